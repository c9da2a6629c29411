"""The text files TF Serving reads: models config, batching parameters, monitoring config.

`model_server_config_pb2` ships in the tensorflow-serving-api wheel; the batching and monitoring
messages do not, so they are declared here from TF Serving's `.proto` files (same field names and
numbers) and parsed with protobuf's own text parser, which reports `line:column` like the real one.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory, text_format
from google.protobuf import wrappers_pb2 as _wrappers  # noqa: F401  (registers wrappers.proto)

DEFAULT_METRICS_PATH = "/monitoring/prometheus/metrics"
LABEL_RE = re.compile(r"^[a-zA-Z0-9_]+$")


class ConfigFileError(Exception):
    """A config file that cannot be read or parsed; the message names the file and line."""


def _build_messages() -> tuple[Any, Any]:
    """BatchingParameters (session_bundle_config.proto) and MonitoringConfig (monitoring_config)."""
    fdp = descriptor_pb2.FileDescriptorProto(
        name="tokenpulse/tfs_text_configs.proto",
        package="tensorflow.serving",
        syntax="proto3",
        dependency=["google/protobuf/wrappers.proto"],
    )
    t = descriptor_pb2.FieldDescriptorProto
    opt, rep = t.LABEL_OPTIONAL, t.LABEL_REPEATED
    batching = fdp.message_type.add(name="BatchingParameters")
    for name, number, type_name in [
        ("max_batch_size", 1, ".google.protobuf.Int64Value"),
        ("batch_timeout_micros", 2, ".google.protobuf.Int64Value"),
        ("max_enqueued_batches", 3, ".google.protobuf.Int64Value"),
        ("num_batch_threads", 4, ".google.protobuf.Int64Value"),
        ("thread_pool_name", 5, ".google.protobuf.StringValue"),
        ("enable_large_batch_splitting", 8, ".google.protobuf.BoolValue"),
        ("max_execution_batch_size", 9, ".google.protobuf.Int64Value"),
    ]:
        batching.field.add(
            name=name, number=number, label=opt, type=t.TYPE_MESSAGE, type_name=type_name
        )
    batching.field.add(name="allowed_batch_sizes", number=6, label=rep, type=t.TYPE_INT64)
    batching.field.add(name="pad_variable_length_inputs", number=7, label=opt, type=t.TYPE_BOOL)
    prom = fdp.message_type.add(name="PrometheusConfig")
    prom.field.add(name="enable", number=1, label=opt, type=t.TYPE_BOOL)
    prom.field.add(name="path", number=2, label=opt, type=t.TYPE_STRING)
    mon = fdp.message_type.add(name="MonitoringConfig")
    mon.field.add(
        name="prometheus_config",
        number=1,
        label=opt,
        type=t.TYPE_MESSAGE,
        type_name=".tensorflow.serving.PrometheusConfig",
    )
    pool = descriptor_pool.DescriptorPool()
    pool.AddSerializedFile(_wrappers.DESCRIPTOR.serialized_pb)
    pool.Add(fdp)
    return (
        message_factory.GetMessageClass(
            pool.FindMessageTypeByName("tensorflow.serving.BatchingParameters")
        ),
        message_factory.GetMessageClass(
            pool.FindMessageTypeByName("tensorflow.serving.MonitoringConfig")
        ),
    )


BatchingParametersProto, MonitoringConfigProto = _build_messages()


def _parse_text(path: Path, message: Any) -> Any:
    try:
        text = path.read_text()
    except OSError as exc:
        raise ConfigFileError(f"cannot read {path}: {exc.strerror}") from exc
    try:
        text_format.Parse(text, message)
    except text_format.ParseError as exc:
        # ParseError's text starts with "line:column : ..."; say which file it is.
        raise ConfigFileError(f"{path}:{exc}") from exc
    return message


@dataclass(frozen=True)
class BatchingParameters:
    """Server-wide batching knobs with TF Serving's defaults."""

    max_batch_size: int = 1000
    batch_timeout_micros: int = 0
    max_enqueued_batches: int = 10
    num_batch_threads: int = field(default_factory=lambda: os.cpu_count() or 1)
    thread_pool_name: str = "model_server_batch_threads"
    enable_large_batch_splitting: bool = False
    max_execution_batch_size: int = 1000
    allowed_batch_sizes: tuple[int, ...] = ()
    pad_variable_length_inputs: bool = False


def parse_batching_parameters(path: Path | None) -> BatchingParameters:
    """Read a `batching_parameters.txt`; None gives the defaults of `--enable_batching` alone."""
    if path is None:
        return BatchingParameters()
    proto = _parse_text(path, BatchingParametersProto())
    values: dict[str, Any] = {}
    for name in (
        "max_batch_size",
        "batch_timeout_micros",
        "max_enqueued_batches",
        "num_batch_threads",
        "max_execution_batch_size",
    ):
        if proto.HasField(name):
            values[name] = int(getattr(proto, name).value)
    if proto.HasField("thread_pool_name"):
        values["thread_pool_name"] = proto.thread_pool_name.value
    else:
        values["thread_pool_name"] = "batch_threads"
    if proto.HasField("enable_large_batch_splitting"):
        values["enable_large_batch_splitting"] = proto.enable_large_batch_splitting.value
    values["allowed_batch_sizes"] = tuple(int(v) for v in proto.allowed_batch_sizes)
    values["pad_variable_length_inputs"] = bool(proto.pad_variable_length_inputs)
    params = BatchingParameters(**values)
    _validate_batching(path, params)
    return params


def _validate_batching(path: Path, p: BatchingParameters) -> None:
    for name in ("max_batch_size", "max_enqueued_batches", "num_batch_threads"):
        if getattr(p, name) <= 0:
            raise ConfigFileError(f"{path}: {name} must be positive, got {getattr(p, name)}")
    if p.batch_timeout_micros < 0:
        raise ConfigFileError(f"{path}: batch_timeout_micros must be >= 0")
    sizes = p.allowed_batch_sizes
    if sizes:
        if any(b <= a for a, b in zip(sizes, sizes[1:], strict=False)) or sizes[0] <= 0:
            raise ConfigFileError(
                f"{path}: allowed_batch_sizes entries must be monotonically increasing"
            )
        if sizes[-1] != p.max_batch_size:
            raise ConfigFileError(
                f"{path}: Last entry in allowed_batch_sizes must match max_batch_size; "
                f"last entry was {sizes[-1]}; expected {p.max_batch_size}"
            )


@dataclass(frozen=True)
class MonitoringConfig:
    """Whether and where the Prometheus page is served."""

    prometheus_enable: bool = False
    prometheus_path: str = DEFAULT_METRICS_PATH


def parse_monitoring_config(path: Path | None) -> MonitoringConfig:
    """Read a `monitoring.config`; None means no metrics page (TF Serving's default)."""
    if path is None:
        return MonitoringConfig()
    proto = _parse_text(path, MonitoringConfigProto())
    prom = proto.prometheus_config
    return MonitoringConfig(bool(prom.enable), prom.path or DEFAULT_METRICS_PATH)


def parse_model_server_config(path: Path) -> Any:
    """Read a `--model_config_file` (ModelServerConfig text proto) and check it like TF Serving."""
    from tensorflow_serving.config import model_server_config_pb2

    config = _parse_text(path, model_server_config_pb2.ModelServerConfig())
    try:
        validate_model_config_list(config)
    except ValueError as exc:
        raise ConfigFileError(f"{path}: {exc}") from exc
    return config


def validate_model_config_list(config: Any) -> None:
    """TF Serving's checks on a ModelServerConfig; raises ValueError with its message."""
    if config.WhichOneof("config") != "model_config_list":
        raise ValueError(
            "ServerModelConfig type not supported by HandleReloadConfigRequest. "
            "Only ModelConfigList is currently supported"
        )
    seen: set[str] = set()
    for model in config.model_config_list.config:
        if not model.name:
            raise ValueError("model config without a name")
        if model.name in seen:
            raise ValueError(f"Illegal to list model {model.name} multiple times in config list")
        seen.add(model.name)
        if not model.base_path:
            raise ValueError(f"model {model.name} has no base_path")
        if model.model_platform not in ("", "tensorflow"):
            raise ValueError(f"PlatformConfigMap has no entry for platform {model.model_platform}")
        if model.HasField("logging_config"):
            raise ValueError("No request-logger-creator provided.")
        for label in model.version_labels:
            if not LABEL_RE.match(label):
                raise ValueError(f"Invalid label name: {label}; allowed: [a-zA-Z0-9_]+")


def single_model_config(model_name: str, base_path: str) -> Any:
    """The ModelServerConfig that `--model_name/--model_base_path` stand for."""
    from tensorflow_serving.config import model_server_config_pb2

    config = model_server_config_pb2.ModelServerConfig()
    model = config.model_config_list.config.add()
    model.name = model_name
    model.base_path = base_path
    model.model_platform = "tensorflow"
    return config


def resolve_base_path(base_path: str) -> Path:
    """A base path as a local directory; relative paths resolve against the current directory."""
    return Path(base_path).expanduser().resolve()
