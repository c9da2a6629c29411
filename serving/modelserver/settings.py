"""The model server's settings: tensorflow_model_server's flags, validated at start-up."""

from __future__ import annotations

from pathlib import Path

from pydantic import Field, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict


class ModelServerSettings(BaseSettings):
    """One field per `tensorflow_model_server` flag we honour (same names and defaults)."""

    model_config = SettingsConfigDict(
        env_prefix="TOKENPULSE_MODELSERVER_",
        env_ignore_empty=True,
        extra="ignore",
        protected_namespaces=(),
    )

    port: int = Field(8500, ge=0, le=65535, description="gRPC port")
    rest_api_port: int = Field(8501, ge=0, le=65535, description="REST port; 0 disables REST")
    host: str = Field("127.0.0.1", description="address both servers bind to")
    rest_api_timeout_in_ms: int = Field(30000, ge=0)
    model_config_file: Path | None = None
    model_config_file_poll_wait_seconds: float = 0.0
    model_name: str = "default"
    model_base_path: str | None = None
    file_system_poll_wait_seconds: float = 1.0
    enable_batching: bool = False
    batching_parameters_file: Path | None = None
    monitoring_config_file: Path | None = None
    enable_model_warmup: bool = True
    allow_version_labels_for_unavailable_models: bool = False
    log_level: str = "INFO"

    @model_validator(mode="after")
    def _check(self) -> ModelServerSettings:
        if self.model_config_file is None and not self.model_base_path:
            raise ValueError("give --model_config_file or --model_base_path")
        if self.batching_parameters_file is not None and not self.enable_batching:
            raise ValueError(
                "server_options.batching_parameters_file is set without setting "
                "server_options.enable_batching to true."
            )
        return self
