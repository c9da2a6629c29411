"""Settings of the log pipeline's components, one pydantic-settings model each, built in main()."""

from __future__ import annotations

import base64
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Literal

from pydantic import AfterValidator, Field, SecretStr, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from log_pipeline.assets import DEFAULT_STREAM
from log_pipeline.sampler import DEFAULT_RULES_FILE
from log_pipeline.spool import FsyncPolicy
from tokenpulse import ports


def _http_url(value: str) -> str:
    if value and not value.startswith(("http://", "https://")):
        raise ValueError("URLs start with http:// or https://")
    return value.rstrip("/")


# empty, or an http(s) URL without a trailing slash
HttpUrlText = Annotated[str, AfterValidator(_http_url)]


@dataclass(frozen=True)
class EsAuth:
    """How to sign in to Elasticsearch (and Kibana): an API key, a user and password, or nothing."""

    api_key: str = ""
    username: str = ""
    password: str = ""
    ca_file: str = ""  # the CA that signed the server's certificate (https); "": the system's

    def client_kwargs(self) -> dict[str, object]:
        """Keyword arguments of `elasticsearch.Elasticsearch` for this sign-in."""
        tls: dict[str, object] = {"ca_certs": self.ca_file} if self.ca_file else {}
        if self.api_key:
            return {"api_key": self.api_key, **tls}
        if self.username:
            return {"basic_auth": (self.username, self.password), **tls}
        return tls

    def header(self) -> dict[str, str]:
        """The `Authorization` header for plain HTTP calls (Kibana)."""
        if self.api_key:
            return {"Authorization": f"ApiKey {self.api_key}"}
        if self.username:
            pair = f"{self.username}:{self.password}".encode()
            return {"Authorization": f"Basic {base64.b64encode(pair).decode()}"}
        return {}


class EsAuthSettings(BaseSettings):
    """Elasticsearch sign-in fields shared by the shipper, `es setup` and `samples`."""

    es_api_key: str = Field("", description="Elasticsearch API key (prefer the env var)")
    es_username: str = Field(
        "", description="Elasticsearch user, with es-password (not with a key)"
    )
    es_password: SecretStr = Field(
        SecretStr(""), description="password of es-username (prefer the env var)"
    )
    es_ca_file: str = Field(
        "", description="PEM file of the CA that signed the https servers' certificates (ECK's "
        "self-signed CA); empty: the system's CAs",
    )  # fmt: skip

    @model_validator(mode="after")
    def _one_sign_in(self) -> EsAuthSettings:
        if self.es_api_key and self.es_username:
            raise ValueError("give es_api_key or es_username/es_password, not both")
        if self.es_username and not self.es_password.get_secret_value():
            raise ValueError("es_username needs es_password")
        return self

    def es_auth(self) -> EsAuth:
        """The sign-in these settings describe."""
        return EsAuth(
            self.es_api_key, self.es_username, self.es_password.get_secret_value(), self.es_ca_file
        )


DEFAULT_SPOOL = Path("run/spool")
DEFAULT_SQLITE = Path("run/samples.db")


class SinkSettings(BaseSettings):
    """The gateway-side sink (env prefix `TOKENPULSE_SINK_`)."""

    model_config = SettingsConfigDict(env_prefix="TOKENPULSE_SINK_", extra="forbid")

    spool_dir: Path = Field(DEFAULT_SPOOL, description="directory of the spool segments")
    rules_file: Path = Field(DEFAULT_RULES_FILE, description="sampling rules (TOML)")
    queue_size: int = Field(
        10_000, ge=1, description="samples waiting for the writer process; beyond: dropped, counted"
    )
    segment_max_bytes: int = Field(16 << 20, ge=4096, description="rotate a segment at this size")
    segment_max_age_s: float = Field(10.0, gt=0, description="rotate a segment at this age")
    cap_bytes: int = Field(1 << 30, ge=4096, description="disk cap; beyond it samples are dropped")
    fsync: FsyncPolicy = Field(FsyncPolicy.INTERVAL, description="always | interval | never")
    fsync_interval_s: float = Field(1.0, gt=0, description="fsync period with fsync=interval")
    metrics_port: int = Field(
        0, ge=0, le=65535, description="own /metrics port when the host gives no registry (0: none)"
    )
    writer_nice: int = Field(
        19, ge=0, le=19, description="CPU niceness added to the writer process (0: as the gateway)"
    )
    feedback_window_s: float = Field(
        600.0, ge=0, description="seconds an unsampled request is held in memory so that feedback "
        "can still keep it (0: none held; later feedback is stored on its own)",
    )  # fmt: skip
    feedback_window_records: int = Field(
        20_000, ge=0, description="unsampled requests held for feedback at most (oldest go first)"
    )
    feedback_window_bytes: int = Field(
        64 << 20, ge=0, description="text bytes of the requests held for feedback at most"
    )


class ShipperSettings(EsAuthSettings):
    """`tokenpulse shipper` (env prefix `TOKENPULSE_SHIPPER_`)."""

    model_config = SettingsConfigDict(env_prefix="TOKENPULSE_SHIPPER_", extra="forbid")

    spool_dir: Path = Field(DEFAULT_SPOOL, description="spool directory to tail")
    spool_root: Path | None = Field(
        None, description="instead of spool-dir: a directory of spool directories, one per writer "
        "(<root>/<pod>), each followed from when it appears",
    )  # fmt: skip
    spool_dir_remove_after_s: float = Field(
        3600.0, gt=0, description="with spool-root: delete a writer directory found without a "
        "writer and shipped by every known output for this long",
    )  # fmt: skip
    state_dir: Path | None = Field(
        None, description="checkpoints and dead letters (default: <spool-dir or spool-root>/state)"
    )
    outputs: list[str] = Field(
        default_factory=lambda: ["sqlite"], min_length=1, description="sqlite and/or elasticsearch"
    )
    sqlite_path: Path = Field(DEFAULT_SQLITE, description="embedded store file")
    es_url: HttpUrlText = Field(
        "", description="Elasticsearch URL (required with output elasticsearch)"
    )
    es_data_stream: str = Field(DEFAULT_STREAM, description="data stream to write")
    es_timeout_s: float = Field(30.0, gt=0, description="per-request timeout")
    batch_records: int = Field(1000, ge=1, description="records per delivery request")
    batch_max_bytes: int = Field(
        5 << 20, ge=1024,
        description="bytes of records per delivery request (a bigger record goes alone)",
    )  # fmt: skip
    sqlite_retention_days: float = Field(
        30.0, ge=0, description="delete embedded-store records older than this (0: keep forever)"
    )
    deadletter_segment_bytes: int = Field(
        16 << 20, ge=4096, description="rotate an output's dead-letter file at this size"
    )
    poll_interval_s: float = Field(0.2, gt=0, description="idle wait before looking for new lines")
    drain_timeout_s: float = Field(
        0.0, ge=0, description="on SIGTERM: ship what the spool holds for at most this long "
        "once its writer is gone, then exit (a spool on a volume that dies with its pod); 0: stop "
        "at once",
    )  # fmt: skip
    backoff_initial_s: float = Field(0.5, gt=0, description="first retry delay")
    backoff_max_s: float = Field(30.0, gt=0, description="retry delay cap")
    metrics_host: str = Field("127.0.0.1", description="address of /metrics")
    metrics_port: int = Field(
        ports.SHIPPER, ge=0, le=65535, description="port of /metrics (0: any free)"
    )
    log_level: str = Field("INFO", description="log level")

    @field_validator("outputs")
    @classmethod
    def _known_outputs(cls, value: list[str]) -> list[str]:
        unknown = sorted(set(value) - {"sqlite", "elasticsearch"})
        if unknown:
            raise ValueError(f"unknown output(s) {unknown}; use sqlite and/or elasticsearch")
        return list(dict.fromkeys(value))

    @model_validator(mode="after")
    def _es_needs_url(self) -> ShipperSettings:
        if "elasticsearch" in self.outputs and not self.es_url:
            raise ValueError("output elasticsearch needs es_url")
        return self

    @model_validator(mode="after")
    def _one_spool(self) -> ShipperSettings:
        if self.spool_root is not None and "spool_dir" in self.model_fields_set:
            raise ValueError("give spool_dir (one writer) or spool_root (one directory per "
                             "writer), not both")  # fmt: skip
        return self

    def state(self) -> Path:
        """Where checkpoints and dead letters live."""
        return self.state_dir or (self.spool_root or self.spool_dir) / "state"


class EsSetupSettings(EsAuthSettings):
    """`tokenpulse es setup` (env prefix `TOKENPULSE_ES_`)."""

    model_config = SettingsConfigDict(env_prefix="TOKENPULSE_ES_", extra="forbid")

    es_url: HttpUrlText = Field(description="Elasticsearch URL")
    kibana_url: HttpUrlText = Field("", description="Kibana URL (empty: skip the saved objects)")
    kibana_api_key: str = Field("", description="Kibana API key (default: the ES sign-in)")
    data_stream: str = Field(DEFAULT_STREAM, description="data stream to create")
    replicas: int = Field(
        0, ge=0, description="replicas per backing index (0 on one node; 1+ on a cluster)"
    )
    timeout_s: float = Field(30.0, gt=0, description="per-request timeout")
    shipper_user: str = Field(
        "",
        description="create this user with a role that may only create documents in the "
        "data stream and look their ids up (empty: no user)",
    )
    shipper_password: SecretStr = Field(
        SecretStr(""), description="password of shipper-user (prefer the env var)"
    )
    reader_user: str = Field(
        "", description="create this read-only user for the samples (Grafana's; empty: no user)"
    )
    reader_password: SecretStr = Field(
        SecretStr(""), description="password of reader-user (prefer the env var)"
    )

    @model_validator(mode="after")
    def _users_have_passwords(self) -> EsSetupSettings:
        for who in ("shipper", "reader"):
            password: SecretStr = getattr(self, f"{who}_password")
            if getattr(self, f"{who}_user") and not password.get_secret_value():
                raise ValueError(f"{who}_user needs {who}_password")
        return self


class SamplesSettings(EsAuthSettings):
    """`tokenpulse samples` (env prefix `TOKENPULSE_SAMPLES_`): which store to search."""

    model_config = SettingsConfigDict(env_prefix="TOKENPULSE_SAMPLES_", extra="forbid")

    sqlite_path: Path = Field(DEFAULT_SQLITE, description="embedded store (used without es-url)")
    es_url: HttpUrlText = Field(
        "", description="search Elasticsearch instead of the embedded store"
    )
    es_index: str = Field("genai-samples-*", description="index pattern to search")


class SearchSettings(SamplesSettings):
    """`tokenpulse samples search`: the store, the filters, the order and the output."""

    text: str = Field("", description='words in the prompt or output, all required ("a b": one)')
    id: str = Field("", description="a record id, request id or response id (cmpl-..., gen-...)")
    model: str = Field("", description="model name")
    version: str = Field("", description="model version that served")
    label: str = Field("", description="version label the request was routed by (stable, canary)")
    finish_reason: str = Field("", description="stop | length")
    status: str = Field("", description="HTTP status the gateway answered: 503, or a class: 5xx")
    error_type: str = Field("", description="the gateway's error code (error.type)")
    key_id: str = Field("", description="API key id")
    reason: str = Field(
        "", description="why it was kept: error|slow|low_quality|canary|head|feedback"
    )
    feedback: str = Field(
        "", pattern=r"^(|any|negative|neutral|positive)$",
        description="records with feedback of this class: negative|neutral|positive|any "
        "(samples kept for it, and feedback stored on its own)",
    )  # fmt: skip
    nll_min: float | None = Field(None, description="mean NLL at least (nats)")
    nll_max: float | None = Field(None, description="mean NLL at most (nats)")
    latency_min: float | None = Field(None, ge=0, description="total seconds at least")
    latency_max: float | None = Field(None, ge=0, description="total seconds at most")
    since: str = Field("", description="ISO-8601 time or an age (15m, 2h, 7d)")
    until: str = Field("", description="ISO-8601 time or an age (15m, 2h, 7d)")
    sort: str = Field(
        "time", pattern=r"^(time|nll|latency|version|status)$",
        description="time | nll | latency | version | status (missing values last)",
    )  # fmt: skip
    ascending: bool = Field(False, description="smallest first (default: largest, newest first)")
    offset: int = Field(0, ge=0, description="skip this many matching records first")
    limit: int = Field(20, ge=1, description="at most this many records (pages past 10,000)")
    count_by: list[str] = Field(
        default_factory=list,
        description="count per group instead: model,version,finish_reason,label,key_id,status,"
        "error_type,route,feedback",
    )
    format: Literal["table", "jsonl", "csv"] = Field("table", description="table | jsonl | csv")

    @field_validator("count_by")
    @classmethod
    def _known_groups(cls, value: list[str]) -> list[str]:
        keys = [k.strip() for item in value for k in item.split(",") if k.strip()]
        known = ("model", "version", "finish_reason", "label", "key_id", "status", "error_type",
                 "route", "feedback")  # fmt: skip
        unknown = [k for k in keys if k not in known]
        if unknown:
            raise ValueError(f"unknown group(s) {unknown}; use {','.join(known)}")
        return list(dict.fromkeys(keys))
