"""The actions of `tokenpulse rollout`, each returning the lines to print (RolloutError: refused).

Labels move in the models.config the model server and the gateway poll (labels.py); the canary
weight in the gateway's canary weight file; the gateway's /readyz says which versions are
AVAILABLE and which labels it routes by, on the local stack and on compose alike. On Kubernetes
the file is the source of a ConfigMap: a move is written and then applied by hand (K8S_APPLY),
so the action does not wait for the gateway to route by it.
"""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from typing import Any

from serving.gateway.admin import (
    CanaryWeightFileError,
    parse_canary_weight,
    write_canary_weight,
)
from stack.rollout.labels import ModelsConfig, RolloutError
from stack.rollout.settings import K8S_APPLY, K8S_CANARY_WEIGHT, RolloutSettings

PROG = "tokenpulse rollout"

# ---- the gateway's view ------------------------------------------------------------------------


def gateway_view(settings: RolloutSettings) -> tuple[list[int], dict[str, int]]:
    """(AVAILABLE versions, labels it routes by) of the model, from the gateway's /readyz."""
    url = f"{settings.gateway_url.rstrip('/')}/readyz"
    try:
        with urllib.request.urlopen(url, timeout=5) as resp:
            body = resp.read()
    except urllib.error.HTTPError as exc:  # 503 not ready: the body still says what it knows
        body = exc.read()
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        raise RolloutError(f"cannot reach the gateway at {url}: {reason}") from exc
    try:
        model = json.loads(body)["models"][settings.model]
        versions = sorted(int(v) for v in model["available_versions"])
        return versions, {str(k): int(v) for k, v in model["labels"].items()}
    except (ValueError, KeyError, TypeError) as exc:
        raise RolloutError(f"the gateway at {url} does not serve model {settings.model!r}") from exc


def require_available(settings: RolloutSettings, version: int) -> None:
    """RolloutError unless the gateway sees `version` AVAILABLE (TF Serving's own condition)."""
    available, _ = gateway_view(settings)
    if version not in available:
        shown = ", ".join(map(str, available)) or "none"
        raise RolloutError(
            f"version {version} of model {settings.model!r} is not AVAILABLE (AVAILABLE: "
            f"{shown}); TF Serving refuses a label on it, so the label stays where it is"
        )


def _wait_routed(settings: RolloutSettings, label: str, version: int, path: Any) -> None:
    deadline = time.monotonic() + settings.wait_s
    while True:
        seen = gateway_view(settings)[1].get(label)
        if seen == version:
            return
        if time.monotonic() >= deadline:
            raise RolloutError(
                f"wrote {path}, but after {settings.wait_s:g}s the gateway at "
                f"{settings.gateway_url} routes {label} to {seen}: does it read this file "
                "(gateway --model-config-file)?"
            )
        time.sleep(0.5)


# ---- actions -----------------------------------------------------------------------------------


def move_label(settings: RolloutSettings, label: str, version: int) -> list[str]:
    """Point `label` at `version`, refused unless that version is AVAILABLE."""
    config = ModelsConfig.read(settings.models_config)
    require_available(settings, version)
    old = config.move(settings.model, label, version)
    if old == version:
        return [f"{label} is already version {version} of {settings.model}; nothing to do"]
    config.write()
    was = "new label" if old is None else f"was version {old}"
    if settings.applied_by_hand:
        return [f"{settings.model}: {label} -> version {version} ({was})", *_apply(settings)]
    _wait_routed(settings, label, version, settings.models_config)
    return [
        f"{settings.model}: {label} -> version {version} ({was}); the gateway routes by it now",
        f"the model server applies {settings.models_config} at its next config poll",
    ]


def rollback(settings: RolloutSettings) -> list[str]:
    """The stable label back to the version it pointed at before its last move."""
    label, path = settings.stable_label, settings.models_config
    config = ModelsConfig.read(path)
    earlier = config.earlier(settings.model, label)
    if not earlier:
        raise RolloutError(
            f"no earlier {label} version of {settings.model} is recorded in {path}: nothing "
            f"to roll back to (`{PROG} label {label} <version>` moves it by hand)"
        )
    target = earlier[-1]
    require_available(settings, target)
    old = config.move(settings.model, label, target, remember=False)
    config.forget_last(settings.model, label)
    config.write()
    if settings.applied_by_hand:
        done = f"{settings.model}: {label} back to version {target} (from {old})"
        return [done, *_apply(settings)]
    _wait_routed(settings, label, target, path)
    return [
        f"{settings.model}: rolled {label} back to version {target} (from {old}); "
        "the gateway routes by it now",
        f"the model server applies {path} at its next config poll",
    ]


def serve(settings: RolloutSettings, versions: list[int]) -> list[str]:
    """Serve exactly these versions (a new one loads next to the old, ready to be labelled)."""
    path = settings.models_config
    config = ModelsConfig.read(path)
    config.serve(settings.model, versions)
    config.write()
    shown = ", ".join(map(str, sorted(set(versions))))
    if settings.applied_by_hand:
        return [f"{settings.model}: serving versions {shown}", *_apply(settings)]
    deadline = time.monotonic() + settings.wait_s
    while True:
        missing = sorted(set(versions) - set(gateway_view(settings)[0]))
        if not missing or time.monotonic() >= deadline:
            break
        time.sleep(0.5)
    lines = [f"{settings.model}: serving versions {shown} ({path})"]
    if missing:
        lines.append(
            "not AVAILABLE yet: " + ", ".join(map(str, missing)) + "; the model server loads "
            f"them at its next config poll (`{PROG} status` shows when)"
        )
    return lines


def canary_weight(settings: RolloutSettings, percent: float) -> list[str]:
    """Write the gateway's canary weight file."""
    path = settings.canary_weight_path
    if path is None:
        raise RolloutError(
            f"the {settings.deployment} gateway reads no canary weight file; set its start-up "
            f"weight instead: {K8S_CANARY_WEIGHT}"
        )
    try:
        write_canary_weight(path, percent / 100)
    except (OSError, CanaryWeightFileError) as exc:
        raise RolloutError(f"cannot write {path}: {exc}") from exc
    return [f"canary weight {percent:g}% written to {path}; the gateway applies it within 1 s"]


def status(settings: RolloutSettings) -> list[str]:
    """What the gateway routes by, what the file says, where stable was, the canary weight."""
    config = ModelsConfig.read(settings.models_config)
    available, routed = gateway_view(settings)
    filed = config.labels(settings.model)
    lines = [
        f"model {settings.model} at {settings.gateway_url} (models config "
        f"{settings.models_config})",
        "AVAILABLE versions: " + (", ".join(map(str, available)) or "none"),
        "labels the gateway routes by: " + _labels(routed),
    ]
    if filed != routed:
        lines.append("labels in the file (not applied yet): " + _labels(filed))
    earlier = config.earlier(settings.model, settings.stable_label)
    lines.append(
        f"{settings.stable_label} before: " + (", ".join(map(str, earlier)) or "not recorded")
    )
    lines.append("canary weight: " + _weight(settings))
    return lines


def _apply(settings: RolloutSettings) -> list[str]:
    """What to run so a written models.config reaches a deployment that does not poll it."""
    return [
        f"wrote {settings.models_config}; apply it: {K8S_APPLY} (the tfserving-config "
        "ConfigMap's new hash rolls the gateway and TF Serving pods)",
        f"then `{PROG} status --deployment {settings.deployment}` shows when the gateway routes "
        "by it",
    ]


def _labels(labels: dict[str, int]) -> str:
    return ", ".join(f"{k} -> {v}" for k, v in sorted(labels.items())) or "none"


def _weight(settings: RolloutSettings) -> str:
    path = settings.canary_weight_path
    if path is None:
        return "the gateway Deployment's TOKENPULSE_GATEWAY_CANARY_WEIGHT (no weight file)"
    try:
        return f"{parse_canary_weight(path.read_text(encoding='utf-8')) * 100:g}% ({path})"
    except FileNotFoundError:
        return f"the gateway's start-up setting (no {path})"
    except (OSError, CanaryWeightFileError) as exc:
        return f"unreadable {path}: {exc}"
