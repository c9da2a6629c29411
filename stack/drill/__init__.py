"""`tokenpulse drill <scenario>|all`: prove each page against the running local stack.

Start the stack with the drill profile (stack/profiles.py: the compressed rules and the drill
options), then drill it from another terminal:

    tokenpulse up --profile drill --es-url http://127.0.0.1:9200 --es-fault-proxy-port 8512
    tokenpulse drill all

Each scenario applies a fault under steady traffic and reads the on-call receiver: the expected
alert must arrive on its route within the bound, nothing else may page (the Watchdog aside), and
it must resolve after the fault is removed. A pass/fail table with timings is printed and
drill-report.json written. Exit status: 0 all passed, 1 some failed, 2 no running stack.

`ha-monitoring-failover` needs a stack started with `--ha` as well (two Prometheus, two
Alertmanagers), whose group interval must exceed a scrape plus an evaluation (`--group-interval
4s` with the drill profile): `drill all` on a stack without `--ha` skips it and says so, and
naming it alone there is refused in one line.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from pydantic import Field, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from stack.drill.canary import DegradedCanary
from stack.drill.gpu import GpuXidAndThrottle
from stack.drill.ha import HaMonitoringFailover, applicable
from stack.drill.meta import AlertmanagerSecretMissing, PrometheusStopped, WatchdogSilent
from stack.drill.outages import (
    CrashLoop,
    CrashLoopSlow,
    FailureAfterRestart,
    ModelServerKilled,
    RestartNoAvailableVersion,
)
from stack.drill.pipeline import EsUnreachable, SpoolDiskCap
from stack.drill.rejects import VersionRejectsAll
from stack.drill.runner import report, run_all, table
from stack.drill.scenario import Scenario
from stack.drill.slo import ErrorBurst, IdleThenTraffic, SlowUpstream
from stack.drill.target import DrillError, Target
from stack.drill.training import TrainingWorkerKilled
from stack.up.state import NoRunningStack
from tokenpulse.settings_cli import KEBAB, add_settings_arguments, settings_from_args

# slug -> scenario, in the order `all` runs them (quick ones that share a warm stack first)
SCENARIOS: dict[str, type[Scenario]] = {
    s.name: s
    for s in (
        ModelServerKilled,
        CrashLoop,
        RestartNoAvailableVersion,
        CrashLoopSlow,
        FailureAfterRestart,
        DegradedCanary,
        SlowUpstream,
        ErrorBurst,
        VersionRejectsAll,
        IdleThenTraffic,
        SpoolDiskCap,
        GpuXidAndThrottle,
        EsUnreachable,
        AlertmanagerSecretMissing,
        PrometheusStopped,
        WatchdogSilent,
        TrainingWorkerKilled,
        HaMonitoringFailover,
    )  # fmt: skip
}


class DrillSettings(BaseSettings):
    """What to drill and where; each is also TOKENPULSE_DRILL_<NAME>."""

    model_config = SettingsConfigDict(env_prefix="TOKENPULSE_DRILL_", extra="ignore")

    scenario: str = Field(description=f"one of: all, {', '.join(SCENARIOS)} (comma-separated ok)")
    run_dir: Path = Field(Path("run"), description="the run directory of the running `up`")
    report: Path = Field(Path("drill-report.json"), description="where the JSON report goes")

    @field_validator("scenario")
    @classmethod
    def _known(cls, value: str) -> str:
        unknown = [s for s in value.split(",") if s != "all" and s not in SCENARIOS]
        if unknown:
            raise ValueError(f"unknown scenario {', '.join(unknown)}; known: all, "
                             f"{', '.join(SCENARIOS)}")  # fmt: skip
        return value

    def scenarios(self) -> list[Scenario]:
        """The chosen scenarios, in the table's order."""
        names = self.scenario.split(",")
        return [cls() for name, cls in SCENARIOS.items() if "all" in names or name in names]


def _say(message: str) -> None:
    print(message, flush=True)  # noqa: T201 - the command's output


def run(settings: DrillSettings) -> int:
    """Drill the stack of `settings.run_dir`; print the table, write the report."""
    try:
        target = Target(settings.run_dir.resolve())
    except (NoRunningStack, FileNotFoundError) as exc:
        _say(f"tokenpulse drill: error: {exc}")
        return 2
    if target.state.config.rules != "compressed":
        _say("tokenpulse drill: note: the stack runs the normal rules; drills wait for "
             "hours-long windows unless it runs --rules compressed (--profile drill)")  # fmt: skip
    scenarios, line = applicable(settings.scenarios(), target.state)
    if line:
        _say(f"tokenpulse drill: {'note' if scenarios else 'error'}: {line}")
        if not scenarios:
            return 2
    try:
        results = run_all(target, scenarios, _say)
    except DrillError as exc:
        _say(f"tokenpulse drill: error: {exc}")
        return 2
    _say(table(results))
    report(results, target.run_dir, settings.report)
    _say(f"report: {settings.report}")
    return 0 if all(r.passed for r in results) else 1


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The scenario as a positional argument, the rest as flags."""
    add_settings_arguments(parser, DrillSettings, style=KEBAB, positional=("scenario",))


def main(args: argparse.Namespace) -> int:
    """Build the settings from flags and environment, then drill."""
    return run(settings_from_args(DrillSettings, args))
