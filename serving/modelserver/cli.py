"""`tokenpulse modelserver`: tensorflow_model_server's flags mapped 1:1 onto ModelServerSettings."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from serving.modelserver.settings import ModelServerSettings


def _bool(text: str) -> bool:
    value = text.strip().lower()
    if value in ("1", "true", "yes", "on"):
        return True
    if value in ("0", "false", "no", "off"):
        return False
    raise argparse.ArgumentTypeError(f"not a boolean: {text!r}")


_FLAGS: list[tuple[str, type | object, str]] = [
    ("port", int, "gRPC port (default 8500)"),
    ("rest_api_port", int, "REST port; 0 disables REST and the metrics page (default 8501)"),
    ("host", str, "address to bind (default 127.0.0.1)"),
    ("rest_api_timeout_in_ms", int, "REST request deadline in ms (default 30000)"),
    ("model_config_file", str, "ModelServerConfig text file (models.config)"),
    ("model_config_file_poll_wait_seconds", float, "re-read the config file every N s (0: never)"),
    ("model_name", str, "model name for the single-model form (default 'default')"),
    ("model_base_path", str, "base path for the single-model form; relative to the cwd"),
    ("file_system_poll_wait_seconds", float, "poll base paths every N s (0: once, <0: never)"),
    ("enable_batching", _bool, "server-wide dynamic batching (default false)"),
    ("batching_parameters_file", str, "BatchingParameters text file"),
    ("monitoring_config_file", str, "MonitoringConfig text file (enables the Prometheus page)"),
    ("enable_model_warmup", _bool, "replay assets.extra warmup records (default true)"),
    ("allow_version_labels_for_unavailable_models", _bool, "labels on unloaded versions"),
    ("log_level", str, "DEBUG, INFO, WARNING or ERROR"),
]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """tensorflow_model_server's flag names; booleans take `--flag`, `--flag=true|false`."""
    for name, kind, help_text in _FLAGS:
        if kind is _bool:
            parser.add_argument(
                f"--{name}", type=_bool, nargs="?", const=True, default=None, help=help_text
            )
        else:
            parser.add_argument(f"--{name}", type=kind, default=None, help=help_text)  # type: ignore[arg-type]


def settings_from_args(args: argparse.Namespace) -> ModelServerSettings:
    """Flags given on the command line override `TOKENPULSE_MODELSERVER_*` env vars."""
    from serving.modelserver.settings import ModelServerSettings

    given = {name: getattr(args, name) for name, _, _ in _FLAGS if getattr(args, name) is not None}
    return ModelServerSettings(**given)


def main(args: argparse.Namespace) -> int:
    """Build the settings (flags over env vars), then serve until a signal."""
    from pydantic import ValidationError

    from tokenpulse.logging import configure_logging, get_logger

    try:
        settings = settings_from_args(args)
    except ValidationError as exc:
        for err in exc.errors():
            where = ".".join(str(p) for p in err["loc"]) or "settings"
            print(f"tokenpulse modelserver: {where}: {err['msg']}", file=sys.stderr)
        return 2
    configure_logging("modelserver", settings.log_level)
    from serving.modelserver.server import StartupError, run

    try:
        run(settings)
    except StartupError as exc:
        get_logger(__name__).error("model server failed to start", error=str(exc))
        print(f"tokenpulse modelserver: {exc}", file=sys.stderr)
        return 1
    return 0
