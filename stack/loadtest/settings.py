"""`tokenpulse loadtest`'s one settings model (env prefix `TOKENPULSE_LOADTEST_`)."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field, SecretStr, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from tokenpulse import ports
from tokenpulse.logging import LogLevel
from tokenpulse.tfserving.signature import DEFAULT_MODEL_NAME

# flags whose values never reach the report's command line
SECRET_FLAGS = ("--key",)


class LoadtestSettings(BaseSettings):
    """Everything `tokenpulse loadtest` can be told."""

    model_config = SettingsConfigDict(env_prefix="TOKENPULSE_LOADTEST_", extra="forbid")

    url: str = Field(
        f"http://127.0.0.1:{ports.GATEWAY}",
        description="base URL of the target: the gateway (routes native, openai) or a model "
        "server (route tfserving)",
    )
    route: Literal["native", "openai", "tfserving"] = Field(
        "native",
        description="native: POST /v1/generate; openai: POST /v1/completions; tfserving: TF "
        "Serving's POST /v1/models/<model>:predict",
    )
    interaction: Literal["unary", "stream"] = Field(
        "unary",
        description="unary, or stream (route openai only: server-sent events; measures time to "
        "first token and inter-token latency)",
    )
    model: str = Field(DEFAULT_MODEL_NAME, description="model name in each request")
    key: list[SecretStr] = Field(
        default_factory=list,
        description="API key(s), used in turn; prefer the env var or --key-file (flags show in "
        "the process list; the report never records them)",
    )
    key_file: Path | None = Field(None, description="file with one API key a line")
    mode: Literal["open", "closed"] = Field(
        "open", description="open: fixed arrival rate; closed: fixed concurrency"
    )
    arrival: Literal["poisson", "constant"] = Field("poisson", description="open-loop arrivals")
    rate: float = Field(5.0, gt=0, description="open loop: requests per second")
    ramp_from: float | None = Field(
        None, ge=0, description="open loop: start at this rate and rise linearly to --rate"
    )
    ramp_s: float = Field(0.0, ge=0, description="seconds the ramp takes")
    concurrency: int = Field(4, ge=1, description="closed loop: requests in flight")
    sweep: list[float] = Field(
        default_factory=list,
        description="run once per value: rates (open) or concurrencies (closed), ascending",
    )
    duration_s: float = Field(30.0, gt=0, description="seconds of load per run")
    timeout_s: float = Field(30.0, gt=0, description="seconds a request may take")
    prompts_file: Path | None = Field(
        None,
        description="JSONL prompts (prompt, max_new_tokens?, weight?); e.g. the shipped "
        "stack/loadtest/workloads/customer_service_zh.jsonl",
    )
    prompt_chars: str = Field(
        "32", description="synthetic prompt length: N, LO-HI, normal:MEAN,STD, choice:A,B"
    )
    max_new_tokens: str = Field("16", description="max_new_tokens distribution, same forms")
    truncate_prompt_tokens: int | None = Field(
        None, description="sent with each gateway request (-1: the model keeps the window's end)"
    )
    seed: int = Field(0, description="seed of arrivals and workload draws")
    slo_latency_s: float | None = Field(
        None, gt=0, description="latency bound (default: the mixin's latency SLO threshold)"
    )
    slo_error_ratio: float | None = Field(
        None, ge=0, le=1, description="error+shed share bound (default: 1 - availability SLO)"
    )
    find_max: bool = Field(False, description="search the highest rate that holds the SLO")
    find_max_start: float = Field(1.0, gt=0, description="first rate of the search")
    find_max_factor: float = Field(2.0, gt=1, description="growth per step before bisecting")
    find_max_repeats: int = Field(3, ge=1, description="runs per rate; the majority decides")
    find_max_tolerance: float = Field(0.1, gt=0, description="bisect until within this share")
    find_max_limit: float = Field(10_000.0, gt=0, description="never go above this rate")
    prometheus_url: str | None = Field(
        None,
        description="Prometheus to query server-side figures from (e.g. http://127.0.0.1:9090)",
    )
    prometheus_step_s: float = Field(5.0, gt=0, description="resolution of server-side series")
    prometheus_window_s: float = Field(
        30.0, gt=0, description="rate window of server-side series (>= 2 scrape intervals)"
    )
    metrics_url: list[str] = Field(
        default_factory=list,
        description="/metrics pages to sample during the run instead of Prometheus (gateway, "
        "model server's /monitoring/prometheus/metrics, exporter)",
    )
    server_pid: list[int] = Field(
        default_factory=list, description="local server processes whose CPU to sample"
    )
    max_generator_cpu: float = Field(
        0.9, gt=0, description="stop when the generator's event loop uses this share of a core"
    )
    max_loop_lag_s: float = Field(0.25, gt=0, description="... or wakes this late")
    saturation_grace_s: float = Field(3.0, gt=0, description="... for this many seconds")
    max_in_flight: int = Field(4096, ge=1, description="requests in flight before refusing")
    scenario: Literal["seed"] | None = Field(
        None,
        description="seed: the seed's story (naive server, model server without and "
        "with batching) under the same load",
    )
    scenario_model: Path | None = Field(
        None, description="seed scenario: an exported SavedModel version directory"
    )
    report_dir: Path = Field(Path("loadtest-report"), description="where the report goes")
    against: Path | None = Field(
        None, description="an earlier report directory to compare this run with"
    )
    progress: bool = Field(True, description="live progress line on stderr")
    log_level: LogLevel = Field("INFO", description="DEBUG, INFO, WARNING or ERROR")

    @field_validator("sweep")
    @classmethod
    def _ascending(cls, value: list[float]) -> list[float]:
        if any(v <= 0 for v in value) or value != sorted(value):
            raise ValueError("sweep values must be positive and ascending")
        return value

    @model_validator(mode="after")
    def _consistent(self) -> LoadtestSettings:
        if self.interaction == "stream" and self.route != "openai":
            raise ValueError(
                f"--interaction stream needs --route openai (route {self.route} is unary only)"
            )
        if self.find_max and (self.sweep or self.mode == "closed"):
            raise ValueError("--find-max searches open-loop rates: drop --sweep and --mode closed")
        if self.mode == "closed" and any(v != int(v) for v in self.sweep):
            raise ValueError("a closed-loop sweep takes whole concurrencies")
        if self.scenario == "seed" and self.scenario_model is None:
            raise ValueError(
                "--scenario seed needs --scenario-model: an exported SavedModel version "
                "directory (e.g. `tokenpulse model build --preset tiny`)"
            )
        if self.ramp_from is not None and self.ramp_s <= 0:
            raise ValueError("--ramp-from needs --ramp-s")
        return self

    def api_keys(self) -> list[str]:
        """The keys from --key and --key-file, in that order."""
        keys = [k.get_secret_value() for k in self.key]
        if self.key_file is not None:
            try:
                text = self.key_file.read_text()
            except OSError as exc:
                why = exc.strerror
                raise ValueError(f"cannot read --key-file {self.key_file}: {why}") from None
            keys += [line.strip() for line in text.splitlines() if line.strip()]
        return keys
