"""`model train` and `model export` (build.run_train, build.run_export) on `tiny`, 30 steps.

Three runs of one recipe (global batch 16) are shared by the module: one process (as `build`
trains), two replicas in one process (`--strategy mirrored --devices 2`, through the CLI), and two
workers of which one is SIGKILLed after the first checkpoint. Measured: the two-replica loss
curves stay within 1.7e-5 nats of the one-process curve (the replicas' XLA gradients and the
all-reduce add in another order), held to LOSS_TOLERANCE; the killed and resumed run ends with
exactly the weights of the unbroken two-replica run, held to WEIGHT_TOLERANCE.
"""

from __future__ import annotations

import base64
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx
import numpy as np
import pytest

from serving.model.build import run_export, run_train
from serving.model.metrics import PFX
from serving.model.settings import ExportSettings, TrainSettings
from stack.cli import main as tokenpulse
from tests.support.modelserver import running_modelserver
from tokenpulse.procs import free_port
from tokenpulse.tfserving import signature as sig

if TYPE_CHECKING:
    import tensorflow as tf

STEPS, EVERY = 30, 5  # the kill comes after the first checkpoint, with the run held
LOSS_TOLERANCE = 5e-4  # nats; measured 1.7e-5 at most
WEIGHT_TOLERANCE = 1e-6  # measured 0.0: the same steps on the same data, bit for bit
NLL_TOLERANCE = 1e-4
# fixed prompts and seeds: greedy, and sampled with each filter
ROWS = [
    ("The assert statement", 0.0, 0, 1.0, 0),
    ("Return the number of", 0.9, 0, 1.0, 7),
    ("If the argument is", 1.0, 20, 1.0, 11),
    ("This module provides", 0.8, 0, 0.9, 3),
]


def _settings(run_dir: Path, **kw: Any) -> TrainSettings:
    # every run shares one XLA cache: the killed run's first attempt loads the compiled step
    values: dict[str, Any] = {"preset": "tiny", "steps": STEPS, "checkpoint_every": EVERY,
                              "cache_dir": run_dir.parent, "progress": False}  # fmt: skip
    return TrainSettings(run_dir=run_dir, **{**values, **kw})


def _losses(run_dir: Path) -> dict[int, float]:
    """Step -> training loss from the run's TensorBoard events (a redone step: its last value)."""
    import tensorflow as tf

    found = {}
    for path in sorted((run_dir / "tensorboard").glob("events.out.*")):
        for event in tf.compat.v1.train.summary_iterator(str(path)):
            for value in event.summary.value:
                if value.tag == "train/loss":
                    found[event.step] = float(tf.make_ndarray(value.tensor))
    return found


def _weights(run_dir: Path) -> dict[str, np.ndarray]:
    """The newest checkpoint's model weights by name."""
    import tensorflow as tf

    directory = str(run_dir / "checkpoints")
    reader = tf.train.load_checkpoint(directory)
    names = [n for n, _ in tf.train.list_variables(directory) if n.startswith("model/")]
    return {n: reader.get_tensor(n) for n in names}


@pytest.fixture(scope="module")
def one_process(tmp_path_factory: pytest.TempPathFactory) -> Path:
    run_dir = tmp_path_factory.mktemp("one")
    run_train(_settings(run_dir, keep_checkpoints=2))
    return run_dir


@pytest.fixture(scope="module")
def mirrored(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two replicas on the CPU split in two (its own process: devices are fixed at start-up)."""
    run_dir = tmp_path_factory.mktemp("mirrored")
    argv = [sys.executable, "-m", "stack.cli", "model", "train", "--preset", "tiny",
            "--steps", str(STEPS), "--checkpoint-every", str(EVERY), "--run-dir", str(run_dir),
            "--strategy", "mirrored", "--devices", "2", "--no-progress"]  # fmt: skip
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert json.loads(proc.stdout)["replicas"] == 2
    return run_dir


@pytest.fixture(scope="module")
def killed(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Two workers; worker 1 is SIGKILLed once the first checkpoint is written."""
    run_dir = tmp_path_factory.mktemp("killed")
    port = free_port()
    settings = _settings(run_dir, workers=2, metrics_port=port)
    out: dict[str, Any] = {"run_dir": run_dir, "lines": [], "pages": []}

    def run() -> None:
        out["report"] = run_train(settings, say=out["lines"].append)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    first = run_dir / "checkpoints" / f"ckpt-{EVERY}.index"
    deadline = time.monotonic() + 240
    while not first.exists() and thread.is_alive() and time.monotonic() < deadline:
        time.sleep(0.02)
    pids = json.loads((run_dir / "workers.json").read_text())
    assert pids["attempt"] == 0, "the first attempt ended before the kill"
    # Stopped, a worker holds the other in its next all-reduce, which waits outside the GIL: the
    # waiting one serves its page, and the run cannot end before the kill, however slow the box.
    chief, other = pids["pids"]["0"], pids["pids"]["1"]
    os.kill(chief, signal.SIGSTOP)
    pages = {1: httpx.get(f"http://127.0.0.1:{port + 1}/metrics", timeout=30).text}
    os.kill(other, signal.SIGSTOP)
    os.kill(chief, signal.SIGCONT)
    pages[0] = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=30).text
    out["pages"] = [pages[0], pages[1]]
    os.kill(other, signal.SIGKILL)
    thread.join(timeout=300)
    return out


def test_one_process_trains_as_build_does_and_keeps_the_newest_checkpoints(
    one_process: Path, tmp_path: Path
) -> None:
    from serving.model import checkpoints, train
    from serving.model.loop import recipe
    from serving.model.tokenizer import read_spec
    from serving.model.transformer import GPT

    names = sorted(p.name for p in (one_process / "checkpoints").glob("ckpt-*.index"))
    assert names == ["ckpt-25.index", "ckpt-30.index"]  # every 5 steps, the newest 2 kept
    preset = recipe(_settings(one_process))
    state = checkpoints.read_state(str(one_process / "checkpoints" / "ckpt-30"))
    assert state == {"step": STEPS, "preset": "tiny", "fingerprint": preset.fingerprint()}
    reference = GPT(preset.model, seed=preset.train.seed)  # bit for bit what `build` trains
    _, spec = train.train(reference, preset, tmp_path, progress=False, histogram_every=0)
    trained = GPT(preset.model)
    checkpoints.load_weights(trained, str(one_process / "checkpoints" / "ckpt-30"))
    assert read_spec(str(one_process / "checkpoints" / "ckpt-30")) == spec  # the same vocabulary
    for want, got in zip(reference.trainable_variables, trained.trainable_variables, strict=True):
        np.testing.assert_array_equal(got.numpy(), want.numpy())


def test_a_finished_run_resumes_at_its_data_position_and_refuses_another_recipe(
    one_process: Path,
) -> None:
    from serving.model import checkpoints

    first = json.loads((one_process / "report.json").read_text())
    again = run_train(_settings(one_process, keep_checkpoints=2))
    assert again["resumed_from_step"] == STEPS and first["resumed_from_step"] == 0
    # the held-out windows are drawn after training's: the same only if the generator resumed
    assert again["held_out_bits_per_byte"] == first["held_out_bits_per_byte"]
    with pytest.raises(checkpoints.CheckpointError, match="another recipe"):
        run_train(_settings(one_process, steps=STEPS + 1))


def test_two_replicas_follow_the_one_process_loss_curve(
    one_process: Path, mirrored: Path, killed: dict[str, Any]
) -> None:
    one = _losses(one_process)
    assert sorted(one) == list(range(STEPS)) and one[STEPS - 1] < one[0] - 1.0  # it learned
    for run_dir in (mirrored, killed["run_dir"]):
        two = _losses(run_dir)
        assert sorted(two) == list(range(STEPS)), run_dir
        gaps = [abs(one[i] - two[i]) for i in range(STEPS)]
        assert max(gaps) < LOSS_TOLERANCE, (run_dir, gaps)
    # only the chief writes TensorBoard and logs its steps at INFO
    logs = [(killed["run_dir"] / "logs" / f"worker-{i}.log").read_text() for i in (0, 1)]
    assert '"message": "step"' in logs[0] and '"message": "step"' not in logs[1]
    assert not (killed["run_dir"] / "workers" / "1").exists()  # worker 1's scratch checkpoints


def test_a_killed_worker_costs_at_most_k_steps_and_no_accuracy(
    mirrored: Path, killed: dict[str, Any]
) -> None:
    lines = killed["lines"]
    assert killed.get("report", {}).get("restarts") == 1, lines
    assert any("worker 1" in line and "killed by signal 9" in line for line in lines), lines
    assert any(line.startswith("restart 1/3 from ckpt-") for line in lines), lines
    assert killed["report"]["resumed_from_step"] >= EVERY  # from a checkpoint, not the start
    want, got = _weights(mirrored), _weights(killed["run_dir"])
    assert want.keys() == got.keys() and len(want) > 10
    worst = max(float(np.abs(want[k] - got[k]).max()) for k in want)
    assert worst < WEIGHT_TOLERANCE, worst


def test_every_worker_served_its_metrics_with_its_role(killed: dict[str, Any]) -> None:
    for index, (page, role) in enumerate(zip(killed["pages"], ("chief", "worker"), strict=True)):
        assert f'{PFX}worker_info{{role="{role}",worker="{index}"}} 1.0' in page
        step = next(ln for ln in page.splitlines() if ln.startswith(f"{PFX}global_step "))
        assert float(step.split()[1]) >= EVERY


def _rows() -> list[dict[str, Any]]:
    rows = []
    for prompt, temperature, top_k, top_p, seed in ROWS:
        row = sig.default_row(prompt, 16)
        row.update(temperature=temperature, top_k=top_k, top_p=top_p, seed=seed)
        rows.append(row)
    return rows


def _continue_rows() -> list[dict[str, Any]]:
    """Each row resumed 3 bytes in, for a chunk of 6."""
    out = []
    for row in _rows():
        resumed = sig.continue_row(row["prompt"], b"the", 6, 16)
        resumed.update({k: row[k] for k in ("temperature", "top_k", "top_p", "seed")})
        out.append(resumed)
    return out


def _tensors(rows: list[dict[str, Any]], names: dict[str, str]) -> dict[str, tf.Tensor]:
    import tensorflow as tf

    def value(v: Any) -> Any:
        return base64.b64decode(v["b64"]) if isinstance(v, dict) else v

    return {n: tf.constant([value(r[n]) for r in rows], tf.as_dtype(k)) for n, k in names.items()}


def _in_process(prefix: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """serving_default and a `continue` chunk of the checkpoint's own model, in this process."""
    from serving.model import checkpoints
    from serving.model.generate import Generator
    from serving.model.loop import recipe
    from serving.model.tokenizer import bpe_vocab, read_spec
    from serving.model.transformer import GPT

    model = GPT(recipe(TrainSettings(preset="tiny")).model)
    checkpoints.load_weights(model, prefix)
    spec = read_spec(prefix)
    assert spec is not None  # the vocabulary travels in the checkpoint
    generator = Generator(model, bpe_vocab(spec))
    full = generator.serve(**_tensors(_rows(), sig.INPUTS))
    chunk = generator.continue_chunk(**_tensors(_continue_rows(), sig.CONTINUE_INPUTS))
    return {k: v.numpy() for k, v in full.items()}, {k: v.numpy() for k, v in chunk.items()}


def test_an_exported_checkpoint_serves_what_the_checkpoint_generates(
    killed: dict[str, Any], tmp_path: Path
) -> None:
    base = tmp_path / "gen"
    settings = ExportSettings(
        checkpoint="latest", run_dir=killed["run_dir"], base_path=base, version=2,
        warmup_batch_sizes=[1],
    )  # fmt: skip
    done = run_export(settings)
    assert str(done["checkpoint"]).endswith(f"ckpt-{STEPS}") and done["step"] == STEPS
    full, chunk = _in_process(str(done["checkpoint"]))
    with running_modelserver(base, enable_batching=False) as server:
        url = f"{server.rest_url}/v1/models/gen/versions/2:predict"
        served = httpx.post(url, json={"instances": _rows()}, timeout=120).json()["predictions"]
        body = {"signature_name": sig.CONTINUE_SIGNATURE_NAME, "instances": _continue_rows()}
        resumed = httpx.post(url, json=body, timeout=120).json()["predictions"]
    assert len(served) == len(resumed) == len(ROWS)
    for i, row in enumerate(served):
        assert row["text"] == full["text"][i].decode(), i  # token for token
        assert row["output_tokens"] == full["output_tokens"][i] > 0
        assert row["mean_nll"] == pytest.approx(float(full["mean_nll"][i]), abs=NLL_TOLERANCE)
    for i, row in enumerate(resumed):
        n = int(chunk["n_tokens"][i])
        assert row["n_tokens"] == n and row["tokens"][:n] == chunk["tokens"][i][:n].tolist()
        assert row["nll_sum"] == pytest.approx(float(chunk["nll_sum"][i]), abs=NLL_TOLERANCE)
    assert len({r["text"] for r in served}) > 1  # the rows differ: nothing is answered blindly


def test_bad_input_is_one_line_not_a_traceback(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert tokenpulse(["model", "train", "--workers", "0"]) == 2
    assert "--workers (env TOKENPULSE_MODEL_WORKERS): Input should be greater" in (
        capsys.readouterr().err
    )
    export = ["model", "export", "--base-path", str(tmp_path / "gen"), "--version", "1"]
    assert tokenpulse([*export, "--checkpoint", "latest", "--run-dir", str(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert err == f"tokenpulse model export: error: no checkpoints in {tmp_path / 'checkpoints'}\n"
    assert tokenpulse([*export, "--checkpoint", str(tmp_path / "ckpt-9")]) == 1
    assert capsys.readouterr().err.endswith(f"no checkpoint at {tmp_path / 'ckpt-9'}\n")
