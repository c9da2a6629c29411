"""The text files TF Serving reads: models config, batching parameters, monitoring config.

Parsing and TF Serving's checks are the shared `tokenpulse.tfserving.config` (the gateway and the
exporter read the same files with it). The model server adds what only it needs: the model
config as a `ModelServerConfig` proto (its manager and gRPC `HandleReloadConfigRequest` work on
protos), and the proto-side checks for configs that arrive over gRPC.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tokenpulse.tfserving.config import (
    DEFAULT_METRICS_PATH,
    BatchingParameters,
    ModelConfig,
    ModelServerConfig,
    MonitoringConfig,
    VersionPolicy,
    load,
    load_model_server_config,
    validate_model_server_config,
)
from tokenpulse.tfserving.config import parse_batching_parameters as _parse_batching
from tokenpulse.tfserving.config import parse_monitoring_config as _parse_monitoring
from tokenpulse.tfserving.errors import ConfigError

ConfigFileError = ConfigError  # a config file that cannot be read or parsed; names file and line

__all__ = [
    "DEFAULT_METRICS_PATH",
    "BatchingParameters",
    "ConfigFileError",
    "MonitoringConfig",
    "parse_batching_parameters",
    "parse_model_server_config",
    "parse_monitoring_config",
    "resolve_base_path",
    "single_model_config",
    "validate_model_config_list",
]


def parse_batching_parameters(path: Path | None) -> BatchingParameters:
    """Read a `batching_parameters.txt`; None gives the defaults of `--enable_batching` alone."""
    return BatchingParameters() if path is None else load(path, _parse_batching)


def parse_monitoring_config(path: Path | None) -> MonitoringConfig:
    """Read a `monitoring.config`; None means no metrics page (TF Serving's default)."""
    return MonitoringConfig() if path is None else load(path, _parse_monitoring)


def parse_model_server_config(path: Path) -> Any:
    """Read a `--model_config_file`, check it like TF Serving, as a ModelServerConfig proto."""
    return to_proto(load_model_server_config(path))


def to_proto(config: ModelServerConfig) -> Any:
    """The `ModelServerConfig` proto of a parsed config."""
    from tensorflow_serving.config import model_server_config_pb2

    proto = model_server_config_pb2.ModelServerConfig()
    if not config.has_model_config_list:
        return proto
    proto.model_config_list.SetInParent()
    for m in config.models:
        entry = proto.model_config_list.config.add()
        entry.name, entry.base_path = m.name, m.base_path
        entry.model_platform, entry.model_type = m.model_platform, m.model_type
        for label, version in m.version_labels.items():
            entry.version_labels[label] = version
        policy = m.version_policy
        if policy is None:
            continue
        entry.model_version_policy.SetInParent()
        if policy.choice == "latest":
            entry.model_version_policy.latest.num_versions = policy.num_versions
        elif policy.choice == "all":
            entry.model_version_policy.all.SetInParent()
        elif policy.choice == "specific":
            entry.model_version_policy.specific.SetInParent()
            entry.model_version_policy.specific.versions.extend(policy.versions)
    return proto


def from_proto(proto: Any) -> ModelServerConfig:
    """A `ModelServerConfig` proto (e.g. from gRPC) as the shared dataclasses."""
    if proto.WhichOneof("config") != "model_config_list":
        return ModelServerConfig((), has_model_config_list=False)
    models = []
    for m in proto.model_config_list.config:
        policy = None
        if m.HasField("model_version_policy"):
            p = m.model_version_policy
            choice = p.WhichOneof("policy_choice") or ""
            policy = VersionPolicy(choice, p.latest.num_versions, tuple(p.specific.versions))
        models.append(
            ModelConfig(
                m.name,
                m.base_path,
                m.model_platform,
                m.model_type,
                policy,
                dict(m.version_labels),
            )
        )
    return ModelServerConfig(tuple(models))


def validate_model_config_list(config: Any) -> None:
    """TF Serving's checks on a ModelServerConfig proto; raises ValueError with its message."""
    for model in config.model_config_list.config:
        if model.HasField("logging_config"):
            raise ValueError("No request-logger-creator provided.")
    try:
        validate_model_server_config(from_proto(config))
    except ConfigError as exc:
        raise ValueError(exc.message) from exc


def single_model_config(model_name: str, base_path: str) -> Any:
    """The ModelServerConfig that `--model_name/--model_base_path` stand for."""
    config = ModelConfig(model_name, base_path, model_platform="tensorflow")
    return to_proto(ModelServerConfig((config,)))


def resolve_base_path(base_path: str) -> Path:
    """A base path as a local directory; relative paths resolve against the current directory."""
    return Path(base_path).expanduser().resolve()
