"""`tokenpulse up`: the whole local stack on one machine, started in order, stopped on Ctrl-C.

Model server (versions 1 `stable` and 2 `canary`, batching on), gateway (canary routing at a small
weight, sampling into the log pipeline's spool), exporter, shipper (embedded SQLite store, and
Elasticsearch when ES_URL is set), on-call receiver, Alertmanager and Prometheus (Debian's
binaries, configs generated from monitoring/mixin; two of each, gossiping, with `--ha`). Every
port is checked before anything starts; each component is healthy before the next starts; a
component that exits is restarted after `restart_delay_s`; Ctrl-C or SIGTERM stops all of them
and says so. Files live under RUN_DIR; RUN_DIR/stack.json holds the running stack's StackConfig.
"""

from __future__ import annotations

import argparse
import os
import time

from monitoring.alertmanager_check import problem_line
from stack.components import MissingBinary
from stack.launch import LaunchError
from stack.supervise import Stopped, Supervisor, stop_on_signals
from stack.up import banner as up_banner
from stack.up.files import (
    BuildFailed,
    EsSetupFailed,
    ensure_demo_key,
    ensure_models,
    make_run_dir,
    setup_elasticsearch,
    write_models_config,
)
from stack.up.plan import stack_config
from stack.up.ports import PortError, check_ports
from stack.up.settings import UpSettings
from stack.up.state import StackState, remove_state, write_state
from tokenpulse.settings_cli import KEBAB, add_settings_arguments, settings_from_args


def _say(message: str) -> None:
    print(message, flush=True)


class SecretMissing(RuntimeError):
    """The Alertmanager config names a secret file that is not there (the message says which)."""


def check_alertmanager_config(settings: UpSettings) -> None:
    """A given Alertmanager config must have every receiver's secret file: Alertmanager reads them
    only when it sends, so a missing one would fail every page silently."""
    if settings.alertmanager_config is None:
        return  # the generated local config: webhooks to the on-call receiver, no secrets
    line = problem_line(settings.alertmanager_config)
    if line:
        raise SecretMissing(f"alertmanager_config {settings.alertmanager_config}: {line}")


def run(settings: UpSettings) -> int:
    """Check ports, prepare files, start and supervise the stack until asked to stop."""
    started = time.monotonic()
    stack: Supervisor | None = None
    with stop_on_signals():
        try:
            check_ports(settings)
            check_alertmanager_config(settings)
            make_run_dir(settings)
            ensure_models(settings, _say)
            write_models_config(settings)
            _, key = ensure_demo_key(settings)
            if settings.es_url:
                setup_elasticsearch(settings, _say)
            config = stack_config(settings)
            if (faults := config.gpu_faults_file) is not None:
                faults.unlink(missing_ok=True)  # an earlier run's drill faults end here
            stack = Supervisor(config, _say)
            stack.start_all()
            pids = stack.pids()
            write_state(StackState(config, os.getpid(), pids))  # before the banner says ready
            _say(up_banner.banner(settings, config, key, pids))
            _say(f"ready in {time.monotonic() - started:.1f} s")
            while not settings.exit_after_ready:
                stack.watch_once()
                if stack.pids() != pids:  # a restart: the drills and the soak follow the new pid
                    pids = stack.pids()
                    write_state(StackState(config, os.getpid(), pids))
                time.sleep(0.5)
        except Stopped as why:
            _say(f"{why} received: stopping the stack ...")
        except (PortError, MissingBinary, BuildFailed, EsSetupFailed, SecretMissing) as exc:
            _say(f"tokenpulse up: error: {exc}")
            return 2
        except LaunchError as exc:
            _say(f"tokenpulse up: a component did not start: {exc}")
            return 1
        finally:
            remove_state(settings.path(""), os.getpid())
            count = stack.stop_all() if stack is not None else 0
            if count:
                _say(f"stopped all {count} processes of the stack")
    return 0


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """One flag per UpSettings field (each also TOKENPULSE_UP_<NAME>)."""
    add_settings_arguments(parser, UpSettings, style=KEBAB)


def main(args: argparse.Namespace) -> int:
    """Build the settings from flags and environment, then run the stack."""
    return run(settings_from_args(UpSettings, args))
