"""Alertmanager config from the mixin: severity routing, grouping, inhibition, receivers.

critical pages (PagerDuty + webhook), warning goes to chat (Slack) or, for SLO ticket tiers, to a
ticket webhook, info notifies nobody. Secrets are read from files. The local variant points every
receiver at the local on-call receiver, one path per receiver.
"""

from __future__ import annotations

from typing import Any

import yaml

from monitoring.mixin import config as c
from monitoring.mixin.alerts import Alert, all_alerts, slo_alerts
from monitoring.mixin.promql import NORMAL

SECRETS = "/etc/alertmanager/secrets"
TICKET_URL = "http://ticket-bridge:9096/tickets"  # the team's ticket bridge (no secret in the URL)
CHAT_CHANNEL = "#tokenpulse-alerts"

# receiver -> route matchers, in route order (first match wins)
ROUTES: list[tuple[str, list[str]]] = [
    ("null", ['severity="info"']),
    ("pager", ['severity="critical"']),
    ("ticket", ['severity="warning"', 'slo=~".+"']),
    ("chat", ['severity="warning"']),
]


def _names(alerts: list[Alert]) -> str:
    return "|".join(sorted({a.alertname for a in alerts}))


def inhibit_rules() -> list[dict[str, Any]]:
    """A down upstream silences what it explains; a page silences its own ticket tier.

    Scoped by replica: a replica that is down silences only alerts about that replica (equal on
    config.REPLICA_LABEL); fleet-wide symptoms (SLO burn, breaker, quality) are silenced only
    while every replica is or was just down. So one bad replica hides neither another replica's
    alerts nor the fleet's. With one replica and no label, absent equals absent: as before.
    """
    alerts = all_alerts(NORMAL)
    symptoms = [a for a in alerts if a.symptom]
    replica_symptoms = [a for a in symptoms if a.per_replica]
    p, replica = c.ALERT_PREFIX, c.REPLICA_LABEL
    no_version = f"{p}TfServingNoAvailableVersion"
    # one replica's outage, and the recovery window after it (info: notifies nobody)
    down = f'alertname=~"{p}TfServingDown|{p}TfServingRecentlyDown"'
    # every replica at once, now or within the recovery window (info)
    fleet_down = f'alertname="{p}TfServingFleetRecentlyDown"'
    collectors = [f'alertname="{p}ExporterCollectorFailing"', 'collector=~"tfserving|canary"']
    return [
        {
            # the whole fleet down explains every model's symptoms, wherever they show
            "source_matchers": [fleet_down],
            "target_matchers": [f'alertname=~"{_names(symptoms)}|{no_version}"'],
        },
        {"source_matchers": [fleet_down], "target_matchers": collectors},
        {
            # one replica down explains only what is about that replica
            "source_matchers": [down],
            "target_matchers": [f'alertname=~"{_names(replica_symptoms)}|{no_version}"'],
            "equal": [replica],
        },
        {"source_matchers": [down], "target_matchers": collectors, "equal": [replica]},
        {
            "source_matchers": [f'alertname="{no_version}"'],
            "target_matchers": [f'alertname=~"{_names(symptoms)}"'],
            "equal": ["model", replica],
        },
        {
            "source_matchers": [f'alertname="{p}GatewayDown"'],
            "target_matchers": [f'alertname=~"{_names(slo_alerts(NORMAL))}"'],
        },
        {
            "source_matchers": ['severity="critical"'],
            "target_matchers": ['severity="warning"'],
            "equal": ["alertname", "model", replica],
        },
    ]


def _route_tree() -> dict[str, Any]:
    return {
        "receiver": "chat",  # anything without a known severity still reaches people
        "group_by": list(c.AM_GROUP_BY),
        "group_wait": c.AM_GROUP_WAIT,
        "group_interval": c.AM_GROUP_INTERVAL,
        "repeat_interval": c.AM_REPEAT_INTERVAL,
        "routes": [{"receiver": r, "matchers": m} for r, m in ROUTES],
    }


def _receivers() -> list[dict[str, Any]]:
    return [
        {"name": "null"},
        {
            "name": "pager",
            "pagerduty_configs": [
                {
                    "routing_key_file": f"{SECRETS}/pagerduty-routing-key",
                    "severity": "critical",
                    "send_resolved": True,
                    "description": '{{ template "pagerduty.default.description" . }}',
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
                    "title": "[{{ .Status | toUpper }}] {{ .CommonLabels.alertname }}",
                    "text": "{{ range .Alerts }}{{ .Annotations.description }}\n"
                    "runbook: {{ .Annotations.runbook_url }}\n{{ end }}",
                }
            ],
        },
    ]


HEADER = "# Generated by `tokenpulse build` from monitoring/mixin; do not edit.\n"


def _dump(doc: dict[str, Any], note: str) -> str:
    return HEADER + note + yaml.safe_dump(doc, sort_keys=False, width=100)


def render() -> str:
    """alertmanager.yml for a deployment (secrets mounted under /etc/alertmanager/secrets)."""
    doc = {
        "global": {"resolve_timeout": c.AM_RESOLVE_TIMEOUT},
        "route": _route_tree(),
        "inhibit_rules": inhibit_rules(),
        "receivers": _receivers(),
    }
    return _dump(doc, "")


def render_local(
    receiver_url: str,
    *,
    group_wait: str = c.AM_GROUP_WAIT,
    group_interval: str = c.AM_GROUP_INTERVAL,
    repeat_interval: str = c.AM_REPEAT_INTERVAL,
) -> str:
    """The same routes and inhibitions, every receiver a webhook to the local on-call receiver."""
    route = _route_tree()
    route.update(
        group_wait=group_wait, group_interval=group_interval, repeat_interval=repeat_interval
    )
    receivers: list[dict[str, Any]] = [{"name": "null"}]
    for name in ("pager", "ticket", "chat"):
        url = f"{receiver_url.rstrip('/')}/{name}"
        receivers.append({"name": name, "webhook_configs": [{"url": url, "send_resolved": True}]})
    doc = {
        "global": {"resolve_timeout": c.AM_RESOLVE_TIMEOUT},
        "route": route,
        "inhibit_rules": inhibit_rules(),
        "receivers": receivers,
    }
    note = "# Local stack: every receiver posts to `tokenpulse oncall-receiver`.\n"
    return _dump(doc, note)
