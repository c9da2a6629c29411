"""The assertion rewrite ahead of a run splits the test files in two halves of about equal size."""

from __future__ import annotations

from pathlib import Path

from tests.support.rewrite import halves
from tokenpulse.paths import ROOT


def _files(entries: list[Path]) -> list[Path]:
    return [f for e in entries for f in (sorted(e.rglob("test_*.py")) if e.is_dir() else [e])]


def test_every_test_file_is_in_one_half_and_the_halves_are_near_equal() -> None:
    first, second = halves(ROOT / "tests")
    a, b = _files(first), _files(second)
    assert not set(a) & set(b)
    assert set(a) | set(b) == set((ROOT / "tests").rglob("test_*.py"))
    size = [sum(f.stat().st_size for e in half for f in (e.rglob("*.py") if e.is_dir() else [e]))
            for half in (first, second)]  # fmt: skip
    largest = max(sum(f.stat().st_size for f in e.rglob("*.py")) for e in first + second
                  if e.is_dir())  # fmt: skip
    assert abs(size[0] - size[1]) <= largest  # greedy: off by at most one entry


def test_the_largest_goes_first_each_to_the_smaller_half(tmp_path: Path) -> None:
    for name, kb in (("big", 30), ("small", 10), ("mid", 20)):
        (tmp_path / name).mkdir()
        (tmp_path / name / "test_x.py").write_text("#" * kb * 1024)
    (tmp_path / "test_top.py").write_text("#" * 1024)
    (tmp_path / "conftest.py").write_text("#" * 90 * 1024)  # not a test file: not passed
    first, second = halves(tmp_path)
    # big (30 KB) to the first, mid and small to the second (20, then 30), the tie to the first
    assert [p.name for p in first] == ["big", "test_top.py"]
    assert [p.name for p in second] == ["mid", "small"]
