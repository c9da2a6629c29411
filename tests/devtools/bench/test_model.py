"""`tokenpulse bench model` runs end to end on the tiny preset, with or without keras_hub."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.models import cache_root, cached_export
from tests.support.scheduling import COMPUTING_TEST_TIMEOUT_S, COMPUTING_TIMEOUT_S


@pytest.mark.slow
@pytest.mark.timeout(COMPUTING_TEST_TIMEOUT_S)
def test_without_keras_hub_it_says_how_to_install_it_and_measures_tokenpulse(tmp_path: Path):
    cached_export("normal")  # trains the tiny checkpoint the held-out figures read
    # a keras_hub that fails to import exactly as a missing one does
    (tmp_path / "keras_hub.py").write_text(
        "raise ModuleNotFoundError(\"No module named 'keras_hub'\", name='keras_hub')\n"
    )
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(tmp_path), os.getcwd()]))
    done = subprocess.run(
        [sys.executable, "-m", "stack.cli", "bench", "model", "--preset", "tiny",
         "--repeats", "1", "--json", "--cache-dir", str(cache_root())],
        capture_output=True, text=True, timeout=COMPUTING_TIMEOUT_S, env=env,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    assert "pip install 'tokenpulse[bench-model]'" in done.stderr
    report = json.loads(done.stdout)
    assert list(report["runs"]) == ["tokenpulse"] and "bench-model" in report["keras_hub"]
    run = report["runs"]["tokenpulse"]
    assert set(run["tokens_per_s"]) == {"1", "8", "32"}
    assert all(v > 0 for v in run["tokens_per_s"].values())
    assert 0 < run["fraction_of_matmul_peak"] and report["matmul_peak_flop_per_s"] > 0
    ops = run["ops_per_decode_step"]
    assert 0 < ops["greedy_batch1"] < ops["sampled_batch1"]  # greedy skips the sampling ops
    assert "ratio_tokenpulse_over_keras_hub" not in report
    held = report["held_out"]  # the suite's tiny build's checkpoint
    assert held["bits_per_byte"] == pytest.approx(
        held["bits_per_token"] / held["bytes_per_token"], rel=1e-3
    )
    assert 1.3 < held["bytes_per_token"] and 0 < held["bits_per_token"] < 9.0


@pytest.mark.timeout(COMPUTING_TEST_TIMEOUT_S)
def test_a_preset_dir_is_timed_against_keras_hub_on_the_same_weights_side_by_side() -> None:
    from tests.support.hub import cached_gpt2_import, cached_gpt2_preset

    preset, export = cached_gpt2_preset(), cached_gpt2_import()  # `--export`: no second import
    done = subprocess.run(
        [sys.executable, "-m", "stack.cli", "bench", "model", "--preset-dir", str(preset),
         "--export", str(export), "--repeats", "1", "--json"],
        capture_output=True, text=True, timeout=COMPUTING_TIMEOUT_S,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout)
    assert list(report["runs"]) == ["tokenpulse export", "keras_hub generate (XLA)"]
    for run in report["runs"].values():
        assert set(run["tokens_per_s"]) == {"1", "8", "32"}
        assert all(v > 0 for v in run["tokens_per_s"].values())  # measured, not copied
        assert {"decode_ms_per_step_early", "decode_ms_per_step_late"} <= set(run)
    ratio = report["ratio_export_over_keras_hub"]
    assert set(ratio) == {f"tokens_per_s_batch{n}" for n in (1, 8, 32)}
    assert all(v > 0 for v in ratio.values())
    assert report["export_decode_step_graph_nodes"] > 0
    assert (report["limits"] is None) == (min(ratio.values()) >= 1)  # said where it is slower


def test_an_export_of_another_preset_is_refused_in_one_line(tmp_path: Path) -> None:
    from tests.support.hub import cached_gpt2_preset

    export = tmp_path / "1"
    (export / "assets.extra").mkdir(parents=True)
    (export / "assets.extra" / "tokenpulse_model.json").write_text('{"model": {"context": 64}}')
    done = subprocess.run(
        [sys.executable, "-m", "stack.cli", "bench", "model", "--preset-dir",
         str(cached_gpt2_preset()), "--export", str(export)],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert done.stderr.strip().splitlines()[-1].startswith("bench model: error: ")
    assert "is not an import of" in done.stderr


@pytest.mark.slow  # the bench end to end: `make test`, not the inner loop
def test_a_grouped_query_preset_gets_a_multi_head_arm_for_the_keras_hub_ratios() -> None:
    from dataclasses import replace

    from devtools.bench.model import multi_head
    from serving.model.config import get_preset

    tiny = get_preset("tiny").model
    assert tiny.n_kv_heads == tiny.n_heads and multi_head(tiny) is None  # already keras_hub's
    arm = multi_head(replace(tiny, n_kv_heads=1))
    assert arm is not None and arm.name == "tokenpulse multi-head" and arm.ops_per_step is None
    arm.generate(2, 4, 3)  # it generates: raises unless every row made its 3 tokens
