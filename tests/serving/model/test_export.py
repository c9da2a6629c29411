"""The exported version directory: servable ops, warmup records, golden canaries, degradation."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from serving.model import bpe, opcheck
from serving.model.config import get_preset
from tokenpulse.tfserving import signature as sig
from tokenpulse.tfserving.ops import TF_TEXT_OPS

_SPEC = bpe.BpeSpec(get_preset("tiny").model.vocab_size, ())  # no merges: refused before use


def test_export_uses_only_ops_the_stock_server_runs(tiny_export: Path) -> None:
    ops = opcheck.saved_model_ops(tiny_export)
    assert "While" in ops or "StatelessWhile" in ops  # generation loop is in the graph
    assert opcheck.unservable_ops(tiny_export) == {}


@pytest.mark.parametrize("name", [sig.SIGNATURE_NAME, sig.CONTINUE_SIGNATURE_NAME])
def test_each_signature_runs_its_own_generation_loop_on_core_ops_and_tf_text(
    tiny_export: Path, name: str
) -> None:
    ops = opcheck.signature_ops(tiny_export)[name]
    assert {"While", "TensorStridedSliceUpdate"} <= ops  # the generation loop, the KV cache
    assert ops & TF_TEXT_OPS == {"RegexSplitWithOffsets"}  # the tokenizer's word split
    assert {op: why for op in ops if (why := opcheck.unservable_reason(op))} == {}


# A process with TensorFlow and TF.Text's ops only, as `tensorflow_model_server` is: the version
# loads in a TF1 session as the server loads it and answers; no Python of ours is imported, nor
# TF.Text's Python package (which would import Keras too).
_TF_TEXT_ONLY = """
import importlib.util, json, pathlib, sys
import numpy as np
import tensorflow as tf
# TF.Text's kernel libraries, which the stock server links in; not its Python package
package = pathlib.Path(importlib.util.find_spec("tensorflow_text").submodule_search_locations[0])
for library in sorted((package / "python" / "ops").glob("_*.so")):
    tf.load_op_library(str(library))
path, rows = sys.argv[1], json.loads(sys.argv[2])
with tf.Graph().as_default(), tf.compat.v1.Session() as session:
    meta = tf.compat.v1.saved_model.loader.load(session, ["serve"], path)
    signature = meta.signature_def["serving_default"]
    feed = {
        info.name: np.array(
            [row[name] for row in rows], tf.dtypes.as_dtype(info.dtype).as_numpy_dtype
        )
        for name, info in signature.inputs.items()
    }
    out = session.run({"text": signature.outputs["text"].name}, feed)
ours = sorted(
    m for m in sys.modules
    if m.split(".")[0] in ("serving", "tokenpulse", "tokenizers", "tensorflow_text")
)
print(json.dumps({"text": [t.decode() for t in out["text"]], "ours": ours}))
"""


def test_the_export_answers_in_a_process_with_tf_text_ops_only(
    tiny_export: Path, tiny_loaded: Any
) -> None:
    import tensorflow as tf

    prompts = ["The model server", "用户：你好<|endofturn|>\n客服："]
    rows = [sig.default_row(p, 12) for p in prompts]  # greedy
    done = subprocess.run(
        [sys.executable, "-c", _TF_TEXT_ONLY, str(tiny_export), json.dumps(rows)],
        capture_output=True, text=True, timeout=300, cwd=tiny_export,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    got = json.loads(done.stdout.strip().splitlines()[-1])
    assert got["ours"] == []
    fn = tiny_loaded.signatures[sig.SIGNATURE_NAME]
    tensors = {
        k: tf.constant([row[k] for row in rows], tf.as_dtype(sig.INPUTS[k])) for k in rows[0]
    }
    expected = [t.decode() for t in fn(**tensors)["text"].numpy()]
    assert got["text"] == expected and all(expected)


def test_op_check_catches_py_function(tmp_path: Path) -> None:
    import tensorflow as tf

    class Bad(tf.Module):
        @tf.function(input_signature=[tf.TensorSpec([None], tf.string)])
        def serve(self, x):
            return {"y": tf.py_function(lambda t: t, [x], tf.string)}

    bad = Bad()
    tf.saved_model.save(bad, str(tmp_path), signatures={"serving_default": bad.serve})
    assert "EagerPyFunc" in opcheck.unservable_ops(tmp_path)
    assert "EagerPyFunc" in opcheck.signature_ops(tmp_path)["serving_default"]


def test_warmup_records_are_prediction_logs_at_several_batch_sizes(
    tiny_export: Path, tiny_loaded: Any
) -> None:
    import tensorflow as tf
    from tensorflow_serving.apis import prediction_log_pb2

    path = tiny_export / sig.WARMUP_FILE
    sizes: dict[str, list[int]] = {sig.SIGNATURE_NAME: [], sig.CONTINUE_SIGNATURE_NAME: []}
    inputs = {sig.SIGNATURE_NAME: sig.INPUTS, sig.CONTINUE_SIGNATURE_NAME: sig.CONTINUE_INPUTS}
    fn = tiny_loaded.signatures
    for raw in tf.data.TFRecordDataset(str(path)):
        log = prediction_log_pb2.PredictionLog.FromString(raw.numpy())
        request = log.predict_log.request
        assert request.model_spec.name == sig.DEFAULT_MODEL_NAME
        name = request.model_spec.signature_name
        assert set(request.inputs) == set(inputs[name])
        tensors = {k: tf.make_ndarray(t) for k, t in request.inputs.items()}
        dims = {len(t) for t in tensors.values()}
        assert len(dims) == 1
        sizes[name].append(dims.pop())
        if name == sig.CONTINUE_SIGNATURE_NAME and len(tensors["prompt"]) == 1:
            out = fn[name](**{k: tf.constant(v) for k, v in tensors.items()})
            assert int(out["n_tokens"][0]) > 0  # the record really runs the decode loop
    assert 0 < sum(map(len, sizes.values())) <= sig.MAX_WARMUP_RECORDS
    assert {1, 8, 32} <= set(sizes[sig.SIGNATURE_NAME])
    assert sizes[sig.CONTINUE_SIGNATURE_NAME] == sizes[sig.SIGNATURE_NAME]


def record_batch_sizes(path: Path) -> list[tuple[str, int]]:
    import tensorflow as tf
    from tensorflow_serving.apis import prediction_log_pb2

    sizes = []
    for raw in tf.data.TFRecordDataset(str(path)):
        request = prediction_log_pb2.PredictionLog.FromString(raw.numpy()).predict_log.request
        name = request.model_spec.signature_name
        sizes.append((name, len(tf.make_ndarray(request.inputs["prompt"]))))
    return sizes


def test_warmup_records_use_the_batch_sizes_given(tmp_path: Path) -> None:
    from serving.model.export import ExportError, write_warmup

    path = tmp_path / sig.WARMUP_FILE
    assert write_warmup(path, "gen", (1, 3, 16)) == 6
    both = (sig.SIGNATURE_NAME, sig.CONTINUE_SIGNATURE_NAME)
    assert record_batch_sizes(path) == [(name, n) for n in (1, 3, 16) for name in both]
    with pytest.raises(ExportError, match="positive"):
        write_warmup(path, "gen", ())


def test_golden_canary_matches_the_exported_model(tiny_export: Path, tiny_loaded: Any) -> None:
    import tensorflow as tf

    from serving.model.export import CANARY_PROMPTS

    golden = json.loads((tiny_export / sig.GOLDEN_FILE).read_text())
    assert golden["version"] == 1 and golden["model"] == sig.DEFAULT_MODEL_NAME
    assert [p["prompt"] for p in golden["prompts"]] == list(CANARY_PROMPTS)
    fn = tiny_loaded.signatures[sig.SIGNATURE_NAME]
    first = golden["prompts"][0]
    assert set(golden["request"]) == set(sig.INPUTS) - {"prompt", "max_new_tokens"}
    assert golden["request"]["stop"] == sig.stop_slots() and golden["request"]["ignore_eos"] == 0
    row = golden["request"] | {
        "prompt": first["prompt"],
        "max_new_tokens": golden["max_new_tokens"],
    }
    out = fn(**{k: tf.constant([v], tf.as_dtype(sig.INPUTS[k])) for k, v in row.items()})
    assert out["text"].numpy()[0].decode() == first["text"]
    assert float(out["mean_nll"][0]) == pytest.approx(first["mean_nll"], abs=1e-4)


def test_degraded_export_differs_and_is_less_sure_of_itself(
    tiny_export: Path, tiny_degraded_export: Path
) -> None:
    good = json.loads((tiny_export / sig.GOLDEN_FILE).read_text())["prompts"]
    bad = json.loads((tiny_degraded_export / sig.GOLDEN_FILE).read_text())["prompts"]
    assert [g["text"] for g in good] != [b["text"] for b in bad]
    mean = lambda rows: sum(r["mean_nll"] for r in rows) / len(rows)  # noqa: E731
    assert mean(bad) > mean(good)
    meta = json.loads((tiny_degraded_export / "assets.extra" / "tokenpulse_model.json").read_text())
    assert meta["degrade_noise"] > 0


def test_versions_are_immutable(tmp_path: Path, tiny_export: Path) -> None:
    from serving.model.export import ExportError, export_version
    from serving.model.transformer import GPT

    (tmp_path / "3").mkdir()
    with pytest.raises(ExportError, match="already exists"):
        export_version(GPT(get_preset("tiny").model), _SPEC, tmp_path, 3)
    with pytest.raises(ExportError, match="positive"):
        export_version(GPT(get_preset("tiny").model), _SPEC, tmp_path, 0)
