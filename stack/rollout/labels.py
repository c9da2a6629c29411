"""Version labels in the models.config the model server and the gateway poll, with a history.

Moving a label rewrites the file (atomically, the rest of it unchanged): TF Serving's
`--model_config_file_poll_wait_seconds` poll applies it on the stock image and on ours, and the
gateway, which routes by the same file, re-reads it at its next status poll. The label's earlier
versions are kept in one comment line of the file's header, so `rollback` knows where stable was
before, wherever the file lives, and the model server and gateway ignore it.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from tokenpulse.atomic import atomic_write
from tokenpulse.tfserving.config import (
    ModelConfig,
    ModelServerConfig,
    VersionPolicy,
    load_model_server_config,
)
from tokenpulse.tfserving.errors import ConfigError
from tokenpulse.tfserving.render import render

HISTORY_PREFIX = "# tokenpulse rollout history: "
HISTORY_KEEP = 20  # earlier versions kept per label

History = dict[str, dict[str, list[int]]]  # model -> label -> earlier versions, oldest first


class RolloutError(Exception):
    """A rollout step that cannot be done; the message is the one line the user sees."""


@dataclasses.dataclass
class ModelsConfig:
    """A models.config file: the parsed config, its header comments and the label history."""

    path: Path
    config: ModelServerConfig
    header: list[str]
    history: History

    @classmethod
    def read(cls, path: Path) -> ModelsConfig:
        """Parse and check the file as TF Serving would; its header and history."""
        try:
            config = load_model_server_config(path)
        except ConfigError as exc:
            raise RolloutError(str(exc)) from exc
        header, history = [], {}
        for line in path.read_text(encoding="utf-8").splitlines():
            if line.startswith(HISTORY_PREFIX):
                history = _parse_history(line.removeprefix(HISTORY_PREFIX))
            elif line.startswith("#") or not line.strip():
                header.append(line)
            else:
                break
        return cls(path, config, header, history)

    def labels(self, model: str) -> dict[str, int]:
        """The model's labels as the file has them."""
        return dict(self._model(model).version_labels)

    def earlier(self, model: str, label: str) -> list[int]:
        """Versions the label pointed at before, oldest first."""
        return list(self.history.get(model, {}).get(label, []))

    def move(self, model: str, label: str, version: int, *, remember: bool = True) -> int | None:
        """Point `label` at `version`; the version it left (None: new label). `remember` keeps
        that version in the history (a rollback takes it off instead)."""
        entry = self._model(model)
        old = entry.version_labels.get(label)
        labels = {**entry.version_labels, label: version}
        models = tuple(
            dataclasses.replace(m, version_labels=labels) if m.name == model else m
            for m in self.config.models
        )
        self.config = dataclasses.replace(self.config, models=models)
        past = self.history.setdefault(model, {}).setdefault(label, [])
        if remember and old is not None and old != version:
            past.append(old)
            del past[:-HISTORY_KEEP]
        return old

    def serve(self, model: str, versions: list[int]) -> None:
        """Serve exactly `versions` (TF Serving's `specific` policy); a labelled version stays."""
        entry = self._model(model)
        kept = {v for v in entry.version_labels.values() if v not in versions}
        if kept:
            labels = ", ".join(f"{k} -> {v}" for k, v in sorted(entry.version_labels.items()))
            raise RolloutError(
                f"labels point at versions the list leaves out ({labels}): move them first"
            )
        policy = VersionPolicy("specific", versions=tuple(sorted(set(versions))))
        models = tuple(
            dataclasses.replace(m, version_policy=policy) if m.name == model else m
            for m in self.config.models
        )
        self.config = dataclasses.replace(self.config, models=models)

    def forget_last(self, model: str, label: str) -> None:
        """Drop the newest history entry of a label (the one a rollback went back to)."""
        past = self.history.get(model, {}).get(label, [])
        if past:
            past.pop()

    def write(self) -> None:
        """Replace the file atomically, keeping its mode (a poller never reads half a file)."""
        history = {m: {k: v for k, v in ls.items() if v} for m, ls in self.history.items()}
        history = {m: ls for m, ls in history.items() if ls}
        header = "".join(f"{line}\n" for line in self.header)
        if history:
            header += f"{HISTORY_PREFIX}{json.dumps(history, sort_keys=True)}\n"
        text = render(self.config, header)
        try:
            atomic_write(self.path, text)
        except OSError as exc:
            raise RolloutError(f"cannot write {self.path}: {exc.strerror}") from exc

    def _model(self, model: str) -> ModelConfig:
        for m in self.config.models:
            if m.name == model:
                return m
        names = ", ".join(m.name for m in self.config.models) or "none"
        raise RolloutError(f"model {model!r} is not in {self.path} (models: {names})")


def _parse_history(text: str) -> History:
    try:
        doc = json.loads(text)
        return {
            str(m): {str(k): [int(v) for v in vs] for k, vs in labels.items()}
            for m, labels in doc.items()
        }
    except (ValueError, TypeError, AttributeError):
        return {}  # a hand-edited line: start a new history rather than refuse to roll out
