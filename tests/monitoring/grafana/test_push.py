"""`tokenpulse grafana push|annotate` against the Grafana stand-in (no Grafana runs here)."""

from __future__ import annotations

import http.server
import threading

import pytest

from devtools.standins.grafana import GrafanaStandin
from monitoring.grafana.push import (
    Credential,
    GrafanaConflictError,
    GrafanaPushError,
    annotate,
    connect,
    push,
)
from stack.cli import main as tokenpulse_main
from tokenpulse.paths import DASHBOARDS
from tokenpulse.procs import free_port

FILES = sorted(DASHBOARDS.glob("*.json"))


@pytest.fixture
def grafana():
    with GrafanaStandin() as g:
        yield g


@pytest.fixture
def token_file(tmp_path, grafana):
    path = tmp_path / "token"
    path.write_text(grafana.state.token + "\n")
    return path


def _api(grafana, token=None):
    return connect(grafana.url, Credential(token=token or grafana.state.token))


def test_push_creates_the_folder_then_updates_in_place(grafana):
    api = _api(grafana)
    first = push(api, grafana.url, FILES, "tokenpulse", "TokenPulse")
    assert [a["version"] for a in first] == [1] * 6
    assert grafana.state.folders["tokenpulse"]["title"] == "TokenPulse"
    second = push(api, grafana.url, FILES, "tokenpulse", "TokenPulse")
    assert [a["version"] for a in second] == [2] * 6
    assert len(grafana.state.dashboards) == 6
    assert all(d["meta"]["folderUid"] == "tokenpulse" for d in grafana.state.dashboards.values())
    assert sum(1 for m, p in grafana.state.requests if (m, p) == ("POST", "/api/folders")) == 1


def test_a_dashboard_changed_in_between_is_a_version_conflict(grafana, monkeypatch):
    api = _api(grafana)
    push(api, grafana.url, FILES[:1], "tokenpulse", "TokenPulse")
    uid = next(iter(grafana.state.dashboards))
    import monitoring.grafana.push as push_module

    real = push_module._current_version

    def read_then_someone_saves(api, uid):
        version = real(api, uid)
        grafana.state.dashboards[uid]["dashboard"]["version"] += 1  # an edit in the UI
        return version

    monkeypatch.setattr(push_module, "_current_version", read_then_someone_saves)
    with pytest.raises(GrafanaConflictError, match="version conflict"):
        push(api, grafana.url, FILES[:1], "tokenpulse", "TokenPulse")
    answers = push(api, grafana.url, FILES[:1], "tokenpulse", "TokenPulse", overwrite=True)
    assert answers[0]["uid"] == uid


def test_wrong_token_is_unauthorized(grafana):
    with pytest.raises(GrafanaPushError, match="unauthorized"):
        push(_api(grafana, "wrong"), grafana.url, FILES, "tokenpulse", "TokenPulse")


def test_nothing_listening_is_a_wrong_url():
    url = f"http://127.0.0.1:{free_port()}"
    with pytest.raises(GrafanaPushError, match="cannot reach Grafana"):
        push(connect(url, Credential(token="t")), url, FILES, "f", "F")


def test_a_server_that_is_not_grafana_is_a_wrong_url():
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), http.server.SimpleHTTPRequestHandler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}"
        with pytest.raises(GrafanaPushError, match="wrong URL"):
            push(connect(url, Credential(token="t")), url, FILES, "f", "F")
    finally:
        server.shutdown()
        server.server_close()


def test_annotation_is_tagged_deployment_in_epoch_ms(grafana):
    ident = annotate(_api(grafana), grafana.url, "gen v2 live", ["model:gen", "deployment"],
                     dashboard_uid="tokenpulse-quality")  # fmt: skip
    note = grafana.state.annotations[0]
    assert ident == note["id"] == 1
    assert note["tags"] == ["deployment", "model:gen"]
    assert note["dashboardUID"] == "tokenpulse-quality"
    assert note["time"] == note["timeEnd"] > 1_000_000_000_000  # milliseconds, not seconds


def test_credentials_come_from_exactly_one_file(tmp_path):
    basic = tmp_path / "basic"
    basic.write_text("admin:pw\n")
    assert Credential.from_files(None, basic).basic == ("admin", "pw")
    (tmp_path / "bad").write_text("no-colon")
    (tmp_path / "empty").write_text("\n")
    with pytest.raises(GrafanaPushError, match="user:password"):
        Credential.from_files(None, tmp_path / "bad")
    with pytest.raises(GrafanaPushError, match="empty"):
        Credential.from_files(tmp_path / "empty", None)
    with pytest.raises(GrafanaPushError, match="cannot read"):
        Credential.from_files(tmp_path / "missing", None)
    with pytest.raises(GrafanaPushError, match="exactly one"):
        Credential.from_files(None, None)


def test_cli_push_and_annotate_with_basic_auth(grafana, tmp_path, capsys):
    basic = tmp_path / "basic"
    basic.write_text(":".join(grafana.state.basic))
    common = ["--url", grafana.url, "--basic-auth-file", str(basic)]
    assert tokenpulse_main(["grafana", "push", *common]) == 0
    assert "tokenpulse-slo version 1" in capsys.readouterr().out
    assert tokenpulse_main(["grafana", "annotate", *common, "--text", "v2", "--tags", "a"]) == 0
    assert grafana.state.annotations[0]["tags"] == ["deployment", "a"]


def test_cli_errors_are_one_line_exit_1(grafana, tmp_path, capsys):
    bad = tmp_path / "token"
    bad.write_text("wrong")
    assert tokenpulse_main(["grafana", "push", "--url", grafana.url, "--token-file", str(bad)]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "unauthorized" in err and "Traceback" not in err
    code = tokenpulse_main(["grafana", "push", "--url", "grafana:3000", "--token-file", str(bad)])
    assert code == 2  # a settings error, before anything is sent
    assert "http://" in capsys.readouterr().err
    both = ["--token-file", str(bad), "--basic-auth-file", str(bad)]
    assert tokenpulse_main(["grafana", "push", "--url", grafana.url, *both]) == 2
    assert "exactly one" in capsys.readouterr().err
    seconds = ["--text", "x", "--time-ms", "1700000000"]
    assert tokenpulse_main(["grafana", "annotate", "--url", grafana.url, *both[:2], *seconds]) == 2
    assert "--time-ms" in capsys.readouterr().err


def test_settings_come_from_the_environment_too(grafana, token_file, monkeypatch, capsys):
    monkeypatch.setenv("TOKENPULSE_GRAFANA_URL", grafana.url)
    monkeypatch.setenv("TOKENPULSE_GRAFANA_TOKEN_FILE", str(token_file))
    assert tokenpulse_main(["grafana", "annotate", "--text", "gen v2 live"]) == 0
    assert grafana.state.annotations[0]["text"] == "gen v2 live"
