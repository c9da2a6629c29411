"""`tokenpulse modelserver`: tensorflow_model_server's flags, generated from ModelServerSettings.

Flags keep TF Serving's spellings (`--rest_api_port=8501`, `--enable_batching`,
`--enable_batching=false`); each is also `TOKENPULSE_MODELSERVER_<FLAG>`, and a flag beats its
env var.
"""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from tokenpulse.settings_cli import TF, add_settings_arguments
from tokenpulse.settings_cli import settings_from_args as _build

if TYPE_CHECKING:
    from serving.modelserver.settings import ModelServerSettings


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """One flag per ModelServerSettings field, named as tensorflow_model_server names it."""
    from serving.modelserver.settings import ModelServerSettings

    add_settings_arguments(parser, ModelServerSettings, style=TF)


def settings_from_args(args: argparse.Namespace) -> ModelServerSettings:
    """Flags given on the command line over `TOKENPULSE_MODELSERVER_*` env vars."""
    from serving.modelserver.settings import ModelServerSettings

    settings: ModelServerSettings = _build(ModelServerSettings, args)
    return settings


def main(args: argparse.Namespace) -> int:
    """Build the settings (flags over env vars), then serve until a signal."""
    from tokenpulse.logging import configure_logging, get_logger

    settings = settings_from_args(args)
    configure_logging("modelserver", settings.log_level)
    from serving.modelserver.server import StartupError, run

    try:
        run(settings)
    except StartupError as exc:
        get_logger(__name__).error("model server failed to start", error=str(exc))
        print(f"tokenpulse modelserver: {exc}", file=sys.stderr)
        return 1
    return 0
