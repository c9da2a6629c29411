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
# writes them into its run directory; compose bind-mounts serving/config into both containers;
# Kubernetes mounts the tfserving-config ConfigMap, which `tokenpulse build` copies from the same
# serving/config file (deploy/k8s/components/serving-config), so a change there reaches the pods
# through `kubectl apply` (the ConfigMap's new hash rolls them), and no canary weight file exists.
LOCAL_MODELS_CONFIG = "models.config"  # under run_dir, as stack.config.StackConfig names it
CANARY_WEIGHT_FILE = "canary-weight.json"  # under run_dir: the stack's gateway polls it
COMPOSE_MODELS_CONFIG = paths.SERVING_CONFIG / "models.container.config"
COMPOSE_CANARY_WEIGHT = paths.SERVING_CONFIG / "gateway" / "canary-weight.json"
K8S_MODELS_CONFIG = COMPOSE_MODELS_CONFIG  # the ConfigMap's source
K8S_APPLY = "tokenpulse build && kubectl apply --server-side -k deploy/k8s/overlays/<cpu|gpu>"
K8S_CANARY_WEIGHT = (
    "kubectl -n tokenpulse set env deploy/gateway -c gateway "
    "TOKENPULSE_GATEWAY_CANARY_WEIGHT=<0..1>"
)
Deployment = Literal["local", "compose", "kubernetes"]


class RolloutSettings(BaseSettings):
    """Which deployment, which files, which gateway."""

    model_config = SettingsConfigDict(env_prefix="TOKENPULSE_ROLLOUT_", extra="forbid")

    deployment: Deployment = Field(
        "local",
        description="local: the files `tokenpulse up` polls under run-dir; compose: "
        "serving/config/models.container.config and serving/config/gateway/canary-weight.json; "
        "kubernetes: serving/config/models.container.config, the tfserving-config ConfigMap's "
        "source (applied with `tokenpulse build` and `kubectl apply`; the gateway through a "
        "port-forward: `kubectl -n tokenpulse port-forward svc/gateway 8080:8080`)",
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
        "labels it routes by (compose publishes it on the same port, a Kubernetes "
        "port-forward of svc/gateway too)",
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
        if self.deployment == "kubernetes":
            return K8S_MODELS_CONFIG
        return self.run_dir / LOCAL_MODELS_CONFIG

    @property
    def applied_by_hand(self) -> bool:
        """Kubernetes: a written models.config reaches the pods only once it is applied."""
        return self.deployment == "kubernetes"

    @property
    def canary_weight_path(self) -> Path | None:
        """The canary weight file to write (None: the deployment's gateway reads none)."""
        if self.canary_weight_file is not None:
            return self.canary_weight_file
        if self.deployment == "compose":
            return COMPOSE_CANARY_WEIGHT
        if self.deployment == "kubernetes":
            return None
        return self.run_dir / CANARY_WEIGHT_FILE
