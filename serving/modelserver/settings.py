"""The model server's settings: tensorflow_model_server's flags, validated at start-up."""

from __future__ import annotations

from pathlib import Path

from pydantic import Field, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from tokenpulse import ports
from tokenpulse.logging import LogLevel


class ModelServerSettings(BaseSettings):
    """One field per `tensorflow_model_server` flag we honour (same names and defaults)."""

    model_config = SettingsConfigDict(
        env_prefix="TOKENPULSE_MODELSERVER_",
        env_ignore_empty=True,
        extra="ignore",
        protected_namespaces=(),
    )

    port: int = Field(ports.MODELSERVER_GRPC, ge=0, le=65535, description="gRPC port")
    rest_api_port: int = Field(
        ports.MODELSERVER_REST,
        ge=0,
        le=65535,
        description="REST port; 0 disables REST and the metrics page",
    )
    host: str = Field("127.0.0.1", description="address both servers bind to")
    rest_api_timeout_in_ms: int = Field(30000, ge=0, description="REST request deadline in ms")
    model_config_file: Path | None = Field(
        None, description="ModelServerConfig text file (models.config)"
    )
    model_config_file_poll_wait_seconds: float = Field(
        0.0, description="re-read the config file every N seconds (0: never)"
    )
    model_name: str = Field("default", description="model name for the single-model form")
    model_base_path: str | None = Field(
        None, description="base path for the single-model form; relative to the cwd"
    )
    file_system_poll_wait_seconds: float = Field(
        1.0, description="poll base paths for new versions every N seconds (0: once, <0: never)"
    )
    enable_batching: bool = Field(False, description="server-wide dynamic batching")
    batching_parameters_file: Path | None = Field(
        None, description="BatchingParameters text file (needs --enable_batching)"
    )
    monitoring_config_file: Path | None = Field(
        None, description="MonitoringConfig text file (enables the Prometheus page)"
    )
    enable_model_warmup: bool = Field(
        True, description="replay the assets.extra warmup records before serving a version"
    )
    allow_version_labels_for_unavailable_models: bool = Field(
        False, description="allow labels on versions that are not yet loaded"
    )
    max_num_load_retries: int = Field(
        5, ge=0, description="retries of a failed version load before it is marked failed"
    )
    load_retry_interval_micros: int = Field(
        60_000_000, ge=0, description="wait between load retries, in microseconds"
    )
    rest_api_max_body_bytes: int = Field(
        16 * 1024 * 1024, gt=0, description="largest REST request body; larger ones get 413"
    )
    rest_api_header_timeout_seconds: float = Field(
        10.0, gt=0, description="time a REST client has to send a request head; then 408"
    )
    rest_api_idle_timeout_seconds: float = Field(
        75.0, gt=0, description="close a REST keep-alive connection idle this long"
    )
    rest_api_max_connections: int = Field(
        1024, ge=1, description="open REST connections; one more gets 503 and is closed"
    )
    tensorflow_intra_op_parallelism: int = Field(
        0, ge=0, description="threads one op may use; 0: TensorFlow's default (every core)"
    )
    tensorflow_inter_op_parallelism: int = Field(
        0, ge=0, description="ops run at once; 0: TensorFlow's default (every core)"
    )
    graph_rewrites: bool = Field(
        True,
        description="Grappler's rewrites of each signature on its first call (TF Serving turns "
        "them off through --platform_config_file's rewrite_options.disable_meta_optimizer); "
        "false: about 2 CPU-s less per version loaded, for a model too small to gain from them",
    )
    log_level: LogLevel = Field("INFO", description="DEBUG, INFO, WARNING or ERROR")

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
