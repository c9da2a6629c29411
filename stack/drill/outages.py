"""Drills that take the model server away: killed, crash-looping, back with nothing to serve.

Each kills the model server's process (SIGKILL, as a crash would) or freezes it; `tokenpulse up`
starts a killed one again after its restart delay.
"""

from __future__ import annotations

import contextlib
import os
import signal
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

from stack.drill.runner import wait_quiet
from stack.drill.scenario import Expect, Log, Scenario
from stack.drill.target import DrillError, Note, Target, wait_for
from stack.rollout.labels import ModelsConfig, RolloutError
from stack.rollout.settings import LOCAL_MODELS_CONFIG

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
    return target.state.restart_delay_s + START_S


class ModelServerKilled(Scenario):
    """The model server dies: one page, the outage itself, and it resolves once restarted."""

    name = "model-server-killed"
    summary = "SIGKILL the model server; up restarts it after its restart delay"
    expect = (Expect("TokenPulseTfServingDown"),)

    @contextlib.contextmanager
    def fault(self, target: Target, log: Log) -> Iterator[None]:
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
    # what a crash loop truly does to callers may page too: the point is that something pages
    allow = (
        "TokenPulseTfServingDown", "TokenPulseGatewayAvailabilityBudgetBurn",
        "TokenPulseGatewayLatencyBudgetBurn", "TokenPulseGatewayTokenLatencyBudgetBurn",
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
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(text)
    os.chmod(tmp, path.stat().st_mode & 0o777)
    os.replace(tmp, path)


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
    # request fails while no version serves, and the burn must not page (`check`): while
    # NoAvailableVersion fires it inhibits the burn, and once its page was sent
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
        model = target.state.model
        try:
            config = ModelsConfig.read(path)
            entry = next(m for m in config.config.models if m.name == model)
        except (RolloutError, StopIteration) as exc:
            raise DrillError(f"cannot read model {model!r} from {path}: {exc}") from exc
        base = Path(entry.base_path)
        try:
            on_disk = [int(p.name) for p in base.iterdir() if p.name.isdigit()]
        except OSError as exc:
            raise DrillError(f"cannot list the versions of {model!r}: {exc}") from exc
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
        # the point: it paged while "recently down" fired, which used to silence it
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
            log.problems.append(
                f"{recently} was not firing when {name} paged: the drill did not show that "
                "recently down no longer silences it"
            )
