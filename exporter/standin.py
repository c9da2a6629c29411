"""A stand-in for TF Serving's REST API (status and predict), for tests and benchmarks.

It speaks the real wire format (REFERENCE.md A.5) on 127.0.0.1 and can misbehave on purpose:
answer malformed JSON, fail with 5xx, or drop off. It is not a model server: answers are whatever
the test put in `answers`.
"""

from __future__ import annotations

import json
import re
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

_STATUS = re.compile(r"^/v1/models/([^/:]+)(?:/versions/(\d+))?$")
_PREDICT = re.compile(r"^/v1/models/([^/:]+)/versions/(\d+):predict$")


@dataclass
class StandinState:
    """What the stand-in serves; tests mutate it while it runs."""

    # model -> version -> state
    versions: dict[str, dict[int, str]] = field(default_factory=dict)
    # (model, version) -> (error_code, error_message) of a version whose load failed
    errors: dict[tuple[str, int], tuple[str, str]] = field(default_factory=dict)
    # (model, version) -> prompt -> (text, mean_nll)
    answers: dict[tuple[str, int], dict[str, tuple[str, float]]] = field(default_factory=dict)
    # "ok", "malformed" (status is not JSON), "wrong_shape" (JSON without the list), "error" (500)
    status_mode: str = "ok"
    predict_mode: str = "ok"  # "ok" or "error" (500)
    predict_calls: int = 0
    status_calls: int = 0


class TfServingStandin:
    """Run with `with TfServingStandin() as tfs:`; `tfs.url` is the REST base URL."""

    def __init__(self, state: StandinState | None = None) -> None:
        self.state = state or StandinState()
        self._lock = threading.Lock()
        handler = _handler(self)
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self._httpd.daemon_threads = True
        self.port = int(self._httpd.server_address[1])
        self.url = f"http://127.0.0.1:{self.port}"
        self._thread: threading.Thread | None = None

    def __enter__(self) -> TfServingStandin:
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Stop serving and free the port."""
        self._httpd.shutdown()
        self._httpd.server_close()

    def status_doc(self, model: str) -> tuple[int, Any]:
        """(HTTP status, body) of a status request, as TF Serving would answer."""
        with self._lock:
            self.state.status_calls += 1
            versions = dict(self.state.versions.get(model, {}))
            errors = dict(self.state.errors)
            mode = self.state.status_mode
        if mode == "error":
            return 500, {"error": "stand-in told to fail"}
        if mode == "malformed":
            return 200, "{not json"
        if mode == "wrong_shape":
            return 200, {"model_version_status": "nope"}
        if not versions:
            return 404, {"error": f"Could not find any versions of model {model}"}
        entries = []
        for v, s in sorted(versions.items(), reverse=True):
            code, message = errors.get((model, v), ("OK", ""))
            status = {"error_code": code, "error_message": message}
            entries.append({"version": str(v), "state": s, "status": status})
        return 200, {"model_version_status": entries}

    def predict_doc(self, model: str, version: int, body: Any) -> tuple[int, Any]:
        """(HTTP status, body) of a row-format predict request."""
        with self._lock:
            self.state.predict_calls += 1
            state = self.state.versions.get(model, {}).get(version)
            answers = dict(self.state.answers.get((model, version), {}))
            mode = self.state.predict_mode
        if mode == "error":
            return 500, {"error": "stand-in told to fail"}
        if state != "AVAILABLE":
            return 404, {"error": f"Servable not found for request: Specific({model}, {version})"}
        rows = body.get("instances") if isinstance(body, dict) else None
        if not isinstance(rows, list):
            return 400, {"error": "Missing 'inputs' or 'instances' key"}
        preds = []
        for row in rows:
            text, nll = answers.get(row.get("prompt"), ("", 9.0))
            preds.append(
                {
                    "text": text,
                    "mean_nll": nll,
                    "prompt_tokens": 4,
                    "output_tokens": len(text),
                    "finish_reason": "length",
                    "truncated_prompt_tokens": 0,
                }
            )
        return 200, {"predictions": preds}


def _handler(standin: TfServingStandin) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
            pass

        def _send(self, status: int, body: Any) -> None:
            raw = body.encode() if isinstance(body, str) else json.dumps(body, indent=1).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(raw)))
            self.end_headers()
            self.wfile.write(raw)

        def do_GET(self) -> None:  # noqa: N802  (http.server naming)
            m = _STATUS.match(self.path)
            if m is None:
                self._send(400, {"error": f"Malformed request: GET {self.path}"})
                return
            self._send(*standin.status_doc(m.group(1)))

        def do_POST(self) -> None:  # noqa: N802
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length)
            m = _PREDICT.match(self.path)
            if m is None:
                self._send(400, {"error": f"Malformed request: POST {self.path}"})
                return
            try:
                body = json.loads(raw)
            except ValueError:
                self._send(400, {"error": "JSON Parse error"})
                return
            self._send(*standin.predict_doc(m.group(1), int(m.group(2)), body))

    return Handler
