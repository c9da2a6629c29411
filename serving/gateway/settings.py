"""The gateway's one settings model (env prefix `TOKENPULSE_GATEWAY_`), validated at start-up."""

from __future__ import annotations

from pathlib import Path

from pydantic import Field, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from serving.model.signature import DEFAULT_MODEL_NAME


class GatewaySettings(BaseSettings):
    """Everything `tokenpulse gateway` can be told; built in `main()`, never at import."""

    model_config = SettingsConfigDict(env_prefix="TOKENPULSE_GATEWAY_", extra="forbid")

    host: str = "127.0.0.1"
    port: int = Field(8080, ge=0, le=65535)
    upstream_url: str = "http://127.0.0.1:8501"
    keys_file: Path
    models: list[str] = Field(default_factory=lambda: [DEFAULT_MODEL_NAME], min_length=1)
    # TF Serving's models.config: its `version_labels` are mirrored so the gateway can resolve a
    # label to a version itself and call `/versions/N` (TF Serving does not say who served).
    model_config_file: Path | None = None
    stable_label: str = "stable"
    canary_label: str = "canary"
    canary_weight: float = Field(0.0, ge=0.0, le=1.0)
    # each poll is a REST status GET, which TF Serving counts in its request_count
    status_poll_interval_s: float = Field(5.0, gt=0)

    # admission: in-flight upstream calls, and how many may wait (and how long) for a slot
    max_concurrency: int = Field(64, ge=1)
    max_queue: int = Field(256, ge=0)
    max_queue_wait_s: float = Field(1.0, ge=0)

    request_timeout_s: float = Field(30.0, gt=0)
    max_request_timeout_s: float = Field(300.0, gt=0)

    breaker_failure_threshold: int = Field(5, ge=1)
    breaker_open_s: float = Field(5.0, gt=0)

    # per-key defaults when the keys file does not set a limit
    default_requests_per_minute: float = Field(600.0, gt=0)
    default_tokens_per_minute: float = Field(60_000.0, gt=0)

    max_body_bytes: int = Field(1 << 20, ge=1024)
    max_prompt_chars: int = Field(16_384, ge=1)
    max_prompts: int = Field(16, ge=1)
    max_new_tokens_limit: int = Field(512, ge=1)
    default_max_new_tokens: int = Field(16, ge=1)

    # "module:factory" returning a SampleSink; empty = discard samples
    sample_sink: str = ""
    sample_queue_size: int = Field(1024, ge=1)

    log_level: str = "INFO"
    access_log: bool = True

    @field_validator("upstream_url")
    @classmethod
    def _strip_slash(cls, value: str) -> str:
        if not value.startswith(("http://", "https://")):
            raise ValueError("upstream_url must start with http:// or https://")
        return value.rstrip("/")

    @field_validator("stable_label", "canary_label")
    @classmethod
    def _label_chars(cls, value: str) -> str:
        # TF Serving allows [a-zA-Z0-9_]+ for label names
        if not value or not all(c.isascii() and (c.isalnum() or c == "_") for c in value):
            raise ValueError("version labels use [a-zA-Z0-9_]+")
        return value

    @model_validator(mode="after")
    def _consistent(self) -> GatewaySettings:
        if self.default_max_new_tokens > self.max_new_tokens_limit:
            raise ValueError("default_max_new_tokens exceeds max_new_tokens_limit")
        if self.request_timeout_s > self.max_request_timeout_s:
            raise ValueError("request_timeout_s exceeds max_request_timeout_s")
        if not self.keys_file.is_file():
            raise ValueError(f"keys file {self.keys_file} does not exist")
        return self
