"""The drill runner's reading of the on-call receiver: which notification settles an expectation."""

from __future__ import annotations

import time

from stack.drill.runner import Outcome, _wait_all
from stack.drill.scenario import Expect
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
