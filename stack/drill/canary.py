"""A drill on rollouts: a degraded version goes out as the canary, is caught, and is rolled back.

The degraded version is the stack's own model with noise on its weights (`tokenpulse model build
--degrade-noise`), carrying the golden canary answers of the stable version: weights broken after
their expectations were recorded, as a bad conversion or cast leaves them. It is built as `up
--canary-degrade-noise` builds its canary (stack/up/files.py says why the answers are stable's).

Every step goes through `tokenpulse rollout` (stack/rollout): serve it beside the others, label it
canary, give it a real share of traffic; the rollback labels canary back, restores the weight and
the served versions. The exporter probes a version as soon as it turns AVAILABLE (its status
poller wakes the canary runner), so the page does not wait for the canary interval (30 s unless
`up --canary-interval-s`), and drops the series of a version the model server unloaded.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from pathlib import Path

from stack.drill.outages import LOAD_SLOWS, settle_after_load
from stack.drill.scenario import Expect, Log, Scenario
from stack.drill.target import DrillError, Target
from stack.rollout.actions import canary_weight, gateway_view, move_label, serve
from stack.rollout.labels import ModelsConfig, RolloutError
from stack.rollout.settings import CANARY_WEIGHT_FILE, LOCAL_MODELS_CONFIG, RolloutSettings
from stack.up import files
from stack.up.files import META_FILE
from tokenpulse.atomic import atomic_write

DEGRADED_VERSION = 90  # the drill's version number under the stack's models dir (kept: a cache)
# The noise on the degraded version's weights, and on the test suite's degraded export (one fact
# for both): enough to fail the canary's golden answers and raise the mean NLL, where 2.0
# collapses the subword model into a confident loop (a lower NLL than stable's).
DEGRADE_NOISE = 0.6
CANARY_PERCENT = 50.0  # a real share of callers meets the degraded canary


def _preset(version_dir: Path) -> str:
    """The preset a version was built from, as its export recorded it."""
    try:
        meta = json.loads((version_dir / META_FILE).read_text())
        return str(meta["train"]["preset"])
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise DrillError(f"cannot tell the preset of {version_dir} from {META_FILE}") from exc


def ensure_degraded(base: Path, stable: int) -> Path:
    """BASE/<DEGRADED_VERSION>, from stable's preset: built once (with progress), always carrying
    the stable version's golden answers, as up's canary with --canary-degrade-noise."""
    preset = _preset(base / str(stable))
    try:
        return files.ensure_degraded(base, DEGRADED_VERSION, stable, preset, DEGRADE_NOISE, _say)
    except files.BuildFailed as exc:
        raise DrillError(f"the degraded version: {exc}") from exc


def _say(message: str) -> None:
    print(f"degraded-canary: {message}", flush=True)  # noqa: T201


def _restore(path: Path, text: str | None) -> None:
    """Put a polled file back as it was (None: it did not exist), atomically."""
    if text is None:
        path.unlink(missing_ok=True)
        return
    if path.is_file() and path.read_text(encoding="utf-8") == text:
        return
    atomic_write(path, text)  # keeps the file's mode: the pollers may run as another user


def _read(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None


class DegradedCanary(Scenario):
    """A degraded version labelled canary at 50 %: its golden-prompt canary mismatches and reaches
    chat (a ticket, not a page: stable still serves most callers); the rollback resolves it."""

    name = "degraded-canary"
    summary = (
        f"tokenpulse rollout: serve a degraded version, label it canary at {CANARY_PERCENT:g}%; "
        "then label canary back, restore the weight and the served versions"
    )
    expect = (Expect("TokenPulseCanaryMismatch", "chat"),)
    allow = LOAD_SLOWS  # loading the canary's version slows the callers of the others
    fire_within_s = 90.0
    resolve_within_s = 60.0

    @contextlib.contextmanager
    def fault(self, target: Target, log: Log) -> Iterator[None]:
        config_path = target.run_dir / LOCAL_MODELS_CONFIG
        weight_path = target.run_dir / CANARY_WEIGHT_FILE
        saved = {config_path: _read(config_path), weight_path: _read(weight_path)}
        model = target.state.config.model
        settings = RolloutSettings(
            deployment="local", run_dir=target.run_dir, model_config_file=config_path,
            canary_weight_file=weight_path,
            gateway_url=target.state.url("gateway_port"), model=model, stable_label="stable",
            wait_s=60.0,
        )  # fmt: skip
        try:
            config = ModelsConfig.read(config_path)
            entry = next(m for m in config.config.models if m.name == model)
            labels = config.labels(model)
            available, _ = gateway_view(settings)
            policy = entry.version_policy
            served = list(policy.versions) if policy and policy.choice == "specific" else []
            stable, canary = labels["stable"], labels.get("canary", labels["stable"])
            ensure_degraded(Path(entry.base_path), stable)
            log.mark("built")
            lines = serve(settings, [*(served or available), DEGRADED_VERSION])
            if any(line.startswith("not AVAILABLE") for line in lines):
                raise DrillError(f"version {DEGRADED_VERSION} did not load: {lines[-1]}")
            move_label(settings, "canary", DEGRADED_VERSION)
            canary_weight(settings, CANARY_PERCENT)
            log.mark("canary_out")
        except (RolloutError, KeyError, StopIteration) as exc:
            _restore(config_path, saved[config_path])
            _restore(weight_path, saved[weight_path])
            raise DrillError(f"cannot roll the degraded canary out: {exc}") from exc
        try:
            yield
            move_label(settings, "canary", canary)  # the rollback, as on-call would do it
            _restore(weight_path, saved[weight_path])
            if served:
                serve(settings, served)
            log.mark("rolled_back")
        except RolloutError as exc:
            log.problems.append(f"rollback: {exc}")
        finally:
            _restore(config_path, saved[config_path])  # also the label history line
            _restore(weight_path, saved[weight_path])

    def check(self, target: Target, log: Log) -> None:
        settle_after_load(target, log)
