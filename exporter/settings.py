"""The exporter's settings: one pydantic-settings model, env prefix TOKENPULSE_EXPORTER_."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Literal

from pydantic import Field, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from exporter.registry import enabled_names
from tokenpulse import ports
from tokenpulse.tfserving.signature import DEFAULT_MODEL_NAME

_LISTEN = re.compile(r"^(?P<host>\[[0-9a-fA-F:.]+\]|[A-Za-z0-9.\-]*):(?P<port>\d{1,5})$")


class ExporterSettings(BaseSettings):
    """Everything `tokenpulse exporter` can be told; validated at start-up."""

    model_config = SettingsConfigDict(env_prefix="TOKENPULSE_EXPORTER_", extra="ignore")

    # host:port; an empty host (":9410") listens on every interface, as in node_exporter.
    listen_address: str = Field(
        f"127.0.0.1:{ports.EXPORTER}",
        description=f"host:port for /metrics; :{ports.EXPORTER} listens on every interface",
    )
    # Per-collector overrides of each collector's default, e.g. {"nvml": false}.
    collectors: dict[str, bool] = Field(
        default_factory=dict, description='per-collector overrides, e.g. {"nvml": false}'
    )
    tfserving_url: str = Field(
        f"http://127.0.0.1:{ports.MODELSERVER_REST}", description="TF Serving REST base URL"
    )
    # The same file TF Serving reads: model names, base paths (for golden files) and labels.
    model_config_file: Path | None = Field(
        None, description="TF Serving's --model_config_file: models, base paths, labels"
    )
    # Without a config file: the one model to watch and where its versions live.
    model_name: str = Field(
        DEFAULT_MODEL_NAME, description="without a config file: the model to watch"
    )
    model_base_path: Path | None = Field(
        None, description="without a config file: the model's base path (golden files)"
    )
    status_poll_interval_seconds: float = Field(
        default=5.0, gt=0, description="seconds between model status polls"
    )
    request_timeout_seconds: float = Field(
        default=2.0, gt=0, description="status request timeout in seconds"
    )
    canary_interval_seconds: float = Field(
        default=60.0, gt=0, description="seconds between canary runs"
    )
    canary_timeout_seconds: float = Field(
        default=60.0, gt=0, description="predict timeout per canary prompt, seconds"
    )
    # "real" is pynvml; "fake" is a simulated node for demos and benchmarks, never a default.
    nvml_backend: Literal["real", "fake"] = Field(
        "real", description="real (pynvml), or fake: a simulated node for demos and benchmarks"
    )
    nvml_fake_gpus: int = Field(default=8, ge=1, le=64, description="GPUs of the fake backend")
    # Drills only: XIDs and thermal throttling for the fake GPUs (exporter/nvml/fake_faults.py).
    nvml_fake_faults: Path | None = Field(
        None,
        description="fake backend only: a JSON file of drill faults (XIDs, thermal throttling), "
        "re-read when it changes",
    )
    nvml_fields_file: Path | None = Field(
        None, description="NVML fields file (default: exporter/nvml/fields.csv)"
    )
    nvml_retry_seconds: float = Field(
        default=30.0, gt=0, description="seconds between NVML init retries while unavailable"
    )
    # A hung NVML call fails the nvml collector after this long instead of hanging the scrape.
    nvml_timeout_seconds: float = Field(
        default=3.0, gt=0, description="seconds before a hung NVML collect fails the collector"
    )
    log_level: str = Field("INFO", description="DEBUG, INFO, WARNING or ERROR")

    @field_validator("listen_address")
    @classmethod
    def _listen(cls, value: str) -> str:
        m = _LISTEN.match(value)
        if m is None or not 0 <= int(m["port"]) < 65536:
            raise ValueError(
                "listen address must be host:port "
                f"(e.g. 127.0.0.1:{ports.EXPORTER} or :{ports.EXPORTER})"
            )
        return value

    @field_validator("tfserving_url")
    @classmethod
    def _url(cls, value: str) -> str:
        if not re.match(r"^https?://[^/\s]+/?$", value):
            raise ValueError("tfserving url must be http(s)://host:port")
        return value.rstrip("/")

    @field_validator("log_level")
    @classmethod
    def _level(cls, value: str) -> str:
        if value.upper() not in ("DEBUG", "INFO", "WARNING", "ERROR"):
            raise ValueError("log level must be DEBUG, INFO, WARNING or ERROR")
        return value.upper()

    @model_validator(mode="after")
    def _check(self) -> ExporterSettings:
        enabled_names(self.collectors)  # unknown collector names fail here, at start-up
        if self.model_config_file is not None and not self.model_config_file.is_file():
            raise ValueError(f"model config file {self.model_config_file} does not exist")
        if self.nvml_fake_faults is not None and self.nvml_backend != "fake":
            raise ValueError(
                "--collector.nvml.fake-faults needs --collector.nvml.backend=fake: "
                "drill faults never reach a real GPU"
            )
        return self

    def listen(self) -> tuple[str, int]:
        """(host, port) to bind; host "" means every interface."""
        m = _LISTEN.match(self.listen_address)
        if m is None:  # validated above; kept for type narrowing
            raise ValueError("bad listen address")
        return m["host"].strip("[]"), int(m["port"])

    def enabled_collectors(self) -> list[str]:
        """The collectors to run, in registry order."""
        return enabled_names(self.collectors)
