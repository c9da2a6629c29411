"""TF Serving's text config files: `--model_config_file`, `--batching_parameters_file`,
`--monitoring_config_file`.

The schemas below carry the field names, types and oneofs of TF Serving's `.proto` files
(`config/model_server_config.proto`, `servables/tensorflow/session_bundle_config.proto`,
`config/monitoring_config.proto`); the defaults are TF Serving's. Parsing is `textformat`, so
every component (model server, gateway, exporter, export) reads these files the same way.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

from tokenpulse.tfserving.errors import ConfigError
from tokenpulse.tfserving.textformat import Field, Message, MessageType, parse

DEFAULT_METRICS_PATH = "/monitoring/prometheus/metrics"
LABEL_RE = re.compile(r"^[a-zA-Z0-9_]+$")
MODEL_TYPES = ("MODEL_TYPE_UNSPECIFIED", "TENSORFLOW", "OTHER")  # ModelType, deprecated


def _msg(
    type_name: str, fields: dict[str, Field], oneof: str | None = None, repeated: bool = False
) -> Field:
    return Field("message", repeated=repeated, message=MessageType(type_name, fields), oneof=oneof)


_POLICY = _msg(
    "ServableVersionPolicy",
    {
        "latest": _msg("Latest", {"num_versions": Field("uint32")}, "policy_choice"),
        "all": _msg("All", {}, "policy_choice"),
        "specific": _msg("Specific", {"versions": Field("int64", repeated=True)}, "policy_choice"),
    },
)
_LABEL = _msg("VersionLabelsEntry", {"key": Field("string"), "value": Field("int64")}, None, True)
_MODEL_CONFIG = _msg(
    "ModelConfig",
    {
        "name": Field("string"),
        "base_path": Field("string"),
        "model_type": Field("enum", enum=MODEL_TYPES),
        "model_platform": Field("string"),
        "model_version_policy": _POLICY,
        "version_labels": _LABEL,
    },
    repeated=True,
)
MODEL_SERVER_CONFIG = MessageType(
    "ModelServerConfig",
    {"model_config_list": _msg("ModelConfigList", {"config": _MODEL_CONFIG}, "config")},
)
_INT64 = _msg("Int64Value", {"value": Field("int64")})
BATCHING_PARAMETERS = MessageType(
    "BatchingParameters",
    {
        "max_batch_size": _INT64,
        "batch_timeout_micros": _INT64,
        "max_enqueued_batches": _INT64,
        "num_batch_threads": _INT64,
        "thread_pool_name": _msg("StringValue", {"value": Field("string")}),
        "allowed_batch_sizes": Field("int64", repeated=True),
        "pad_variable_length_inputs": Field("bool"),
        "enable_large_batch_splitting": _msg("BoolValue", {"value": Field("bool")}),
        "max_execution_batch_size": _INT64,
    },
)
PROMETHEUS_CONFIG = {"enable": Field("bool"), "path": Field("string")}
MONITORING_CONFIG = MessageType(
    "MonitoringConfig", {"prometheus_config": _msg("PrometheusConfig", PROMETHEUS_CONFIG)}
)


@dataclass(frozen=True)
class VersionPolicy:
    """`model_version_policy`: which versions on disk to serve."""

    choice: str = "latest"  # latest | all | specific | "" (`model_version_policy {}`: latest)
    num_versions: int = 0  # latest, as written (0: unset)
    versions: tuple[int, ...] = ()  # specific


@dataclass(frozen=True)
class ModelConfig:
    """One `config { ... }` entry of a model_config_list."""

    name: str
    base_path: str
    model_platform: str = ""
    model_type: int = 0
    version_policy: VersionPolicy | None = None  # None: not given (TF Serving: latest 1)
    version_labels: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class ModelServerConfig:
    """A ModelServerConfig; `has_model_config_list` is False for a file without one."""

    models: tuple[ModelConfig, ...] = ()
    has_model_config_list: bool = True

    def labels(self) -> dict[str, dict[str, int]]:
        """`{model: {label: version}}` for every model."""
        return {m.name: dict(m.version_labels) for m in self.models}


def _policy(msg: Message | None) -> VersionPolicy | None:
    if msg is None:
        return None
    for choice in ("latest", "all", "specific"):
        sub = msg.get(choice)
        if sub is not None:
            return VersionPolicy(choice, sub.get("num_versions", 0), tuple(sub.get("versions", [])))
    return VersionPolicy("")  # `model_version_policy {}`: no choice, TF Serving serves latest


def parse_model_server_config(text: str) -> ModelServerConfig:
    """Parse a `--model_config_file`; syntax and types only (see `validate_model_server_config`)."""
    root = parse(text, MODEL_SERVER_CONFIG)
    config_list = root.get("model_config_list")
    if config_list is None:
        return ModelServerConfig((), has_model_config_list=False)
    models = []
    for entry in config_list.get("config", []):
        labels = {e.get("key", ""): e.get("value", 0) for e in entry.get("version_labels", [])}
        models.append(
            ModelConfig(
                name=entry.get("name", ""),
                base_path=entry.get("base_path", ""),
                model_platform=entry.get("model_platform", ""),
                model_type=entry.get("model_type", 0),
                version_policy=_policy(entry.get("model_version_policy")),
                version_labels=labels,
            )
        )
    return ModelServerConfig(tuple(models))


def validate_model_server_config(config: ModelServerConfig) -> None:
    """TF Serving's checks on a model config list; ConfigError with its messages."""
    if not config.has_model_config_list:
        raise ConfigError(
            "ServerModelConfig type not supported by HandleReloadConfigRequest. "
            "Only ModelConfigList is currently supported"
        )
    seen: set[str] = set()
    for model in config.models:
        if not model.name:
            raise ConfigError("model config without a name")
        if model.name in seen:
            raise ConfigError(f"Illegal to list model {model.name} multiple times in config list")
        seen.add(model.name)
        if not model.base_path:
            raise ConfigError(f"model {model.name} has no base_path")
        if model.model_platform not in ("", "tensorflow"):
            raise ConfigError(f"PlatformConfigMap has no entry for platform {model.model_platform}")
        for label in model.version_labels:
            if not LABEL_RE.match(label):
                raise ConfigError(f"Invalid label name: {label}; allowed: [a-zA-Z0-9_]+")


@dataclass(frozen=True)
class BatchingParameters:
    """Server-wide batching knobs, TF Serving's defaults (those of `--enable_batching` alone)."""

    max_batch_size: int = 1000
    batch_timeout_micros: int = 0
    max_enqueued_batches: int = 10
    num_batch_threads: int = field(default_factory=lambda: os.cpu_count() or 1)
    thread_pool_name: str = "model_server_batch_threads"
    enable_large_batch_splitting: bool = False
    max_execution_batch_size: int = 1000
    allowed_batch_sizes: tuple[int, ...] = ()
    pad_variable_length_inputs: bool = False


_WRAPPED = (
    "max_batch_size",
    "batch_timeout_micros",
    "max_enqueued_batches",
    "num_batch_threads",
    "max_execution_batch_size",
    "enable_large_batch_splitting",
)


def parse_batching_parameters(text: str) -> BatchingParameters:
    """Parse a `batching_parameters.txt` and check it as TF Serving does at start-up."""
    root = parse(text, BATCHING_PARAMETERS)
    values: dict[str, object] = {}
    for name in _WRAPPED:
        if root.has(name):
            default = getattr(BatchingParameters, name, None)
            values[name] = root.get(name).get("value", False if default is False else 0)
    pool = root.get("thread_pool_name")
    values["thread_pool_name"] = pool.get("value", "") if pool is not None else "batch_threads"
    values["allowed_batch_sizes"] = tuple(root.get("allowed_batch_sizes", []))
    values["pad_variable_length_inputs"] = root.get("pad_variable_length_inputs", False)
    params = BatchingParameters(**values)  # type: ignore[arg-type]
    validate_batching_parameters(params)
    return params


def validate_batching_parameters(p: BatchingParameters) -> None:
    """The checks TF's batch scheduler makes; ConfigError with its messages."""
    for name in ("max_batch_size", "max_enqueued_batches", "num_batch_threads"):
        if getattr(p, name) <= 0:
            raise ConfigError(f"{name} must be positive, got {getattr(p, name)}")
    if p.batch_timeout_micros < 0:
        raise ConfigError("batch_timeout_micros must be >= 0")
    sizes = p.allowed_batch_sizes
    if sizes:
        if any(b <= a for a, b in zip(sizes, sizes[1:], strict=False)) or sizes[0] <= 0:
            raise ConfigError("allowed_batch_sizes entries must be monotonically increasing")
        if sizes[-1] != p.max_batch_size:
            raise ConfigError(
                f"Last entry in allowed_batch_sizes must match max_batch_size; "
                f"last entry was {sizes[-1]}; expected {p.max_batch_size}"
            )


@dataclass(frozen=True)
class MonitoringConfig:
    """Whether and where the Prometheus page is served (off without a file, as in TF Serving)."""

    prometheus_enable: bool = False
    prometheus_path: str = DEFAULT_METRICS_PATH


def parse_monitoring_config(text: str) -> MonitoringConfig:
    """Parse a `monitoring.config`; an empty path means the default path."""
    prom = parse(text, MONITORING_CONFIG).get("prometheus_config")
    if prom is None:
        return MonitoringConfig()
    return MonitoringConfig(prom.get("enable", False), prom.get("path") or DEFAULT_METRICS_PATH)


T = TypeVar("T")


def load(path: Path, parser: Callable[[str], T]) -> T:
    """Read `path` and parse it with `parser`; every error names the file."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) else "not UTF-8 text"
        raise ConfigError(f"cannot read {path}: {reason}") from exc
    try:
        return parser(text)
    except ConfigError as exc:
        raise exc.in_file(path) from exc


def load_model_server_config(path: Path) -> ModelServerConfig:
    """Read, parse and validate a `--model_config_file` as TF Serving does."""
    config = load(path, parse_model_server_config)
    try:
        validate_model_server_config(config)
    except ConfigError as exc:
        raise exc.in_file(path) from exc
    return config
