"""`tokenpulse up` before anything starts: ports, settings, models, the generated files, the banner.

The running stack itself (start, curl, Prometheus, alerts, Ctrl-C) is proven end to end in
tests/e2e/test_up_stack.py.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import urllib.parse
from pathlib import Path

import pytest
import yaml

from monitoring.mixin import alertmanager
from monitoring.mixin import prometheus as prometheus_config
from monitoring.mixin.config import DEFAULT as MIXIN
from stack import components, up
from stack.config import StackConfig
from stack.launch import Launched, running_process
from stack.supervise import Supervisor
from stack.up import banner as up_banner
from stack.up import files, plan
from stack.up.ports import PortError, check_ports
from stack.up.settings import HA_PORT_FIELDS, PORT_FIELDS, UpSettings
from stack.up.state import StackState
from tests.support.up import up_config, up_settings
from tokenpulse.procs import free_port
from tokenpulse.tfserving.config import parse_model_server_config
from tokenpulse.tfserving.signature import GOLDEN_FILE


def _up(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, "-m", "stack.cli", "up", *args]
    return subprocess.run(argv, cwd=tmp_path, capture_output=True, text=True, timeout=120)


def test_a_taken_port_is_named_with_its_setting_before_anything_starts(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = _up(tmp_path, f"--gateway-port={port}", f"--run-dir={tmp_path / 'run'}")
    assert done.returncode == 2
    assert f"port {port} on 127.0.0.1 is already in use" in done.stdout
    assert "--gateway-port / TOKENPULSE_UP_GATEWAY_PORT" in done.stdout
    assert "Traceback" not in done.stdout + done.stderr
    assert not (tmp_path / "run" / "logs").exists()  # nothing was prepared, nothing started


def test_a_port_given_twice_is_an_error(tmp_path: Path) -> None:
    s = up_settings(tmp_path)
    s = s.model_copy(update={"exporter_port": s.gateway_port})
    with pytest.raises(PortError, match="both gateway_port .* and exporter_port"):
        check_ports(s)


def test_bad_settings_are_one_line_exit_2(tmp_path: Path) -> None:
    done = _up(tmp_path, "--gateway-port=0")
    assert done.returncode == 2
    assert done.stderr.startswith("tokenpulse up: error:") and "gateway" in done.stderr
    assert "Traceback" not in done.stderr


def test_es_url_comes_from_the_plain_environment_variable(monkeypatch) -> None:
    monkeypatch.setenv("ES_URL", "http://127.0.0.1:9200/")
    assert UpSettings().es_url == "http://127.0.0.1:9200"


def test_models_config_labels_version_1_stable_and_2_canary(tmp_path: Path) -> None:
    s = up_settings(tmp_path)
    s.run_dir.mkdir(parents=True)
    (model,) = parse_model_server_config(files.write_models_config(s).read_text()).models
    assert model.name == "gen" and Path(model.base_path) == (tmp_path / "models/gen").resolve()
    assert model.version_labels == {"stable": 1, "canary": 2}
    assert model.version_policy is not None and model.version_policy.versions == (1, 2)


def _export(base: Path, version: int, golden: str, noise: float = 0.0) -> Path:
    """What `tokenpulse model build` leaves that up reads: the graph, golden answers, metadata."""
    path = base / str(version)
    (path / "assets.extra").mkdir(parents=True)
    (path / "saved_model.pb").write_bytes(b"not read here")
    (path / GOLDEN_FILE).write_text(golden)
    (path / files.META_FILE).write_text(json.dumps({"degrade_noise": noise}))
    return path


def _fake_build(monkeypatch: pytest.MonkeyPatch) -> list[list[str]]:
    """`tokenpulse model build` replaced by one that exports with its own answers as golden."""
    calls: list[list[str]] = []

    def run(argv: list[str], check: bool) -> subprocess.CompletedProcess[str]:
        calls.append(argv)
        base, version = Path(argv[argv.index("--base-path") + 1]), argv[argv.index("--version") + 1]
        noise = float(argv[argv.index("--degrade-noise") + 1]) if "--degrade-noise" in argv else 0.0
        _export(base, int(version), f'{{"answers of": {version}}}', noise)
        return subprocess.CompletedProcess(argv, 0)

    monkeypatch.setattr(files.subprocess, "run", run)
    return calls


def test_a_degraded_canary_is_built_with_the_noise_and_carries_stables_golden_answers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    s = up_settings(tmp_path, preset="tiny", canary_degrade_noise=2.5)
    base = s.models_dir / "gen"
    stable = _export(base, 1, '{"answers of": "stable"}')
    calls = _fake_build(monkeypatch)
    said: list[str] = []
    files.ensure_models(s, said.append)
    # its own broken answers would pass its canary: it carries the answers stable recorded
    assert (base / "2" / GOLDEN_FILE).read_bytes() == (stable / GOLDEN_FILE).read_bytes()
    (argv,) = calls  # version 1 exists: only the canary is built
    assert argv[argv.index("--version") + 1] == "2"
    assert argv[argv.index("--preset") + 1] == "tiny"
    assert argv[argv.index("--degrade-noise") + 1] == "2.5"
    assert "version 2 (canary)" in said[0] and "--degrade-noise 2.5" in said[0]
    (stable / GOLDEN_FILE).write_text('{"answers of": "a new stable"}')
    files.ensure_models(s, said.append)  # cached: not built again, still given stable's answers
    assert len(calls) == 1
    assert (base / "2" / GOLDEN_FILE).read_text() == '{"answers of": "a new stable"}'


def test_a_healthy_canary_keeps_its_own_golden_answers(tmp_path, monkeypatch) -> None:
    s = up_settings(tmp_path, preset="tiny")
    calls = _fake_build(monkeypatch)
    files.ensure_models(s, lambda _: None)
    assert [argv[argv.index("--version") + 1] for argv in calls] == ["1", "2"]
    assert not any("--degrade-noise" in argv for argv in calls)
    assert (s.models_dir / "gen" / "2" / GOLDEN_FILE).read_text() == '{"answers of": 2}'


@pytest.mark.parametrize(("built", "asked"), [(0.0, 2.0), (2.0, 0.0), (2.0, 1.5)])
def test_a_cached_canary_built_with_other_noise_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, built: float, asked: float
) -> None:
    s = up_settings(tmp_path, canary_degrade_noise=asked)
    _export(s.models_dir / "gen", 1, "{}")
    canary = _export(s.models_dir / "gen", 2, '{"its own": true}', noise=built)
    calls = _fake_build(monkeypatch)
    with pytest.raises(files.BuildFailed, match=f"built with --degrade-noise {built:g}, not"):
        files.ensure_models(s, lambda _: None)
    assert calls == [] and (canary / GOLDEN_FILE).read_text() == '{"its own": true}'


def test_a_stable_version_without_golden_answers_fails_the_degraded_canary(
    tmp_path, monkeypatch
) -> None:
    s = up_settings(tmp_path, canary_degrade_noise=2.0)
    (_export(s.models_dir / "gen", 1, "{}") / GOLDEN_FILE).unlink()
    _fake_build(monkeypatch)
    with pytest.raises(files.BuildFailed, match="stable version's golden answers"):
        files.ensure_models(s, lambda _: None)


def test_a_failed_build_is_a_typed_error(tmp_path, monkeypatch) -> None:
    monkeypatch.setattr(
        files.subprocess, "run", lambda argv, check: subprocess.CompletedProcess(argv, 1)
    )
    with pytest.raises(files.BuildFailed, match="version 1"):
        files.ensure_models(up_settings(tmp_path), lambda _: None)


def test_the_run_directory_is_private_whatever_the_umask(tmp_path: Path) -> None:
    s = up_settings(tmp_path)
    s.run_dir.mkdir(parents=True, mode=0o755)
    old = os.umask(0o022)
    try:
        run = files.make_run_dir(s)
    finally:
        os.umask(old)
    assert run.stat().st_mode & 0o777 == 0o700
    assert s.path("logs").stat().st_mode & 0o077 == 0


def test_demo_key_is_private_and_only_its_hash_is_stored(tmp_path: Path) -> None:
    s = up_settings(tmp_path)
    s.run_dir.mkdir(parents=True)
    keys, key = files.ensure_demo_key(s)
    assert key not in keys.read_text()
    assert s.path("demo-key.txt").stat().st_mode & 0o077 == 0
    assert files.ensure_demo_key(s) == (keys, key)  # kept across runs


def test_prometheus_scrapes_every_component_and_alertmanager_calls_the_receiver(
    tmp_path, monkeypatch
) -> None:
    s = up_settings(
        tmp_path, rules="compressed", scrape_interval="2s", group_wait="10s",
        training_cache_dir=tmp_path / "training",
    )  # fmt: skip
    s.run_dir.mkdir(parents=True)
    started: list[list[str]] = []
    monkeypatch.setattr(
        components, "_process", lambda c, name, argv, url, env=None: started.append(argv)
    )
    components.by_name("prometheus").start(up_config(s))
    components.by_name("alertmanager").start(up_config(s))
    prom = yaml.safe_load(s.path("prometheus.yml").read_text())
    static = [job for job in prom["scrape_configs"] if "static_configs" in job]
    scraped = {t for job in static for t in job["static_configs"][0]["targets"]}
    # training runs register themselves: one file_sd job over the targets files of the runs of
    # the training cache up was given, whose folder exists before Prometheus watches it
    (training,) = [job for job in prom["scrape_configs"] if "file_sd_configs" in job]
    assert training["job_name"] == "tokenpulse-training"
    folder = tmp_path / "training" / "training-targets"
    assert training["file_sd_configs"][0]["files"] == [str(folder / "*.json")]
    assert folder.is_dir()
    if shutil.which("promtool"):  # Prometheus itself parses it (a file_sd path included)
        check = subprocess.run(
            ["promtool", "check", "config", "--syntax-only", str(s.path("prometheus.yml"))],
            capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        assert check.returncode == 0, check.stdout + check.stderr
    ports = {getattr(s, f) for f in PORT_FIELDS} - {s.grpc_port, s.oncall_port}
    assert scraped == {f"127.0.0.1:{p}" for p in ports}
    assert prom["global"]["scrape_interval"] == "2s"
    sources = [Path(f).read_text().splitlines()[1] for f in prom["rule_files"]]
    assert len(sources) == 2 and all("/compressed/" in line for line in sources)
    # the stack's copies link its own runbooks, served by its on-call receiver (issue 17 B)
    alerts = yaml.safe_load(Path(prom["rule_files"][1]).read_text())["groups"][0]["rules"][0]
    runbook = f"http://127.0.0.1:{s.oncall_port}/runbooks/{alerts['alert']}"
    assert alerts["annotations"]["runbook_url"] == runbook
    assert alerts["annotations"]["dashboard_url"].startswith(f"{s.grafana_url}/d/tokenpulse-")
    assert prom["alerting"]["alertmanagers"][0]["static_configs"][0]["targets"] == [
        f"127.0.0.1:{s.alertmanager_port}"
    ]
    am = yaml.safe_load(s.path("alertmanager.yml").read_text())
    assert am["route"]["group_wait"] == "10s"
    hooks = [c["url"] for r in am["receivers"] for c in r.get("webhook_configs", [])]
    assert hooks and all(h.startswith(f"http://127.0.0.1:{s.oncall_port}/") for h in hooks)
    assert all(f"127.0.0.1:{getattr(s, f)}" in " ".join(a) for a, f in
               zip(started, ("prometheus_port", "alertmanager_port"), strict=True))  # fmt: skip
    for argv, field in zip(started, ("prometheus_port", "alertmanager_port"), strict=True):
        assert f"--web.external-url=http://127.0.0.1:{getattr(s, field)}/" in argv


def test_a_missing_receiver_secret_stops_up_in_one_line_before_anything_starts(
    tmp_path: Path,
) -> None:
    config = tmp_path / "alertmanager.yml"  # the deployment's routes, its secrets not in place
    secrets = tmp_path / "secrets"
    config.write_text(alertmanager.render(MIXIN).replace(alertmanager.SECRETS, str(secrets)))
    ports = [f"--{f.replace('_', '-')}={free_port()}" for f in PORT_FIELDS]
    done = _up(tmp_path, *ports, f"--alertmanager-config={config}", f"--run-dir={tmp_path / 'run'}")
    assert done.returncode == 2, done.stdout + done.stderr
    (line,) = done.stdout.splitlines()
    assert line.startswith(f"tokenpulse up: error: alertmanager_config {config}: receiver 'pager'")
    assert f"{secrets}/pagerduty-routing-key does not exist" in line
    assert not (tmp_path / "run").exists()  # nothing was prepared, nothing started


def test_a_given_alertmanager_config_runs_as_written(tmp_path: Path, monkeypatch) -> None:
    secrets = tmp_path / "secrets"
    secrets.mkdir()
    for name in ("pagerduty-routing-key", "slack-webhook-url"):
        (secrets / name).write_text("x\n")
    config = tmp_path / "alertmanager.yml"
    text = alertmanager.render(MIXIN).replace(alertmanager.SECRETS, str(secrets))
    config.write_text(text)
    s = up_settings(tmp_path, alertmanager_config=config)
    s.run_dir.mkdir(parents=True)
    started: list[list[str]] = []
    monkeypatch.setattr(
        components, "_process", lambda c, name, argv, url, env=None: started.append(argv)
    )
    up.check_alertmanager_config(s)  # every secret in place: no refusal
    components.by_name("alertmanager").start(up_config(s))
    assert f"--config.file={config}" in started[0]
    assert config.read_text() == text and not s.path("alertmanager.yml").exists()


def test_banner_lists_every_component_and_what_to_do_next(tmp_path: Path) -> None:
    s = up_settings(tmp_path)
    config = up_config(s)
    pids = {name: 1000 + i for i, name in enumerate(components.names())}
    text = up_banner.banner(s, config, "tp-demo", pids)
    for c in components.PROCESSES:
        assert c.url(config) in text and c.metrics(config) in text or c.name == "oncall"
        assert f"pid {pids[c.name]}" in text
    assert "curl -sS" in text and "from openai import OpenAI" in text and "tp-demo" in text
    assert "tokenpulse samples search" in text and "tokenpulse dashboards preview" in text
    assert str(s.path("oncall.jsonl")) in text and "tensorboard --logdir" in text
    assert f"http://127.0.0.1:{s.oncall_port}/runbooks" in text
    assert f"http://127.0.0.1:{s.oncall_port}/watchdog" in text
    assert text.rstrip().endswith(up_banner.READY_LINE)
    links = [line.split(": ", 1)[1] for line in text.splitlines() if "/graph?" in line]
    assert len(links) == len(up_banner.KEY_GRAPHS)
    query = urllib.parse.parse_qs(urllib.parse.urlsplit(links[0]).query)
    assert query["g0.expr"] == [up_banner.KEY_GRAPHS[0][1]]


def test_shipper_writes_to_elasticsearch_too_when_es_url_is_set(tmp_path, monkeypatch) -> None:
    calls: list[tuple[list[str], dict[str, str] | None]] = []
    monkeypatch.setattr(
        components, "_process", lambda c, name, argv, url, env=None: calls.append((argv, env))
    )
    components.by_name("shipper").start(up_config(up_settings(tmp_path)))
    with_es = up_settings(tmp_path, es_url="http://127.0.0.1:9200", es_api_key="k3y")
    components.by_name("shipper").start(up_config(with_es))
    (sqlite_only, _), (both, env) = calls
    assert sqlite_only[sqlite_only.index("--outputs") + 1 :] == ["sqlite"]
    assert both[both.index("--outputs") + 1 :] == [
        "sqlite", "elasticsearch", "--es-url=http://127.0.0.1:9200",
    ]  # fmt: skip
    assert env is not None and env["TOKENPULSE_SHIPPER_ES_API_KEY"] == "k3y"
    assert "k3y" not in " ".join(both)  # never on a command line


def test_with_es_url_the_samples_data_stream_is_set_up_first(tmp_path, monkeypatch) -> None:
    from devtools.standins.es import EsStandin
    from log_pipeline import assets

    with EsStandin(api_key="right") as es:
        monkeypatch.setenv("ES_URL", es.url)
        monkeypatch.setenv("ES_API_KEY", "right")
        files.setup_elasticsearch(up_settings(tmp_path), lambda _: None)
        assert assets.DEFAULT_STREAM in es.streams
        monkeypatch.setenv("ES_API_KEY", "wrong")
        with pytest.raises(files.EsSetupFailed, match=es.url):
            files.setup_elasticsearch(up_settings(tmp_path), lambda _: None)


def test_a_component_that_exits_is_restarted_after_the_delay_and_all_stop(tmp_path) -> None:
    def sleeper(c: StackConfig) -> contextlib.AbstractContextManager[Launched]:
        return running_process(["sleep", "600"], lambda: True, what="sleeper")

    comp = components.Component("sleeper", sleeper, lambda c: "", lambda c: "")
    said: list[str] = []
    config = StackConfig(run_dir=tmp_path, restart_delay_s=0)
    stack = Supervisor(config, said.append, components=(comp,))
    try:
        stack.start_all()
        first = stack.pids()["sleeper"]
        os.kill(first, signal.SIGKILL)
        stack.running[0].child.process.wait()
        stack.watch_once()
        second = stack.pids()["sleeper"]
        assert second != first and os.path.exists(f"/proc/{second}")
        assert any("sleeper (pid" in m and "exited with -9" in m for m in said)
        assert said[-1] == f"sleeper restarted (pid {second})"
    finally:
        assert stack.stop_all() == 1
    assert stack.running == []
    with pytest.raises(ProcessLookupError):
        os.kill(second, 0)


def test_two_dead_components_are_restarted_one_per_watch_so_each_pid_is_recorded(tmp_path) -> None:
    """`up` writes stack.json between calls: the model server's new pid must not wait for a
    Prometheus that replays its WAL behind it (the HA drill timed its resolution from that)."""

    def sleeper(c: StackConfig) -> contextlib.AbstractContextManager[Launched]:
        return running_process(["sleep", "600"], lambda: True, what="sleeper")

    comps = tuple(components.Component(n, sleeper, lambda c: "", lambda c: "") for n in "ab")
    stack = Supervisor(StackConfig(run_dir=tmp_path, restart_delay_s=0), components=comps)
    try:
        stack.start_all()
        first = stack.pids()
        for r in stack.running:
            os.kill(r.child.pid, signal.SIGKILL)
            r.child.process.wait()
        assert stack.watch_once() == "a"
        assert stack.pids()["a"] != first["a"] and stack.pids()["b"] == first["b"]
        assert stack.watch_once() == "b"
        assert stack.pids()["b"] != first["b"]
        assert stack.watch_once() is None
    finally:
        assert stack.stop_all() == 2


@pytest.mark.parametrize(("nvml", "wanted"), [(True, "real"), (False, "off")])
def test_gpu_auto_runs_the_nvml_collector_only_where_nvml_works(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, nvml: bool, wanted: str
) -> None:
    """Without a GPU the collector would fail every scrape and page ExporterCollectorFailing."""
    monkeypatch.setattr(plan, "nvml_works", lambda: nvml)
    assert plan.gpu_backend(up_settings(tmp_path)) == wanted
    assert plan.gpu_backend(up_settings(tmp_path, gpu_backend="fake")) == "fake"


def test_nvml_works_answers_here_without_raising() -> None:
    assert isinstance(plan.nvml_works(), bool)


def test_the_gateway_window_is_the_one_the_served_export_recorded(tmp_path: Path) -> None:
    s = up_settings(tmp_path)
    meta = s.models_dir / "gen" / "1" / "assets.extra" / "tokenpulse_model.json"
    meta.parent.mkdir(parents=True)
    meta.write_text('{"model": {"context": 64, "d_model": 64}}')
    assert files.context_window(s) == 64
    assert plan.stack_config(s).gateway["context_window_tokens"] == 64


def test_fake_gpus_read_drill_faults_from_the_run_directory(tmp_path: Path) -> None:
    """The drill reaches the fake GPUs through RUN_DIR/gpu-faults.json; real ones never."""
    s = up_settings(tmp_path, gpu_backend="fake", fast_polls=True)
    meta = s.models_dir / "gen" / "1" / "assets.extra" / "tokenpulse_model.json"
    meta.parent.mkdir(parents=True)
    meta.write_text('{"model": {"context": 64, "d_model": 64}}')
    path = s.path("gpu-faults.json")
    config = plan.stack_config(s)
    assert f"--collector.nvml.fake-faults={path}" in components.exporter_args(config)
    assert "--tfserving.poll-interval=1" in components.exporter_args(config)  # fast polls kept
    assert StackState.from_json(StackState(config, 1, {}).to_json()).config.gpu_faults_file == path
    for backend in ("real", "off"):
        config = plan.stack_config(up_settings(tmp_path, gpu_backend=backend))
        assert config.gpu_faults_file is None
        assert not any("fake-faults" in f for f in components.exporter_args(config))


# --- `up --ha`: two Prometheus, two gossiping Alertmanagers --------------------------------------


def _ha_settings(tmp_path: Path, **kw: object) -> UpSettings:
    ha_ports = {name: free_port() for name in HA_PORT_FIELDS}
    return up_settings(tmp_path, ha=True, **{**ha_ports, **kw})


def test_ha_adds_a_second_prometheus_and_alertmanager_after_the_first(tmp_path: Path) -> None:
    names = [c.name for c in components.enabled(up_config(_ha_settings(tmp_path)))]
    assert names[-4:] == ["alertmanager", "alertmanager-2", "prometheus", "prometheus-2"]
    single = [c.name for c in components.enabled(up_config(up_settings(tmp_path)))]
    assert single[-2:] == ["alertmanager", "prometheus"] and "prometheus-2" not in single


def test_ha_prometheus_pair_differs_by_an_external_label_it_drops_from_alerts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    s = _ha_settings(tmp_path)
    s.run_dir.mkdir(parents=True)
    started: dict[str, list[str]] = {}
    monkeypatch.setattr(
        components, "_process", lambda c, name, argv, url, env=None: started.update({name: argv})
    )
    config = up_config(s)
    for c in components.enabled(config):
        if c.name.startswith(("prometheus", "alertmanager")):
            c.start(config)
    docs = {
        n: yaml.safe_load(s.path(f"{n}.yml").read_text()) for n in ("prometheus", "prometheus-2")
    }
    label = prometheus_config.REPLICA_EXTERNAL_LABEL
    assert label != MIXIN.replica_label  # a model-server replica is another thing
    for name, doc in docs.items():
        assert doc["global"]["external_labels"] == {label: name}
        alerting = doc["alerting"]
        assert alerting["alert_relabel_configs"] == [{"action": "labeldrop", "regex": label}]
        (managers,) = alerting["alertmanagers"]
        assert managers["static_configs"][0]["targets"] == [
            f"127.0.0.1:{s.alertmanager_port}", f"127.0.0.1:{s.alertmanager_2_port}"
        ]  # fmt: skip
        jobs = {j["job_name"]: j["static_configs"][0]["targets"] for j in doc["scrape_configs"]
                if "static_configs" in j}  # fmt: skip
        # each scrapes both Prometheus and both Alertmanagers: a dead peer is seen by the other
        assert jobs["prometheus"] == [f"127.0.0.1:{s.prometheus_port}",
                                      f"127.0.0.1:{s.prometheus_2_port}"]  # fmt: skip
        assert jobs["alertmanager"] == [f"127.0.0.1:{s.alertmanager_port}",
                                        f"127.0.0.1:{s.alertmanager_2_port}"]  # fmt: skip
        assert doc["rule_files"] == docs["prometheus"]["rule_files"]  # the same rules
    argv = started["prometheus-2"]
    assert f"--config.file={s.path('prometheus-2.yml')}" in argv
    assert f"--storage.tsdb.path={s.path('prometheus-2')}" in argv
    assert f"--web.listen-address=127.0.0.1:{s.prometheus_2_port}" in argv
    assert f"--storage.tsdb.path={s.path('prometheus')}" in started["prometheus"]


def test_ha_alertmanagers_gossip_with_each_other_on_loopback(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    s = _ha_settings(tmp_path)
    s.run_dir.mkdir(parents=True)
    started: dict[str, list[str]] = {}
    monkeypatch.setattr(
        components, "_process", lambda c, name, argv, url, env=None: started.update({name: argv})
    )
    config = up_config(s)
    for i in (0, 1):
        components.alertmanager(i).start(config)
    one, two = s.alertmanager_cluster_port, s.alertmanager_2_cluster_port
    for name, own, peer in (("alertmanager", one, two), ("alertmanager-2", two, one)):
        argv = started[name]
        assert f"--cluster.listen-address=127.0.0.1:{own}" in argv
        assert f"--cluster.advertise-address=127.0.0.1:{own}" in argv  # loopback: explicit
        assert f"--cluster.peer=127.0.0.1:{peer}" in argv
        assert f"--storage.path={s.path(name)}" in argv  # each its own notification log
    assert f"--web.listen-address=127.0.0.1:{s.alertmanager_2_port}" in started["alertmanager-2"]
    # without --ha: no cluster at all
    single = up_settings(tmp_path)
    components.alertmanager(0).start(up_config(single))
    assert "--cluster.listen-address=" in started["alertmanager"]
    assert not any(a.startswith("--cluster.peer") for a in started["alertmanager"])


def test_without_ha_prometheus_has_no_external_label(tmp_path, monkeypatch) -> None:
    s = up_settings(tmp_path)
    s.run_dir.mkdir(parents=True)
    monkeypatch.setattr(components, "_process", lambda c, name, argv, url, env=None: None)
    components.prometheus(0).start(up_config(s))
    doc = yaml.safe_load(s.path("prometheus.yml").read_text())
    assert "external_labels" not in doc["global"]
    assert "alert_relabel_configs" not in doc["alerting"]


def test_ha_refuses_a_group_interval_the_replicas_disagreement_could_split(
    tmp_path: Path,
) -> None:
    """Two Prometheus see a recovery up to a scrape and an evaluation apart: a shorter group
    interval could notify resolved, then firing again from the later one (a second page)."""
    flags = ("--scrape-interval=2s", "--evaluation-interval=1s")
    done = _up(tmp_path, "--ha", *flags, "--group-interval=3s")
    assert done.returncode == 2
    assert done.stderr.startswith("tokenpulse up: error:") and "group_interval (3s)" in done.stderr
    assert "Traceback" not in done.stderr
    with pytest.raises(ValueError, match="scrape_interval \\+ evaluation_interval"):
        up_settings(tmp_path, ha=True, scrape_interval="2s", evaluation_interval="1s",
                    group_interval="3s")  # fmt: skip
    up_settings(tmp_path, ha=True, scrape_interval="2s", evaluation_interval="1s",
                group_interval="4s")  # fmt: skip
    up_settings(tmp_path, scrape_interval="2s", evaluation_interval="1s", group_interval="1s")


def test_ha_ports_are_checked_only_with_ha(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        check_ports(up_settings(tmp_path, alertmanager_2_cluster_port=port))  # not used
        with pytest.raises(PortError, match=f"port {port} .* alertmanager_2_cluster_port .*"
                           "--alertmanager-2-cluster-port"):  # fmt: skip
            check_ports(_ha_settings(tmp_path, alertmanager_2_cluster_port=port))


def test_ha_banner_and_state_name_both_of_each(tmp_path: Path) -> None:
    s = _ha_settings(tmp_path)
    config = up_config(s)
    pids = {c.name: 2000 + i for i, c in enumerate(components.enabled(config))}
    text = up_banner.banner(s, config, "tp-demo", pids)
    for name in ("prometheus-2", "alertmanager-2"):
        assert f"pid {pids[name]}" in text and f"logs/{name}.log" in text
    assert f"http://127.0.0.1:{s.prometheus_2_port}/alerts" in text
    assert f"127.0.0.1:{s.alertmanager_cluster_port} and 127.0.0.1:" in text
    assert "tokenpulse drill ha-monitoring-failover" in text
    state = StackState.from_json(json.loads(json.dumps(StackState(config, 1, pids).to_json())))
    assert state.config.ha is not None and state.pids["prometheus-2"] == pids["prometheus-2"]
    urls = {state.url(f) for f in HA_PORT_FIELDS}
    assert urls == {f"http://127.0.0.1:{getattr(s, f)}" for f in HA_PORT_FIELDS}
    assert up_config(up_settings(tmp_path)).ha is None
    assert "prometheus-2" not in up_banner.banner(
        up_settings(tmp_path), up_config(up_settings(tmp_path)), "k",
        {c.name: 1 for c in components.enabled(up_config(up_settings(tmp_path)))},
    )  # fmt: skip


def test_a_training_cache_that_cannot_be_made_is_refused_at_start_up(tmp_path) -> None:
    with pytest.raises(ValueError, match="cannot make /proc/nope/training-targets"):
        up_settings(tmp_path, training_cache_dir=Path("/proc/nope"))
    up_settings(tmp_path, training_cache_dir=tmp_path / "t")
    assert (tmp_path / "t" / "training-targets").is_dir()  # made at start-up, for the file watch
