"""Which models the exporter watches: given on the command line, or TF Serving's model config.

The `--model_config_file` is read with the shared TF Serving parser and checked as TF Serving
checks it, so the exporter accepts exactly the files the model server accepts.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from tokenpulse.logging import get_logger
from tokenpulse.tfserving.config import ModelConfig, load_model_server_config
from tokenpulse.tfserving.errors import ConfigError

# Bound here too: contextvars bound in main() do not reach the exporter's threads.
log = get_logger(__name__).bind(component="exporter")


@dataclass(frozen=True)
class ModelEntry:
    """What the exporter needs of one served model."""

    name: str
    base_path: Path | None  # None: unknown (no config file, no --model-base-path)
    labels: dict[str, int]
    versions: tuple[int, ...] = ()  # versions the config names (labels, specific policy)

    @classmethod
    def from_config(cls, config: ModelConfig) -> ModelEntry:
        """The entry of one `config { ... }` of a model config file."""
        named = set(config.version_labels.values())
        if config.version_policy is not None and config.version_policy.choice == "specific":
            named |= set(config.version_policy.versions)
        return cls(
            config.name, Path(config.base_path), dict(config.version_labels), tuple(sorted(named))
        )


def load_model_entries(path: Path) -> list[ModelEntry]:
    """The served models of a model config file; ConfigError names the file and line."""
    return [ModelEntry.from_config(m) for m in load_model_server_config(path).models]


class StaticTargets:
    """Models given on the command line (no config file): fixed for the process lifetime."""

    def __init__(self, entries: list[ModelEntry]) -> None:
        self._entries = list(entries)

    def read(self) -> tuple[list[ModelEntry], str | None]:
        """The models, and no error."""
        return list(self._entries), None


class ConfigTargets:
    """Models from TF Serving's `--model_config_file`, re-read whenever the file changes."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._entries = load_model_entries(path)  # a bad file at start-up is fatal
        self._mtime = self._stat()
        self._error: str | None = None

    def _stat(self) -> int | None:
        try:
            return self.path.stat().st_mtime_ns
        except OSError:
            return None

    def read(self) -> tuple[list[ModelEntry], str | None]:
        """The models of the last good version of the file, and why the current one is bad."""
        mtime = self._stat()
        if mtime != self._mtime:
            self._mtime = mtime
            try:
                self._entries = load_model_entries(self.path)
                self._error = None
                log.info("model config reloaded", path=str(self.path), models=len(self._entries))
            except ConfigError as exc:
                self._error = str(exc)
                log.warning("model config unreadable, keeping last good", error=str(exc))
        return list(self._entries), self._error
