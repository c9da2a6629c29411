"""What `tokenpulse up` prints once every component is healthy: where things are, how to use it."""

from __future__ import annotations

import shlex
import urllib.parse

from monitoring.mixin.prometheus import REPLICA_EXTERNAL_LABEL
from serving.gateway.snippets import curl_snippet, openai_snippet
from stack.components import enabled
from stack.config import HaPorts, StackConfig
from stack.up.files import CANARY, MODEL, STABLE, served_model
from stack.up.settings import UpSettings

READY_LINE = "Ctrl-C stops everything."
VENV_PYTHON = ".venv/bin/python"  # the venv `make up` builds, from the repository root

# (title, PromQL) of the graphs the banner links
KEY_GRAPHS = (
    ("requests/s by status", "sum by (code) (rate(tokenpulse_gateway_requests_total[1m]))"),
    (
        "p99 latency (s)",
        "histogram_quantile(0.99, sum by (le) "
        "(rate(tokenpulse_gateway_request_duration_seconds_bucket[5m])))",
    ),
    ("error ratio (5m)", "model:gateway_errors:ratio_rate5m"),
    ("canary vs stable NLL", "tokenpulse_canary_mean_nll_nats"),
    ("scrape targets up", "up"),
)


def graph_url(prometheus: str, expr: str) -> str:
    """A Prometheus graph page for one expression over the last 30 minutes."""
    query = urllib.parse.urlencode({"g0.expr": expr, "g0.tab": "0", "g0.range_input": "30m"})
    return f"{prometheus}/graph?{query}"


def try_it(gateway: str, key: str) -> tuple[str, str]:
    """The banner's two ways to call the gateway, as printed: a curl command, and the openai SDK
    snippet run by the Python of the venv `make up` builds (its `stack` extra has the SDK)."""
    sdk = f"{VENV_PYTHON} - <<'EOF'\n{openai_snippet(gateway, key)}\nEOF"
    return curl_snippet(gateway, key), sdk


def _drill(config: StackConfig, pids: dict[str, int]) -> str:
    n = config.model_server_replicas
    restarts = f"`up` restarts it after {config.restart_delay_s:g} s, then the resolution arrives."
    if n == 1:
        pid = pids["modelserver"]
        return f"Outage drill: kill {pid} (the model server); the page arrives, and {restarts}"
    last = f"modelserver-{n - 1}"
    return (
        f"Replica drill: kill {pids[last]} ({last}); the gateway routes around it, one page "
        f"names replica {n - 1}, and {restarts} The exporter watches replica 0."
    )


def _ha(config: StackConfig, ha: HaPorts) -> list[str]:
    return [
        f"  alerts (prometheus-2): {config.url('prometheus_2_port', '/alerts')}",
        f"  Alertmanager (alertmanager-2): {config.url('alertmanager_2_port', '/#/alerts')}",
        "",
        "High availability (--ha): prometheus and prometheus-2 evaluate the same rules, told "
        f"apart by the external label {REPLICA_EXTERNAL_LABEL}, which they drop from the alerts "
        "they send; alertmanager and alertmanager-2 gossip on 127.0.0.1:"
        f"{ha.alertmanager_cluster_port} and 127.0.0.1:{ha.alertmanager_2_cluster_port} and "
        "notify once between them. Cluster state: "
        f"{config.url('alertmanager_port', '/api/v2/status')}. HA drill: tokenpulse drill "
        "ha-monitoring-failover.",
    ]


def banner(s: UpSettings, config: StackConfig, key: str, pids: dict[str, int]) -> str:
    """The whole text, ending with READY_LINE."""
    gateway = f"http://127.0.0.1:{s.gateway_port}"
    curl, sdk = try_it(gateway, key)
    prometheus = f"http://127.0.0.1:{s.prometheus_port}"
    run = s.path("")
    lines = ["", "TokenPulse local stack is up (every service on 127.0.0.1):"]
    components = enabled(config)
    width = max(13, 1 + max(len(c.name) for c in components))
    for c in components:
        lines.append(
            f"  {c.name:<{width}}{c.url(config):<40} pid {pids[c.name]:<8} logs/{c.name}.log"
        )
    lines += [
        "",
        f"Model {MODEL}: {served_model(s)}; version {STABLE} stable, {CANARY} canary "
        f"({s.canary_weight:.0%} of requests)",
        "",
        "Metrics pages Prometheus scrapes:",
    ]
    lines += [f"  {c.name:<{width}}{c.metrics(config)}" for c in components if c.name != "oncall"]
    pace = f"{config.rules} rules, scraped every {config.scrape_interval}"
    lines += ["", f"Key graphs in Prometheus ({pace}):"]
    lines += [f"  {title}: {graph_url(prometheus, expr)}" for title, expr in KEY_GRAPHS]
    lines += [
        f"  alerts: {prometheus}/alerts",
        f"  Alertmanager: http://127.0.0.1:{s.alertmanager_port}/#/alerts",
    ]
    if config.ha is not None:
        lines += _ha(config, config.ha)
    lines += [
        "",
        f"Try it with curl (demo key in {s.path('demo-key.txt')}; the prompt is a customer's "
        "turn in the chat template, what the default model was trained to answer):",
        curl,
        "",
        "or with the openai SDK (`make up` installed it in .venv):",
        sdk,
        "",
        "Find sampled requests (prompts redacted) in the embedded store:",
        "  .venv/bin/tokenpulse samples search --sqlite-path "
        f"{shlex.quote(str(s.path('samples.db')))} --since 15m",
    ]
    if s.es_url:
        lines.append(f"  .venv/bin/tokenpulse samples search --es-url {s.es_url} --since 15m")
    lines += [
        "",
        f"Notifications land in {s.path('oncall.jsonl')} (one JSON line each) and, readable,",
        f"in {s.path('logs/oncall.log')}: tail -f it. {_drill(config, pids)}",
        f"Every page links its runbook ({config.url('oncall_port', '/runbooks')}), dashboard panel"
        f" ({s.grafana_url}) and sample search; the Watchdog (dead man's switch, every "
        f"{config.watchdog_interval}) last arrived: {config.url('oncall_port', '/watchdog')}",
        "",
        "Preview the dashboards as PNGs from this Prometheus:",
        f"  .venv/bin/tokenpulse dashboards preview --prometheus {prometheus}"
        f" --out {shlex.quote(str(s.path('previews')))} --since 15m",
        "",
        "TensorBoard on the training runs (checkpoint cache):",
        "  .venv/bin/tensorboard --logdir .cache/tokenpulse/checkpoints --host 127.0.0.1",
        "",
        f"Generated configs and data: {run}/ (models.config, prometheus.yml, alertmanager.yml"
        f"{', prometheus-2.yml' if config.ha is not None else ''})",
        READY_LINE,
        "",
    ]
    return "\n".join(lines)
