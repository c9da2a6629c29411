"""Which finished requests become samples, and why: head sampling, always-keep rules, key caps."""

from __future__ import annotations

import random
import time
import tomllib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from tokenpulse.samples import OutputSignals, RequestStats
from tokenpulse.tfserving.signature import FINISH_LENGTH

DEFAULT_RULES_FILE = Path(__file__).with_name("sampling.toml")
# every reason the sampler keeps a request for: the always-keep rules in the rules file's order,
# then the head-sampling coin (with the writer's "feedback", the kept counter's closed label set)
REASONS = ("error", "slow", "low_quality", "canary", "head")


class RulesError(Exception):
    """The sampling rules file is missing or invalid."""


class AlwaysKeep(BaseModel):
    """Rules that keep a request whatever the head rate."""

    model_config = ConfigDict(extra="forbid")
    errors: bool = True
    slow_s: float = Field(2.0, ge=0)
    empty: bool = True
    repetition_ratio: float = Field(0.5, ge=0, le=1)
    mean_nll: float = Field(4.0, ge=0)
    truncated: bool = True
    canary_labels: list[str] = Field(default_factory=lambda: ["canary"])


class Caps(BaseModel):
    """Per-key limits."""

    model_config = ConfigDict(extra="forbid")
    per_key_per_minute: int = Field(600, ge=0)


class SamplingRules(BaseModel):
    """The parsed rules file."""

    model_config = ConfigDict(extra="forbid")
    head_rate: float = Field(0.1, ge=0, le=1)
    always_keep: AlwaysKeep = Field(default_factory=lambda: AlwaysKeep.model_validate({}))
    caps: Caps = Field(default_factory=lambda: Caps.model_validate({}))


def load_rules(path: Path) -> SamplingRules:
    """Parse a TOML rules file strictly; errors name the file and the bad key."""
    try:
        data = tomllib.loads(path.read_text())
    except OSError as exc:
        raise RulesError(f"cannot read sampling rules {path}: {exc.strerror}") from exc
    except tomllib.TOMLDecodeError as exc:
        raise RulesError(f"{path}: {exc}") from exc
    try:
        return SamplingRules.model_validate(data)
    except ValidationError as exc:
        first = exc.errors(include_url=False)[0]
        loc = ".".join(str(p) for p in first["loc"])
        raise RulesError(f"{path}: {loc}: {first['msg']}") from exc


def truncated(out: OutputSignals, max_new_tokens: int | None) -> bool:
    """True when an output was cut against the user's intent: its prompt was cut to fit the
    context window, or the window stopped it before the request's own `max_new_tokens` (a
    finish_reason "length" at `max_new_tokens` is what the request asked for; unknown when
    `max_new_tokens` is None, and then not counted)."""
    return out.truncated_prompt_tokens > 0 or (
        out.finish_reason == FINISH_LENGTH
        and max_new_tokens is not None
        and out.output_tokens < max_new_tokens
    )


def low_quality(out: OutputSignals, rules: AlwaysKeep, max_new_tokens: int | None = None) -> bool:
    """True when an output is empty, repetitive, unlikely (high mean NLL) or truncated against
    the user's intent (`truncated`)."""
    return (
        (rules.empty and out.empty)
        or (rules.repetition_ratio > 0 and out.repetition_ratio >= rules.repetition_ratio)
        or (rules.mean_nll > 0 and out.mean_nll > rules.mean_nll)
        or (rules.truncated and truncated(out, max_new_tokens))
    )


def max_new_tokens(params: dict[str, Any]) -> int | None:
    """The request's own token limit from a sample's parameters (None when it has none)."""
    value = params.get("max_new_tokens")
    return value if type(value) is int else None


@dataclass(frozen=True, slots=True)
class Decision:
    """Kept with its reasons, or skipped with one reason."""

    reasons: tuple[str, ...]
    skipped: str = ""

    @property
    def keep(self) -> bool:
        """Whether a record is written."""
        return not self.skipped


class Sampler:
    """Decides per request; not thread-safe (the sink's writer process calls it from one thread)."""

    def __init__(
        self,
        rules: SamplingRules,
        rng: random.Random | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.rules = rules
        self._rng = rng or random.Random()
        self._clock = clock
        self._window = -1
        self._per_key: dict[str, int] = {}

    def reasons(self, stats: RequestStats, max_new_tokens: int | None = None) -> list[str]:
        """Every always-keep reason that applies, in the rules file's order; `max_new_tokens`
        (the request's own limit) tells a window cut from an output that reached its limit."""
        keep = self.rules.always_keep
        found = []
        if keep.errors and stats.status >= 400:
            found.append("error")
        if keep.slow_s > 0 and stats.total_s >= keep.slow_s:
            found.append("slow")
        if any(low_quality(o, keep, max_new_tokens) for o in stats.outputs):
            found.append("low_quality")
        if stats.version_label and stats.version_label in keep.canary_labels:
            found.append("canary")
        return found

    def decide(self, stats: RequestStats, max_new_tokens: int | None = None) -> Decision:
        """Keep or skip one request (`max_new_tokens`: the request's own limit, see `reasons`)."""
        found = self.reasons(stats, max_new_tokens)
        if not found:
            if self._rng.random() >= self.rules.head_rate:
                return Decision((), skipped="not_sampled")
            found = ["head"]
        if not self._within_cap(stats.key_id):
            return Decision(tuple(found), skipped="key_cap")
        return Decision(tuple(found))

    def _within_cap(self, key_id: str) -> bool:
        cap = self.rules.caps.per_key_per_minute
        if cap <= 0:
            return True
        window = int(self._clock() // 60)
        if window != self._window:  # a fresh minute: the map holds one minute's keys at most
            self._window = window
            self._per_key.clear()
        used = self._per_key.get(key_id, 0)
        if used >= cap:
            return False
        self._per_key[key_id] = used + 1
        return True
