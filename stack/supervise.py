"""Start the components in order, watch them, restart one that exits, stop all on Ctrl-C.

`tokenpulse up` supervises its stack with this; the test stack starts and stops it the same way.
"""

from __future__ import annotations

import contextlib
import signal
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from types import FrameType

from stack.components import Component, enabled
from stack.config import StackConfig
from stack.launch import Launched, LaunchError


class Stopped(Exception):  # noqa: N818 - a request, not a failure
    """Ctrl-C or SIGTERM asked the stack to stop."""


@contextlib.contextmanager
def stop_on_signals() -> Iterator[None]:
    """The first SIGINT or SIGTERM raises Stopped (even when the shell that started us ignores
    SIGINT); later ones are ignored so that stopping the components is never cut short."""
    asked: list[str] = []

    def handler(signum: int, _frame: FrameType | None) -> None:
        if not asked:
            asked.append(signal.Signals(signum).name)
            raise Stopped(asked[0])

    old = {s: signal.signal(s, handler) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for signum, previous in old.items():
            signal.signal(signum, previous)


@dataclass
class Running:
    """One started component and the context that stops it."""

    component: Component
    child: Launched
    scope: contextlib.ExitStack = field(repr=False)
    died_at: float | None = None

    def stop(self) -> None:
        """Stop the process (SIGTERM, then SIGKILL) and forget it."""
        self.scope.close()


def start(component: Component, config: StackConfig) -> Running:
    """Start one component and wait until it is healthy; LaunchError with its log tail if not."""
    scope = contextlib.ExitStack()
    try:
        child = scope.enter_context(component.start(config))
    except BaseException:
        scope.close()
        raise
    return Running(component, child, scope)


@dataclass
class Supervisor:
    """Every running component of one StackConfig, in start order."""

    config: StackConfig
    say: Callable[[str], None] = lambda message: None
    components: tuple[Component, ...] | None = None  # None: the table's, as the config enables
    running: list[Running] = field(default_factory=list)

    def start_all(self) -> None:
        """Start the components in order, each healthy before the next one starts."""
        for component in self.components or enabled(self.config):
            self.say(f"starting {component.name} ...")
            started = time.monotonic()
            r = start(component, self.config)
            self.running.append(r)
            took = time.monotonic() - started
            self.say(f"  {component.name} ready (pid {r.child.pid}, {took:.1f} s)")

    def child(self, name: str) -> Launched:
        """The running process of one component."""
        return self._running(name).child

    def _running(self, name: str) -> Running:
        for r in self.running:
            if r.component.name == name:
                return r
        raise KeyError(f"no component {name!r} in this stack")

    def stop(self, name: str) -> None:
        """Stop one component (a fault); `restart` starts it again on the same ports."""
        self._running(name).stop()

    def restart(self, name: str) -> Launched:
        """Start one stopped component again and wait until it is healthy."""
        i = self.running.index(self._running(name))
        self.running[i].stop()
        self.running[i] = start(self.running[i].component, self.config)
        return self.running[i].child

    def pids(self) -> dict[str, int]:
        """Component name -> pid of its current process."""
        return {r.component.name: r.child.pid for r in self.running}

    def watch_once(self) -> str | None:
        """Notice exits; restart a component once it has been down for restart_delay_s.

        At most one restart per call, returned by name: `up` records each new pid in
        `stack.json` before the next component's start (a Prometheus replaying its WAL) can
        hold it back, so a drill sees the model server back when it is back.
        """
        for i, r in enumerate(self.running):
            code = r.child.process.poll()
            if code is None:
                continue
            now = time.monotonic()
            if r.died_at is None:
                r.died_at = now
                self.say(
                    f"{r.component.name} (pid {r.child.pid}) exited with {code}; restarting it in "
                    f"{self.config.restart_delay_s:g} s (log: logs/{r.component.name}.log)"
                )
            if now - r.died_at < self.config.restart_delay_s:
                continue
            r.stop()
            try:
                self.running[i] = start(r.component, self.config)
            except LaunchError as exc:
                self.say(f"{r.component.name} failed to restart, trying again: {exc}")
                r.died_at = time.monotonic()
                continue
            self.say(f"{r.component.name} restarted (pid {self.running[i].child.pid})")
            return r.component.name
        return None

    def stop_all(self) -> int:
        """Stop every component, newest first; returns how many were stopped."""
        for r in reversed(self.running):
            r.stop()
        count, self.running = len(self.running), []
        return count
