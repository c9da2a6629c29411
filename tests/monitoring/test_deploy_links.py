"""The links a page carries, per deployment: compose and Kubernetes link the configured hosts (never
loopback), a loopback setting is refused there, and `up` keeps linking its own ports.

Compose: `docker-compose config` with the settings in the env file, then the `links` one-shot's
own command, run here with the environment compose gives it, over the committed dashboards it
mounts (it renders the rules and the Alertmanager config with the deployment's config).
Kubernetes: the rendered overlays (tests/deploy/conftest.py) against deploy/k8s/links.env.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from monitoring import deploy_links
from monitoring.mixin import alertmanager, rulefiles
from monitoring.mixin.config import DEFAULT as config
from monitoring.mixin.config import Links, MixinConfig
from monitoring.mixin.dashboards import build_models
from monitoring.mixin.links import LinkError, check, loopback
from stack.cli import main as cli
from tokenpulse.paths import ROOT

RUNBOOKS = "https://ops.corp.test/tokenpulse/runbooks/{alertname}"
GRAFANA = "https://grafana.corp.test"
KIBANA = "https://kibana.corp.test/s/ops"
_URL = re.compile(r"https?://[^\s'\"\\)]+")
LOOPBACKS = [
    "http://127.0.0.1:3000", "http://127.9.9.9", "http://localhost:3000", "http://LocalHost",
    "http://grafana.localhost", "http://[::1]:3000", "http://0.0.0.0:3000", "http://169.254.1.2",
]  # fmt: skip


def _alerts(text: str) -> list[dict]:
    doc = yaml.safe_load(text)
    return [r for g in doc["groups"] for r in g["rules"] if "alert" in r]


def _loopback_urls(text: str) -> list[str]:
    return [u for u in _URL.findall(text) if loopback(u)]


# --- compose --------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def compose(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """`docker-compose config` with .env.example's secrets filled and the links configured."""
    if shutil.which("docker-compose") is None:
        pytest.fail("docker-compose is not installed (make test installs it)")
    values = {
        "TOKENPULSE_LINKS_RUNBOOK_URL_PATTERN": RUNBOOKS,
        "TOKENPULSE_LINKS_GRAFANA_URL": GRAFANA,
        "TOKENPULSE_LINKS_KIBANA_URL": KIBANA,
    }
    lines = []
    for line in (ROOT / ".env.example").read_text().splitlines():
        name = line.partition("=")[0]
        if name in values:
            line = f"{name}={values[name]}"
        elif re.fullmatch(r"[A-Z_]+=", line):
            line += "x" * 32
        lines.append(line)
    env_file = tmp_path_factory.mktemp("compose") / "compose.env"
    env_file.write_text("\n".join(lines) + "\n")
    out = subprocess.run(
        ["docker-compose", "--env-file", str(env_file), "-f", "docker-compose.yml", "config"],
        cwd=ROOT, capture_output=True, text=True,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    return yaml.safe_load(out.stdout)


def _mounts(service: dict) -> dict[str, str]:
    """target -> source of a service's volumes."""
    out = {}
    for m in service.get("volumes", []):
        source, target = (m.split(":")[:2]) if isinstance(m, str) else (m["source"], m["target"])
        out[target] = source
    return out


@pytest.fixture(scope="module")
def compose_pages(compose: dict, tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """File name -> text the `links` one-shot writes, run with its compose command and env."""
    service = compose["services"]["links"]
    assert service["environment"]["TOKENPULSE_LINKS_GRAFANA_URL"] == GRAFANA
    command = list(service["command"])
    mounts = _mounts(service)
    out = tmp_path_factory.mktemp("links")
    # the container's path, mapped to the host's: the committed dashboards it mounts read-only
    i = command.index("--dashboards-dir") + 1
    command[i] = mounts[command[i]]
    command[command.index("--out-dir") + 1] = str(out)
    env = {k: v for k, v in os.environ.items() if not k.startswith("TOKENPULSE_LINKS_")}
    env.update({k: str(v) for k, v in service["environment"].items()})
    run = subprocess.run(
        [str(ROOT / ".venv" / "bin" / "tokenpulse"), *command],
        env=env, cwd=ROOT, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    return {p.name: p.read_text() for p in out.iterdir()}


def test_compose_prometheus_and_alertmanager_read_what_the_one_shot_writes(compose: dict) -> None:
    services = compose["services"]
    links = services["links"]
    out = links["command"][links["command"].index("--out-dir") + 1]
    volume = _mounts(links)[out]
    for name in ("prometheus", "alertmanager", "alertmanager-check"):
        assert services[name]["depends_on"]["links"]["condition"] == (
            "service_completed_successfully"
        ), name
    prometheus = _mounts(services["prometheus"])
    assert prometheus["/etc/prometheus/rules"] == volume  # compose prometheus.yml's rule dir
    manager = services["alertmanager"]
    (flag,) = [f for f in manager["command"] if f.startswith("--config.file=")]
    config_file = Path(flag.removeprefix("--config.file="))
    assert _mounts(manager)[str(config_file.parent)] == volume
    check = services["alertmanager-check"]["command"]
    assert check[check.index("--config-file") + 1] == str(config_file)


def test_compose_rules_link_the_configured_runbooks_and_grafana(
    compose_pages: dict[str, str],
) -> None:
    alerts = _alerts(compose_pages["alerts.rules.yml"])
    assert alerts
    for rule in alerts:
        notes = rule["annotations"]
        assert notes["runbook_url"] == RUNBOOKS.format(alertname=rule["alert"])
        assert notes["dashboard_url"].startswith(f"{GRAFANA}/d/tokenpulse-"), rule["alert"]
    for name, text in compose_pages.items():
        assert _loopback_urls(text) == [], name


def test_compose_notifications_link_the_configured_kibana(compose_pages: dict[str, str]) -> None:
    text = compose_pages["alertmanager.yml"]
    samples = [u for u in _URL.findall(text) if "/app/discover" in u]
    assert samples and all(u.startswith(f"{KIBANA}/app/discover#/") for u in samples)
    # the config rendered with compose's links: the committed one but for the links
    mine = alertmanager.render(MixinConfig.local().with_links(Links(RUNBOOKS, GRAFANA, KIBANA)))
    assert text.endswith(mine)
    committed = (ROOT / "monitoring/alertmanager/alertmanager.yml").read_text()
    as_local = json.dumps(yaml.safe_load(mine)).replace(KIBANA, config.links.kibana_url)
    assert json.loads(as_local) == yaml.safe_load(committed)


def test_compose_needs_the_links_set(tmp_path: Path) -> None:
    env_file = tmp_path / "compose.env"
    env_file.write_text(
        "\n".join(
            line + "x" * 32 if re.fullmatch(r"[A-Z_]+=", line) else line
            for line in (ROOT / ".env.example").read_text().splitlines()
            if not line.startswith("TOKENPULSE_LINKS_")
        )
    )
    out = subprocess.run(
        ["docker-compose", "--env-file", str(env_file), "-f", "docker-compose.yml", "config"],
        cwd=ROOT, capture_output=True, text=True,
    )  # fmt: skip
    assert out.returncode != 0 and "TOKENPULSE_LINKS_" in out.stderr


@pytest.mark.parametrize("url", LOOPBACKS)
def test_the_one_shot_refuses_a_loopback_link_in_one_line(
    url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("TOKENPULSE_LINKS_RUNBOOK_URL_PATTERN", RUNBOOKS)
    monkeypatch.setenv("TOKENPULSE_LINKS_GRAFANA_URL", url)
    monkeypatch.setenv("TOKENPULSE_LINKS_KIBANA_URL", KIBANA)
    argv = [
        "links", "--dashboards-dir", str(ROOT / "dashboards"), "--out-dir", str(tmp_path / "out")
    ]  # fmt: skip
    assert cli(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "grafana_url" in err and "loopback" in err
    assert not (tmp_path / "out").exists()
    # allowed explicitly: a stack used on this machine only
    monkeypatch.setenv("TOKENPULSE_LINKS_ALLOW_LOOPBACK", "true")
    assert cli(argv) == 0


# --- the check ------------------------------------------------------------------------------


@pytest.mark.parametrize("url", LOOPBACKS)
@pytest.mark.parametrize("deployment", ["compose", "kubernetes"])
def test_loopback_is_refused_outside_the_local_stack(url: str, deployment: str) -> None:
    for links in (
        Links(RUNBOOKS, url, KIBANA),
        Links(RUNBOOKS, GRAFANA, url),
        Links(url + "/runbooks/{alertname}", GRAFANA, KIBANA),
    ):
        with pytest.raises(LinkError, match=f"^{deployment}: .* is a loopback address"):
            check(links, deployment)
        assert check(links, deployment, allow_loopback=True) == links
        assert check(links, "local") == links


@pytest.mark.parametrize(
    ("links", "problem"),
    [
        (Links("https://ops.test/runbooks/", GRAFANA, KIBANA), "does not end with {alertname}"),
        (Links("https://ops.test/{alertname}.html", GRAFANA, KIBANA), "does not end with"),
        (Links(RUNBOOKS, "grafana.corp.test", KIBANA), "not an http"),
        (Links(RUNBOOKS, "https://grafana.corp.test/x y", KIBANA), "space, quote"),
        (Links(RUNBOOKS, GRAFANA, "https://kibana.corp.test/?a=1"), "not a base URL"),
    ],
)
def test_a_malformed_link_is_one_error_naming_it(links: Links, problem: str) -> None:
    with pytest.raises(LinkError, match=re.escape(problem)):
        check(links, "compose", allow_loopback=True)


def test_settings_strip_a_trailing_slash(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TOKENPULSE_LINKS_GRAFANA_URL", GRAFANA + "/")
    settings = deploy_links.LinksSettings(runbook_url_pattern=RUNBOOKS, kibana_url=KIBANA)
    assert settings.links("compose") == Links(RUNBOOKS, GRAFANA, KIBANA)


# --- Kubernetes -----------------------------------------------------------------------------


def test_kubernetes_links_come_from_the_file_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TOKENPULSE_LINKS_GRAFANA_URL", "https://from-the-shell.test")
    path = tmp_path / "links.env"
    path.write_text(
        f"TOKENPULSE_LINKS_RUNBOOK_URL_PATTERN={RUNBOOKS}\n"
        f"TOKENPULSE_LINKS_GRAFANA_URL={GRAFANA}\nTOKENPULSE_LINKS_KIBANA_URL={KIBANA}\n"
    )
    assert deploy_links.kubernetes_links(path) == Links(RUNBOOKS, GRAFANA, KIBANA)
    path.write_text(path.read_text().replace(GRAFANA, "http://127.0.0.1:3000"))
    with pytest.raises(LinkError, match="^kubernetes: grafana_url .* is a loopback address"):
        deploy_links.kubernetes_links(path)
    path.write_text(f"TOKENPULSE_LINKS_GRAFANA_URL={GRAFANA}\n")
    with pytest.raises(LinkError, match="TOKENPULSE_LINKS_RUNBOOK_URL_PATTERN"):
        deploy_links.kubernetes_links(path)


def test_the_committed_kubernetes_links_are_not_loopback() -> None:
    links = deploy_links.kubernetes_links()
    assert not any(loopback(u) for u in (links.grafana_url, links.kibana_url))


# --- the local stack ------------------------------------------------------------------------


def test_a_config_with_other_links_changes_the_links_only() -> None:
    """What `up` does with its own ports: the same rules, its runbooks and Grafana linked."""
    mine = Links(
        "http://127.0.0.1:19095/runbooks/{alertname}", "http://127.0.0.1:13000",
        config.links.kibana_url,
    )  # fmt: skip
    cfg = MixinConfig.local().with_links(mine)
    moved = rulefiles.render_files(cfg, build_models(cfg))["alerts.rules.yml"]
    committed = (ROOT / "alerts/alerts.rules.yml").read_text()
    for rule, shipped in zip(_alerts(moved), _alerts(committed), strict=True):
        notes = rule["annotations"]
        assert notes["runbook_url"] == f"http://127.0.0.1:19095/runbooks/{rule['alert']}"
        assert notes["dashboard_url"].startswith("http://127.0.0.1:13000/d/")
        # nothing but the links differ
        for key in ("runbook_url", "dashboard_url"):
            notes.pop(key), shipped["annotations"].pop(key)
        assert rule == shipped


def test_the_one_shot_names_a_missing_dashboard_in_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("TOKENPULSE_LINKS_RUNBOOK_URL_PATTERN", RUNBOOKS)
    monkeypatch.setenv("TOKENPULSE_LINKS_GRAFANA_URL", GRAFANA)
    monkeypatch.setenv("TOKENPULSE_LINKS_KIBANA_URL", KIBANA)
    argv = ["links", "--dashboards-dir", str(tmp_path), "--out-dir", str(tmp_path / "out")]
    assert cli(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "tokenpulse-slo.json" in err
    assert not (tmp_path / "out").exists()
