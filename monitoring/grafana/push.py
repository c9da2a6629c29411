"""Upload the generated dashboards into a Grafana folder, and add deployment annotations.

Uses grafana-client. Every failure becomes a `GrafanaPushError` whose message says what to do:
unauthorized (check the token), wrong URL (not a Grafana, or not reachable), version conflict
(someone changed the dashboard in Grafana since it was read).
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import niquests
from grafana_client import GrafanaApi
from grafana_client.client import (
    GrafanaClientError,
    GrafanaException,
    GrafanaUnauthorizedError,
)

from tokenpulse.logging import get_logger

log = get_logger(__name__).bind(component="grafana")

DEPLOYMENT_TAG = "deployment"


class GrafanaPushError(Exception):
    """Grafana refused or could not be reached; the message is one line for the user."""


class GrafanaConflictError(GrafanaPushError):
    """A dashboard changed in Grafana after it was read (HTTP 412)."""


@dataclass(frozen=True)
class Credential:
    """A service-account token, or a user and password."""

    token: str | None = None
    basic: tuple[str, str] | None = None

    @classmethod
    def from_files(cls, token_file: Path | None, basic_auth_file: Path | None) -> Credential:
        """Exactly one of a token file or a `user:password` file (no trailing newline needed)."""
        if (token_file is None) == (basic_auth_file is None):
            raise GrafanaPushError("give exactly one of --token-file or --basic-auth-file")
        path = token_file or basic_auth_file
        assert path is not None  # for mypy: one of the two is set (checked above)
        try:
            text = path.read_text().strip()
        except OSError as exc:
            raise GrafanaPushError(f"cannot read credential file {path}: {exc.strerror}") from exc
        if not text:
            raise GrafanaPushError(f"credential file {path} is empty")
        if token_file is not None:
            return cls(token=text)
        user, sep, password = text.partition(":")
        if not sep or not user or not password:
            raise GrafanaPushError(f"{path} must hold `user:password`")
        return cls(basic=(user, password))

    def for_client(self) -> str | tuple[str, str]:
        """What GrafanaApi.from_url takes as `credential`."""
        return self.token if self.token is not None else self.basic  # type: ignore[return-value]


def _first_line(message: str) -> str:
    return message.strip().splitlines()[0][:200] if message.strip() else "no message"


@contextmanager
def _translated(url: str, what: str) -> Iterator[None]:
    """Turn grafana-client and transport errors into one-line GrafanaPushErrors."""
    try:
        yield
    except GrafanaUnauthorizedError as exc:
        raise GrafanaPushError(
            f"{what}: unauthorized at {url}: check the token or user:password"
        ) from exc
    except GrafanaClientError as exc:
        if exc.status_code == 412:
            raise GrafanaConflictError(
                f"{what}: version conflict: the dashboard changed in Grafana since it was read; "
                "push again, or pass --overwrite to replace it"
            ) from exc
        if exc.status_code == 403:
            raise GrafanaPushError(f"{what}: forbidden: the credential lacks rights") from exc
        if exc.status_code == 404:
            raise GrafanaPushError(f"{what}: {url} has no Grafana API (404): wrong URL?") from exc
        raise GrafanaPushError(f"{what}: {_first_line(exc.message)}") from exc
    except GrafanaException as exc:
        raise GrafanaPushError(f"{what}: {url}: {_first_line(exc.message)}") from exc
    except niquests.exceptions.RequestException as exc:
        raise GrafanaPushError(f"{what}: cannot reach Grafana at {url}: wrong URL?") from exc
    except ValueError as exc:  # a non-JSON answer: not a Grafana
        raise GrafanaPushError(f"{what}: {url} did not answer like Grafana: wrong URL?") from exc


def connect(url: str, credential: Credential, timeout_s: float = 10.0) -> GrafanaApi:
    """A client for `url`, once its build info (`/api/frontend/settings`) proved it a Grafana."""
    if not url.startswith(("http://", "https://")):
        raise GrafanaPushError(f"--url must start with http:// or https://, got {url!r}")
    api = GrafanaApi.from_url(url, credential=credential.for_client(), timeout=timeout_s)
    with _translated(url, "connect"):
        build = api.health.check()
    if not isinstance(build, dict) or "version" not in build:
        raise GrafanaPushError(f"{url} has no Grafana build info: wrong URL?")
    log.info("grafana_connected", url=url, version=build["version"])
    return api


def ensure_folder(api: GrafanaApi, url: str, uid: str, title: str) -> None:
    """Create the folder unless it exists."""
    with _translated(url, f"folder {uid}"):
        try:
            api.folder.get_folder(uid)
            return
        except GrafanaClientError as exc:
            if exc.status_code != 404 or isinstance(exc, GrafanaUnauthorizedError):
                raise
        api.folder.create_folder(title, uid=uid)
        log.info("grafana_folder_created", uid=uid, title=title)


def _current_version(api: GrafanaApi, uid: str) -> int | None:
    try:
        found = api.dashboard.get_dashboard(uid)
    except GrafanaClientError as exc:
        if exc.status_code == 404 and not isinstance(exc, GrafanaUnauthorizedError):
            return None
        raise
    return int(found["dashboard"]["version"])


def push(
    api: GrafanaApi,
    url: str,
    files: Sequence[Path],
    folder_uid: str,
    folder_title: str,
    overwrite: bool = False,
) -> list[dict[str, Any]]:
    """Upload each dashboard file into the folder; Grafana's answer per dashboard."""
    ensure_folder(api, url, folder_uid, folder_title)
    answers = []
    for path in files:
        try:
            dash = json.loads(path.read_text())
        except (OSError, ValueError) as exc:
            raise GrafanaPushError(f"{path}: not a readable dashboard JSON file") from exc
        with _translated(url, f"dashboard {dash.get('uid')}"):
            # send the version we read: Grafana answers 412 if it changed in between
            dash["version"] = _current_version(api, dash["uid"])
            dash.pop("id", None)
            answer = api.dashboard.update_dashboard(
                {
                    "dashboard": dash, "folderUid": folder_uid, "overwrite": overwrite,
                    "message": "tokenpulse grafana push",
                }
            )  # fmt: skip
        log.info("grafana_dashboard_pushed", uid=dash["uid"], version=answer.get("version"))
        answers.append(answer)
    return answers


def annotate(
    api: GrafanaApi,
    url: str,
    text: str,
    tags: Sequence[str],
    dashboard_uid: str | None = None,
    when_ms: int | None = None,
) -> int:
    """Add a deployment annotation (always tagged `deployment`); its id."""
    when_ms = when_ms if when_ms is not None else int(time.time() * 1000)
    all_tags = [DEPLOYMENT_TAG, *(t for t in tags if t != DEPLOYMENT_TAG)]
    with _translated(url, "annotation"):
        answer = api.annotations.add_annotation(
            dashboard_uid=dashboard_uid, time_from=when_ms, time_to=when_ms, tags=all_tags,
            text=text,
        )  # fmt: skip
    log.info("grafana_annotation_added", id=answer.get("id"), tags=all_tags)
    return int(answer["id"])
