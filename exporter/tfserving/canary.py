"""Golden-prompt canaries: each AVAILABLE version answers its own golden prompts, greedily.

Each exported version carries `assets.extra/golden_canary.json` (the exporter is a sidecar sharing
the model volume). A background thread sends every prompt to that exact version on a schedule,
and as soon as a version turns AVAILABLE or the model server stops answering, then compares with
the golden output. Scrapes only read the latest results.

During an outage the versions that were AVAILABLE are still probed, so their runs fail at once
(success 0) instead of their series vanishing; results stay while the status tracker retains the
version, and run counters are never reset. While the model server answers, a version it no longer
has AVAILABLE (unloaded by a rollback) loses its series at once: its last result says nothing
about what serves, and a mismatch kept for the retention would hold its alert after the rollback.
"""

from __future__ import annotations

import difflib
import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from exporter.tfserving.client import TfServingClient
from exporter.tfserving.status import StatusTracker
from tokenpulse.logging import get_logger
from tokenpulse.tfserving.errors import TfServingError
from tokenpulse.tfserving.predict import decode_text
from tokenpulse.tfserving.signature import GOLDEN_FILE, INPUTS, STOP_INPUTS, default_row

# Bound here too: contextvars bound in main() do not reach the exporter's threads.
log = get_logger(__name__).bind(component="exporter")


class GoldenError(ValueError):
    """A golden canary file is missing or malformed."""


@dataclass(frozen=True)
class GoldenPrompt:
    """One fixed prompt and what the version answered at export time."""

    prompt: str
    text: str
    mean_nll: float


@dataclass(frozen=True)
class Golden:
    """A version's golden canary file."""

    max_new_tokens: int
    request: dict[str, Any]
    prompts: tuple[GoldenPrompt, ...]

    def row(self, prompt: str) -> dict[str, Any]:
        """The predict row for one prompt: the golden request's sampling inputs (greedy)."""
        row = default_row(prompt, self.max_new_tokens)
        row.update({k: v for k, v in self.request.items() if k in INPUTS and k != "prompt"})
        # An export older than the in-graph stop has no `stop`/`ignore_eos` inputs and refuses
        # rows that carry them; newer exports record both in their golden request.
        for name in STOP_INPUTS:
            if name not in self.request:
                row.pop(name, None)
        return row


def load_golden(path: Path) -> Golden:
    """Read and validate `golden_canary.json`."""
    try:
        doc = json.loads(path.read_text())
    except FileNotFoundError as exc:
        raise GoldenError(f"no golden canary file at {path}") from exc
    except (OSError, ValueError) as exc:
        raise GoldenError(f"unreadable golden canary file {path}: {exc}") from exc
    try:
        max_new = int(doc["max_new_tokens"])
        request = dict(doc.get("request") or {})
        prompts = tuple(
            GoldenPrompt(str(p["prompt"]), str(p["text"]), float(p["mean_nll"]))
            for p in doc["prompts"]
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise GoldenError(f"malformed golden canary file {path}: {exc!r}") from exc
    if not prompts:
        raise GoldenError(f"golden canary file {path} has no prompts")
    return Golden(max_new_tokens=max_new, request=request, prompts=prompts)


@dataclass(frozen=True)
class CanaryResult:
    """One canary run against one model version."""

    model: str
    version: int
    finished_at: float
    result: str  # ok, mismatch (answered, not golden) or error
    error: str | None
    prompts: int
    answered: int
    matched: int
    latency_s: float | None  # mean per answered prompt
    similarity: float | None  # mean difflib ratio to the golden text
    mean_nll: float | None  # mean of the answers' mean_nll
    golden_mean_nll: float | None  # mean golden mean_nll over the same prompts
    # Mean of (answer NLL - golden NLL) over the prompts whose answer differs (0 when none does):
    # a benign divergence (other hardware's numerics) is about as likely as the golden answer;
    # a broken model's divergent answers are less likely, so this rises.
    mismatch_nll_delta: float | None = None


class CanaryRunner:
    """Runs the golden prompts of every AVAILABLE version; holds the latest result per version."""

    def __init__(
        self,
        client: TfServingClient,
        tracker: StatusTracker,
        interval_s: float,
        timeout_s: float,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._client = client
        self._tracker = tracker
        self.interval_s = interval_s
        self._timeout_s = timeout_s
        self._clock = clock
        self._lock = threading.Lock()
        self._results: dict[tuple[str, int], CanaryResult] = {}
        self._runs: dict[tuple[str, int, str], int] = {}
        self._last_cycle: float | None = None
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        tracker.add_listener(self._wake.set)  # a new AVAILABLE version, an outage: probe at once

    def results(self) -> list[CanaryResult]:
        """The latest result of every version the status tracker retains."""
        with self._lock:
            return list(self._results.values())

    def runs(self) -> dict[tuple[str, int, str], int]:
        """Runs so far per (model, version, result), for the versions that have a result."""
        with self._lock:
            return {k: n for k, n in self._runs.items() if (k[0], k[1]) in self._results}

    def last_cycle(self) -> float | None:
        """When the last full cycle finished (unix time), None before the first."""
        with self._lock:
            return self._last_cycle

    def alive(self) -> bool:
        """False when the background thread was started and has died."""
        return self._thread is None or self._thread.is_alive()

    def run_once(self) -> list[CanaryResult]:
        """Probe every AVAILABLE version once (when the model server does not answer: the
        retained versions that were AVAILABLE); the results of this run."""
        snap = self._tracker.snapshot()
        fresh: dict[tuple[str, int], CanaryResult] = {}
        retained: set[tuple[str, int]] = set()
        for model in snap.models:
            if model.up:
                probe = keep = model.available_versions()
            else:
                probe = [v for v in model.last_available if v in model.retained]
                keep = [*model.retained, *probe]
            for version in probe:
                fresh[(model.name, version)] = self._probe(model.name, model.base_path, version)
            retained |= {(model.name, v) for v in keep}
        with self._lock:
            results = {k: r for k, r in self._results.items() if k in retained}
            self._results = results | fresh
            for r in fresh.values():
                key = (r.model, r.version, r.result)
                self._runs[key] = self._runs.get(key, 0) + 1  # never reset: counters only grow
            self._last_cycle = self._clock()
        return list(fresh.values())

    def _probe(self, model: str, base_path: Path | None, version: int) -> CanaryResult:
        def fail(error: str, **kw: Any) -> CanaryResult:
            log.warning("canary failed", model=model, version=version, error=error)
            fields: dict[str, Any] = {"prompts": 0, "answered": 0, "matched": 0}
            fields |= {"latency_s": None, "similarity": None}
            fields |= {"mean_nll": None, "golden_mean_nll": None}
            fields.update(kw)
            return CanaryResult(model, version, self._clock(), "error", error, **fields)

        if base_path is None:
            return fail("no base path for model (give the model config file or a base path)")
        try:
            golden = load_golden(base_path / str(version) / GOLDEN_FILE)
        except GoldenError as exc:
            return fail(str(exc))
        latencies: list[float] = []
        sims: list[float] = []
        nlls: list[float] = []
        golden_nlls: list[float] = []
        deltas: list[float] = []
        matched = 0
        for g in golden.prompts:
            start = time.perf_counter()
            try:
                pred = self._client.predict(model, version, [golden.row(g.prompt)], self._timeout_s)
                text, nll = _answer(pred[0])
            except (TfServingError, ValueError) as exc:
                return fail(
                    f"predict failed: {exc}",
                    prompts=len(golden.prompts),
                    answered=len(latencies),
                    matched=matched,
                )
            latencies.append(time.perf_counter() - start)
            sims.append(difflib.SequenceMatcher(None, text, g.text).ratio())
            nlls.append(nll)
            golden_nlls.append(g.mean_nll)
            if text == g.text:
                matched += 1
            else:
                deltas.append(nll - g.mean_nll)
        n = len(golden.prompts)
        result = CanaryResult(
            model=model,
            version=version,
            finished_at=self._clock(),
            result="ok" if matched == n else "mismatch",
            error=None,
            prompts=n,
            answered=n,
            matched=matched,
            latency_s=sum(latencies) / n,
            similarity=sum(sims) / n,
            mean_nll=sum(nlls) / n,
            golden_mean_nll=sum(golden_nlls) / n,
            mismatch_nll_delta=sum(deltas) / len(deltas) if deltas else 0.0,
        )
        if result.result == "mismatch":
            log.warning(
                "canary mismatch",
                model=model,
                version=version,
                matched=matched,
                prompts=n,
                mean_nll=result.mean_nll,
                golden_mean_nll=result.golden_mean_nll,
            )
        return result

    def start(self) -> None:
        """Run now, then every interval (or as soon as a version changes state)."""
        self._thread = threading.Thread(target=self._loop, name="canary", daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        while not self._stop.is_set():
            self._wake.clear()
            try:
                self.run_once()
            except Exception:  # noqa: BLE001  (one bad cycle must not end the canary)
                log.exception("canary cycle crashed")
            self._wake.wait(self.interval_s)

    def stop(self) -> None:
        """Stop the background thread and wait for it."""
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout=5)  # a predict in flight may run on; the thread is a daemon


def _answer(prediction: object) -> tuple[str, float]:
    """`text` and `mean_nll` of one row of a predict response."""
    if not isinstance(prediction, dict):
        raise ValueError("prediction row is not an object")
    if "text" not in prediction:
        raise ValueError("prediction has no text")
    text = decode_text(prediction["text"])
    nll = prediction.get("mean_nll")
    if isinstance(nll, bool) or not isinstance(nll, int | float):
        raise ValueError("prediction has no mean_nll")
    return text, float(nll)
