"""Which ops stock `tensorflow_model_server` links in beyond TensorFlow's own: TF.Text's.

No TensorFlow at import: the set is data, and `register_tf_text_ops` loads TF.Text's kernel
libraries only when a graph needs them (TF Serving has its ops; a Python process that loads such
a graph must too).
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

# The TF.Text ops stock tensorflow_model_server runs: tensorflow/serving's
# tensorflow_serving/model_servers/BUILD links "@org_tensorflow_text//tensorflow_text:ops_lib"
# into the server (SUPPORTED_TENSORFLOW_OPS), and tensorflow/text's tensorflow_text/BUILD makes
# ops_lib of these kernels' libraries (op names as tensorflow-text 2.21's libraries register
# them). An imported model's tokenizer needs them (GPT-2's BPE: RegexSplitWithOffsets); any
# other custom op is still refused.
TF_TEXT_OPS = frozenset(
    {
        "CaseFoldUTF8",
        "ConstrainedSequence",
        "FastBertNormalize",
        "FastWordpieceTokenizeWithOffsets",
        "FindSourceOffsets",
        "MaxSpanningTree",
        "NormalizeUTF8",
        "NormalizeUTF8WithOffsetsMap",
        "PhraseTokenize",
        "RegexSplitWithOffsets",
        "SentenceFragments",
        "SentenceFragmentsV2",
        "SentencepieceDetokenizeOp",
        "SentencepieceIdToStringOp",
        "SentencepieceOp",
        "SentencepieceStringToIdOp",
        "SentencepieceTokenizeOp",
        "SentencepieceTokenizeWithOffsetsOp",
        "SentencepieceVocabSizeOp",
        "SplitMergeTokenizeWithOffsets",
        "TFText>BoiseTagsToOffsets",
        "TFText>ByteSplitByOffsets",
        "TFText>ByteSplitWithOffsets",
        "TFText>FastSentencepieceDetokenize",
        "TFText>FastSentencepieceTokenize",
        "TFText>FastWordpieceDetokenize",
        "TFText>NgramsStringJoin",
        "TFText>OffsetsToBoiseTags",
        "TFText>PhraseDetokenize",
        "TFText>RoundRobinGenerateMasks",
        "TFText>RoundRobinTrim",
        "TFText>Utf8Binarize",
        "TFText>WhitespaceTokenizeWithOffsetsV2",
        "TokenizerFromLogits",
        "UnicodeScriptTokenizeWithOffsets",
        "WhitespaceTokenizeWithOffsets",
        "WordpieceTokenizeWithOffsets",
    }
)


def meta_graph_ops(meta: Any) -> set[str]:
    """Every op type in one MetaGraphDef, function library included."""
    ops = {node.op for node in meta.graph_def.node}
    for fn in meta.graph_def.library.function:
        ops.update(node.op for node in fn.node_def)
    return ops


def read_saved_model(export_dir: Path) -> Any:
    """The SavedModel proto of a version directory (TensorFlow's protobuf module only)."""
    from tensorflow.core.protobuf import saved_model_pb2

    proto = saved_model_pb2.SavedModel()
    proto.ParseFromString((export_dir / "saved_model.pb").read_bytes())
    return proto


def saved_model_ops(export_dir: Path) -> set[str]:
    """Every op type in the SavedModel's graphs, function library included."""
    return set().union(*(meta_graph_ops(m) for m in read_saved_model(export_dir).meta_graphs))


def tf_text_op_libraries() -> list[Path]:
    """The kernel libraries of the installed tensorflow-text (its `python/ops/_*.so`), found
    without importing the package."""
    import importlib.util

    spec = importlib.util.find_spec("tensorflow_text")
    if spec is None or not spec.submodule_search_locations:
        raise ModuleNotFoundError("No module named 'tensorflow_text'", name="tensorflow_text")
    package = Path(next(iter(spec.submodule_search_locations)))
    return sorted((package / "python" / "ops").glob("_*.so"))


@functools.cache
def tf_text_library(name: str) -> Any:
    """One TF.Text kernel library loaded (e.g. `_regex_split_ops.so`): its ops registered, and
    their Python wrappers as the module `tf.load_op_library` returns."""
    from tokenpulse.tfimport import import_tensorflow

    (path,) = [p for p in tf_text_op_libraries() if p.name == name]
    return import_tensorflow().load_op_library(str(path))


def register_tf_text_ops(ops: set[str]) -> None:
    """Register TF.Text's ops in this process when `ops` use any (the stock server has them).

    The kernel libraries are loaded as the server links them, without the Python package:
    `import tensorflow_text` also imports Keras (0.83 CPU-s here, against 0.13 for the libraries),
    which a process that only serves a graph has no use for."""
    if ops & TF_TEXT_OPS:
        for library in tf_text_op_libraries():
            tf_text_library(library.name)


def register_for(export_dir: Path) -> None:
    """Before loading a SavedModel: the TF.Text ops it uses (its tokenizer's), registered."""
    register_tf_text_ops(saved_model_ops(export_dir))


def load_saved_model(export_dir: Path) -> Any:
    """TensorFlow 2's load of a version directory (its `serve` graph), TF.Text's ops first."""
    import tensorflow as tf

    register_for(export_dir)
    return tf.saved_model.load(str(export_dir), tags=["serve"])
