"""The drill runner's reading of the on-call receiver: which notification settles an expectation."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

from stack.drill.runner import Outcome, _wait_all, run_one, table
from stack.drill.scenario import Expect, Log, Scenario
from stack.drill.target import Note


class _Receiver:
    """A stand-in for Target: the notes the on-call receiver recorded, nothing else."""

    def __init__(self, notes: list[Note]) -> None:
        self._notes = notes

    def notes(self) -> list[Note]:
        return self._notes


def _note(at: float, status: str, version: str) -> Note:
    labels = {"alertname": "TokenPulseCanaryMismatch", "severity": "warning", "version": version}
    return Note(at, "chat", status, "TokenPulseCanaryMismatch", labels)


def test_only_the_alert_that_fired_resolves_its_expectation() -> None:
    t0 = time.time()
    e = Expect("TokenPulseCanaryMismatch", receiver="chat")
    outcome = Outcome(e.alertname, e.receiver)
    notes = [
        _note(t0 + 1, "firing", "90"),
        # an earlier fault's alert of the same name (another version) resolving meanwhile
        _note(t0 + 2, "resolved", "2"),
    ]
    target = _Receiver(notes)
    _wait_all(target, [(outcome, e)], "firing", t0, bound=1.0)  # type: ignore[arg-type]
    assert outcome.fired_after_s == 1.0 and outcome.labels == notes[0].labels
    _wait_all(target, [(outcome, e)], "resolved", t0, bound=0.6)  # type: ignore[arg-type]
    assert outcome.resolved_after_s is None  # version 2's resolve is not version 90's
    notes.append(_note(t0 + 3, "resolved", "90"))
    _wait_all(target, [(outcome, e)], "resolved", t0, bound=1.0)  # type: ignore[arg-type]
    assert outcome.resolved_after_s == 3.0


class _Stack(_Receiver):
    """A stand-in for Target that run_one can drive: one rule, no alerts pending, no traffic."""

    def alert_rules(self) -> set[str]:
        return {"TokenPulseTfServingDown"}

    def firing(self, pending: bool = False) -> list[dict[str, str]]:
        return []

    @contextlib.contextmanager
    def traffic(self, rps: float, label: str | None = None) -> Iterator[Any]:
        yield SimpleNamespace(codes=[], failures=lambda: 0)


class _UpUndoesIt(Scenario):
    """`up` restarts the model server, the page resolves, and the exit still waits on slower
    restarts (a Prometheus replaying its WAL), as the HA drill's does."""

    name, summary = "up-undoes-it", "test"
    expect = (Expect("TokenPulseTfServingDown"),)
    fire_within_s = resolve_within_s = 1.0
    settle_s = 0.0

    @contextlib.contextmanager
    def fault(self, target: Any, log: Log) -> Iterator[None]:
        notes, labels = target.notes(), {"alertname": "TokenPulseTfServingDown"}
        notes.append(Note(time.time() + 0.05, "pager", "firing", labels["alertname"], labels))
        yield
        log.fault_removed_at = time.time()  # the model server is back
        notes.append(Note(time.time() + 0.05, "pager", "resolved", labels["alertname"], labels))
        time.sleep(1.5)  # longer than resolve_within_s: the prometheus restart behind it


def test_a_resolution_before_the_scenarios_exit_counts_from_when_the_fault_was_removed() -> None:
    result = run_one(_Stack([]), _UpUndoesIt(), lambda line: None)  # type: ignore[arg-type]
    assert result.passed, result.problems
    (outcome,) = result.expected
    assert outcome.resolved_after_s is not None and outcome.resolved_after_s < 1.0
    assert result.timings["fault_off"] < 1.0  # the removal, not the exit 1.5 s later


class _FlickeringStack(_Stack):
    """A stand-in whose Prometheus saw the model server's `up` drop for one scrape, and whose
    receiver got a page nobody expected."""

    def query_range(self, expr: str, start: float, end: float, step: str) -> list[dict[str, Any]]:
        assert expr == "up"
        steady = {"job": "gateway", "instance": "g:1"}
        flicker = {"job": "tfserving", "instance": "m:1"}
        return [
            {"metric": steady, "values": [[start + i, "1"] for i in range(8)]},
            {"metric": flicker, "values": [[start + i, "0" if i == 6 else "1"] for i in range(8)]},
        ]


class _Unexpected(_UpUndoesIt):
    @contextlib.contextmanager
    def fault(self, target: Any, log: Log) -> Iterator[None]:
        with super().fault(target, log):
            labels = {"alertname": "TokenPulseTfServingFlapping", "severity": "critical"}
            target.notes().append(Note(time.time(), "pager", "firing", labels["alertname"], labels))
            yield


def test_an_unexpected_page_comes_with_when_it_paged_and_the_up_changes_behind_it() -> None:
    result = run_one(_FlickeringStack([]), _Unexpected(), lambda line: None)  # type: ignore[arg-type]
    assert result.unexpected_pages == ["TokenPulseTfServingFlapping -> pager"]
    assert any(r.startswith("TokenPulseTfServingFlapping paged at ") for r in result.remarks)
    # the series that changed, with each value and when; the steady one is left out
    (up,) = [r for r in result.remarks if r.startswith("up of ")]
    assert up == "up of tfserving m:1: 1@-5s 0@1s 1@2s"
    assert f"  . {up}" in table([result])


class _ResolvedBeforeTheDrillSawIt(_UpUndoesIt):
    """`up` restarted the model server and the page resolved at the receiver a moment before
    the drill read the new pid from the stack's state file."""

    @contextlib.contextmanager
    def fault(self, target: Any, log: Log) -> Iterator[None]:
        notes, labels = target.notes(), {"alertname": "TokenPulseTfServingDown"}
        # an older incident's resolution: before this page, so it settles nothing
        notes.append(Note(time.time() - 0.5, "pager", "resolved", labels["alertname"], labels))
        notes.append(Note(time.time() + 0.05, "pager", "firing", labels["alertname"], labels))
        yield
        time.sleep(0.3)
        notes.append(Note(time.time(), "pager", "resolved", labels["alertname"], labels))
        time.sleep(0.3)  # the drill notices the restart now


def test_a_resolution_just_before_the_drill_saw_the_restart_counts_but_not_one_before_the_page():
    result = run_one(_Stack([]), _ResolvedBeforeTheDrillSawIt(), lambda line: None)  # type: ignore[arg-type]
    assert result.passed, result.problems
    (outcome,) = result.expected
    assert outcome.resolved_after_s is not None and -0.5 < outcome.resolved_after_s < 0


def test_a_resolution_before_its_page_settles_nothing() -> None:
    t0 = time.time()
    e = Expect("TokenPulseCanaryMismatch", receiver="chat")
    outcome = Outcome(e.alertname, e.receiver)
    target = _Receiver([_note(t0 + 1, "firing", "90")])
    _wait_all(target, [(outcome, e)], "firing", t0, bound=1.0)  # type: ignore[arg-type]
    target.notes().insert(0, _note(t0 + 0.5, "resolved", "90"))  # before the page
    _wait_all(target, [(outcome, e)], "resolved", t0 + 2, 0.6, looking_back_s=5.0)  # type: ignore[arg-type]
    assert outcome.resolved_after_s is None
