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
import re
from dataclasses import dataclass, field
from pathlib import Path

from serving.gateway.errors import NotFound, UpstreamUnavailable

_TOKEN = re.compile(r"""\s*(?:(#[^\n]*)|([{}:])|'([^']*)'|"([^"]*)"|([A-Za-z0-9_.\-+/]+))""")


class ModelConfigError(ValueError):
    """models.config could not be parsed."""


def _tokens(text: str) -> list[str]:
    out: list[str] = []
    pos = 0
    text = text.rstrip()
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if m is None or m.end() == pos:
            raise ModelConfigError(f"unexpected text at offset {pos}")
        pos = m.end()
        if m.group(1) is not None:
            continue
        out.append(next(g for g in m.groups()[1:] if g is not None))
    return out


def _parse_block(tokens: list[str], i: int) -> tuple[list[tuple[str, object]], int]:
    """Parse `field: value` / `field { ... }` pairs until `}` or the end."""
    fields: list[tuple[str, object]] = []
    while i < len(tokens) and tokens[i] != "}":
        name = tokens[i]
        i += 1
        if i < len(tokens) and tokens[i] == ":":
            i += 1
        if i >= len(tokens):
            raise ModelConfigError(f"field {name!r} has no value")
        if tokens[i] == "{":
            sub, i = _parse_block(tokens, i + 1)
            if i >= len(tokens):
                raise ModelConfigError("unbalanced braces")
            fields.append((name, sub))
            i += 1
        else:
            fields.append((name, tokens[i]))
            i += 1
    return fields, i


def parse_version_labels(text: str) -> dict[str, dict[str, int]]:
    """`{model: {label: version}}` from a `model_config_list` text proto."""
    tokens = _tokens(text)
    top, end = _parse_block(tokens, 0)
    if end != len(tokens):
        raise ModelConfigError("unbalanced braces")
    labels: dict[str, dict[str, int]] = {}
    for name, value in top:
        if name != "model_config_list" or not isinstance(value, list):
            continue
        for cname, config in value:
            if cname != "config" or not isinstance(config, list):
                continue
            model = next((v for k, v in config if k == "name" and isinstance(v, str)), None)
            if model is None:
                raise ModelConfigError("a config has no name")
            table = labels.setdefault(model, {})
            for k, v in config:
                if k != "version_labels" or not isinstance(v, list):
                    continue
                pairs = {kk: vv for kk, vv in v if isinstance(vv, str)}
                try:
                    table[pairs["key"]] = int(pairs["value"])
                except (KeyError, ValueError) as exc:
                    raise ModelConfigError(f"bad version_labels in model {model!r}") from exc
    return labels


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
