"""`tokenpulse exporter`: flags map 1:1 onto ExporterSettings, then `exporter.server.run`.

Every flag can also come from the environment (TOKENPULSE_EXPORTER_<FIELD>); flags win.
`--collector.<name>` / `--no-collector.<name>` are generated from the collector registry.
"""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from pydantic import ValidationError

if TYPE_CHECKING:
    from exporter.settings import ExporterSettings

# flag -> (settings field, type, help)
_FLAGS: list[tuple[str, str, type, str]] = [
    (
        "--web.listen-address",
        "listen_address",
        str,
        "host:port for /metrics (default 127.0.0.1:9410; :9410 = all interfaces)",
    ),
    (
        "--tfserving.url",
        "tfserving_url",
        str,
        "TF Serving REST base URL (default http://127.0.0.1:8501)",
    ),
    (
        "--tfserving.model-config-file",
        "model_config_file",
        str,
        "TF Serving's --model_config_file: models, base paths, labels",
    ),
    (
        "--tfserving.model-name",
        "model_name",
        str,
        "without a config file: the model to watch (default gen)",
    ),
    (
        "--tfserving.model-base-path",
        "model_base_path",
        str,
        "without a config file: the model's base path (golden files)",
    ),
    (
        "--tfserving.poll-interval",
        "status_poll_interval_seconds",
        float,
        "seconds between model status polls (default 5)",
    ),
    (
        "--tfserving.timeout",
        "request_timeout_seconds",
        float,
        "status request timeout in seconds (default 2)",
    ),
    (
        "--collector.canary.interval",
        "canary_interval_seconds",
        float,
        "seconds between canary runs (default 60)",
    ),
    (
        "--collector.canary.timeout",
        "canary_timeout_seconds",
        float,
        "predict timeout per canary prompt, seconds (default 60)",
    ),
    (
        "--collector.nvml.backend",
        "nvml_backend",
        str,
        "real (pynvml), or fake: a simulated node for demos and benchmarks",
    ),
    ("--collector.nvml.fake-gpus", "nvml_fake_gpus", int, "GPUs of the fake backend (default 8)"),
    (
        "--collector.nvml.fields-file",
        "nvml_fields_file",
        str,
        "NVML fields file (default exporter/nvml/fields.csv)",
    ),
    (
        "--collector.nvml.retry-interval",
        "nvml_retry_seconds",
        float,
        "seconds between NVML init retries while unavailable (default 30)",
    ),
    (
        "--collector.nvml.timeout",
        "nvml_timeout_seconds",
        float,
        "seconds before a hung NVML collect fails the collector (default 3)",
    ),
    ("--log.level", "log_level", str, "DEBUG, INFO, WARNING or ERROR (default INFO)"),
]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Flags of `tokenpulse exporter`."""
    from exporter.registry import specs

    for flag, dest, typ, help_text in _FLAGS:
        metavar = {float: "SECONDS", int: "N"}.get(typ, dest.rsplit("_", 1)[-1].upper())
        parser.add_argument(flag, dest=dest, type=typ, metavar=metavar, help=help_text)
    group = parser.add_argument_group("collectors")
    for name, spec in specs().items():
        default = "enabled" if spec.default_enabled else "disabled"
        group.add_argument(
            f"--collector.{name}",
            dest=f"collector__{name}",
            action=argparse.BooleanOptionalAction,
            default=None,
            help=f"{spec.help} (default {default})",
        )


def settings_from_args(args: argparse.Namespace) -> ExporterSettings:
    """ExporterSettings from the environment, overridden by the flags that were given."""
    from exporter.settings import ExporterSettings

    values = {dest: getattr(args, dest) for _, dest, _, _ in _FLAGS}
    overrides = {k: v for k, v in values.items() if v is not None}
    flags = {
        key.removeprefix("collector__"): value
        for key, value in vars(args).items()
        if key.startswith("collector__") and value is not None
    }
    env_default = ExporterSettings().collectors if flags else None
    if flags:
        overrides["collectors"] = {**(env_default or {}), **flags}
    return ExporterSettings(**overrides)


def main(args: argparse.Namespace) -> int:
    """Validate settings, then serve until interrupted."""
    from exporter.modelconfig import ModelConfigError
    from exporter.nvml.fields import FieldsFileError
    from exporter.server import run

    try:
        settings = settings_from_args(args)
        return run(settings)
    except ValidationError as exc:
        for err in exc.errors():
            where = ".".join(str(p) for p in err["loc"]) or "settings"
            print(f"tokenpulse exporter: {where}: {err['msg']}", file=sys.stderr)
        return 2
    except (ModelConfigError, FieldsFileError, OSError) as exc:
        print(f"tokenpulse exporter: {exc}", file=sys.stderr)
        return 2
