"""Settings of `tokenpulse grafana push|annotate` (flags or TOKENPULSE_GRAFANA_* variables)."""

from __future__ import annotations

from pathlib import Path

from pydantic import Field, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from tokenpulse import paths

DASHBOARDS = paths.DASHBOARDS
# epoch ms of 2001-09-09: a smaller time is seconds given by mistake
MIN_EPOCH_MS = 1_000_000_000_000


class GrafanaSettings(BaseSettings):
    """Where Grafana is and how to authenticate (exactly one credential file)."""

    model_config = SettingsConfigDict(env_prefix="TOKENPULSE_GRAFANA_", extra="ignore")

    url: str = Field(description="Grafana base URL, e.g. http://grafana:3000")
    token_file: Path | None = Field(None, description="file holding a service-account token")
    basic_auth_file: Path | None = Field(None, description="file holding `user:password`")
    timeout_s: float = Field(10.0, gt=0, description="seconds per HTTP request")

    @field_validator("url")
    @classmethod
    def _http(cls, value: str) -> str:
        if not value.startswith(("http://", "https://")):
            raise ValueError(f"must start with http:// or https://, got {value!r}")
        return value.rstrip("/")

    @model_validator(mode="after")
    def _one_credential(self) -> GrafanaSettings:
        if (self.token_file is None) == (self.basic_auth_file is None):
            raise ValueError("give exactly one of --token-file or --basic-auth-file")
        return self


class PushSettings(GrafanaSettings):
    """What to upload and where."""

    dir: Path = Field(DASHBOARDS, description="folder of dashboard JSON files")
    folder_uid: str = Field("tokenpulse", description="Grafana folder uid (created if missing)")
    folder_title: str = Field("TokenPulse", description="title of a folder created by the push")
    overwrite: bool = Field(
        False, description="replace dashboards even if they changed in Grafana since read"
    )


class AnnotateSettings(GrafanaSettings):
    """The deployment annotation to add."""

    text: str = Field(min_length=1, description="what happened, e.g. 'gen v3 live'")
    tags: list[str] = Field(
        default_factory=list, description="tags besides `deployment`, e.g. model:gen version:3"
    )
    dashboard_uid: str | None = Field(
        None, description="only on this dashboard uid; none: every dashboard"
    )
    time_ms: int | None = Field(
        None, ge=MIN_EPOCH_MS, description="when, in epoch milliseconds; none: now"
    )
