"""`tokenpulse rollout`'s one settings model (env prefix `TOKENPULSE_ROLLOUT_`)."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from tokenpulse import paths, ports
from tokenpulse.tfserving.config import LABEL_RE
from tokenpulse.tfserving.signature import DEFAULT_MODEL_NAME

# Where each deployment keeps the files the model server and the gateway poll: `tokenpulse up`
# writes them into its run directory; compose bind-mounts serving/config into both containers.
LOCAL_MODELS_CONFIG = "models.config"  # under run_dir, as stack.config.StackConfig names it
CANARY_WEIGHT_FILE = "canary-weight.json"  # under run_dir: the stack's gateway polls it
COMPOSE_MODELS_CONFIG = paths.SERVING_CONFIG / "models.container.config"
COMPOSE_CANARY_WEIGHT = paths.SERVING_CONFIG / "gateway" / "canary-weight.json"


class RolloutSettings(BaseSettings):
    """Which deployment, which files, which gateway."""

    model_config = SettingsConfigDict(env_prefix="TOKENPULSE_ROLLOUT_", extra="forbid")

    deployment: Literal["local", "compose"] = Field(
        "local",
        description="local: the files `tokenpulse up` polls under run-dir; compose: "
        "serving/config/models.container.config and serving/config/gateway/canary-weight.json",
    )
    run_dir: Path = Field(Path("run"), description="`tokenpulse up`'s run directory (local)")
    model_config_file: Path | None = Field(
        None, description="the models.config the model server and gateway poll (overrides "
        "the deployment's)",
    )  # fmt: skip
    canary_weight_file: Path | None = Field(
        None, description="the gateway's canary weight file (overrides the deployment's)"
    )
    gateway_url: str = Field(
        f"http://127.0.0.1:{ports.GATEWAY}",
        description="the gateway: its /readyz says which versions are AVAILABLE and which "
        "labels it routes by (compose publishes it on the same port)",
    )
    model: str = Field(DEFAULT_MODEL_NAME, description="model name")
    stable_label: str = Field("stable", description="the label `rollback` moves back")
    wait_s: float = Field(
        15.0, ge=0, description="seconds to wait for the gateway to route by a moved label "
        "(it re-reads models.config every status poll, 5 s by default)",
    )  # fmt: skip

    @field_validator("stable_label")
    @classmethod
    def _label(cls, value: str) -> str:
        if not LABEL_RE.match(value):
            raise ValueError("version labels use [a-zA-Z0-9_]+")
        return value

    @property
    def models_config(self) -> Path:
        """The models.config to rewrite."""
        if self.model_config_file is not None:
            return self.model_config_file
        if self.deployment == "compose":
            return COMPOSE_MODELS_CONFIG
        return self.run_dir / LOCAL_MODELS_CONFIG

    @property
    def canary_weight_path(self) -> Path:
        """The canary weight file to write."""
        if self.canary_weight_file is not None:
            return self.canary_weight_file
        if self.deployment == "compose":
            return COMPOSE_CANARY_WEIGHT
        return self.run_dir / CANARY_WEIGHT_FILE
