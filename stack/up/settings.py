"""Settings of `tokenpulse up`: what a user sets (flags, TOKENPULSE_UP_<NAME>) over a named profile.

stack/up/plan.py turns them into the stack's one description, a StackConfig.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import AliasChoices, Field, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from monitoring.mixin.config import DEFAULT as mixin
from serving.model.hub.preset import PresetError, check_preset
from serving.model.targets import TARGETS_DIR
from stack.config import (
    MAX_MODEL_SERVER_REPLICAS,
    REPLICA_PORT_STEP,
    TRAINING_CACHE,
    HaPorts,
    Ports,
    RuleSet,
    ha_group_interval_problem,
)
from stack.profiles import PROFILES, ProfileName, profile
from tokenpulse import ports

DURATION = r"^\d+(ms|s|m|h)$"

# the port settings, one per listening component (for the port check and its messages)
PORT_FIELDS = Ports.names()
# the port settings `--ha` adds (checked only with it)
HA_PORT_FIELDS = HaPorts.names()


def _port(default: int, description: str) -> Any:
    return Field(default, ge=1, le=65535, description=description)


class UpSettings(BaseSettings):
    """Every knob of the local stack; each is also TOKENPULSE_UP_<NAME>."""

    model_config = SettingsConfigDict(env_prefix="TOKENPULSE_UP_", extra="ignore")

    profile: ProfileName = Field(
        "default",
        description="start from a named profile's values (stack/profiles.py): drill (the "
        "compressed rules, fast polls, fake GPUs, a fault proxy, the drills' pace) or test (the "
        "test stack's pace); a flag or variable given as well wins",
    )
    models_dir: Path = Field(Path("models"), description="model base paths live in DIR/<model>")
    preset: str = Field("default", description="model preset built when no version exists")
    model_preset_dir: Path | None = Field(
        None,
        description="serve a keras_hub causal-LM preset (the directory `save_to_preset` wrote) "
        "instead of our own model: versions 1 and 2 are imported from DIR (`tokenpulse model "
        "import keras-hub`) when missing; not with --preset or --canary-degrade-noise",
    )
    run_dir: Path = Field(
        Path("run"), description="keys, generated configs, logs, spool, stores, TSDB"
    )
    grpc_port: int = Field(
        ports.MODELSERVER_GRPC, ge=1, le=65535, description="model server gRPC port"
    )
    rest_port: int = Field(
        ports.MODELSERVER_REST, ge=1, le=65535, description="model server REST port"
    )
    gateway_port: int = Field(
        ports.GATEWAY, ge=1, le=65535, description="gateway (public API) port"
    )
    exporter_port: int = _port(ports.EXPORTER, "exporter /metrics port")
    shipper_port: int = Field(
        ports.SHIPPER, ge=1, le=65535, description="log shipper /metrics port"
    )
    prometheus_port: int = _port(ports.PROMETHEUS, "Prometheus port")
    alertmanager_port: int = Field(
        ports.ALERTMANAGER, ge=1, le=65535, description="Alertmanager port"
    )
    oncall_port: int = _port(ports.ONCALL, "on-call receiver port")
    model_server_replicas: int = Field(
        1,
        ge=1,
        le=MAX_MODEL_SERVER_REPLICAS,
        description="model servers behind the gateway; replica i > 0 listens on the REST and "
        f"gRPC ports + {REPLICA_PORT_STEP}*i (8503/8502, 8505/8504, ...), all checked first",
    )
    ha: bool = Field(
        False,
        description="no single point of failure in paging: a second Prometheus evaluating the "
        "same rules (prometheus-2) and a second Alertmanager (alertmanager-2) gossiping with the "
        "first on loopback; every alert reaches on-call once while either of each is alive",
    )
    prometheus_2_port: int = _port(ports.PROMETHEUS_2, "with --ha: the second Prometheus's port")
    alertmanager_2_port: int = _port(
        ports.ALERTMANAGER_2, "with --ha: the second Alertmanager's port"
    )
    alertmanager_cluster_port: int = _port(
        ports.ALERTMANAGER_CLUSTER, "with --ha: the first Alertmanager's gossip port"
    )
    alertmanager_2_cluster_port: int = _port(
        ports.ALERTMANAGER_2_CLUSTER, "with --ha: the second Alertmanager's gossip port"
    )
    canary_weight: float = Field(
        0.05, ge=0.0, le=1.0, description="share of requests the gateway sends to the canary"
    )
    canary_degrade_noise: float = Field(
        0.0,
        ge=0.0,
        description="a drill: version 2 (canary) is built with this noise on its weights and "
        "given stable's golden answers, so the canary alerts catch it (a version 2 already built "
        "with other noise is refused: remove it); 0: a healthy canary",
    )
    canary_interval_s: float = Field(
        30.0, gt=0, description="seconds between the exporter's golden-prompt canary runs"
    )
    gpu_backend: Literal["auto", "real", "fake", "off"] = Field(
        "auto",
        description="exporter GPU source: auto (NVML when it initialises, else off), real, fake "
        "(a simulated node) or off (no GPU here: the NVML collector would fail every scrape)",
    )
    es_url: str = Field(
        "",
        validation_alias=AliasChoices("es_url", "TOKENPULSE_UP_ES_URL", "ES_URL"),
        description="ship samples to this Elasticsearch as well (env ES_URL); empty: SQLite only",
    )
    es_api_key: str = Field(
        "",
        validation_alias=AliasChoices("es_api_key", "TOKENPULSE_UP_ES_API_KEY", "ES_API_KEY"),
        description="Elasticsearch API key (prefer the env var ES_API_KEY); empty: none",
    )
    grafana_url: str = Field(
        mixin.links.grafana_url,
        description="Grafana as your browser reaches it: each notification links its alert's "
        "dashboard panel there (runbooks: the on-call receiver serves them)",
    )
    watchdog_interval: str = Field(
        mixin.am_watchdog_interval,
        pattern=DURATION,
        description="how often the always-firing Watchdog reaches the on-call receiver (GET "
        "/watchdog: its last arrival), so a stopped Prometheus shows as its silence",
    )
    alertmanager_config: Path | None = Field(
        None,
        description="run Alertmanager with this config (real pager/chat receivers) instead of "
        "the generated local one; up refuses to start when a receiver's secret file is missing",
    )
    training_cache_dir: Path = Field(
        TRAINING_CACHE,
        description="scrape the `tokenpulse model train --metrics-port` runs started with this "
        "--cache-dir (they register their workers under it); default: the checkout's",
    )
    rules: RuleSet = Field(
        "normal", description="alert rules: normal, or compressed (windows /60, for drills)"
    )
    scrape_interval: str = Field(
        mixin.scrape_interval, pattern=DURATION, description="Prometheus scrape interval"
    )
    evaluation_interval: str = Field(
        mixin.evaluation_interval, pattern=DURATION, description="Prometheus rule evaluation"
    )
    group_wait: str = Field(
        mixin.am_group_wait, pattern=DURATION, description="Alertmanager group_wait"
    )
    group_interval: str = Field(
        mixin.am_group_interval, pattern=DURATION, description="Alertmanager group_interval"
    )
    repeat_interval: str | None = Field(
        None, pattern=DURATION, description="Alertmanager repeat_interval; unset: each route's own"
    )
    restart_delay_s: float = Field(
        150.0,
        ge=0,
        description="seconds before a component that exited is started again (long enough for "
        "its outage page to arrive first)",
    )
    start_timeout_s: float = Field(300.0, gt=0, description="seconds each component may take")
    fault_proxy_port: int = Field(
        0,
        ge=0,
        le=65535,
        description="drills: a fault proxy on this port between the gateway and the model server "
        "(`tokenpulse drill slow-upstream`, `error-burst`); 0: none",
    )
    es_fault_proxy_port: int = Field(
        0,
        ge=0,
        le=65535,
        description="drills: a fault proxy on this port between the shipper and es_url, which "
        "`tokenpulse drill es-unreachable` takes down and brings back (SIGUSR1/SIGUSR2); needs "
        "es_url; 0: none",
    )
    spool_cap_bytes: int = Field(
        0,
        ge=0,
        description="the gateway's spool disk cap in bytes (drills: `tokenpulse drill "
        "spool-disk-cap` wants a small one, e.g. 32768); 0: the sink's default (1 GiB)",
    )
    fast_polls: bool = Field(
        False,
        description="the model server, gateway, exporter and shipper poll every second (model "
        "config, status, spool; stack.config.FAST_POLLS), so a fault shows within the compressed "
        "rules' windows",
    )
    exit_after_ready: bool = Field(
        False, description="start everything, print how to use it, then stop (smoke test)"
    )

    @model_validator(mode="before")
    @classmethod
    def _profile(cls, data: Any) -> Any:
        """The profile's values where nothing set the field (flags and env win)."""
        if not isinstance(data, dict):
            return data
        name = data.get("profile", "default")
        if name not in PROFILES:
            return data  # the field's own check names the known profiles
        return {**profile(name), **data}

    @field_validator("model_preset_dir")
    @classmethod
    def _a_preset(cls, value: Path | None) -> Path | None:
        # its files only: `up` stays free of keras_hub; the import names an unsupported family
        if value is None:
            return None
        try:
            check_preset(value)
        except PresetError as exc:
            raise ValueError(str(exc)) from None
        return value.resolve()

    @model_validator(mode="after")
    def _one_model(self) -> UpSettings:
        if self.model_preset_dir is None:
            return self
        if "preset" in self.model_fields_set:
            raise ValueError(
                "model_preset_dir serves an imported model; preset sizes our own: give one of them"
            )
        if self.canary_degrade_noise:
            raise ValueError(
                "canary_degrade_noise degrades our own model's weights at export; an imported "
                "model has no degraded build (its canary is a second import, identical to stable)"
            )
        return self

    @model_validator(mode="after")
    def _one_proxied_replica(self) -> UpSettings:
        if self.fault_proxy_port and self.model_server_replicas > 1:
            raise ValueError("fault_proxy_port works with one model server replica only")
        return self

    @model_validator(mode="after")
    def _ha_group_interval(self) -> UpSettings:
        if self.ha:
            args = (self.scrape_interval, self.evaluation_interval, self.group_interval)
            problem = ha_group_interval_problem(*args)
            if problem:
                raise ValueError(problem)
        return self

    @model_validator(mode="after")
    def _es_to_proxy(self) -> UpSettings:
        if self.es_fault_proxy_port and not self.es_url:
            raise ValueError("es_fault_proxy_port needs es_url (--es-url or ES_URL): it proxies it")
        return self

    @field_validator("es_url")
    @classmethod
    def _url(cls, value: str) -> str:
        if value and not value.startswith(("http://", "https://")):
            raise ValueError("es_url must start with http:// or https://")
        return value.rstrip("/")

    @field_validator("training_cache_dir")
    @classmethod
    def _writable(cls, value: Path) -> Path:
        # the runs register under it, and Prometheus watches the folder: made now, or refused
        try:
            (value / TARGETS_DIR).mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise ValueError(f"cannot make {value / TARGETS_DIR}: {exc.strerror}") from None
        return value

    def path(self, name: str) -> Path:
        """A file or folder under the run directory, absolute."""
        return (self.run_dir / name).resolve()
