"""A whole running stack for end-to-end tests: components, real Prometheus, optionally alerting.

    from devtools.stack import StackOptions, running_stack

    with running_stack(export_dir, tmp_path) as stack:            # export_dir: a SavedModel
        stack.generate("hello", max_new_tokens=4)                # one request through the gateway
        with stack.traffic(rps=1.0):                             # steady background traffic
            stack.wait_for_series("model:gateway_errors:ratio_rate5m")
        stack.query('up{job="tfserving"}')                       # instant query -> result list
        stack.alerts()                                           # Prometheus' active alerts
        stack.stop_modelserver(); stack.start_modelserver()      # a fault and its fix
        stack.notifications()                                    # what the on-call receiver got

What runs (all on 127.0.0.1, free ports, files under `workdir`):
- model server (TF-Serving compatible) on a copy of `export_dir` as version 1 of model "gen",
  with a models.config that labels version 1 "stable"; restartable on the same ports;
- gateway (one API key: `stack.key`), reading the same models.config, sampling requests into a
  spool under `workdir/spool` (log_pipeline's spool sink);
- shipper tailing that spool into the embedded SQLite store (`stack.shipper_url` is its /metrics);
- exporter with the FAKE NVML backend (2 GPUs), the tfserving and canary collectors;
- real Prometheus (`prometheus` binary) scraping all of them every `scrape_interval`, with the
  rule files given (default: the generated time-compressed rules, see alerts/compressed/);
- with `alerting=True`: real Alertmanager (`prometheus-alertmanager`) with the generated local
  routes (short group timings) and `tokenpulse oncall-receiver` writing `workdir/oncall.jsonl`.
Everything is stopped when the block ends, also on failure.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from devtools.traffic import steady_traffic
from monitoring.mixin import alertmanager as am_config
from monitoring.mixin import prometheus as prom_config
from stack import launch
from stack.launch import (
    ExporterProcess,
    GatewayProcess,
    ModelServerProcess,
    http_ok,
    running_exporter,
    running_gateway,
    running_modelserver,
    running_process,
    tokenpulse_argv,
)
from tokenpulse import paths
from tokenpulse.procs import free_port

ROOT = paths.ROOT
COMPRESSED_RULES = (
    ROOT / "alerts/compressed/recording.rules.yml",
    ROOT / "alerts/compressed/alerts.rules.yml",
)
MODEL = "gen"


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


@dataclass
class Stack:
    """Handles on a running stack (see the module docstring)."""

    workdir: Path
    options: StackOptions
    key: str
    prometheus_url: str
    modelserver: ModelServerProcess
    gateway: GatewayProcess
    exporter: ExporterProcess
    shipper_url: str = ""
    alertmanager_url: str | None = None
    oncall_url: str | None = None
    _restart: Callable[[], ModelServerProcess] | None = field(default=None, repr=False)
    _stop: Callable[[], None] | None = field(default=None, repr=False)

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
    def stop_modelserver(self) -> None:
        """Stop the model server (SIGTERM); its ports stay reserved for start_modelserver()."""
        if self._stop is not None:
            self._stop()

    def start_modelserver(self) -> None:
        """Start the model server again on the same ports; returns once a version is AVAILABLE."""
        if self._restart is not None:
            self.modelserver = self._restart()

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


MODELS_CONFIG = """model_config_list {{
  config {{
    name: "{model}"
    base_path: "{base}"
    model_platform: "tensorflow"
    model_version_policy {{ latest {{ num_versions: 1 }} }}
    version_labels {{ key: "stable" value: 1 }}
  }}
}}
"""


def _write_models(workdir: Path, export_dir: Path) -> Path:
    base = workdir / "models" / MODEL
    if not (base / "1").exists():
        shutil.copytree(export_dir, base / "1")
    config = workdir / "models.config"
    config.write_text(MODELS_CONFIG.format(model=MODEL, base=base))
    return config


def _keys(workdir: Path) -> tuple[Path, str]:
    from serving.gateway.keys import add_key

    path = workdir / "gateway-keys.json"
    return path, add_key(path, "stack", replace=True)


@contextlib.contextmanager
def _binary(argv: list[str], ready_url: str, what: str, log: Path) -> Iterator[None]:
    with running_process(argv, lambda: http_ok(ready_url), what=what, log_path=log):
        yield


@contextlib.contextmanager
def _shipper(workdir: Path) -> Iterator[str]:
    """The shipper on the gateway's spool, into SQLite; yields its /metrics URL."""
    port = free_port()
    argv = tokenpulse_argv(
        "shipper", f"--spool-dir={workdir / 'spool'}", f"--state-dir={workdir / 'spool-state'}",
        "--outputs=sqlite", f"--sqlite-path={workdir / 'samples.db'}", f"--metrics-port={port}",
        "--poll-interval-s=0.5",
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}/metrics"
    with _binary(argv, url, "shipper", workdir / "logs/shipper.log"):
        yield url


@contextlib.contextmanager
def _alerting(workdir: Path, options: StackOptions) -> Iterator[tuple[str, str]]:
    """On-call receiver and Alertmanager; yields (alertmanager_url, oncall_url)."""
    oncall_port, am_port = free_port(), free_port()
    oncall_url = f"http://127.0.0.1:{oncall_port}"
    am_file = workdir / "alertmanager.yml"
    am_file.write_text(
        am_config.render_local(
            oncall_url, group_wait=options.group_wait, group_interval=options.group_interval,
            repeat_interval=options.repeat_interval,
        )
    )  # fmt: skip
    am_url = f"http://127.0.0.1:{am_port}"
    oncall = tokenpulse_argv(
        "oncall-receiver", f"--port={oncall_port}", f"--file={workdir / 'oncall.jsonl'}"
    )
    am = [
        "prometheus-alertmanager", f"--config.file={am_file}",
        f"--storage.path={workdir / 'am-data'}", f"--web.listen-address=127.0.0.1:{am_port}",
        "--cluster.listen-address=", "--log.level=warn",
    ]  # fmt: skip
    with (
        _binary(oncall, f"{oncall_url}/healthz", "on-call receiver", workdir / "logs/oncall.log"),
        _binary(am, f"{am_url}/-/ready", "alertmanager", workdir / "logs/alertmanager.log"),
    ):
        yield am_url, oncall_url


@contextlib.contextmanager
def running_stack(
    export_dir: Path, workdir: Path, options: StackOptions = StackOptions()
) -> Iterator[Stack]:
    """Start the stack described in the module docstring; stop all of it when the block ends."""
    workdir.mkdir(parents=True, exist_ok=True)
    (workdir / "logs").mkdir(exist_ok=True)
    config = _write_models(workdir, export_dir)
    keys_file, key = _keys(workdir)
    rest_port, grpc_port = free_port(), free_port()
    with contextlib.ExitStack() as outer:
        ms_stack = contextlib.ExitStack()
        outer.callback(lambda: ms_stack.close())

        def start_ms() -> ModelServerProcess:
            return ms_stack.enter_context(
                running_modelserver(
                    config_file=config, model_name=MODEL, rest_port=rest_port, grpc_port=grpc_port,
                    log_path=workdir / "logs/modelserver.log",
                )
            )  # fmt: skip

        ms = start_ms()
        gw = outer.enter_context(
            running_gateway(
                ms.rest_url, keys_file, model_config_file=str(config), status_poll_interval_s=1,
                log_path=workdir / "logs/gateway.log", sample_sink="log_pipeline.sink:make_sink",
                env={"TOKENPULSE_SINK_SPOOL_DIR": str(workdir / "spool")},
            )
        )  # fmt: skip
        ex = outer.enter_context(
            running_exporter(
                [
                    f"--tfserving.url={ms.rest_url}", f"--tfserving.model-config-file={config}",
                    "--tfserving.poll-interval=1", "--collector.nvml.backend=fake",
                    "--collector.nvml.fake-gpus=2",
                    f"--collector.canary.interval={options.canary_interval_s:g}",
                ],
                log_path=workdir / "logs/exporter.log",
            )
        )  # fmt: skip
        shipper_url = outer.enter_context(_shipper(workdir))
        am_url = oncall_url = None
        if options.alerting:
            am_url, oncall_url = outer.enter_context(_alerting(workdir, options))
        prom_port = free_port()
        targets = prom_config.Targets(
            modelserver=[f"127.0.0.1:{rest_port}"], gateway=[f"127.0.0.1:{gw.port}"],
            exporter=[f"127.0.0.1:{ex.port}"], shipper=[shipper_url.split("/")[2]],
        )  # fmt: skip
        prom_file = workdir / "prometheus.yml"
        prom_file.write_text(
            prom_config.render(
                targets, [str(p) for p in options.rule_files],
                alertmanagers=[am_url.removeprefix("http://")] if am_url else [],
                scrape_interval=options.scrape_interval,
                evaluation_interval=options.evaluation_interval,
            )
        )  # fmt: skip
        prom_url = f"http://127.0.0.1:{prom_port}"
        prom = [
            "prometheus", f"--config.file={prom_file}", f"--storage.tsdb.path={workdir / 'tsdb'}",
            f"--web.listen-address=127.0.0.1:{prom_port}", "--log.level=warn",
        ]  # fmt: skip
        outer.enter_context(
            _binary(prom, f"{prom_url}/-/ready", "prometheus", workdir / "logs/prometheus.log")
        )

        def stop_ms() -> None:
            ms_stack.close()

        yield Stack(
            workdir=workdir, options=options, key=key, prometheus_url=prom_url, modelserver=ms,
            gateway=gw, exporter=ex, shipper_url=shipper_url, alertmanager_url=am_url,
            oncall_url=oncall_url, _restart=start_ms, _stop=stop_ms,
        )  # fmt: skip
