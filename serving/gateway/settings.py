"""The gateway's one settings model (env prefix `TOKENPULSE_GATEWAY_`), validated at start-up."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from tokenpulse import ports
from tokenpulse.logging import LogLevel
from tokenpulse.tfserving.signature import (
    DEFAULT_MODEL_NAME,
    DEFAULT_STREAM_CHUNK,
    DEFAULT_STREAM_FIRST_CHUNK,
)

# the `replica` label of the per-replica metrics takes one value per configured URL: bounded here
MAX_UPSTREAMS = 64


class GatewaySettings(BaseSettings):
    """Everything `tokenpulse gateway` can be told; built in `main()`, never at import."""

    model_config = SettingsConfigDict(env_prefix="TOKENPULSE_GATEWAY_", extra="forbid")

    host: str = Field("127.0.0.1", description="address to bind")
    port: int = Field(ports.GATEWAY, ge=0, le=65535, description="port of the public API")
    upstream_url: str = Field(
        f"http://127.0.0.1:{ports.MODELSERVER_REST}",
        description="TF Serving's REST base URL, or several replicas' URLs comma-separated: the "
        "gateway spreads requests over them (the `replica` label is each one's 0-based index)",
    )
    keys_file: Path = Field(description="hashed API keys file (`tokenpulse gateway keys add`)")
    keys_poll_interval_s: float = Field(
        0.5,
        gt=0,
        le=1.0,
        description="seconds between checks of the keys file; a removed key stops working "
        "within this interval (at most 1)",
    )
    context_window_tokens: int = Field(
        128,
        ge=8,
        description="the model's context window in its own tokens (a prompt's tokens + 1 start "
        "token + max_tokens must fit): 128 for the tiny preset, 256 for the default; more gets "
        "400 unless truncate_prompt_tokens is set",
    )
    stream_chunk_tokens: int = Field(
        DEFAULT_STREAM_CHUNK,
        ge=1,
        le=256,
        description="tokens per `continue` call when streaming (SSE): smaller sends text sooner, "
        "larger re-reads the prompt less often",
    )
    stream_first_chunk_tokens: int = Field(
        DEFAULT_STREAM_FIRST_CHUNK,
        ge=0,
        le=256,
        description="tokens of a stream's first `continue` call (0: stream_chunk_tokens): a "
        "smaller first chunk sends the first text sooner, larger later ones keep throughput",
    )
    stream_batch_rows: int = Field(
        32,
        ge=0,
        le=4096,
        description="rows one coalesced `continue` call carries: the streams of a version share "
        "one call in flight per replica, so they reach the model server as one batch (at most "
        "its max_batch_size); 0: each stream calls on its own",
    )
    header_timeout_s: float = Field(
        10.0, gt=0, description="seconds a client may take to send a complete request head"
    )
    idle_timeout_s: float = Field(
        75.0, gt=0, description="seconds a keep-alive connection may stay idle"
    )
    max_connections: int = Field(
        2048, ge=1, description="open client connections; more get 503 and are closed"
    )
    models: list[str] = Field(
        default_factory=lambda: [DEFAULT_MODEL_NAME],
        min_length=1,
        description="model names served",
    )
    # TF Serving's models.config: its `version_labels` are mirrored so the gateway can resolve a
    # label to a version itself and call `/versions/N` (TF Serving does not say who served).
    model_config_file: Path | None = Field(
        None, description="TF Serving's models.config, to resolve version labels"
    )
    stable_label: str = Field("stable", description="version label of the stable version")
    canary_label: str = Field("canary", description="version label of the canary version")
    canary_weight: float = Field(
        0.0, ge=0.0, le=1.0, description="share of requests routed to the canary (0 to 1)"
    )
    canary_weight_file: Path | None = Field(
        None,
        description='JSON file {"canary_weight": W} (`tokenpulse rollout canary-weight`), '
        "checked every second; while it exists its weight replaces canary_weight",
    )
    # each poll is a REST status GET, which TF Serving counts in its request_count
    status_poll_interval_s: float = Field(
        5.0, gt=0, description="seconds between model status polls"
    )

    max_concurrency: int = Field(64, ge=1, description="in-flight upstream calls")
    max_queue: int = Field(256, ge=0, description="requests that may wait for a slot")
    max_queue_wait_s: float = Field(1.0, ge=0, description="seconds a request may wait")

    request_timeout_s: float = Field(30.0, gt=0, description="default request deadline, seconds")
    max_request_timeout_s: float = Field(
        300.0, gt=0, description="largest deadline a client may ask for, seconds"
    )

    drain_timeout_s: float = Field(
        310.0,
        gt=0,
        description="on SIGTERM: seconds the requests in flight (streams included) may take to "
        "finish while new ones get 503 shutting_down; then the rest are ended and the process "
        "exits 0. The default covers max_request_timeout_s (300) plus the last writes; a pod's "
        "terminationGracePeriodSeconds must be larger",
    )

    breaker_failure_threshold: int = Field(
        5, ge=1, description="consecutive upstream failures that open the breaker"
    )
    breaker_open_s: float = Field(5.0, gt=0, description="seconds the breaker stays open")

    default_requests_per_minute: float = Field(
        600.0, gt=0, description="per-key request limit when the keys file sets none"
    )
    default_tokens_per_minute: float = Field(
        60_000.0, gt=0, description="per-key token limit when the keys file sets none"
    )

    max_body_bytes: int = Field(1 << 20, ge=1024, description="largest request body, bytes")
    max_prompt_chars: int = Field(16_384, ge=1, description="longest prompt, characters")
    max_prompts: int = Field(16, ge=1, description="most prompts in one request")
    max_new_tokens_limit: int = Field(512, ge=1, description="largest max_tokens a client may ask")
    default_max_new_tokens: int = Field(16, ge=1, description="max_tokens when a client sets none")

    sample_sink: str = Field(
        "", description="'module:factory' returning a SampleSink; empty: discard samples"
    )
    sample_queue_size: int = Field(1024, ge=1, description="samples queued for the sink")
    feedback_window_s: float = Field(
        600.0, ge=0, description="seconds the gateway remembers a response for feedback (its "
        "model, version and key); later feedback is accepted as late, without them",
    )  # fmt: skip
    feedback_max_responses: int = Field(
        100_000, ge=0, description="responses remembered for feedback at most (oldest forgotten)"
    )
    feedback_max_comment_chars: int = Field(
        2000, ge=0, description="longest feedback comment, characters"
    )

    log_level: LogLevel = Field("INFO", description="DEBUG, INFO, WARNING or ERROR")
    access_log: bool = Field(True, description="log one line per request")
    event_loop: Literal["uvloop", "asyncio"] = Field(
        "uvloop", description="uvloop (C, the default) or asyncio's own event loop"
    )

    @field_validator("upstream_url")
    @classmethod
    def _upstream_urls(cls, value: str) -> str:
        urls = [u.strip().rstrip("/") for u in value.split(",")]
        for url in urls:
            if not url.startswith(("http://", "https://")):
                raise ValueError("upstream_url must start with http:// or https://")
        if len(set(urls)) != len(urls):
            raise ValueError("upstream_url lists the same replica twice")
        if len(urls) > MAX_UPSTREAMS:
            raise ValueError(f"upstream_url lists more than {MAX_UPSTREAMS} replicas")
        return ",".join(urls)

    @property
    def upstream_urls(self) -> list[str]:
        """The replicas' REST base URLs, in `replica` label order."""
        return self.upstream_url.split(",")

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
