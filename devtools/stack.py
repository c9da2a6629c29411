"""A whole running stack for end-to-end tests: `tokenpulse up`'s component table, test options.

    from devtools.stack import StackOptions, running_stack

    with running_stack(export_dir, tmp_path) as stack:            # export_dir: a SavedModel
        stack.generate("hello", max_new_tokens=4)                # one request through the gateway
        with stack.traffic(rps=1.0):                             # steady background traffic
            stack.wait_for_series("model:gateway_errors:ratio_rate5m")
        stack.query('up{job="tfserving"}')                       # instant query -> result list
        stack.alerts()                                           # Prometheus' active alerts
        stack.stop_modelserver(); stack.start_modelserver()      # a fault and its fix
        stack.stop_modelserver(1)                                # with model_server_replicas=2
        stack.notifications()                                    # what the on-call receiver got

What runs is stack/components.py's table, the one `tokenpulse up` starts, with a StackConfig for
tests: free ports on 127.0.0.1, files under `workdir`, a copy of `export_dir` as version 1 of
model "gen" labelled "stable", the FAKE NVML backend (2 GPUs), the time-compressed rules
(alerts/compressed/), fast scrapes and polls; with `alerting=True` also Alertmanager (the
generated local routes, short group timings) and the on-call receiver (`workdir/oncall.jsonl`).
`model_server_replicas=N` runs N model servers (`modelserver-0` ..) behind the gateway, each on
free ports. `ha=True` runs `up --ha`'s pairs: `prometheus-2` and `alertmanager-2` beside the first
ones, the Alertmanagers gossiping on free loopback ports (`stop_component`/`restart_component`
take any of them down and back). Everything is stopped when the block ends, also on failure.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import httpx

from devtools.traffic import steady_traffic
from serving.gateway.keys import add_key
from stack import launch
from stack.components import modelserver_name
from stack.config import RULES, HaPorts, Ports, StackConfig, ha_group_interval_problem
from stack.launch import ExporterProcess, GatewayProcess, ModelServerProcess
from stack.supervise import Stack as Supervisor
from tokenpulse.procs import free_port
from tokenpulse.tfserving.render import render_models_config
from tokenpulse.tfserving.signature import DEFAULT_MODEL_NAME

COMPRESSED_RULES = RULES["compressed"]
MODEL = DEFAULT_MODEL_NAME


@dataclass(frozen=True)
class StackOptions:
    """Knobs of a test stack."""

    rule_files: Sequence[Path] = COMPRESSED_RULES
    # 2s: a scrape slowed by a busy machine must not time out and look like a down target
    scrape_interval: str = "2s"
    evaluation_interval: str = "1s"
    alerting: bool = False
    # Alertmanager timings for tests: first notification after group_wait (long enough for an
    # inhibiting alert, e.g. model server down, to arrive before its symptoms' group flushes),
    # updates such as resolved after group_interval.
    group_wait: str = "10s"
    group_interval: str = "3s"
    repeat_interval: str = "1h"
    canary_interval_s: float = 5.0
    max_new_tokens: int = 4
    model_server_replicas: int = 1
    # `up --ha`: prometheus-2 and alertmanager-2 too (group_interval must then exceed a scrape
    # and an evaluation: stack.config.ha_group_interval_problem)
    ha: bool = False


@dataclass
class Stack:
    """Handles on a running stack (see the module docstring)."""

    workdir: Path
    options: StackOptions
    key: str
    supervisor: Supervisor

    @property
    def config(self) -> StackConfig:
        """What the component table was started with."""
        return self.supervisor.config

    @property
    def modelserver(self) -> ModelServerProcess:
        """The model server's (replica 0's) current process."""
        return self.replica(0)

    def replica(self, index: int) -> ModelServerProcess:
        """One model-server replica's current process."""
        return cast(ModelServerProcess, self.supervisor.child(modelserver_name(self.config, index)))

    @property
    def gateway(self) -> GatewayProcess:
        """The gateway's process."""
        return cast(GatewayProcess, self.supervisor.child("gateway"))

    @property
    def exporter(self) -> ExporterProcess:
        """The exporter's process."""
        return cast(ExporterProcess, self.supervisor.child("exporter"))

    @property
    def prometheus_url(self) -> str:
        """Prometheus' base URL."""
        return self.config.url("prometheus_port")

    @property
    def shipper_url(self) -> str:
        """The shipper's /metrics page."""
        return self.config.url("shipper_port", "/metrics")

    @property
    def alertmanager_url(self) -> str | None:
        """Alertmanager's base URL (None without alerting)."""
        return self.config.url("alertmanager_port") if self.config.alerting else None

    @property
    def oncall_url(self) -> str | None:
        """The on-call receiver's base URL (None without alerting)."""
        return self.config.url("oncall_port") if self.config.alerting else None

    # --- traffic -------------------------------------------------------------------------------
    def generate(self, prompt: str = "the quick brown fox", **body: Any) -> httpx.Response:
        """One POST /v1/generate through the gateway (any status comes back, nothing raises)."""
        payload = {"prompt": prompt, "max_new_tokens": self.options.max_new_tokens, **body}
        headers = {"Authorization": f"Bearer {self.key}"}
        return httpx.post(
            f"{self.gateway.url}/v1/generate", json=payload, headers=headers, timeout=60
        )

    @contextlib.contextmanager
    def traffic(self, rps: float = 1.0) -> Iterator[list[int]]:
        """Steady requests in the background for the block; yields the status codes seen."""
        body = {"prompt": "steady traffic", "max_new_tokens": self.options.max_new_tokens}
        headers = {"Authorization": f"Bearer {self.key}"}
        with httpx.Client(timeout=60) as client:

            def send() -> httpx.Response:
                return client.post(f"{self.gateway.url}/v1/generate", json=body, headers=headers)

            with steady_traffic(send, rps, "stack-traffic") as codes:
                yield codes

    # --- Prometheus ----------------------------------------------------------------------------
    def _api(self, path: str, **params: str) -> Any:
        url = f"{self.prometheus_url}{path}?{urllib.parse.urlencode(params)}"
        with urllib.request.urlopen(url, timeout=10) as resp:
            doc = json.loads(resp.read())
        if doc.get("status") != "success":
            raise RuntimeError(f"prometheus {path}: {doc}")
        return doc["data"]

    def query(self, expr: str) -> list[dict[str, Any]]:
        """Instant query; the `result` list of the API answer."""
        return list(self._api("/api/v1/query", query=expr)["result"])

    def alerts(self) -> list[dict[str, Any]]:
        """Prometheus' pending and firing alerts."""
        return list(self._api("/api/v1/alerts")["alerts"])

    def rule_health(self) -> list[dict[str, Any]]:
        """Every loaded rule with its health and last error."""
        groups = self._api("/api/v1/rules")["groups"]
        return [r for g in groups for r in g["rules"]]

    def metric_names(self) -> set[str]:
        """Every metric name Prometheus has scraped or recorded."""
        return set(self._api("/api/v1/label/__name__/values"))

    def wait_for_series(self, expr: str, timeout_s: float = 120.0) -> list[dict[str, Any]]:
        """Poll an instant query until it returns something."""
        return wait_until(lambda: self.query(expr), timeout_s, f"series for {expr!r}")

    # --- faults ---------------------------------------------------------------------------------
    def stop_modelserver(self, replica: int = 0) -> None:
        """Stop a model server (SIGTERM); start_modelserver() starts it on the same ports."""
        self.supervisor.stop(modelserver_name(self.config, replica))

    def start_modelserver(self, replica: int = 0) -> None:
        """Start a model server again on the same ports; returns once a version is AVAILABLE."""
        self.supervisor.restart(modelserver_name(self.config, replica))

    def stop_component(self, name: str) -> None:
        """Stop any component by name (SIGTERM); restart_component() starts it again."""
        self.supervisor.stop(name)

    def restart_component(self, name: str) -> None:
        """Start a stopped component again on the same ports; returns once it is healthy."""
        self.supervisor.restart(name)

    # --- on-call ----------------------------------------------------------------------------------
    def notifications(self) -> list[dict[str, Any]]:
        """Every notification the on-call receiver recorded ([] without alerting)."""
        path = self.workdir / "oncall.jsonl"
        if not path.is_file():
            return []
        return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def wait_until(
    predicate: Callable[[], Any], timeout_s: float, what: str, every_s: float = 0.5
) -> Any:
    """The launcher's poll, at a pace that suits Prometheus and Alertmanager queries."""
    return launch.wait_until(predicate, timeout_s=timeout_s, what=what, every_s=every_s)


def _write_models(workdir: Path, export_dir: Path) -> None:
    base = workdir / "models" / MODEL
    if not (base / "1").exists():
        shutil.copytree(export_dir, base / "1")
    text = render_models_config(MODEL, base, (1,), {"stable": 1})
    (workdir / "models.config").write_text(text)


def config_for_tests(workdir: Path, options: StackOptions) -> StackConfig:
    """The component table's options for a test: free ports, fake GPUs, fast polls."""
    ha = None
    if options.ha:
        o = options
        problem = ha_group_interval_problem(o.scrape_interval, o.evaluation_interval,
                                            o.group_interval)  # fmt: skip
        if problem:
            raise ValueError(problem)
        ha = HaPorts(**{name: free_port() for name in HaPorts.names()})
    return StackConfig(
        run_dir=workdir,
        ports=Ports(**{name: free_port() for name in Ports.names()}),
        rules=tuple(options.rule_files),
        gpu_backend="fake",
        alerting=options.alerting,
        canary_interval_s=options.canary_interval_s,
        scrape_interval=options.scrape_interval,
        evaluation_interval=options.evaluation_interval,
        group_wait=options.group_wait,
        group_interval=options.group_interval,
        repeat_interval=options.repeat_interval,
        start_timeout_s=120.0,
        gateway={"status_poll_interval_s": 1},
        extra_flags={
            "exporter": ("--tfserving.poll-interval=1",),
            "shipper": ("--poll-interval-s=0.5",),
        },
        modelserver_poll_s=1.0,
        replica_ports=tuple(
            (free_port(), free_port()) for _ in range(options.model_server_replicas - 1)
        ),
        ha=ha,
    )


@contextlib.contextmanager
def running_stack(
    export_dir: Path, workdir: Path, options: StackOptions = StackOptions()
) -> Iterator[Stack]:
    """Start the stack described in the module docstring; stop all of it when the block ends."""
    workdir.mkdir(parents=True, exist_ok=True)
    (workdir / "logs").mkdir(exist_ok=True)
    _write_models(workdir, export_dir)
    key = add_key(workdir / "gateway-keys.json", "stack", replace=True)
    supervisor = Supervisor(config_for_tests(workdir, options))
    try:
        supervisor.start_all()
        yield Stack(workdir=workdir, options=options, key=key, supervisor=supervisor)
    finally:
        supervisor.stop_all()
