"""The processes of the local stack, in start order, each started through the shared launchers.

Every component binds 127.0.0.1 on its configured port and logs to RUN_DIR/logs/<name>.log.
"""

from __future__ import annotations

import contextlib
import os
import shutil
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from monitoring.mixin import alertmanager as am_config
from monitoring.mixin import prometheus as prom_config
from stack.launch import (
    Launched,
    http_ok,
    running_exporter,
    running_gateway,
    running_modelserver,
    running_process,
    tokenpulse_argv,
)
from stack.up.files import MODEL, context_window
from stack.up.settings import UpSettings
from tokenpulse import paths

ROOT = paths.ROOT
CONFIG_DIR = ROOT / "serving" / "config"
RULES = {
    "normal": ("alerts/recording.rules.yml", "alerts/alerts.rules.yml"),
    "compressed": ("alerts/compressed/recording.rules.yml", "alerts/compressed/alerts.rules.yml"),
}
SINK = "log_pipeline.sink:make_sink"


class MissingBinary(RuntimeError):
    """A program the stack runs (Debian's prometheus, alertmanager) is not installed."""


def binary(*names: str) -> str:
    """The first of `names` on PATH; MissingBinary naming how to install it."""
    for name in names:
        found = shutil.which(name)
        if found:
            return found
    raise MissingBinary(
        f"{names[0]} is not installed; `make up` installs it (scripts/ensure-debs.sh stack)"
    )


@dataclass(frozen=True)
class Component:
    """One process of the stack: how to start it, where it answers."""

    name: str
    start: Callable[[UpSettings], contextlib.AbstractContextManager[Launched]]
    url: Callable[[UpSettings], str]  # what the banner shows
    metrics: Callable[[UpSettings], str]  # its /metrics page


def _loopback(port: int, path: str = "") -> str:
    return f"http://127.0.0.1:{port}{path}"


def _log(s: UpSettings, name: str) -> Path:
    return s.path("logs") / f"{name}.log"


def _modelserver(s: UpSettings) -> contextlib.AbstractContextManager[Launched]:
    return running_modelserver(
        config_file=s.path("models.config"), model_name=MODEL, rest_port=s.rest_port,
        grpc_port=s.grpc_port, enable_batching=True,
        batching_parameters_file=CONFIG_DIR / "batching_parameters.txt",
        monitoring_config_file=CONFIG_DIR / "monitoring.config",
        file_system_poll_wait_seconds=5, extra_args=["--model_config_file_poll_wait_seconds=30"],
        log_path=_log(s, "modelserver"), start_timeout_s=s.start_timeout_s,
    )  # fmt: skip


def _gateway(s: UpSettings) -> contextlib.AbstractContextManager[Launched]:
    return running_gateway(
        _loopback(s.rest_port), s.path("gateway-keys.json"), port=s.gateway_port,
        log_path=_log(s, "gateway"), start_timeout_s=s.start_timeout_s,
        env={"TOKENPULSE_SINK_SPOOL_DIR": str(s.path("spool"))},
        model_config_file=str(s.path("models.config")), canary_weight=s.canary_weight,
        sample_sink=SINK, context_window_tokens=context_window(s),
    )  # fmt: skip


def nvml_works() -> bool:
    """Whether NVML initialises on this machine (a driver and at least the library)."""
    try:
        import pynvml

        pynvml.nvmlInit()
        pynvml.nvmlShutdown()
    except Exception:  # noqa: BLE001 - any NVML error means: no usable GPU here
        return False
    return True


def gpu_backend(s: UpSettings) -> str:
    """The exporter's GPU source; `auto` resolves to `real` or `off`."""
    if s.gpu_backend == "auto":
        return "real" if nvml_works() else "off"
    return s.gpu_backend


def _exporter(s: UpSettings) -> contextlib.AbstractContextManager[Launched]:
    backend = gpu_backend(s)
    # Without a GPU the collector would fail every scrape and page as ExporterCollectorFailing.
    gpu = ["--no-collector.nvml"] if backend == "off" else [f"--collector.nvml.backend={backend}"]
    return running_exporter(
        [
            f"--tfserving.url={_loopback(s.rest_port)}",
            f"--tfserving.model-config-file={s.path('models.config')}",
            *gpu,
            f"--collector.canary.interval={s.canary_interval_s:g}",
        ],
        port=s.exporter_port, log_path=_log(s, "exporter"), start_timeout_s=s.start_timeout_s,
    )  # fmt: skip


def _shipper(s: UpSettings) -> contextlib.AbstractContextManager[Launched]:
    argv = tokenpulse_argv(
        "shipper", f"--spool-dir={s.path('spool')}", f"--state-dir={s.path('spool-state')}",
        f"--sqlite-path={s.path('samples.db')}", f"--metrics-port={s.shipper_port}", "--outputs",
        "sqlite",
    )  # fmt: skip
    env = None
    if s.es_url:  # the API key goes in the environment, never on a command line
        argv += ["elasticsearch", f"--es-url={s.es_url}"]
        env = dict(os.environ, TOKENPULSE_SHIPPER_ES_API_KEY=s.es_api_key)
    return _process(s, "shipper", argv, _loopback(s.shipper_port, "/metrics"), env)


def _oncall(s: UpSettings) -> contextlib.AbstractContextManager[Launched]:
    argv = tokenpulse_argv(
        "oncall-receiver", f"--port={s.oncall_port}", f"--file={s.path('oncall.jsonl')}"
    )
    return _process(s, "oncall", argv, _loopback(s.oncall_port, "/healthz"))


def _alertmanager(s: UpSettings) -> contextlib.AbstractContextManager[Launched]:
    config = s.path("alertmanager.yml")
    config.write_text(
        am_config.render_local(
            _loopback(s.oncall_port), group_wait=s.group_wait, group_interval=s.group_interval
        )
    )
    argv = [
        binary("prometheus-alertmanager", "alertmanager"), f"--config.file={config}",
        f"--storage.path={s.path('alertmanager')}",
        f"--web.listen-address=127.0.0.1:{s.alertmanager_port}",
        "--cluster.listen-address=", "--log.level=warn",
    ]  # fmt: skip
    return _process(s, "alertmanager", argv, _loopback(s.alertmanager_port, "/-/ready"))


def _prometheus(s: UpSettings) -> contextlib.AbstractContextManager[Launched]:
    targets = prom_config.Targets(
        modelserver=[f"127.0.0.1:{s.rest_port}"], gateway=[f"127.0.0.1:{s.gateway_port}"],
        exporter=[f"127.0.0.1:{s.exporter_port}"], shipper=[f"127.0.0.1:{s.shipper_port}"],
        alertmanager=[f"127.0.0.1:{s.alertmanager_port}"],
        prometheus=[f"127.0.0.1:{s.prometheus_port}"],
    )  # fmt: skip
    config = s.path("prometheus.yml")
    config.write_text(
        prom_config.render(
            targets, [str(ROOT / f) for f in RULES[s.rules]],
            alertmanagers=[f"127.0.0.1:{s.alertmanager_port}"],
            scrape_interval=s.scrape_interval, evaluation_interval=s.evaluation_interval,
            header="# Generated by `tokenpulse up` from monitoring/mixin; do not edit.\n",
        )
    )  # fmt: skip
    argv = [
        binary("prometheus"), f"--config.file={config}",
        f"--storage.tsdb.path={s.path('prometheus')}",
        f"--web.listen-address=127.0.0.1:{s.prometheus_port}", "--log.level=warn",
    ]  # fmt: skip
    return _process(s, "prometheus", argv, _loopback(s.prometheus_port, "/-/ready"))


@contextlib.contextmanager
def _process(
    s: UpSettings, name: str, argv: list[str], ready_url: str, env: dict[str, str] | None = None
) -> Iterator[Launched]:
    with running_process(
        argv, lambda: http_ok(ready_url), what=name, env=env, log_path=_log(s, name),
        start_timeout_s=s.start_timeout_s,
    ) as child:  # fmt: skip
        yield child


def _page(port_field: str, path: str) -> Callable[[UpSettings], str]:
    def url(s: UpSettings) -> str:
        return _loopback(int(getattr(s, port_field)), path)

    return url


METRICS = "/metrics"
COMPONENTS: tuple[Component, ...] = (
    Component(
        "modelserver", _modelserver, _page("rest_port", f"/v1/models/{MODEL}"),
        _page("rest_port", prom_config.TFSERVING_METRICS_PATH),
    ),
    Component("gateway", _gateway, _page("gateway_port", ""), _page("gateway_port", METRICS)),
    Component("exporter", _exporter, _page("exporter_port", ""), _page("exporter_port", METRICS)),
    Component("shipper", _shipper, _page("shipper_port", ""), _page("shipper_port", METRICS)),
    Component("oncall", _oncall, _page("oncall_port", ""), _page("oncall_port", "/healthz")),
    Component(
        "alertmanager", _alertmanager, _page("alertmanager_port", ""),
        _page("alertmanager_port", METRICS),
    ),
    Component(
        "prometheus", _prometheus, _page("prometheus_port", ""), _page("prometheus_port", METRICS)
    ),
)  # fmt: skip


def names() -> list[str]:
    """Component names in start order."""
    return [c.name for c in COMPONENTS]


def by_name(name: str) -> Component:
    """One component."""
    return next(c for c in COMPONENTS if c.name == name)
