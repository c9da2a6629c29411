"""A stand-in for the few Grafana HTTP API endpoints `tokenpulse grafana` uses: not Grafana.

No Grafana runs on this machine, so the push and annotate commands are tested against this. It
speaks the same wire contract as Grafana 11 (`docs/sources/developers/http_api/`) on 127.0.0.1:

- every `/api/...` request needs `Authorization: Bearer <token>` or Basic `<user>:<password>`
  matching the configured credential, else 401 `{"message": "Unauthorized"}`;
- `GET /api/frontend/settings`: `{"buildInfo": {"version": "11.6.0", ...}}` (grafana-client's
  health check);
- `GET /api/folders/{uid}`: the folder, or 404 `{"message": "folder not found"}`;
- `POST /api/folders` `{"title", "uid"}`: 200 with the folder; 409 if the uid exists;
- `GET /api/dashboards/uid/{uid}`: `{"dashboard": {..., "version"}, "meta": {"folderUid"}}`, or 404;
- `POST /api/dashboards/db` `{"dashboard", "folderUid", "overwrite", "message"}`: creates version 1
  or, for an existing uid, needs `overwrite: true` or the stored `version`, else 412
  `{"status": "version-mismatch"}`; answers `{"id", "uid", "url", "status", "version", "slug"}`;
- `POST /api/annotations` `{"dashboardUID", "panelId", "time", "timeEnd", "tags", "text"}`: 200
  `{"id", "message": "Annotation added"}`; `time` must be epoch milliseconds;
- `GET /d/{uid}[/{slug}]?viewPanel=&from=&to=` (the link a notification carries): 200 for a stored
  dashboard that has the panel, with `from`/`to` epoch milliseconds when given; else 404 (stricter
  than Grafana, whose page answers 200 and shows "not found" inside it).

Other paths answer 404 `{"message": "Not found"}`. Tests read and change `state` while it runs.
"""

from __future__ import annotations

import base64
import json
import re
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs

# epoch ms of 2001-09-09; anything smaller is seconds sent by mistake
_MIN_EPOCH_MS = 1_000_000_000_000


@dataclass
class GrafanaState:
    """What the stand-in holds; the credential it accepts."""

    token: str = "standin-token"
    basic: tuple[str, str] = ("admin", "standin-password")
    folders: dict[str, dict[str, Any]] = field(default_factory=dict)
    dashboards: dict[str, dict[str, Any]] = field(default_factory=dict)  # uid -> stored record
    annotations: list[dict[str, Any]] = field(default_factory=list)
    requests: list[tuple[str, str]] = field(default_factory=list)  # (method, path)


class _Handler(BaseHTTPRequestHandler):
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib signature
        """Quiet: tests read `state.requests` instead."""

    def _send(self, status: int, body: Any) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _authorized(self) -> bool:
        state = self.server.state
        header = self.headers.get("Authorization", "")
        if header == f"Bearer {state.token}":
            return True
        expected = base64.b64encode(":".join(state.basic).encode()).decode()
        return header == f"Basic {expected}"

    def _body(self) -> dict[str, Any] | None:
        raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        try:
            body = json.loads(raw or b"null")
        except ValueError:
            return None
        return body if isinstance(body, dict) else None

    def _dispatch(self, method: str) -> None:
        state = self.server.state
        with self.server.lock:
            state.requests.append((method, self.path))
            if not self._authorized():
                return self._send(401, {"message": "Unauthorized"})
            body = self._body() if method == "POST" else {}
            if body is None:
                return self._send(400, {"message": "bad request data"})
            status, answer = _route(state, method, self.path, body)
        self._send(status, answer)

    def do_GET(self) -> None:  # noqa: N802 - stdlib name
        """GET."""
        self._dispatch("GET")

    def do_POST(self) -> None:  # noqa: N802 - stdlib name
        """POST."""
        self._dispatch("POST")


def _route(state: GrafanaState, method: str, path: str, body: dict[str, Any]) -> tuple[int, Any]:
    if path == "/api/frontend/settings" and method == "GET":
        return 200, {"buildInfo": {"version": "11.6.0", "edition": "Open Source"}}
    if m := re.fullmatch(r"/api/folders/([\w-]+)", path):
        folder = state.folders.get(m.group(1)) if method == "GET" else None
        return (200, folder) if folder else (404, {"message": "folder not found"})
    if path == "/api/folders" and method == "POST":
        return _create_folder(state, body)
    if (m := re.fullmatch(r"/api/dashboards/uid/([\w-]+)", path)) and method == "GET":
        stored = state.dashboards.get(m.group(1))
        return (200, stored) if stored else (404, {"message": "Dashboard not found"})
    if path == "/api/dashboards/db" and method == "POST":
        return _save_dashboard(state, body)
    if path == "/api/annotations" and method == "POST":
        return _add_annotation(state, body)
    if (m := re.fullmatch(r"/d/([\w-]+)(?:/[\w-]*)?(?:\?(.*))?", path)) and method == "GET":
        return _view(state, m.group(1), parse_qs(m.group(2) or ""))
    return 404, {"message": "Not found"}


def _view(state: GrafanaState, uid: str, query: dict[str, list[str]]) -> tuple[int, Any]:
    stored = state.dashboards.get(uid)
    if stored is None:
        return 404, {"message": "Dashboard not found"}
    panels = {str(p.get("id")) for p in stored["dashboard"].get("panels", [])}
    for panel in query.get("viewPanel", []):
        if panel not in panels:
            return 404, {"message": "Panel not found"}
    for bound in ("from", "to"):
        for value in query.get(bound, []):
            if not value.isdigit() or int(value) < _MIN_EPOCH_MS:
                return 400, {"message": f"{bound} must be epoch milliseconds"}
    return 200, {"uid": uid, "title": stored["dashboard"].get("title", "")}


def _create_folder(state: GrafanaState, body: dict[str, Any]) -> tuple[int, Any]:
    uid, title = body.get("uid"), body.get("title")
    if not title:
        return 400, {"message": "folder title cannot be empty"}
    if uid in state.folders:
        return 409, {"message": "a folder with the same uid already exists"}
    folder = {"id": len(state.folders) + 1, "uid": uid, "title": title, "version": 1}
    state.folders[str(uid)] = folder
    return 200, folder


def _save_dashboard(state: GrafanaState, body: dict[str, Any]) -> tuple[int, Any]:
    dash = body.get("dashboard")
    if not isinstance(dash, dict) or not dash.get("title") or not dash.get("uid"):
        return 400, {"message": "Dashboard title cannot be empty"}
    folder = body.get("folderUid")
    if folder and folder not in state.folders:
        return 400, {"message": "folder not found"}
    uid = dash["uid"]
    stored = state.dashboards.get(uid)
    if stored is None:
        version = 1
    elif body.get("overwrite") or dash.get("version") == stored["dashboard"]["version"]:
        version = stored["dashboard"]["version"] + 1
    else:
        return 412, {
            "status": "version-mismatch",
            "message": "The dashboard has been changed by someone else",
        }
    saved = {**dash, "version": version, "id": stored["dashboard"]["id"] if stored else None}
    if saved["id"] is None:
        saved["id"] = len(state.dashboards) + 1
    state.dashboards[uid] = {"dashboard": saved, "meta": {"folderUid": folder or ""}}
    slug = re.sub(r"[^a-z0-9]+", "-", dash["title"].lower()).strip("-")
    return 200, {
        "id": saved["id"], "uid": uid, "url": f"/d/{uid}/{slug}", "status": "success",
        "version": version, "slug": slug,
    }  # fmt: skip


def _add_annotation(state: GrafanaState, body: dict[str, Any]) -> tuple[int, Any]:
    when = body.get("time")
    if not isinstance(when, int) or when < _MIN_EPOCH_MS:
        return 400, {"message": "time must be epoch milliseconds"}
    if not body.get("text"):
        return 400, {"message": "text is required"}
    annotation = {**body, "id": len(state.annotations) + 1}
    state.annotations.append(annotation)
    return 200, {"id": annotation["id"], "message": "Annotation added"}


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, state: GrafanaState) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.state = state
        self.lock = threading.Lock()


class GrafanaStandin:
    """Runs the stand-in on a free loopback port in a thread; use as a context manager."""

    def __init__(self, state: GrafanaState | None = None) -> None:
        self.state = state or GrafanaState()
        self._server = _Server(self.state)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        """Base URL, e.g. http://127.0.0.1:41234."""
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def __enter__(self) -> GrafanaStandin:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)
