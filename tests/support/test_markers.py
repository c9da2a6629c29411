"""The `stack` and `training` markers come from what a test and its fixtures call."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests import conftest
from tests.stack import conftest as stack_conftest
from tests.support.markers import earned


def _starts_a_stack(workdir: Path) -> None:
    from devtools.stack import running_stack

    with running_stack(workdir, workdir):
        pass


def _trains(workdir: Path) -> None:
    from tests.support.models import cached_export

    cached_export("normal")


def _trains_through_the_cli_over_lines(workdir: Path) -> None:
    import subprocess
    import sys

    subprocess.run(
        [
            sys.executable, "-m", "stack.cli", "model",
            "train", "--preset", "tiny", f"--run-dir={workdir}",
        ],
        check=True,
    )  # fmt: skip


def _does_neither(workdir: Path) -> None:
    workdir.mkdir()


def test_each_kind_is_earned_by_its_own_calls_only() -> None:
    assert earned([_starts_a_stack]) == {"stack"}
    assert earned([_trains]) == {"training"}
    # the call split over lines, as a formatter writes a long argv (test_worker.py's was missed)
    assert earned([_trains_through_the_cli_over_lines]) == {"training"}
    assert earned([_does_neither]) == set()
    assert earned([_does_neither, _starts_a_stack, _trains]) == {"stack", "training"}


def test_the_suites_stack_and_model_fixtures_earn_their_markers() -> None:
    assert earned([conftest.shared_stack]) == {"stack"}
    assert earned([stack_conftest.drill_stack]) == {"stack"}
    assert earned([conftest.tiny_export]) == earned([conftest.tiny_degraded_export]) == {"training"}


def test_collection_marks_a_test_through_its_fixtures(
    request: pytest.FixtureRequest, model_base: Path
) -> None:
    # model_base -> tiny_export -> cached_export: training, two fixtures away
    assert request.node.get_closest_marker("training") is not None
    assert request.node.get_closest_marker("stack") is None


def test_a_test_without_either_is_left_unmarked(request: pytest.FixtureRequest) -> None:
    assert {m.name for m in request.node.iter_markers()} & {"stack", "training"} == set()
