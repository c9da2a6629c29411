"""Alertmanager config from the mixin: severity routing, grouping, inhibition, receivers.

critical pages (PagerDuty + webhook), warning goes to chat (Slack) or, for SLO ticket tiers, to a
ticket webhook, info notifies nobody. The monitoring's own alerts route apart, so a broken pager
cannot hide itself: the always-firing `Watchdog` to a dead man's switch (re-sent every
cfg.am_watchdog_interval; its silence is the alarm), the meta-alerts (`meta="true"`) to a
webhook that needs no secret. Secrets are read from files (`tokenpulse alertmanager-check`
refuses a config whose files are missing). Every notification carries the summary with model,
version and severity, the runbook, the alert's dashboard panel and its sample search, both
around the alert's start. The local variant points every receiver at the local on-call receiver,
one path per receiver.
"""

from __future__ import annotations

from typing import Any

import yaml

from monitoring.mixin.alerts import all_alerts, gateway
from monitoring.mixin.alerts.common import MODELSERVER_COLLECTORS
from monitoring.mixin.config import MixinConfig
from monitoring.mixin.model import Alert
from monitoring.mixin.promql import NORMAL, render_seconds, seconds
from tokenpulse.samples import DATA_VIEW_ID

SECRETS = "/etc/alertmanager/secrets"
TICKET_URL = "http://ticket-bridge:9096/tickets"  # the team's ticket bridge (no secret in the URL)
# Dead man's switch: wants the Watchdog every AM_WATCHDOG_INTERVAL and alarms when it stops. The
# compose on-call receiver records it (GET /watchdog), pages itself when it is late and relays it
# to the heartbeat URL in its environment (Alertmanager 0.25 reads no URL from a file, and a
# heartbeat URL carries its secret); Kubernetes posts to the URL of a Secret instead.
WATCHDOG_URL = "http://oncall-receiver:9096/watchdog"
# The monitoring's own alerts: a webhook with no secret file, so a pager or chat receiver whose
# secret is missing cannot hide the alert that says so. Point it at a second channel. They go on
# (`continue`) to the pager (critical) or chat (warning) too: a person is woken by them.
META_URL = "http://oncall-receiver:9096/meta"
CHAT_CHANNEL = "#tokenpulse-alerts"
WATCHDOG = "Watchdog"

# receiver -> route matchers, in route order (first match wins)
ROUTES: list[tuple[str, list[str]]] = [
    ("watchdog", [f'alertname="{WATCHDOG}"']),
    ("meta", ['meta="true"']),
    ("null", ['severity="info"']),
    ("pager", ['severity="critical"']),
    ("ticket", ['severity="warning"', 'slo=~".+"']),
    ("chat", ['severity="warning"']),
]


def _names(cfg: MixinConfig, alerts: list[Alert]) -> str:
    return "|".join(sorted({cfg.alertname(a.name) for a in alerts}))


def inhibit_rules(cfg: MixinConfig) -> list[dict[str, Any]]:
    """A cause firing now silences what it explains; after a TfServingDown page, only windowed
    symptoms stay silenced; a page silences its own ticket tier.

    State alerts (a model with no AVAILABLE version, collectors) are silenced only while their
    cause fires: a model server that comes back with no AVAILABLE version pages at once. Windowed
    symptoms (burn rates, quality, traffic, the breaker's window, the canaries' last run) keep
    the outage after it ends, so a
    TfServingDown page that was sent keeps them silenced for cfg.recovery_window: a crash loop
    is one page, TfServingFlapping, which silences them while it fires and, once sent, starts the
    same hold (holds.py), so its burn does not page again when the loop ends. A NoAvailableVersion
    page that was sent does the same for that model's windowed symptoms (every request for it
    failed while it fired), so its burn does not page again once it resolves. Every inhibition is
    scoped by `equal`: cfg.replica_label (one replica explains only its own alerts; the fleet
    alerts have no replica label, so only a whole-fleet page, which has none either, explains
    them; with one replica and no label, absent equals absent), and `model` where the cause is
    one model's. One gateway pod down explains only its own alerts (`equal: [instance]`); the
    whole gateway fleet down (the info alert GatewayFleetDown, no labels) explains every model's
    gateway symptoms, so it alone has no narrower scope.
    """
    alerts = all_alerts(cfg, NORMAL)
    symptoms = [a for a in alerts if a.symptom]
    windowed = [a for a in symptoms if a.windowed]
    p, replica = cfg.alert_prefix, cfg.replica_label
    no_version = f"{p}TfServingNoAvailableVersion"
    collectors = [
        f'alertname="{p}ExporterCollectorFailing"',
        f'collector=~"{MODELSERVER_COLLECTORS}"',
    ]
    gateway_windowed = [a for a in windowed if not a.per_replica and a.component == "Gateway"]
    gateway_symptoms = _names(cfg, gateway.slo_alerts(cfg, NORMAL) + gateway_windowed)
    recently = f"{p}TfServingRecentlyDown|{p}TfServingFleetRecentlyDown"
    flapping = f"{p}TfServingFlapping"
    unavailable = f"{p}TfServingRecentlyUnavailable|{p}TfServingFleetRecentlyUnavailable"
    return [
        {
            # down now: everything it explains on that replica (or everything, with one)
            "source_matchers": [f'alertname="{p}TfServingDown"'],
            "target_matchers": [f'alertname=~"{_names(cfg, symptoms)}|{no_version}"'],
            "equal": [replica],
        },
        {
            "source_matchers": [f'alertname="{p}TfServingDown"'],
            "target_matchers": collectors,
            "equal": [replica],
        },
        {
            # a crash loop now: its one page stands for its outages, so the windowed symptoms
            # they fill (the burn) are its own (on that replica; the fleet's, with one replica)
            "source_matchers": [f'alertname="{flapping}"'],
            "target_matchers": [f'alertname=~"{_names(cfg, windowed)}"'],
            "equal": [replica],
        },
        {
            # paged down within the recovery window: only what its outage still fills
            "source_matchers": [f'alertname=~"{recently}"'],
            "target_matchers": [f'alertname=~"{_names(cfg, windowed)}"'],
            "equal": [replica],
        },
        {
            "source_matchers": [f'alertname="{no_version}"'],
            "target_matchers": [f'alertname=~"{_names(cfg, symptoms)}"'],
            "equal": ["model", replica],
        },
        {
            # paged with no AVAILABLE version within the recovery window: the windowed symptoms
            # its failed requests still fill, of that model (on that replica; the fleet's, when
            # it was gone from every replica)
            "source_matchers": [f'alertname=~"{unavailable}"'],
            "target_matchers": [f'alertname=~"{_names(cfg, windowed)}"'],
            "equal": ["model", replica],
        },
        {
            # a GPU out of memory is why the model servers on its machine (node; one machine
            # locally) answer RESOURCE_EXHAUSTED
            "source_matchers": [f'alertname="{p}GpuMemoryNearlyFull"'],
            "target_matchers": [f'alertname="{p}TfServingResourceExhausted"'],
            "equal": [cfg.node_label],
        },
        {
            # one gateway pod down: only what that pod itself reports (its breaker); the
            # fleet's symptoms carry no instance, so the pods that still serve keep theirs
            "source_matchers": [f'alertname="{p}GatewayDown"'],
            "target_matchers": [f'alertname=~"{gateway_symptoms}"'],
            "equal": ["instance"],
        },
        {
            # every gateway pod paged down at once: every model's gateway symptoms
            "source_matchers": [f'alertname="{p}GatewayFleetDown"'],
            "target_matchers": [f'alertname=~"{gateway_symptoms}"'],
        },
        {
            "source_matchers": ['severity="critical"'],
            "target_matchers": ['severity="warning"'],
            "equal": ["alertname", "model", replica],
        },
    ]


def _watchdog_timing(interval: str) -> dict[str, str]:
    """Sent at once, then at every group_interval tick. A repeat is due when the last send is
    older than repeat_interval, and the last send happened just after the previous tick: with
    repeat_interval equal to the interval, the next tick finds it a moment too young and the
    Watchdog comes every other interval. Half an interval is due at every tick."""
    secs = seconds(interval)
    repeat = render_seconds(secs // 2) if secs >= 2 else f"{secs * 500}ms"
    return {"group_wait": "0s", "group_interval": interval, "repeat_interval": repeat}


def _route_tree(cfg: MixinConfig, watchdog_interval: str) -> dict[str, Any]:
    routes: list[dict[str, Any]] = []
    for receiver, matchers in ROUTES:
        route: dict[str, Any] = {"receiver": receiver, "matchers": matchers}
        if receiver == "watchdog":
            route.update(_watchdog_timing(watchdog_interval))
        if receiver == "meta":
            # on to the pager or chat by severity as well: the meta webhook needs no secret, so
            # a pager that cannot send still leaves the alert saying so somewhere
            route["continue"] = True
        routes.append(route)
    return {
        "receiver": "chat",  # anything without a known severity still reaches people
        "group_by": list(cfg.am_group_by),
        "group_wait": cfg.am_group_wait,
        "group_interval": cfg.am_group_interval,
        "repeat_interval": cfg.am_repeat_interval,
        "routes": routes,
    }


# Notification text (Go templates, Alertmanager's data). `from`/`to` are cfg.link_window around
# each alert's start; time.Duration arguments are nanoseconds.
_ISO = '.UTC.Format "2006-01-02T15:04:05Z"'
TITLE = (
    "[{{ .Status | toUpper }}] {{ .CommonLabels.severity }} {{ .CommonLabels.alertname }}: "
    '{{ .CommonAnnotations.summary }} (model {{ or .CommonLabels.model "-" }}, version '
    '{{ or .CommonLabels.version "-" }}, severity {{ or .CommonLabels.severity "-" }})'
)
_QUERY = (
    "{{ if .Labels.model }}genai_sample.model:{{ .Labels.model | urlquery }}{{ end }}"
    "{{ if .Labels.version }}%20AND%20genai_sample.version:{{ .Labels.version | urlquery }}"
    "{{ end }}"
)
_FIRST = "{{ with index .Alerts 0 }}"


def _window(cfg: MixinConfig) -> tuple[str, str]:
    ns = int(seconds(cfg.link_window)) * 1_000_000_000
    return f"(.StartsAt.Add -{ns})", f"(.StartsAt.Add {ns})"


def dashboard(cfg: MixinConfig) -> str:
    """An alert's dashboard panel link, its time range around the alert's start."""
    start, end = _window(cfg)
    return (
        f"{{{{ .Annotations.dashboard_url }}}}&from={{{{ {start}.UnixMilli }}}}"
        f"&to={{{{ {end}.UnixMilli }}}}"
    )


def samples(cfg: MixinConfig) -> str:
    """An alert's sample search in Kibana, its model and version around the alert's start."""
    start, end = _window(cfg)
    return (
        f"{cfg.links.kibana_url}/app/discover#/?_g=(time:(from:'{{{{ {start}{_ISO} }}}}',"
        f"to:'{{{{ {end}{_ISO} }}}}'))&_a=(index:'{DATA_VIEW_ID}',"
        f"query:(language:lucene,query:'{_QUERY}'))"
    )


def alert_text(cfg: MixinConfig) -> str:
    """Every alert of a notification, with its links."""
    return (
        "{{ range .Alerts }}[{{ .Status | toUpper }}] {{ .Labels.severity }} "
        "{{ .Labels.alertname }} model={{ .Labels.model }} version={{ .Labels.version }}\n"
        "{{ .Annotations.description }}\n"
        "runbook: {{ .Annotations.runbook_url }}\n"
        f"dashboard: {dashboard(cfg)}\n"
        f"samples: {samples(cfg)}\n"
        "source: {{ .GeneratorURL }}\n{{ end }}"
    )


def _pager_links(cfg: MixinConfig) -> list[dict[str, str]]:
    """PagerDuty links of the first alert of the group (alerts of a group share alertname and
    model); the details hold every alert's."""
    return [
        {"href": f"{_FIRST}{{{{ .Annotations.runbook_url }}}}{{{{ end }}}}", "text": "Runbook"},
        {"href": f"{_FIRST}{dashboard(cfg)}{{{{ end }}}}", "text": "Dashboard panel"},
        {"href": f"{_FIRST}{samples(cfg)}{{{{ end }}}}", "text": "Sample search"},
    ]


def _receivers(cfg: MixinConfig) -> list[dict[str, Any]]:
    return [
        {"name": "watchdog", "webhook_configs": [{"url": WATCHDOG_URL, "send_resolved": False}]},
        {"name": "meta", "webhook_configs": [{"url": META_URL, "send_resolved": True}]},
        {"name": "null"},
        {
            "name": "pager",
            "pagerduty_configs": [
                {
                    "routing_key_file": f"{SECRETS}/pagerduty-routing-key",
                    "severity": "critical",
                    "send_resolved": True,
                    "description": TITLE,
                    "details": {"alerts": alert_text(cfg)},
                    "links": _pager_links(cfg),
                }
            ],
        },
        {"name": "ticket", "webhook_configs": [{"url": TICKET_URL, "send_resolved": True}]},
        {
            "name": "chat",
            "slack_configs": [
                {
                    "api_url_file": f"{SECRETS}/slack-webhook-url",
                    "channel": CHAT_CHANNEL,
                    "send_resolved": True,  # Slack's default is false
                    "title": TITLE,
                    "text": alert_text(cfg),
                }
            ],
        },
    ]


HEADER = "# Generated by `tokenpulse build` from monitoring/mixin; do not edit.\n"


def _dump(doc: dict[str, Any], note: str) -> str:
    return HEADER + note + yaml.safe_dump(doc, sort_keys=False, width=100)


def render(cfg: MixinConfig) -> str:
    """alertmanager.yml for a deployment (secrets mounted under /etc/alertmanager/secrets)."""
    doc = {
        "global": {"resolve_timeout": cfg.am_resolve_timeout},
        "route": _route_tree(cfg, cfg.am_watchdog_interval),
        "inhibit_rules": inhibit_rules(cfg),
        "receivers": _receivers(cfg),
    }
    return _dump(doc, "")


def render_local(
    cfg: MixinConfig,
    receiver_url: str,
    *,
    group_wait: str = "",
    group_interval: str = "",
    repeat_interval: str = "",
    watchdog_interval: str = "",
) -> str:
    """The same routes and inhibitions, every receiver a webhook to the local on-call receiver;
    a timing left empty is the config's."""
    route = _route_tree(cfg, watchdog_interval or cfg.am_watchdog_interval)
    route.update(
        group_wait=group_wait or cfg.am_group_wait,
        group_interval=group_interval or cfg.am_group_interval,
        repeat_interval=repeat_interval or cfg.am_repeat_interval,
    )
    receivers: list[dict[str, Any]] = []
    for name in ("watchdog", "meta", "null", "pager", "ticket", "chat"):
        if name == "null":
            receivers.append({"name": name})
            continue
        url = f"{receiver_url.rstrip('/')}/{name}"
        resolved = name != "watchdog"  # it never resolves while Prometheus runs
        hook = {"url": url, "send_resolved": resolved}
        receivers.append({"name": name, "webhook_configs": [hook]})
    doc = {
        "global": {"resolve_timeout": cfg.am_resolve_timeout},
        "route": route,
        "inhibit_rules": inhibit_rules(cfg),
        "receivers": receivers,
    }
    note = "# Local stack: every receiver posts to `tokenpulse oncall-receiver`.\n"
    return _dump(doc, note)
