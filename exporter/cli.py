"""`tokenpulse exporter`: flags map 1:1 onto ExporterSettings, then `exporter.server.run`.

Every flag can also come from the environment (TOKENPULSE_EXPORTER_<FIELD>); flags win.
`--collector.<name>` / `--no-collector.<name>` are generated from the collector registry.
"""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from tokenpulse.settings_cli import add_settings_arguments, dotted
from tokenpulse.settings_cli import settings_from_args as _build

if TYPE_CHECKING:
    from exporter.settings import ExporterSettings

# node_exporter-style flag of each settings field (`collectors` gets --collector.<name> below)
FLAGS = dotted(
    {
        "listen_address": "--web.listen-address",
        "tfserving_url": "--tfserving.url",
        "model_config_file": "--tfserving.model-config-file",
        "model_name": "--tfserving.model-name",
        "model_base_path": "--tfserving.model-base-path",
        "status_poll_interval_seconds": "--tfserving.poll-interval",
        "request_timeout_seconds": "--tfserving.timeout",
        "canary_interval_seconds": "--collector.canary.interval",
        "canary_timeout_seconds": "--collector.canary.timeout",
        "nvml_backend": "--collector.nvml.backend",
        "nvml_fake_gpus": "--collector.nvml.fake-gpus",
        "nvml_fake_faults": "--collector.nvml.fake-faults",
        "nvml_fields_file": "--collector.nvml.fields-file",
        "nvml_retry_seconds": "--collector.nvml.retry-interval",
        "nvml_timeout_seconds": "--collector.nvml.timeout",
        "log_level": "--log.level",
    }
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Flags of `tokenpulse exporter`: one per settings field, one pair per collector."""
    from exporter.registry import specs
    from exporter.settings import ExporterSettings

    add_settings_arguments(parser, ExporterSettings, style=FLAGS, exclude=("collectors",))
    group = parser.add_argument_group("collectors")
    for name, spec in specs().items():
        default = "enabled" if spec.default_enabled else "disabled"
        group.add_argument(
            f"--collector.{name}",
            dest=f"collector__{name}",
            action=argparse.BooleanOptionalAction,
            default=None,
            help=f"{spec.help} (default {default}; env TOKENPULSE_EXPORTER_COLLECTORS)",
        )


def settings_from_args(args: argparse.Namespace) -> ExporterSettings:
    """ExporterSettings from the environment, overridden by the flags that were given."""
    from exporter.settings import ExporterSettings

    flags = {
        key.removeprefix("collector__"): value
        for key, value in vars(args).items()
        if key.startswith("collector__") and value is not None
    }
    overrides = {}
    if flags:  # --collector.X adds to TOKENPULSE_EXPORTER_COLLECTORS rather than replacing it
        env = _build(ExporterSettings, argparse.Namespace(_settings_style=FLAGS))
        overrides["collectors"] = {**env.collectors, **flags}
    settings: ExporterSettings = _build(ExporterSettings, args, **overrides)
    return settings


def main(args: argparse.Namespace) -> int:
    """Validate settings, then serve until interrupted."""
    from exporter.nvml.fields import FieldsFileError
    from exporter.server import run
    from tokenpulse.tfserving.errors import ConfigError as ModelConfigError

    settings = settings_from_args(args)
    try:
        return run(settings)
    except (ModelConfigError, FieldsFileError, OSError) as exc:
        print(f"tokenpulse exporter: error: {exc}", file=sys.stderr)
        return 2
