"""The seed's "before": a naive Python model server, for `--scenario seed` only.

Written the way the seed describes its starting point: the model loaded in-process with
tf.saved_model.load and called once per request, one request at a time (a single-threaded
http.server, a new connection per request), no batching. It speaks TF Serving's REST predict
contract (`POST /v1/models/<any>:predict`, row format) so the same load test can drive it.

    python -m stack.loadtest.naive_server --model-dir EXPORT/1 --port 8601
"""

from __future__ import annotations

import argparse
import json
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
from typing import Any

from tokenpulse.tfserving.predict import DEFAULT_SIGNATURE
from tokenpulse.tfserving.signature import INPUTS


class NaiveServer(HTTPServer):
    """One request at a time; a deep listen backlog so bursts queue instead of being dropped."""

    request_queue_size = 256


def serve(model_dir: Path, port: int, host: str = "127.0.0.1") -> None:
    """Load the SavedModel and answer predicts until killed."""
    import tensorflow as tf  # only here: the rest of the load test stays TensorFlow-free

    from tokenpulse.tfserving.ops import load_saved_model

    fn = load_saved_model(model_dir).signatures[DEFAULT_SIGNATURE]
    dtypes = {"string": tf.string, "int32": tf.int32, "float32": tf.float32, "int64": tf.int64}

    def predict(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
        tensors = {
            name: tf.constant([row[name] for row in rows], dtype=dtypes[kind])
            for name, kind in INPUTS.items()
        }
        out = fn(**tensors)
        preds = []
        for i in range(len(rows)):
            pred: dict[str, Any] = {}
            for name, value in out.items():
                v = value[i].numpy()
                pred[name] = v.decode("utf-8", "replace") if isinstance(v, bytes) else v.item()
            preds.append(pred)
        return preds

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base's name
            pass

        def _answer(self, status: int, doc: Any) -> None:
            body = json.dumps(doc).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self) -> None:  # noqa: N802 - http.server's name
            self._answer(200 if self.path == "/healthz" else 404, {"ok": self.path == "/healthz"})

        def do_POST(self) -> None:  # noqa: N802 - http.server's name
            try:
                doc = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
                rows = doc["instances"]
                self._answer(200, {"predictions": predict(rows)})
            except (ValueError, KeyError, TypeError) as exc:
                self._answer(400, {"error": f"{type(exc).__name__}: {exc}"})

    NaiveServer((host, port), Handler).serve_forever()


def main(argv: list[str] | None = None) -> None:
    """`python -m stack.loadtest.naive_server --model-dir DIR --port N`."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model-dir", type=Path, required=True, help="SavedModel version dir")
    parser.add_argument("--port", type=int, required=True)
    args = parser.parse_args(argv)
    serve(args.model_dir, args.port)


if __name__ == "__main__":
    main()
