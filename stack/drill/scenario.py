"""What a drill scenario is: a fault, the pages it must cause, the bounds, and how it is judged.

A scenario applies its fault in `fault(target, log)` (a context manager: entering applies it,
leaving removes it) while the runner sends background traffic and watches the on-call receiver:

- each expected alert must arrive, firing, on its route (receiver path) within `fire_within_s`;
- after the fault is removed each must arrive resolved within `resolve_within_s`;
- nothing else may page (pager route or critical), the Watchdog and `allow`ed alerts aside;
- the scenario's own `check` may add problems (e.g. NaN samples, a Watchdog that kept arriving).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, ClassVar

from stack.drill.target import Target


@dataclass(frozen=True)
class Expect:
    """An alert that must page: its name and the receiver path it must arrive on."""

    alertname: str
    receiver: str = "pager"
    rule: bool = True  # False: the on-call receiver raises it itself (no Prometheus rule)


@dataclass
class Log:
    """What a scenario observed while its fault was on: problems, timings, remarks."""

    started: float = field(default_factory=time.time)
    problems: list[str] = field(default_factory=list)
    timings: dict[str, float] = field(default_factory=dict)
    remarks: list[str] = field(default_factory=list)
    fault_removed_at: float | None = None  # set by a scenario whose fault `up` undoes itself

    def mark(self, name: str) -> float:
        """Record how many seconds after the start `name` happened."""
        self.timings[name] = round(time.time() - self.started, 1)
        return self.timings[name]


class Scenario:
    """One drill; subclasses set the class attributes and implement `fault`."""

    name: ClassVar[str]
    summary: ClassVar[str]
    expect: ClassVar[tuple[Expect, ...]] = ()
    allow: ClassVar[tuple[str, ...]] = ()  # alerts that may also page (true, but not the point)
    rps: ClassVar[float] = 2.0  # background traffic while the fault is on
    label: ClassVar[str | None] = None  # the version label it is sent to (None: routed as usual)
    fire_within_s: ClassVar[float] = 90.0  # fault on -> expected page at the receiver
    resolve_within_s: ClassVar[float] = 120.0  # fault removed -> resolved at the receiver
    settle_s: ClassVar[float] = 2.0  # after the last resolve: late pages still count

    def expected(self, target: Target) -> tuple[Expect, ...]:
        """The alerts that must page (a subclass may pick a name from the loaded rules)."""
        return self.expect

    def fault(self, target: Target, log: Log) -> contextlib.AbstractContextManager[Any]:
        """Apply the fault on entering; remove it on leaving (also on error)."""
        raise NotImplementedError

    def check(self, target: Target, log: Log) -> None:
        """Extra checks after the fault is removed; add problems to `log`."""


@contextlib.contextmanager
def nothing() -> Iterator[None]:
    """A fault that is the absence of something (the scenario does it in `check`)."""
    yield
