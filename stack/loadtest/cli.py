"""`tokenpulse loadtest`: flags map 1:1 onto LoadtestSettings (also TOKENPULSE_LOADTEST_* vars).

tokenpulse loadtest --url http://127.0.0.1:8080 --key-file run/demo-key.txt --rate 5
tokenpulse loadtest --sweep 1 2 4 8 --duration-s 20 --report-dir before
tokenpulse loadtest --find-max --metrics-url http://127.0.0.1:8080/metrics --against before
tokenpulse loadtest --scenario seed --scenario-model path/to/export/1
"""

from __future__ import annotations

import argparse
import sys

from tokenpulse.settings_cli import KEBAB, SettingsError, add_settings_arguments, settings_from_args


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """One flag per LoadtestSettings field."""
    from stack.loadtest.settings import LoadtestSettings

    add_settings_arguments(parser, LoadtestSettings, style=KEBAB)


def main(args: argparse.Namespace) -> int:
    """Build the settings, run, write the report; a target or workload error is one line."""
    from stack.loadtest.engine import LoadtestError
    from stack.loadtest.runner import run
    from stack.loadtest.settings import LoadtestSettings

    settings = settings_from_args(LoadtestSettings, args)
    try:
        # the command line as typed, when this process is `tokenpulse loadtest ...`
        argv = ["tokenpulse", *sys.argv[1:]] if sys.argv[1:2] == ["loadtest"] else None
        return run(settings, argv=argv)
    except LoadtestError as exc:
        raise SettingsError(str(exc)) from exc
