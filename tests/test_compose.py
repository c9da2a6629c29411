"""docker-compose.yml: valid for docker-compose, and every command, file, port, variable and
credential it references exists and agrees with the local stack's configuration."""

from __future__ import annotations

import importlib
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml
from pydantic_settings import BaseSettings

from monitoring.mixin.config import DEFAULT as mixin_config
from serving.model.settings import TrainSettings
from serving.model.targets import TARGETS_GLOB
from stack.cli import build_parser
from tokenpulse import ports
from tokenpulse.paths import ROOT
from tokenpulse.settings_cli import settings_from_args
from tokenpulse.tfserving import config as tfs_config

ONE_SHOTS = {"model-build", "setup", "es-users", "alertmanager-check", "links", "training"}
PROJECT_SERVICES = {
    "model-build", "gateway", "exporter", "shipper", "setup", "oncall-receiver",
    "alertmanager-check", "links",
}  # fmt: skip


def _mounts(service: dict) -> list[dict]:
    """A service's volumes as dicts (`docker-compose config` prints short syntax as strings)."""
    out = []
    for mount in service.get("volumes", []):
        if isinstance(mount, str):
            source, target, *flags = mount.split(":")
            kind = "bind" if source.startswith("/") else "volume"
            mount = {"type": kind, "source": source, "target": target, "read_only": "ro" in flags}
        out.append(mount)
    return out


def _env_file(tmp_path: Path) -> Path:
    """.env.example with every required secret filled in, as an operator would."""
    lines = []
    for line in (ROOT / ".env.example").read_text().splitlines():
        if re.fullmatch(r"[A-Z_]+=", line):
            line += "x" * 32
        lines.append(line)
    path = tmp_path / "compose.env"
    path.write_text("\n".join(lines) + "\n")
    return path


def _config(
    *files: str, env_file: Path | None, profiles: tuple[str, ...] = ()
) -> subprocess.CompletedProcess[str]:
    if shutil.which("docker-compose") is None:
        pytest.fail("docker-compose is not installed (make test installs it)")
    argv = ["docker-compose"]
    if env_file is not None:
        argv += ["--env-file", str(env_file)]
    for profile in profiles:
        argv += ["--profile", profile]
    for name in files:
        argv += ["-f", name]
    return subprocess.run([*argv, "config"], cwd=ROOT, capture_output=True, text=True)


@pytest.fixture(scope="module")
def compose(tmp_path_factory: pytest.TempPathFactory) -> dict:
    env_file = _env_file(tmp_path_factory.mktemp("compose"))
    out = _config("docker-compose.yml", "docker-compose.gpu.yml", env_file=env_file)
    assert out.returncode == 0, out.stderr
    return yaml.safe_load(out.stdout)


@pytest.fixture(scope="module")
def raw() -> dict:
    return yaml.safe_load((ROOT / "docker-compose.yml").read_text())


def test_valid_alone_and_with_the_gpu_overlay(tmp_path: Path) -> None:
    env_file = _env_file(tmp_path)
    assert _config("docker-compose.yml", env_file=env_file).returncode == 0
    gpu = _config("docker-compose.yml", "docker-compose.gpu.yml", env_file=env_file)
    assert gpu.returncode == 0, gpu.stderr


def test_a_missing_secret_fails_with_a_message_naming_it(tmp_path: Path) -> None:
    env_file = tmp_path / "empty.env"
    env_file.write_text("")
    out = _config("docker-compose.yml", env_file=env_file)
    assert out.returncode != 0
    assert re.search(r"set [A-Z_]+PASSWORD in \.env", out.stderr), out.stderr


def test_every_variable_it_reads_is_documented_in_env_example(raw: dict) -> None:
    text = (ROOT / "docker-compose.yml").read_text()
    used = set(re.findall(r"(?<!\$)\$\{([A-Z][A-Z0-9_]*)", text))
    documented = set(re.findall(r"^([A-Z][A-Z0-9_]*)=", (ROOT / ".env.example").read_text(), re.M))
    assert used <= documented, used - documented
    assert ".env" in (ROOT / ".gitignore").read_text().split()


SETTINGS_MODULES = [
    "serving.gateway.settings",
    "exporter.settings",
    "log_pipeline.settings",
    "monitoring.oncall.server",
    "monitoring.deploy_links",
    "serving.model.settings",
]


def test_every_tokenpulse_variable_is_a_setting_of_the_component(compose: dict) -> None:
    """A misspelt TOKENPULSE_* variable would be ignored silently: each must name a field."""
    known: set[str] = set()
    for module_name in SETTINGS_MODULES:
        module = importlib.import_module(module_name)
        for obj in vars(module).values():
            if isinstance(obj, type) and issubclass(obj, BaseSettings) and obj is not BaseSettings:
                prefix = obj.model_config.get("env_prefix", "")
                known |= {f"{prefix}{name}".upper() for name in obj.model_fields}
    for name, service in compose["services"].items():
        for var in service.get("environment", {}):
            if var.startswith("TOKENPULSE_"):
                assert var in known, (name, var)


def test_services_and_gpu_reservations(compose: dict) -> None:
    services = compose["services"]
    wanted = {"tfserving", "prometheus", "alertmanager", "grafana", "elasticsearch", "kibana"}
    assert wanted | PROJECT_SERVICES <= set(services)
    assert services["tfserving"]["image"].startswith("tensorflow/serving:")
    for name in ("tfserving", "exporter"):
        devices = services[name]["deploy"]["resources"]["reservations"]["devices"]
        assert "gpu" in devices[0]["capabilities"]


def test_nvml_collector_runs_only_where_gpus_are_reserved(tmp_path: Path) -> None:
    """A CPU deployment must not run a collector that fails every scrape (a false page)."""
    env_file = _env_file(tmp_path)
    cases = [
        (["docker-compose.yml"], "--no-collector.nvml"),
        (["docker-compose.yml", "docker-compose.gpu.yml"], "--collector.nvml"),
    ]
    for files, wanted in cases:
        out = _config(*files, env_file=env_file)
        command = yaml.safe_load(out.stdout)["services"]["exporter"]["command"]
        assert wanted in command and build_parser(command).parse_args(command)


def test_tf_serving_is_internal_and_only_the_gateway_is_public(compose: dict) -> None:
    services = compose["services"]
    assert "ports" not in services["tfserving"]
    assert set(services["tfserving"]["networks"]) == {"internal"}
    assert compose["networks"]["internal"]["internal"] is True
    for name, service in services.items():
        for port in service.get("ports", []):
            if name == "gateway":
                assert port["target"] == 8080
            else:  # operator UIs: the host's loopback only
                assert isinstance(port, str) and port.startswith("127.0.0.1:"), (name, port)


def test_operations_health_restart_limits_volumes(compose: dict) -> None:
    for name, service in compose["services"].items():
        assert "mem_limit" in service, name
        if name in ONE_SHOTS:
            assert service.get("restart") == "no", name
            continue
        assert service.get("restart") == "unless-stopped", name
        assert "healthcheck" in service, name
    stateful = {
        "prometheus": "/prometheus",
        "alertmanager": "/alertmanager",
        "grafana": "/var/lib/grafana",
        "elasticsearch": "/usr/share/elasticsearch/data",
    }
    for name, target in stateful.items():
        mounts = _mounts(compose["services"][name])
        assert any(m["type"] == "volume" and m["target"] == target for m in mounts), name


def test_keys_file_is_a_long_syntax_bind_so_docker_never_creates_a_directory(raw: dict) -> None:
    mounts = raw["services"]["gateway"]["volumes"]
    target = "/secrets/gateway-keys.json"
    keys = [m for m in mounts if isinstance(m, dict) and m["target"] == target]
    assert keys and keys[0]["type"] == "bind" and keys[0]["read_only"] is True
    assert "/secrets/gateway-keys.json" in raw["services"]["gateway"]["command"]


def test_every_bind_mounted_repo_file_exists(compose: dict) -> None:
    operator_provided = {ROOT / "run" / "gateway-keys.json"}
    for name, service in compose["services"].items():
        for mount in _mounts(service):
            if mount["type"] != "bind":
                continue
            source = Path(mount["source"])
            if source in operator_provided:
                continue
            assert source.exists(), (name, source)


def test_alertmanager_secret_files_are_the_ones_the_secrets_readme_lists(compose: dict) -> None:
    config = (ROOT / "monitoring" / "alertmanager" / "alertmanager.yml").read_text()
    wanted = set(re.findall(r"_file: /etc/alertmanager/secrets/([\w.-]+)", config))
    readme = (ROOT / "secrets" / "alertmanager" / "README.md").read_text()
    assert wanted and all(f"`{name}`" in readme for name in wanted)
    mounts = _mounts(compose["services"]["alertmanager"])
    assert any(m["target"] == "/etc/alertmanager/secrets" for m in mounts)


def _listen_port(command: list[str], flag: str) -> int:
    for i, word in enumerate(command):
        if word.startswith(flag + "="):
            return int(word.split("=", 1)[1].rsplit(":", 1)[-1])
        if word == flag:
            return int(command[i + 1])
    raise AssertionError(f"{flag} not in {command}")


def test_prometheus_scrapes_each_service_where_it_listens(compose: dict) -> None:
    prom = yaml.safe_load((ROOT / "monitoring" / "prometheus" / "prometheus.yml").read_text())
    services = compose["services"]
    listening = {
        "tfserving": _listen_port(services["tfserving"]["command"], "--rest_api_port"),
        "gateway": _listen_port(services["gateway"]["command"], "--port"),
        "exporter": _listen_port(services["exporter"]["command"], "--web.listen-address"),
        "shipper": _listen_port(services["shipper"]["command"], "--metrics-port"),
        "alertmanager": 9093,
    }
    targets = {
        t
        for job in prom["scrape_configs"]
        for sc in job.get("static_configs", [])  # not training's file_sd job
        for t in sc["targets"]
    }
    for host, port in listening.items():
        assert f"{host}:{port}" in targets, (host, port)
    assert prom["alerting"]["alertmanagers"][0]["static_configs"][0]["targets"] == [
        "alertmanager:9093", "alertmanager-2:9093"
    ]  # fmt: skip
    # the rule glob matches the files the `links` one-shot renders into its volume (the names
    # of the committed ./alerts files, rendered with the deployment's links)
    mounts = {m["target"]: m["source"] for m in _mounts(services["prometheus"])}
    links = services["links"]["command"]
    written = {m["target"]: m["source"] for m in _mounts(services["links"])}
    for pattern in prom["rule_files"]:
        inside = Path(pattern)
        assert mounts[str(inside.parent)] == written[_listen_flag(links, "--out-dir")]
        assert list((ROOT / "alerts").glob(inside.name)), pattern


def test_two_prometheus_and_two_gossiping_alertmanagers(compose: dict) -> None:
    """HA (issue 26 B.8): each Prometheus runs its own generated file (one external label value
    apiece, dropped from alerts) with the same rules and targets, and each Alertmanager peers with
    the other on the cluster port, with its own data volume and published port."""
    services = compose["services"]
    files = {}
    for name in ("prometheus", "prometheus-2"):
        mounts = {m["target"]: m for m in _mounts(services[name])}
        source = Path(mounts["/etc/prometheus/prometheus.yml"]["source"])
        assert source == ROOT / "monitoring" / "prometheus" / f"{name}.yml"
        files[name] = yaml.safe_load(source.read_text())
        assert "--config.file=/etc/prometheus/prometheus.yml" in services[name]["command"]
        assert mounts["/prometheus"]["type"] == "volume"
    one, two = files["prometheus"], files["prometheus-2"]
    assert one["global"].pop("external_labels") == {"prometheus_replica": "prometheus"}
    assert two["global"].pop("external_labels") == {"prometheus_replica": "prometheus-2"}
    assert one == two  # nothing else differs
    assert one["alerting"]["alert_relabel_configs"] == [
        {"action": "labeldrop", "regex": "prometheus_replica"}
    ]
    scraped = {t for job in one["scrape_configs"] if job["job_name"] in ("prometheus",
               "alertmanager") for sc in job["static_configs"] for t in sc["targets"]}  # fmt: skip
    assert scraped == {"prometheus:9090", "prometheus-2:9090", "alertmanager:9093",
                       "alertmanager-2:9093"}  # fmt: skip
    peers = {"alertmanager": "alertmanager-2", "alertmanager-2": "alertmanager"}
    for name, peer in peers.items():
        command = services[name]["command"]
        assert "--cluster.listen-address=0.0.0.0:9094" in command
        assert f"--cluster.peer={peer}:9094" in command
        assert "internal" in services[name]["networks"] and "internal" in services[peer]["networks"]
    data = [next(m["source"] for m in _mounts(services[n]) if m["target"] == t) for n, t in
            (("prometheus", "/prometheus"), ("prometheus-2", "/prometheus"),
             ("alertmanager", "/alertmanager"), ("alertmanager-2", "/alertmanager"))]  # fmt: skip
    assert len(set(data)) == 4  # a TSDB or notification log is never shared
    published = [p for n in ("prometheus", "prometheus-2", "alertmanager", "alertmanager-2")
                 for p in services[n]["ports"]]  # fmt: skip
    assert len(set(published)) == 4


def test_grafana_provisioning_points_at_the_compose_services(compose: dict) -> None:
    datasources = yaml.safe_load(
        (ROOT / "monitoring/grafana/provisioning/datasources/tokenpulse.yaml").read_text()
    )
    urls = {d["type"]: d["url"] for d in datasources["datasources"]}
    assert urls == {"prometheus": "http://prometheus:9090"}
    mounts = {m["target"]: Path(m["source"]) for m in _mounts(compose["services"]["grafana"])}
    assert list(mounts["/var/lib/grafana/dashboards"].glob("*.json"))


def test_alertmanager_ticket_webhook_resolves_to_a_service(compose: dict) -> None:
    config = yaml.safe_load((ROOT / "monitoring/alertmanager/alertmanager.yml").read_text())
    receiver = compose["services"]["oncall-receiver"]
    names = {"oncall-receiver", *receiver["networks"]["internal"].get("aliases", [])}
    port = _listen_port(receiver["command"], "--port")
    for r in config["receivers"]:
        for hook in r.get("webhook_configs", []):
            host, _, rest = hook["url"].removeprefix("http://").partition(":")
            assert host in names and rest.startswith(str(port)), hook["url"]


def test_alertmanager_starts_only_once_its_receivers_secret_files_are_checked(
    compose: dict,
) -> None:
    """Alertmanager reads them only when it sends: without the check a fresh deployment would
    start clean and fail every page (issue 17 A3)."""
    services = compose["services"]
    check, manager = services["alertmanager-check"], services["alertmanager"]
    depends = manager["depends_on"]["alertmanager-check"]
    assert depends["condition"] == "service_completed_successfully"
    config = _listen_flag(check["command"], "--config-file")
    assert f"--config.file={config}" in manager["command"]
    # the check sees what Alertmanager sees: the same config and secrets at the same paths
    seen = {m["target"]: m["source"] for m in _mounts(check)}
    for mount in _mounts(manager):
        if mount["target"] in (config, "/etc/alertmanager/secrets"):
            assert seen[mount["target"]] == mount["source"], mount


def _listen_flag(command: list[str], flag: str) -> str:
    return command[command.index(flag) + 1]


def test_links_in_notifications_point_at_published_addresses(compose: dict) -> None:
    """generatorURL, the Alertmanager link and every runbook_url open from the operator's host."""
    services = compose["services"]
    pairs = (("prometheus", 9090), ("prometheus-2", 9090), ("alertmanager", 9093),
             ("alertmanager-2", 9093))  # fmt: skip
    for name, port in pairs:
        (published,) = [p for p in services[name]["ports"] if p.endswith(f":{port}/tcp")]
        host = published.rsplit(":", 1)[0]  # docker-compose writes host:published:target/tcp
        assert f"--web.external-url=http://{host}/" in services[name]["command"], name
    receiver = services["oncall-receiver"]
    (published,) = receiver["ports"]
    host, _, inside = published.removesuffix("/tcp").rpartition(":")
    assert inside == str(_listen_port(receiver["command"], "--port"))
    assert mixin_config.links.runbook_url_pattern.startswith(f"http://{host}/runbooks/")
    runbooks = {m["target"]: Path(m["source"]) for m in _mounts(receiver)}
    folder = runbooks[_listen_flag(receiver["command"], "--runbooks-dir")]
    assert folder == ROOT / "alerts" / "runbooks" and list(folder.glob("TokenPulse*.md"))


def test_tf_serving_flags_are_ones_the_local_server_accepts_too(compose: dict) -> None:
    flags = compose["services"]["tfserving"]["command"]
    local = build_parser(["modelserver", *flags]).parse_args(["modelserver", *flags])
    assert local.command == "modelserver"
    for flag in flags:
        name = flag.split("=", 1)[0]
        if name.endswith("_file"):
            path = flag.split("=", 1)[1].replace("/config/", "serving/config/")
            assert (ROOT / path).is_file(), path


def test_container_models_config_matches_the_local_one_but_for_base_path() -> None:
    local = tfs_config.parse_model_server_config(
        (ROOT / "serving/config/models.config").read_text()
    )
    container = tfs_config.parse_model_server_config(
        (ROOT / "serving/config/models.container.config").read_text()
    )
    assert [c.name for c in local.models] == [c.name for c in container.models]
    for mine, theirs in zip(local.models, container.models, strict=True):
        assert theirs.base_path.startswith("/models/")
        assert theirs.base_path.removeprefix("/") == mine.base_path
        assert mine.version_policy == theirs.version_policy
        assert mine.version_labels == theirs.version_labels


@pytest.mark.parametrize("service", sorted(PROJECT_SERVICES))
def test_project_commands_parse_with_the_cli(compose: dict, service: str) -> None:
    command = compose["services"][service]["command"]
    args = build_parser(command).parse_args(command)
    assert args.command == command[0]


def _secret_values(raw: dict) -> list[tuple[str, str, str]]:
    """(service, variable, value as written) of every password, key or token variable."""
    found = []
    for name, service in raw["services"].items():
        env = service.get("environment", {})
        for var, value in env.items() if isinstance(env, dict) else ():
            if re.search(r"(^|_)(PASSWORD|SECRET|API_KEY|TOKEN|ENCRYPTIONKEY)($|_)", var):
                found.append((name, var, str(value)))
    return found


def test_no_password_is_written_in_the_file(raw: dict) -> None:
    secrets = _secret_values(raw)
    assert secrets
    for service, var, value in secrets:
        assert re.fullmatch(r"\$\{[A-Z_]+:\?[^}]+\}", value), (service, var, value)
    datasources = (ROOT / "monitoring/grafana/provisioning/datasources/tokenpulse.yaml").read_text()
    for line in datasources.splitlines():
        if "Password" in line and ":" in line:
            assert re.fullmatch(r"\s*\w+: \$[A-Z_]+", line), line


def test_the_shipper_and_grafana_sign_in_with_least_privilege(raw: dict) -> None:
    """Only the setup job (and the es-users job) sign in as `elastic`; it creates the shipper's
    create-only user and Grafana's read-only one (`tokenpulse es setup`)."""
    services = raw["services"]
    setup_env = services["setup"]["environment"]
    shipper_env = services["shipper"]["environment"]
    assert shipper_env["TOKENPULSE_SHIPPER_ES_USERNAME"] == setup_env["TOKENPULSE_ES_SHIPPER_USER"]
    assert shipper_env["TOKENPULSE_SHIPPER_ES_USERNAME"] != "elastic"
    assert (
        shipper_env["TOKENPULSE_SHIPPER_ES_PASSWORD"] == setup_env["TOKENPULSE_ES_SHIPPER_PASSWORD"]
    )
    grafana_env = services["grafana"]["environment"]
    assert "ELASTIC_PASSWORD" not in grafana_env and "ELASTIC_PASSWORD" not in shipper_env
    for name, service in services.items():
        env = service.get("environment", {})
        uses_elastic = "elastic" in env.values() or "ELASTIC_PASSWORD" in env
        assert not uses_elastic or name in {"setup", "es-users", "elasticsearch"}, name


def test_training_is_opt_in_and_serves_its_metrics_where_prometheus_can_reach_it(
    tmp_path: Path, raw: dict
) -> None:
    """`up` leaves it out (a profile, and nothing depends on it); in its profile it trains
    with checkpoints into its own volume, its metrics on tokenpulse.ports' training port on
    the internal network."""
    assert raw["services"]["training"]["profiles"] == ["training"]
    for name, service in raw["services"].items():
        assert "training" not in service.get("depends_on", {}), name
    out = _config("docker-compose.yml", env_file=_env_file(tmp_path), profiles=("training",))
    assert out.returncode == 0, out.stderr
    training = yaml.safe_load(out.stdout)["services"]["training"]
    command = training["command"]
    args = build_parser(command).parse_args(command)
    assert command[:2] == ["model", "train"] and not args.progress
    assert _listen_port(command, "--metrics-port") == ports.TRAINING_METRICS
    assert set(training["networks"]) == {"internal"} and "ports" not in training
    assert training["restart"] == "no" and training["image"].startswith("tokenpulse-model:")
    mounts = {m["target"]: m for m in _mounts(training)}
    run_dir = Path(_listen_flag(command, "--run-dir"))
    assert mounts["/training"]["type"] == "volume" and run_dir.is_relative_to("/training")


def test_prometheus_scrapes_the_training_workers_the_run_registers(tmp_path: Path) -> None:
    """No static target (it would be down forever after the run): the run writes its file_sd
    file, naming itself by its service, into a volume both Prometheus read, as `up`'s runs do."""
    out = _config("docker-compose.yml", env_file=_env_file(tmp_path), profiles=("training",))
    assert out.returncode == 0, out.stderr
    services = yaml.safe_load(out.stdout)["services"]
    command = services["training"]["command"]
    settings = settings_from_args(TrainSettings, build_parser(command).parse_args(command))
    assert settings.metrics_host == "training"  # the service's name on the internal network
    training = {m["target"]: m for m in _mounts(services["training"])}
    written = training[str(settings.targets_path())]
    assert written["type"] == "volume" and not written.get("read_only")
    for name in ("prometheus", "prometheus-2"):
        mounts = {m["target"]: m for m in _mounts(services[name])}
        prom = yaml.safe_load(Path(mounts["/etc/prometheus/prometheus.yml"]["source"]).read_text())
        (job,) = [j for j in prom["scrape_configs"] if j["job_name"] == mixin_config.jobs.training]
        (sd,) = job["file_sd_configs"]
        (files,) = sd["files"]
        folder, _, pattern = files.rpartition("/")
        assert pattern == TARGETS_GLOB.rpartition("/")[2], files
        assert mounts[folder]["source"] == written["source"], name
        assert mounts[folder]["read_only"], name
