"""A SavedModel in a TF1 session, loaded and run the way stock `tensorflow_model_server` does.

TF Serving's `SavedModelBundleFactory` loads a version with `LoadSessionBundleOrSavedModelBundle`,
which is TensorFlow's `LoadSavedModel` (`tensorflow/cc/saved_model/loader.cc`): the meta graph
into a new session, `RunRestore` on the `saver_def`'s restore op (the variables from
`variables/`), `RunInitOp` (tables, assets), then every predict is `Session::Run` on the
signature's tensor names. `tf.compat.v1.saved_model.loader.load` takes the same steps, so a
model that runs here runs there; TF2's `tf.saved_model.load` rebinds functions to restored
objects instead, and can run a model the server cannot.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np


@dataclass(frozen=True)
class SessionModel:
    """A loaded `serve` meta graph and the session holding its restored variables."""

    session: Any
    meta_graph: Any

    def run(
        self,
        signature: str,
        rows: Sequence[Mapping[str, object]],
        options: Any = None,
        run_metadata: Any = None,
    ) -> dict[str, Any]:
        """One batch through `signature`: each input the signature takes, from every row."""
        import tensorflow as tf

        signature_def = self.meta_graph.signature_def[signature]
        feed = {
            info.name: np.array(
                [row[name] for row in rows], dtype=tf.dtypes.as_dtype(info.dtype).as_numpy_dtype
            )
            for name, info in signature_def.inputs.items()
        }
        fetch = {name: info.name for name, info in signature_def.outputs.items()}
        out: dict[str, Any] = self.session.run(
            fetch, feed, options=options, run_metadata=run_metadata
        )
        return out


@contextmanager
def load(export_dir: Path) -> Iterator[SessionModel]:
    """The SavedModel's `serve` graph restored into a fresh TF1 session (closed on exit), with
    the TF.Text ops its tokenizer uses registered first, as the server links them in."""
    import tensorflow as tf

    from tokenpulse.tfserving.ops import register_for

    register_for(export_dir)
    with tf.Graph().as_default(), tf.compat.v1.Session() as session:
        meta = tf.compat.v1.saved_model.loader.load(session, ["serve"], str(export_dir))
        yield SessionModel(session, meta)
