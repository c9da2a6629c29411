"""Read a keras_hub preset directory (never the network): which task it is, and the model."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

PRESET_FILES = ("config.json", "metadata.json")
TASK_FILE = "task.json"


class PresetError(ValueError):
    """The directory is no local keras_hub causal-LM preset we can import."""


def _task_class(path: Path) -> str:
    """The task's class name from `task.json`, without importing keras_hub."""
    if not path.exists():
        raise PresetError(f"{path} does not exist")
    if not path.is_dir():
        raise PresetError(f"{path} is not a directory (a keras_hub preset is one)")
    missing = [name for name in PRESET_FILES if not (path / name).is_file()]
    if missing:
        raise PresetError(f"{path} is not a keras_hub preset: no {', '.join(missing)}")
    task = path / TASK_FILE
    if not task.is_file():
        raise PresetError(f"{path} holds a backbone only (no {TASK_FILE}): not a causal LM")
    try:
        return str(json.loads(task.read_text())["class_name"])
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise PresetError(f"{task} is unreadable: {exc}") from exc


def check_preset(path: Path) -> str:
    """The task class a causal-LM preset directory holds (PresetError when it holds none),
    read from its files alone: a process that only plans, such as `tokenpulse up`, checks a
    preset without importing keras_hub or TensorFlow."""
    return _task_class(path)


def load_causal_lm(path: Path, supported: tuple[str, ...]) -> Any:
    """The preset's causal LM (weights, preprocessor and tokenizer), if its class is supported."""
    name = _task_class(path)
    if name not in supported:
        raise PresetError(
            f"{path} is a {name} preset; importable causal LMs: {', '.join(supported)}"
        )
    import keras_hub

    try:
        model = keras_hub.models.CausalLM.from_preset(str(path))
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise PresetError(f"{path} does not load as a keras_hub preset: {exc}") from exc
    if model.preprocessor is None or model.preprocessor.tokenizer is None:
        raise PresetError(f"{path} has no tokenizer: the export needs one in the graph")
    return model
