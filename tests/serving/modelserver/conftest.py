"""Live model servers shared by this directory's tests (each start costs a few seconds)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.models import install_version
from tests.support.modelserver import ModelServerProcess, running_modelserver

SHARED_BATCHING = """
max_batch_size { value: 32 }
batch_timeout_micros { value: 5000 }
num_batch_threads { value: 1 }
"""


def write_config(path: Path, body: str) -> Path:
    """A models.config with the given model_config_list body."""
    path.write_text(f"model_config_list {{\n{body}\n}}\n")
    return path


def model_entry(
    name: str, base: Path, policy: str = "", labels: dict[str, int] | None = None
) -> str:
    """One `config { ... }` block."""
    label_text = " ".join(
        f"version_labels {{ key: '{k}' value: {v} }}" for k, v in (labels or {}).items()
    )
    return (
        f"config {{ name: '{name}' base_path: '{base}' model_platform: 'tensorflow' "
        f"{policy} {label_text} }}"
    )


@pytest.fixture(scope="session")
def two_versions(tmp_path_factory: pytest.TempPathFactory, tiny_export: Path) -> Path:
    """A base path holding versions 1 and 2 of the tiny model."""
    base = tmp_path_factory.mktemp("two") / "gen"
    install_version(tiny_export, base, 1)
    install_version(tiny_export, base, 2)
    return base


@pytest.fixture(scope="session")
def server(
    tmp_path_factory: pytest.TempPathFactory, two_versions: Path
) -> Iterator[ModelServerProcess]:
    """Batching on; `gen` serves versions 1 and 2 with labels stable=1, canary=2."""
    config = write_config(
        tmp_path_factory.mktemp("cfg") / "models.config",
        model_entry(
            "gen", two_versions, "model_version_policy { all {} }", {"stable": 1, "canary": 2}
        ),
    )
    with running_modelserver(
        config_file=config, batching_parameters=SHARED_BATCHING, file_system_poll_wait_seconds=0
    ) as proc:
        yield proc
