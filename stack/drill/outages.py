"""Drills that take the model server away: killed, crash-looping, back with nothing to serve.

Each kills the model server's process (SIGKILL, as a crash would) or freezes it; `tokenpulse up`
starts a killed one again after its restart delay.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from monitoring.mixin.config import DEFAULT as mixin
from monitoring.mixin.model import GATEWAY_PREFIX
from stack.drill.runner import wait_quiet
from stack.drill.scenario import Expect, Log, Scenario
from stack.drill.target import DrillError, Note, Target, wait_for
from stack.rollout.settings import LOCAL_MODELS_CONFIG
from tokenpulse.atomic import atomic_write

MODELSERVER = "modelserver"
START_S = 180.0  # a model server loads and warms both versions within this, on 2 busy cores
# Loading versions (TensorFlow load and warm-up) takes the CPU the serving versions answer with:
# on a small host the callers' requests around a load are truly slow, and a latency burn's slower
# tier may page some 20 s later. Allowed where a scenario loads versions, and waited out inside it
# (the runner judges pages after `check`), so it cannot land in the next scenario.
LOAD_SLOWS = ("TokenPulseGatewayLatencyBudgetBurn", "TokenPulseGatewayTokenLatencyBudgetBurn")
LOAD_SETTLE_S = 10.0


def settle_after_load(target: Target, log: Log) -> None:
    """Wait until what loading versions slowed has paged or settled (no critical pending)."""
    time.sleep(LOAD_SETTLE_S)
    still = wait_quiet(target, 60.0)
    if still:
        log.remarks.append(f"still firing after the loads settled: {', '.join(still)}")


def restart_bound(target: Target) -> float:
    """How long `up` may take to bring a killed component back."""
    return target.state.config.restart_delay_s + START_S


FLAPPING = f"{mixin.alert_prefix}TfServingFlapping"
DOWN = f"{mixin.alert_prefix}TfServingDown"
STEADY_MARGIN_S = 5.0


def _wait_window_quiet(
    target: Target, log: Log, duration: str, expr: Callable[[str], str], still: str, mark: str
) -> None:
    """Wait until `expr(window)`, `duration` as the loaded rules compress it, matches nothing,
    for that window plus a margin at most; then mark `mark`."""
    timing = mixin.timing(compressed=target.state.config.rules == "compressed")
    window = timing(duration)
    bound = float(timing.secs(duration)) + STEADY_MARGIN_S
    query = expr(window)
    if not wait_for(lambda: not target.query(query), min(bound, START_S)):
        log.remarks.append(f"{still} within {window}")
    log.mark(mark)


def wait_steady(target: Target, log: Log) -> None:
    """Wait until the model server's `up` has not changed for the crash-loop window, so that an
    outage this drill causes is not a second outage of an earlier drill's (a crash loop)."""
    job = mixin.jobs.selector("modelserver")
    _wait_window_quiet(
        target, log, mixin.flap_window, lambda w: f"changes(up{{{job}}}[{w}]) > 0",
        "the model server's `up` still changed", "steady",
    )  # fmt: skip


def wait_burn_windows_clean(target: Target, log: Log) -> None:
    """Wait until the fast burn tier's long window holds no failed request of an earlier drill.

    A crash loop fails requests from its first outage, but its page needs the second; with an
    earlier outage still in the burn's long window, the loop's first failures alone complete the
    burn's evidence, and the burn pages before the loop's page that stands for it (CI r36: 8 s
    into drill crash-loop, run just after model-server-killed, whose hold had just run out). A
    loop that starts on a clean window is what the drill claims one page for."""
    errors = mixin.sel("gateway", f'code=~"{mixin.error_codes}"')
    _wait_window_quiet(
        target, log, mixin.burn_tiers[0].long,
        lambda w: f"sum(increase({GATEWAY_PREFIX}requests_total{errors}[{w}])) > 0",
        "requests still failed in the burn's window", "windows_clean",
    )  # fmt: skip


class ModelServerKilled(Scenario):
    """The model server dies: one page, the outage itself, and it resolves once restarted."""

    name = "model-server-killed"
    summary = "SIGKILL the model server; up restarts it after its restart delay"
    expect = (Expect("TokenPulseTfServingDown"),)

    @contextlib.contextmanager
    def fault(self, target: Target, log: Log) -> Iterator[None]:
        wait_steady(target, log)
        pid = target.signal(MODELSERVER, signal.SIGKILL)
        yield
        target.wait_restarted(MODELSERVER, pid, restart_bound(target))
        log.mark("restarted")


class CrashLoop(Scenario):
    """The model server keeps dropping out for short spells: the flapping alert pages.

    Compressed 60 times, "down 45 s in every 3 min" is under a second in every 3 s, and a real
    restart takes ~20 s here (TensorFlow import, load, warm-up): longer than the compressed
    window. So the spells are freezes (SIGSTOP, then SIGCONT): the process is there but answers
    nothing, its scrapes fail, `up` flips, as in a crash loop, and each spell is too short for
    TokenPulseTfServingDown's `for`.
    """

    name = "crash-loop"
    summary = "freeze the model server 4 s in every 5 s (SIGSTOP/SIGCONT) for 50 s"
    # a first freeze may page as TfServingDown before the loop shows; the latency the freezes
    # cause may page; the availability burn may not: the loop's page (Flapping, then the hold
    # its delivered page starts) stands for it, one page per incident
    allow = (
        "TokenPulseTfServingDown", "TokenPulseGatewayLatencyBudgetBurn",
        "TokenPulseGatewayTokenLatencyBudgetBurn",
    )  # fmt: skip
    # With 2 s scrapes (2 s timeout), 4 s frozen and 1 s thawed flips `up` at least 4 times in
    # every compressed 15 s window as Prometheus sees it live (a scrape's sample lands only when
    # it completes or times out); 4 s + 2 s dips to 3 at every freeze and resets the `for`.
    down_s = 4.0
    up_s = 1.0
    loop_s = 50.0
    fire_within_s = 60.0

    def expected(self, target: Target) -> tuple[Expect, ...]:
        names = [n for n in target.alert_rules() if "Flapping" in n or "CrashLoop" in n]
        return (Expect(names[0] if names else "TokenPulseTfServingFlapping"),)

    @contextlib.contextmanager
    def fault(self, target: Target, log: Log) -> Iterator[None]:
        wait_burn_windows_clean(target, log)
        stop = threading.Event()
        pid = target.pid(MODELSERVER)

        def loop() -> None:
            end = time.monotonic() + self.loop_s
            while time.monotonic() < end and not stop.is_set():
                os.kill(pid, signal.SIGSTOP)
                try:
                    stop.wait(self.down_s)
                finally:
                    os.kill(pid, signal.SIGCONT)
                stop.wait(self.up_s)

        thread = threading.Thread(target=loop, name="crash-loop", daemon=True)
        thread.start()
        try:
            yield  # the runner leaves once the page arrived (or its bound passed): loop over
        finally:
            stop.set()
            thread.join()
            os.kill(pid, signal.SIGCONT)
            log.mark("loop_end")


def _notes(target: Target, alertname: str, status: str, since: float) -> list[Note]:
    return [
        n
        for n in target.notes()
        if n.at >= since and n.alertname == alertname and n.status == status
    ]


def _replace(path: Path, text: str) -> None:
    """Write `path` atomically (the model server, gateway and exporter poll it)."""
    atomic_write(path, text)


class RestartNoAvailableVersion(Scenario):
    """The model server is killed, comes back, and is left with no AVAILABLE version: the
    NoAvailableVersion page arrives although TfServingDown paged moments before.

    Issue 17 A.1: "recently down" used to inhibit it for 30 minutes while on-call had just got
    TfServingDown's RESOLVED. Like TF Serving, ours opens no port until a version is AVAILABLE at
    start-up (and exits when none loads), so "back with nothing" is the next config reload: the
    restarted server's models config now serves only a version whose files are missing (a deploy
    that wrote the config before its copy landed), and it unloads every version, as TF Serving
    does when no version on disk matches the policy. A broken version (a corrupt saved_model.pb)
    would not do: TF Serving keeps an old version serving while a new one fails to load.
    """

    name = "restart-no-available-version"
    summary = (
        "SIGKILL the model server; once up restarted it, its models config serves only a "
        "version whose files are missing; then the config is restored"
    )
    expect = (Expect("TokenPulseTfServingNoAvailableVersion"),)
    # The restart part of the drill: the kill pages (and resolves) before the fault proper; the
    # versions loading after the restart and after the config is restored slow callers. The
    # kill's own failures may page the availability burn before TfServingDown fires: compressed
    # 60 times, its 1h tier's 5 s short window and 2 s `for` race TfServingDown's scrape, and
    # lose when an earlier drill left the 1-minute long window full (at real speed
    # TfServingDown's 1m `for` wins by a minute). From the config change on, though, every
    # request fails while no version serves, and the burn must not page (`check`): failures while
    # NoAvailableVersion is pending are not fresh, so TfServingDown's hold lasts; while it fires it
    # inhibits the burn, and once its page was sent
    # TfServingRecentlyUnavailable holds the burn's tiers (their windows still full of the 503s)
    # for the recovery window: one incident, one page
    burn = "TokenPulseGatewayAvailabilityBudgetBurn"
    allow = ("TokenPulseTfServingDown", burn, *LOAD_SLOWS)
    fire_within_s = 60.0
    resolve_within_s = 120.0

    @contextlib.contextmanager
    def fault(self, target: Target, log: Log) -> Iterator[None]:
        path = target.run_dir / LOCAL_MODELS_CONFIG
        original = path.read_text(encoding="utf-8")
        wait_steady(target, log)
        killed = time.time()
        pid = target.signal(MODELSERVER, signal.SIGKILL)
        down = "TokenPulseTfServingDown"
        try:
            if not wait_for(lambda: _notes(target, down, "firing", killed), 60.0):
                raise DrillError(f"{down} did not page within 60 s of the kill")
            log.mark("down_paged")
            target.wait_restarted(MODELSERVER, pid, restart_bound(target))
            log.mark("restarted")
            if not wait_for(lambda: _notes(target, down, "resolved", killed), 60.0):
                raise DrillError(f"{down} did not resolve within 60 s of the restart")
            log.mark("down_resolved")
            missing = self._serve_missing_version(target, path)
            log.mark("config_written")
            log.remarks.append(f"models config serves only version {missing} (not on disk)")
            yield
        finally:
            if path.read_text(encoding="utf-8") != original:
                _replace(path, original)  # the versions load again at the next config poll
                log.mark("config_restored")

    def _serve_missing_version(self, target: Target, path: Path) -> int:
        """Point the model's labels at, and serve only, a version with no directory."""
        served = target.served_model(path)
        model, config, on_disk = served.name, served.config, served.on_disk
        missing = max(on_disk, default=0) + 1000
        for label in config.labels(model):
            config.move(model, label, missing, remember=False)
        config.serve(model, [missing])
        config.write()
        return missing

    def check(self, target: Target, log: Log) -> None:
        settle_after_load(target, log)
        if "config_written" in log.timings:
            since = log.started + log.timings["config_written"]
            again = [n for n in _notes(target, self.burn, "firing", since) if n.is_page]
            if again:
                tiers = sorted({n.labels.get("long_window", "?") for n in again})
                log.problems.append(
                    f"{self.burn} ({', '.join(tiers)}) paged after the config change: the "
                    "no-version outage paged twice"
                )
        # NoAvailableVersion is a state alert: no recovery hold silences it. Whether the hold
        # still fired when it paged depends on timing: the no-version 503s are fresh failures
        # after the recovery, which end the hold (holds.py). Either is right; say which it was.
        name = self.expect[0].alertname
        pages = _notes(target, name, "firing", log.started)
        if not pages:
            return  # the runner reports the missing page
        recently = "TokenPulseTfServingRecentlyDown"
        at = pages[0].at
        seen = target.query_range(
            f'ALERTS{{alertname="{recently}",alertstate="firing"}}', at - 5, at, "1s"
        )
        if seen:
            log.remarks.append(f"{recently} was firing when {name} paged")
        else:
            log.remarks.append(f"{recently} had ended (fresh failures) when {name} paged")


class CrashLoopSlow(Scenario):
    """A crash loop with long outages and long up-times between them: ONE page, firing steadily
    through the loop, resolved once it stops (issue 26 A.3).

    At real speed compose's `restart: unless-stopped` with a slow-loading model gives outages of
    60-90 s and minutes up between them. Compressed 60 times, 90 s is under the rules' 5 s floor,
    so each outage is a 5 s freeze (SIGSTOP/SIGCONT, as `crash-loop` does: a real restart takes
    20 s and more here) and each up-time 6 s (6 minutes at real speed). The old rule (4 changes
    in 15m, for 1m) resolved and fired again every cycle at this rhythm; the loop must give one
    TfServingFlapping page and no TfServingDown page: each outage is shorter than TfServingDown's
    `for` plus group_wait, and from the second on TfServingFlapping stands for them.

    Why 6 s: the page is carried over an up-time while flap_recent + flap_keep_firing (compressed
    5 s + 10 s) outlast the gap from the last down sample to the next one being stored: the
    up-time, up to a scrape interval (2 s) each side, and the frozen scrape's timeout (2 s).
    Scrapes are not compressed, so 8 s left 3 s of slack (alerts/tests/compressed_restarts.test.yml
    models it), and a busy CI machine's late scrapes took them (r34: it resolved and paged
    again). 6 s leaves 5 s. At real speed the same sum leaves minutes.
    """

    name = "crash-loop-slow"
    summary = "freeze the model server 5 s in every 11 s (SIGSTOP/SIGCONT), 4 times"
    expect = (Expect(FLAPPING),)
    # answers 5 s late may page the latency SLOs: true, but not the point; neither TfServingDown
    # nor the availability burn may (the loop's page, then the hold it starts, stands for them)
    allow = (
        "TokenPulseGatewayLatencyBudgetBurn", "TokenPulseGatewayTokenLatencyBudgetBurn",
        "TokenPulseGatewayTtftBudgetBurn",
    )  # fmt: skip
    down_s = 5.0
    up_s = 6.0
    cycles = 4
    fire_within_s = 60.0
    resolve_within_s = 60.0

    @contextlib.contextmanager
    def fault(self, target: Target, log: Log) -> Iterator[None]:
        wait_steady(target, log)
        stop = threading.Event()
        pid = target.pid(MODELSERVER)
        starts: list[float] = []

        def loop() -> None:
            for _ in range(self.cycles):
                if stop.is_set():
                    return
                starts.append(time.time())
                os.kill(pid, signal.SIGSTOP)
                try:
                    stop.wait(self.down_s)
                finally:
                    os.kill(pid, signal.SIGCONT)
                stop.wait(self.up_s)

        thread = threading.Thread(target=loop, name="crash-loop-slow", daemon=True)
        thread.start()
        try:
            yield  # the page arrived (or its bound passed): the loop goes on to its end
            thread.join(self.cycles * (self.down_s + self.up_s) + 5.0)
        finally:
            stop.set()
            thread.join()
            os.kill(pid, signal.SIGCONT)
            log.mark("loop_end")
            if len(starts) > 1:
                log.timings["second_outage"] = round(starts[1] - log.started, 1)

    def check(self, target: Target, log: Log) -> None:
        pages = [n for n in _notes(target, FLAPPING, "firing", log.started) if n.is_page]
        if len(pages) != 1:
            log.problems.append(f"{FLAPPING} paged {len(pages)} times during the loop, not once")
        end = log.started + log.timings.get("loop_end", 0.0)
        early = [n for n in _notes(target, FLAPPING, "resolved", log.started) if n.at < end]
        if early:
            log.problems.append(f"{FLAPPING} resolved during the loop: it did not fire steadily")
        second = log.timings.get("second_outage")
        if pages and second is not None:
            after = round(pages[0].at - (log.started + second), 1)
            log.timings["paged_after_second_outage"] = after


class FailureAfterRestart(Scenario):
    """The model server is killed, pages and comes back, then every request fails: the
    availability burn pages despite the hold the TfServingDown page started (issue 26 A.2).

    The hold (TfServingFleetRecentlyDown) keeps the outage's leftovers in the burn's windows
    silenced; once a window that starts after the recovery shows fresh failures it ends, and the
    burn pages. The failures come from the fault proxy (every upstream call answers 503), as
    error-burst's do, set once TfServingDown resolved.
    """

    name = "failure-after-restart"
    summary = (
        "SIGKILL the model server; once it is back and TfServingDown resolved, the fault proxy "
        "answers 503 to every upstream call"
    )
    burn = "TokenPulseGatewayAvailabilityBudgetBurn"
    hold = "TokenPulseTfServingFleetRecentlyDown"
    expect = (Expect(burn),)
    # the restart part: the kill pages as TfServingDown (and resolves) before the fault proper,
    # and the versions loading after the restart slow callers
    allow = (DOWN, *LOAD_SLOWS)
    fire_within_s = 60.0
    resolve_within_s = 60.0

    @contextlib.contextmanager
    def fault(self, target: Target, log: Log) -> Iterator[None]:
        wait_steady(target, log)
        killed = time.time()
        pid = target.signal(MODELSERVER, signal.SIGKILL)
        try:
            if not wait_for(lambda: _notes(target, DOWN, "firing", killed), 60.0):
                raise DrillError(f"{DOWN} did not page within 60 s of the kill")
            log.mark("down_paged")
            target.wait_restarted(MODELSERVER, pid, restart_bound(target))
            log.mark("restarted")
            if not wait_for(lambda: _notes(target, DOWN, "resolved", killed), 60.0):
                raise DrillError(f"{DOWN} did not resolve within 60 s of the restart")
            log.mark("down_resolved")
            target.set_fault(error_ratio=1.0)
            log.mark("failing")
            yield
        finally:
            target.set_fault()

    def check(self, target: Target, log: Log) -> None:
        if "failing" not in log.timings:
            return  # the fault never got that far: the problem is recorded
        failing = log.started + log.timings["failing"]
        pages = [n for n in _notes(target, self.burn, "firing", failing) if n.is_page]
        if not pages:
            return  # the runner reports the missing page
        held = f'ALERTS{{alertname="{self.hold}",alertstate="firing"}}'
        seen = target.query_range(held, failing - 5, failing, "1s")
        if seen:
            log.remarks.append(f"{self.hold} was firing when the failures began")
        else:
            log.problems.append(
                f"{self.hold} was not firing when the failures began: the drill did not show "
                "the burn paging through a hold"
            )
        log.timings["burn_paged"] = round(pages[0].at - log.started, 1)
        settle_after_load(target, log)
