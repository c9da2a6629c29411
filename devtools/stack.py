"""A whole running stack for end-to-end tests: `tokenpulse up`'s component table, `test` profile.

    from devtools.stack import running_stack

    with running_stack(export_dir, tmp_path) as stack:            # export_dir: a SavedModel
        stack.generate("hello", max_new_tokens=4)                # one request through the gateway
        with stack.traffic(rps=1.0):                             # steady background traffic
            stack.wait_for_series("model:gateway_errors:ratio_rate5m")
        stack.query('up{job="tfserving"}')                       # instant query -> result list
        stack.alerts()                                           # Prometheus' active alerts
        stack.stop_modelserver(); stack.start_modelserver()      # a fault and its fix
        stack.stop_modelserver(1)                                # with model_server_replicas=2
        stack.notifications()                                    # what the on-call receiver got

What runs is stack/components.py's table, the one `tokenpulse up` starts, with the StackConfig of
`config_for_tests`: free ports on 127.0.0.1, files under `workdir`, and the `test` profile
(stack/profiles.py: the FAKE NVML backend with 2 GPUs, the time-compressed rules, fast scrapes and
polls, short Alertmanager group timings); `running_stack` also installs a copy of `export_dir` as
version 1 of model "gen" labelled "stable". Keywords of both are StackConfig fields over the
profile (`alerting=True`: also Alertmanager, with the generated local routes, and the on-call
receiver writing `workdir/oncall.jsonl`; `canary_interval_s=1.0`; ...), plus two shapes:
`model_server_replicas=N` runs N model servers (`modelserver-0` ..) behind the gateway, each on
free ports; `ha=True` runs `up --ha`'s pairs, `prometheus-2` and `alertmanager-2` beside the first
ones, the Alertmanagers gossiping on free loopback ports (`stop_component`/`restart_component`
take any of them down and back). Everything is stopped when the block ends, also on failure.

    config = config_for_tests(workdir, alerting=True, model_server_replicas=2)   # no processes yet
"""

from __future__ import annotations

import contextlib
import json
import shutil
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import httpx

from devtools.traffic import steady_traffic
from serving.gateway.keys import add_key
from stack import launch
from stack.components import modelserver_name
from stack.config import HaPorts, Ports, StackConfig, ha_group_interval_problem
from stack.launch import ExporterProcess, GatewayProcess, ModelServerProcess
from stack.profiles import profile
from stack.supervise import Supervisor
from tokenpulse.procs import free_port
from tokenpulse.tfserving.render import render_models_config
from tokenpulse.tfserving.signature import DEFAULT_MODEL_NAME

MODEL = DEFAULT_MODEL_NAME
MAX_NEW_TOKENS = 4  # what generate() and traffic() ask for unless told


@dataclass
class Stack:
    """Handles on a running stack (see the module docstring)."""

    workdir: Path
    key: str
    supervisor: Supervisor
    max_new_tokens: int = MAX_NEW_TOKENS

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
        payload = {"prompt": prompt, "max_new_tokens": self.max_new_tokens, **body}
        headers = {"Authorization": f"Bearer {self.key}"}
        return httpx.post(
            f"{self.gateway.url}/v1/generate", json=payload, headers=headers, timeout=60
        )

    def refused(self) -> httpx.Response:
        """One request the gateway refuses (422: a negative `max_new_tokens`), which the sampler
        keeps whatever its head rate (it keeps a tenth of plain requests, and a good model's
        answers give it no low-quality reason): a sample for the shipper to deliver."""
        return self.generate(max_new_tokens=-1)

    @contextlib.contextmanager
    def traffic(self, rps: float = 1.0) -> Iterator[list[int]]:
        """Steady requests in the background for the block; yields the status codes seen."""
        body = {"prompt": "steady traffic", "max_new_tokens": self.max_new_tokens}
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


def config_for_tests(
    workdir: Path, *, model_server_replicas: int = 1, ha: bool = False, **fields: Any
) -> StackConfig:
    """A test stack's StackConfig: free ports, the `test` profile, no alerting unless asked,
    `fields` (StackConfig fields) over the profile. `ha` refuses a group interval the pair could
    page twice with (stack.config.ha_group_interval_problem)."""
    values: dict[str, Any] = {
        **profile("test"), "alerting": False, "training_cache_dir": workdir / "training", **fields
    }  # fmt: skip
    ha_ports = None
    if ha:
        timing = (values["scrape_interval"], values["evaluation_interval"])
        if problem := ha_group_interval_problem(*timing, values["group_interval"]):
            raise ValueError(problem)
        ha_ports = HaPorts(**{name: free_port() for name in HaPorts.names()})
    return StackConfig(
        run_dir=workdir,
        ports=Ports(**{name: free_port() for name in Ports.names()}),
        replica_ports=tuple((free_port(), free_port()) for _ in range(model_server_replicas - 1)),
        ha=ha_ports,
        **values,
    )


@contextlib.contextmanager
def running_stack(
    export_dir: Path, workdir: Path, *, max_new_tokens: int = MAX_NEW_TOKENS, **config: Any
) -> Iterator[Stack]:
    """Start the stack described in the module docstring (`config`: config_for_tests's keywords);
    stop all of it when the block ends."""
    workdir.mkdir(parents=True, exist_ok=True)
    (workdir / "logs").mkdir(exist_ok=True)
    _write_models(workdir, export_dir)
    key = add_key(workdir / "gateway-keys.json", "stack", replace=True)
    supervisor = Supervisor(config_for_tests(workdir, **config))
    try:
        supervisor.start_all()
        yield Stack(workdir=workdir, key=key, supervisor=supervisor, max_new_tokens=max_new_tokens)
    finally:
        supervisor.stop_all()
