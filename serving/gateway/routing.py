"""Version routing: resolve a TF Serving version label to a version, with a sticky weighted canary.

TF Serving's REST API accepts `/labels/{label}:predict`, but its response does not say which
version answered, and a label may move between two requests. So the gateway resolves the label
itself and calls `/versions/{N}:predict`: the version it reports is the version that ran.

- Labels come from the same `models.config` TF Serving reads (its `version_labels`), re-read when
  the file changes; versions and their states from polling `GET /v1/models/{model}`.
- Without an explicit label, a request goes to the canary label with probability `canary_weight`,
  else to the stable label, else (labels absent or not AVAILABLE) to the newest AVAILABLE version.
- The canary choice hashes (model, user or key id) into [0, 1): the same caller stays on the same
  side, and raising the weight only moves callers from stable to canary, never back.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path

from serving.gateway.errors import NotFound, UpstreamUnavailable
from tokenpulse.tfserving.config import parse_model_server_config, validate_model_server_config
from tokenpulse.tfserving.errors import ConfigError as ModelConfigError

__all__ = [
    "ModelConfigError",
    "ModelState",
    "Route",
    "Router",
    "canary_bucket",
    "parse_version_labels",
]


def parse_version_labels(text: str) -> dict[str, dict[str, int]]:
    """`{model: {label: version}}` from a models.config, read and checked as TF Serving does."""
    config = parse_model_server_config(text)
    validate_model_server_config(config)
    return config.labels()


def canary_bucket(model: str, sticky: str) -> float:
    """A stable point in [0, 1) for this caller and model."""
    digest = hashlib.sha256(f"{model}\x00{sticky}".encode("utf-8", "surrogatepass")).digest()
    return int.from_bytes(digest[:8], "big") / 2.0**64


@dataclass(frozen=True)
class Route:
    """Where one request goes."""

    model: str
    version: int
    label: str | None


@dataclass
class ModelState:
    """What the gateway knows about one model."""

    available: list[int] = field(default_factory=list)  # descending
    labels: dict[str, int] = field(default_factory=dict)


class Router:
    """Resolves (model, optional label, caller) to a Route."""

    def __init__(
        self,
        models: list[str],
        *,
        stable_label: str = "stable",
        canary_label: str = "canary",
        canary_weight: float = 0.0,
        model_config_file: Path | None = None,
    ) -> None:
        self.models = {m: ModelState() for m in models}
        self.stable_label = stable_label
        self.canary_label = canary_label
        self.canary_weight = canary_weight
        self.model_config_file = model_config_file
        self._config_mtime: float | None = None
        self.reload_labels()

    def reload_labels(self) -> bool:
        """Re-read models.config if it changed; True when labels were (re)loaded."""
        path = self.model_config_file
        if path is None:
            return False
        try:
            mtime = path.stat().st_mtime
        except OSError:
            return False  # keep the last good labels while the file is being replaced
        if mtime == self._config_mtime:
            return False
        labels = parse_version_labels(path.read_text(encoding="utf-8"))
        self._config_mtime = mtime
        for model, state in self.models.items():
            state.labels = dict(labels.get(model, {}))
        return True

    def set_available(self, model: str, versions: list[int]) -> None:
        """Record the AVAILABLE versions of `model` (from its status)."""
        self.models[model].available = sorted(versions, reverse=True)

    def is_ready(self) -> bool:
        """Every configured model has an AVAILABLE version."""
        return all(state.available for state in self.models.values())

    def _labelled(self, state: ModelState, label: str) -> int | None:
        version = state.labels.get(label)
        return version if version is not None and version in state.available else None

    def route(self, model: str, sticky: str, label: str | None = None) -> Route:
        """Pick the version for one request."""
        state = self.models.get(model)
        if state is None:
            raise NotFound(f"model {model!r} is not served here", param="model")
        if not state.available:
            raise UpstreamUnavailable(f"model {model!r} has no available version")
        if label is not None:
            if label not in state.labels:
                raise NotFound(f"version label {label!r} is not defined", param="version_label")
            version = self._labelled(state, label)
            if version is None:
                raise UpstreamUnavailable(f"version label {label!r} is not available")
            return Route(model, version, label)
        if self.canary_weight > 0 and canary_bucket(model, sticky) < self.canary_weight:
            version = self._labelled(state, self.canary_label)
            if version is not None:
                return Route(model, version, self.canary_label)
        version = self._labelled(state, self.stable_label)
        if version is not None:
            return Route(model, version, self.stable_label)
        return Route(model, state.available[0], None)
