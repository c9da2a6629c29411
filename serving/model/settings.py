"""Settings of the model commands (pydantic-settings, env prefix TOKENPULSE_MODEL_)."""

from __future__ import annotations

from pathlib import Path

from pydantic import Field, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from serving.model.config import PRESETS
from serving.model.signature import DEFAULT_MODEL_NAME
from serving.model.warmup import SERVING_BATCHING_FILE


class BuildSettings(BaseSettings):
    """`tokenpulse model build`: train (or reuse the cached checkpoint) and export one version."""

    model_config = SettingsConfigDict(env_prefix="TOKENPULSE_MODEL_", extra="ignore")

    preset: str = "default"
    base_path: Path
    version: int = Field(gt=0)
    model_name: str = DEFAULT_MODEL_NAME
    degrade_noise: float = Field(default=0.0, ge=0.0, le=10.0)
    cache_dir: Path = Path(".cache/tokenpulse")
    progress: bool = True
    overwrite: bool = False
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


class GenerateSettings(BaseSettings):
    """`tokenpulse model generate`: load a SavedModel and run its signature once."""

    model_config = SettingsConfigDict(env_prefix="TOKENPULSE_MODEL_", extra="ignore")

    base_path: Path
    version: int | None = Field(default=None, gt=0)
    prompt: str
    max_new_tokens: int = Field(default=64, ge=0)
    temperature: float = Field(default=0.8, ge=0.0)
    top_k: int = Field(default=0, ge=0)
    top_p: float = Field(default=1.0, gt=0.0, le=1.0)
    seed: int = 0
