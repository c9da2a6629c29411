"""Settings of the model commands (pydantic-settings, env prefix TOKENPULSE_MODEL_)."""

from __future__ import annotations

from pathlib import Path

from pydantic import Field, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from serving.model.config import PRESETS
from serving.model.warmup import SERVING_BATCHING_FILE
from tokenpulse.tfserving.signature import DEFAULT_MODEL_NAME, STOP_SLOTS


class BuildSettings(BaseSettings):
    """`tokenpulse model build`: train (or reuse the cached checkpoint) and export one version."""

    model_config = SettingsConfigDict(env_prefix="TOKENPULSE_MODEL_", extra="ignore")

    preset: str = Field("default", description=f"model size: {' | '.join(PRESETS)}")
    base_path: Path = Field(description="model base path; the version goes to BASE/<version>")
    version: int = Field(gt=0, description="version number to export")
    model_name: str = Field(DEFAULT_MODEL_NAME, description="name written into warmup records")
    degrade_noise: float = Field(
        default=0.0,
        ge=0.0,
        le=10.0,
        description="export a deliberately degraded version (noise on the weights)",
    )
    cache_dir: Path = Field(Path(".cache/tokenpulse"), description="trained checkpoint cache")
    progress: bool = Field(True, description="show training progress")
    overwrite: bool = Field(False, description="replace an existing version directory")
    keep_existing: bool = Field(
        False,
        description="an existing version directory is a complete one (exports are renamed into "
        "place whole): keep it and exit 0, so a retried or re-applied build is a no-op",
    )
    warmup_batch_sizes: list[int] | None = Field(
        default=None,
        description="batch sizes of the warmup records; default: what the batching file allows",
    )
    batching_parameters_file: Path | None = Field(
        default=SERVING_BATCHING_FILE,
        description="serving BatchingParameters; warmup records never exceed its max_batch_size",
    )

    @field_validator("preset")
    @classmethod
    def _known_preset(cls, value: str) -> str:
        if value not in PRESETS:
            raise ValueError(f"unknown preset {value!r}; choose one of {sorted(PRESETS)}")
        return value

    @model_validator(mode="after")
    def _one_way_for_an_existing_version(self) -> BuildSettings:
        if self.overwrite and self.keep_existing:
            raise ValueError("--overwrite and --keep-existing contradict each other: pick one")
        return self


class GenerateSettings(BaseSettings):
    """`tokenpulse model generate`: load a SavedModel and run its signature once."""

    model_config = SettingsConfigDict(env_prefix="TOKENPULSE_MODEL_", extra="ignore")

    base_path: Path = Field(description="model base path holding numbered versions")
    version: int | None = Field(default=None, gt=0, description="version to load; none: latest")
    prompt: str = Field(description="text to continue")
    max_new_tokens: int = Field(default=64, ge=0, description="tokens to generate at most")
    temperature: float = Field(default=0.8, ge=0.0, description="sampling temperature; 0: greedy")
    top_k: int = Field(default=0, ge=0, description="sample from the k likeliest; 0: all")
    top_p: float = Field(default=1.0, gt=0.0, le=1.0, description="nucleus sampling mass")
    seed: int = Field(0, description="sampling seed")
    stop: list[str] = Field(
        default_factory=list,
        max_length=STOP_SLOTS,
        description="stop sequences: decoding ends when the text ends with one (left out)",
    )
    ignore_eos: bool = Field(False, description="decode past the end-of-text token")


class CheckSettings(BaseSettings):
    """`tokenpulse model check`: validate a SavedModel against the serving contract."""

    model_config = SettingsConfigDict(env_prefix="TOKENPULSE_MODEL_", extra="ignore")

    path: Path = Field(description="the SavedModel directory (one version, e.g. models/gen/1)")
    prompt: str = Field("The assert statement", description="prompt of the smoke predict")
    max_new_tokens: int = Field(
        default=24, gt=0, description="tokens the smoke predict and the streamed run generate"
    )
    chunk: int = Field(
        default=5,
        gt=0,
        description="tokens per `continue` call when streaming (5 does not divide the default "
        "budget, so a short last chunk is checked too)",
    )
    seed: int = Field(0, description="sampling seed of the greedy runs")
