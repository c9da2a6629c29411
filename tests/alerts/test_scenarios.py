"""Every row of the scenario table (alerts/README.md, "Scenarios") is a promtool test that passes,
and every row names a test that exists."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest
import yaml

from tests.alerts.test_promtool import ALERTS, TEST_FILES, promtool_test

SCENARIO_FILES = [p for p in TEST_FILES if p.name.startswith("scenarios_")]

pytestmark = pytest.mark.skipif(shutil.which("promtool") is None, reason="promtool not installed")


# hours to days of evaluation each (~40 CPU-s together): `make test`, not the inner loop, which
# keeps the per-component files (tests/alerts/test_promtool.py)
@pytest.mark.slow
@pytest.mark.parametrize("path", SCENARIO_FILES, ids=lambda p: p.name.split(".")[0])
def test_scenario_file_passes(path: Path, tmp_path: Path) -> None:
    promtool_test(path, tmp_path)


def _rows() -> list[tuple[str, str, str]]:
    """(row id, test file stem, test name) of each row of the Scenarios table."""
    text = (ALERTS / "README.md").read_text()
    section = text[text.index("## Scenarios") :]
    return re.findall(r"^\| (\w+) \|.*\| `(scenarios_\w+)`: (\w+) \|$", section, re.M)


def test_every_scenario_row_names_a_test_that_exists() -> None:
    rows = _rows()
    assert len(rows) >= 40, "the Scenarios table lost its rows (or its format)"
    names: dict[str, set[str]] = {}
    for path in SCENARIO_FILES:
        doc = yaml.safe_load(path.read_text())
        names[path.name.split(".")[0]] = {
            str(t.get("name", "")).split()[0] for t in doc["tests"] if t.get("name")
        }
    missing = [(row, stem, name) for row, stem, name in rows if name not in names.get(stem, set())]
    assert missing == []
