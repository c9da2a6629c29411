"""`promql`: evaluate dashboard PromQL on given series with the real promtool."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

PromqlTest = Callable[..., None]


@pytest.fixture
def promql(tmp_path: Path) -> PromqlTest:
    """Run promtool's promql_expr_test: input series (`interval` apart) and expected samples."""
    if shutil.which("promtool") is None:
        pytest.skip("promtool not installed")

    def check(series: list[dict], cases: list[dict], interval: str = "1m") -> None:
        (tmp_path / "empty.rules.yml").write_text("groups: []\n")
        test = {
            "rule_files": ["empty.rules.yml"],
            "evaluation_interval": "1m",
            "tests": [{"interval": interval, "input_series": series, "promql_expr_test": cases}],
        }
        (tmp_path / "t.yml").write_text(yaml.safe_dump(test))
        out = subprocess.run(
            ["promtool", "test", "rules", "t.yml"],
            capture_output=True, text=True, timeout=60, cwd=tmp_path,
        )  # fmt: skip
        assert out.returncode == 0, out.stdout + out.stderr

    return check
