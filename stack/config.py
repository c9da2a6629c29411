"""What one run of the stack is: ports, files, rule set, GPU source, pace: `StackConfig`, the only
description of a running stack. `tokenpulse up` builds it from its settings (over a named profile,
stack/profiles.py), the test stack from the `test` profile; both start the same component table
with it, and `up` writes it to RUN_DIR/stack.json (`to_json`/`from_json`) for the drills and the
soak."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any, Literal, get_args

from monitoring.mixin.config import DEFAULT as mixin
from tokenpulse import paths, ports
from tokenpulse.tfserving.signature import DEFAULT_MODEL_NAME

RuleSet = Literal["normal", "compressed"]  # compressed: windows /60 (alerts/compressed/), drills
RULES: dict[str, tuple[Path, ...]] = {
    "normal": (paths.ALERTS / "recording.rules.yml", paths.ALERTS / "alerts.rules.yml"),
    "compressed": (
        paths.COMPRESSED_ALERTS / "recording.rules.yml",
        paths.COMPRESSED_ALERTS / "alerts.rules.yml",
    ),
}
GpuBackend = Literal["real", "fake", "off"]
# where `tokenpulse model train` keeps its runs by default (its --cache-dir, from the checkout):
# the runs there register their workers for Prometheus (serving/model/targets.py)
TRAINING_CACHE = paths.ROOT / ".cache" / "tokenpulse"
GPU_FAULTS_FILE = "gpu-faults.json"  # under RUN_DIR: the fake GPUs' drill faults
MAX_MODEL_SERVER_REPLICAS = 8  # each loads every version: more would not fit a workstation
# Replica i (i >= 1) listens this many ports above replica 0's REST and gRPC ports: the defaults
# (REST 8501, gRPC 8500) are adjacent, so a step of 2 interleaves them without a clash.
REPLICA_PORT_STEP = 2


_UNIT_S = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}


def duration_s(duration: str) -> float:
    """Seconds in a one-unit duration of the stack's settings ("500ms", "2s", "5m", "1h")."""
    number = duration.rstrip("smh")
    return float(number) * _UNIT_S[duration[len(number) :]]


def ha_group_interval_problem(scrape: str, evaluation: str, group_interval: str) -> str | None:
    """Why this group_interval is too short for two Prometheus (None: it is long enough).

    The replicas scrape at different offsets, so one sees a recovery up to a scrape and an
    evaluation after the other and keeps re-sending the alert as firing meanwhile; Alertmanager
    takes the newest copy. A group flushed in that gap would notify resolved, then firing again:
    a second page. Flushes farther apart than the gap never see it.
    """
    gap = duration_s(scrape) + duration_s(evaluation)
    if duration_s(group_interval) > gap:
        return None
    return (
        f"with ha, group_interval ({group_interval}) must be longer than scrape_interval + "
        f"evaluation_interval ({gap:g}s): the two Prometheus may see a recovery that far apart, "
        "and a shorter group_interval would page twice (resolved, then firing again)"
    )


def replica_ports(rest_port: int, grpc_port: int, replicas: int) -> tuple[tuple[int, int], ...]:
    """(REST, gRPC) ports of model-server replicas 1..N-1 (replica 0 has the given ones)."""
    step = REPLICA_PORT_STEP
    return tuple((rest_port + step * i, grpc_port + step * i) for i in range(1, replicas))


@dataclass(frozen=True)
class Ports:
    """Where each component listens on 127.0.0.1 (the field names are `up`'s port settings)."""

    grpc_port: int = ports.MODELSERVER_GRPC
    rest_port: int = ports.MODELSERVER_REST
    gateway_port: int = ports.GATEWAY
    exporter_port: int = ports.EXPORTER
    shipper_port: int = ports.SHIPPER
    prometheus_port: int = ports.PROMETHEUS
    alertmanager_port: int = ports.ALERTMANAGER
    oncall_port: int = ports.ONCALL

    @classmethod
    def names(cls) -> tuple[str, ...]:
        """The port fields, in start order of their components."""
        return tuple(f.name for f in fields(cls))


@dataclass(frozen=True)
class HaPorts:
    """`up --ha`: where the second Prometheus and Alertmanager listen, and the gossip ports of
    the two Alertmanagers (the field names are `up`'s settings)."""

    prometheus_2_port: int = ports.PROMETHEUS_2
    alertmanager_2_port: int = ports.ALERTMANAGER_2
    alertmanager_cluster_port: int = ports.ALERTMANAGER_CLUSTER
    alertmanager_2_cluster_port: int = ports.ALERTMANAGER_2_CLUSTER

    @classmethod
    def names(cls) -> tuple[str, ...]:
        """The port fields."""
        return tuple(f.name for f in fields(cls))


@dataclass(frozen=True)
class Polls:
    """How often the components look at what changes under them, in seconds (None: the
    component's own default)."""

    modelserver_config_s: float = 30.0  # models.config (version labels)
    modelserver_versions_s: float = 5.0  # new versions on disk
    gateway_status_s: float | None = None  # the model status (available versions)
    exporter_s: float | None = None  # the model server's status and models.config
    shipper_s: float | None = None  # the spool
    shipper_backoff_max_s: float | None = None  # a refused store is retried this far apart, at most


# `fast_polls` (the drill and test profiles): every poll at a second, so a fault shows within the
# compressed rules' windows; a refused store is retried 2 s apart at most (the default 30 s cap is
# half an hour compressed, and a store that is back would wait that long to be noticed)
FAST_POLLS = Polls(
    modelserver_config_s=1.0, modelserver_versions_s=1.0, gateway_status_s=1.0, exporter_s=1.0,
    shipper_s=0.5, shipper_backoff_max_s=2.0,
)  # fmt: skip


@dataclass(frozen=True)
class StackConfig:
    """Every knob the component table reads (see stack/components.py)."""

    run_dir: Path  # absolute: logs/, generated configs, spool, stores, TSDB
    ports: Ports = Ports()
    model: str = DEFAULT_MODEL_NAME
    # the keras_hub preset versions 1 and 2 were imported from; None: our own model
    model_preset_dir: Path | None = None
    rules: RuleSet = "normal"
    custom_rules: tuple[Path, ...] = ()  # tests: these rule files instead of the set's
    gpu_backend: GpuBackend = "off"
    fake_gpus: int = 2
    alerting: bool = True  # the on-call receiver and Alertmanager
    canary_interval_s: float = 30.0
    scrape_interval: str = mixin.scrape_interval
    evaluation_interval: str = mixin.evaluation_interval
    group_wait: str = mixin.am_group_wait
    group_interval: str = mixin.am_group_interval
    repeat_interval: str | None = None  # None: the generated routes' own
    es_url: str = ""
    es_api_key: str = ""
    # notification links: the stack's rules link its own runbooks (the on-call receiver serves
    # them) and this Grafana's dashboards
    grafana_url: str = mixin.links.grafana_url
    watchdog_interval: str = mixin.am_watchdog_interval  # how often the Watchdog arrives
    # an Alertmanager config to run instead of the generated local one (real receivers)
    alertmanager_config: Path | None = None
    start_timeout_s: float = 300.0
    # `up` starts a component that exited again after this long (its outage page arrives first)
    restart_delay_s: float = 150.0
    # GatewaySettings fields (canary weight, context window, ...), as the gateway's env
    gateway: Mapping[str, Any] = field(default_factory=dict)
    # extra command-line flags per component name (tests: e.g. Alertmanager's gossip pace)
    extra_flags: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    fast_polls: bool = False  # every poll at FAST_POLLS' pace (drills, tests)
    # (REST, gRPC) ports of model-server replicas 1..N-1; replica 0 has ports.rest_port/grpc_port
    replica_ports: tuple[tuple[int, int], ...] = ()
    # drills: a fault proxy (stack/drill/proxy.py) on this port between gateway and model server
    fault_proxy_port: int = 0  # 0: none, the gateway talks to the model server directly
    # drills: a fault proxy on this port between the shipper and es_url (needs es_url); 0: none
    es_fault_proxy_port: int = 0
    spool_cap_bytes: int = 0  # the gateway's spool disk cap; 0: the sink's own default
    # `up --ha`: two Prometheus evaluating the same rules, sending to two gossiping Alertmanagers
    ha: HaPorts | None = None
    # the training runs Prometheus scrapes: those started with this `model train --cache-dir`
    training_cache_dir: Path = TRAINING_CACHE

    def path(self, name: str) -> Path:
        """A file or folder under the run directory."""
        return self.run_dir / name

    @property
    def rule_files(self) -> tuple[Path, ...]:
        """The rule files Prometheus loads: the custom ones, else the chosen set's."""
        return self.custom_rules or RULES[self.rules]

    @property
    def polls(self) -> Polls:
        """The components' poll pace."""
        return FAST_POLLS if self.fast_polls else Polls()

    @property
    def gpu_faults_file(self) -> Path | None:
        """Where the fake GPUs read drill faults (exporter/nvml/fake_faults.py); None: real GPUs
        or none."""
        return self.path(GPU_FAULTS_FILE) if self.gpu_backend == "fake" else None

    @property
    def models_config(self) -> Path:
        """The models.config the model server, gateway and exporter read."""
        return self.path("models.config")

    def log(self, component: str) -> Path:
        """Where a component's output goes."""
        return self.path("logs") / f"{component}.log"

    def url(self, port_field: str, path: str = "") -> str:
        """http://127.0.0.1:<port><path> for one of the Ports (or, with ha, HaPorts) fields."""
        where = self.ha if self.ha is not None and hasattr(self.ha, port_field) else self.ports
        return f"http://127.0.0.1:{getattr(where, port_field)}{path}"

    @property
    def model_server_replicas(self) -> int:
        """How many model servers run behind the gateway."""
        return 1 + len(self.replica_ports)

    def modelserver_ports(self, replica: int) -> tuple[int, int]:
        """(REST, gRPC) port of one model-server replica."""
        if replica == 0:
            return self.ports.rest_port, self.ports.grpc_port
        return self.replica_ports[replica - 1]

    def modelserver_url(self, replica: int, path: str = "") -> str:
        """http://127.0.0.1:<REST port of the replica><path>."""
        return f"http://127.0.0.1:{self.modelserver_ports(replica)[0]}{path}"

    def flags(self, component: str) -> list[str]:
        """The extra flags given for one component."""
        return list(self.extra_flags.get(component, ()))

    def to_json(self) -> dict[str, Any]:
        """This config as JSON (stack.json): every value resolved, no secret (the Elasticsearch
        API key is left out)."""
        doc = asdict(self)
        doc["run_dir"] = str(self.run_dir)
        doc["training_cache_dir"] = str(self.training_cache_dir)
        doc["model_preset_dir"] = str(self.model_preset_dir or "") or None
        doc["alertmanager_config"] = str(self.alertmanager_config or "") or None
        doc["es_api_key"] = ""
        doc["replica_ports"] = [list(p) for p in self.replica_ports]
        doc["custom_rules"] = [str(p) for p in self.custom_rules]
        doc["extra_flags"] = {k: list(v) for k, v in self.extra_flags.items()}
        return doc

    @classmethod
    def from_json(cls, doc: Mapping[str, Any]) -> StackConfig:
        """The config `to_json` wrote; ValueError naming what does not fit."""
        known = {f.name for f in fields(cls)}
        if unknown := sorted(set(doc) - known):
            raise ValueError(f"unknown stack config fields: {', '.join(unknown)}")
        try:
            values = dict(doc)
            values["run_dir"] = Path(doc["run_dir"])
            if "training_cache_dir" in doc:
                values["training_cache_dir"] = Path(doc["training_cache_dir"])
            values["ports"] = Ports(**doc.get("ports", {}))
            if doc.get("ha") is not None:
                values["ha"] = HaPorts(**doc["ha"])
            if doc.get("model_preset_dir"):
                values["model_preset_dir"] = Path(doc["model_preset_dir"])
            if doc.get("alertmanager_config"):
                values["alertmanager_config"] = Path(doc["alertmanager_config"])
            values["replica_ports"] = tuple(tuple(p) for p in doc.get("replica_ports", ()))
            values["custom_rules"] = tuple(Path(p) for p in doc.get("custom_rules", ()))
            extra = doc.get("extra_flags", {})
            values["extra_flags"] = {k: tuple(v) for k, v in extra.items()}
        except (KeyError, TypeError) as exc:
            raise ValueError(f"not a stack config: {exc!r}") from exc
        if values.get("rules", "normal") not in get_args(RuleSet):
            raise ValueError(f"unknown rule set {values['rules']!r}")
        return cls(**values)
