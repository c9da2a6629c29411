"""The one mixin config: every threshold, window and name the rules, routes and dashboards use.

Data only. Change behaviour here, run `tokenpulse build`, commit the regenerated files;
never edit the generated YAML by hand (a test fails when it drifts from this module).
Durations are Prometheus duration strings ("5m", "1h", "3d").
"""

from __future__ import annotations

from dataclasses import dataclass

from tokenpulse import ports


@dataclass(frozen=True)
class Jobs:
    """Prometheus job names of each scraped component (the `job` label of its series)."""

    # Change together with the scrape config of a deployment that names its jobs differently
    # (e.g. a Kubernetes ServiceMonitor); every rule selects on these.
    modelserver: str = "tfserving"
    gateway: str = "tokenpulse-gateway"
    exporter: str = "tokenpulse-exporter"
    shipper: str = "tokenpulse-shipper"
    alertmanager: str = "alertmanager"
    prometheus: str = "prometheus"

    def selector(self, component: str) -> str:
        """`job="<name>"` for a component field name, e.g. selector("gateway")."""
        return f'job="{getattr(self, component)}"'


JOBS = Jobs()

# The label that tells model-server replicas apart across jobs: a target label on each TF Serving
# target and on the exporter watching it (locally `replica="0"`, `"1"`, ...; in Kubernetes the pod
# name, relabelled into it). Replica-level alerts keep it, fleet rules sum it away with `instance`,
# and inhibitions between replica-level alerts hold it `equal`. A deployment with one model server
# may leave it out: an absent label is equal to an absent label.
REPLICA_LABEL = "replica"

# Kibana as the analyst's browser reaches it: the dashboards' "samples in Kibana" links open its
# Discover here. The default is the compose Kibana's published address (loopback, port
# KIBANA_PUBLISH, 5601 by default); change it where Kibana is published elsewhere.
KIBANA_URL = "http://127.0.0.1:5601"
# The one label of the gateway's OpenMetrics exemplars (latency, TTFT and NLL histograms): the
# request id of the sample, which Kibana's genai_sample.request_id and `tokenpulse samples show`
# resolve. Grafana's Prometheus datasource maps it to a link (monitoring/grafana/provisioning).
EXEMPLAR_LABEL = "request_id"

# Scrape and rule evaluation interval of the production Prometheus. Change it only together with
# the shortest rate window below (a rate window must hold at least four scrapes).
SCRAPE_INTERVAL = "15s"
EVALUATION_INTERVAL = "30s"


@dataclass(frozen=True)
class Slo:
    """One service-level objective over the gateway's counters or histograms."""

    name: str  # short id used in recording-rule names and the `slo` label
    objective: float  # share of good events; change when the product promise changes
    description: str
    # For latency SLOs: the histogram bucket bound (seconds, exactly as exposed in `le`) under
    # which a request is good. Must be one of the gateway's bucket bounds.
    threshold_le: str = ""


# SLO period: the budget is `(1 - objective) * period`. Change only with the burn-rate factors
# (they are computed for a 30-day period).
SLO_PERIOD = "30d"

SLOS = (
    # 99.5%: a small single-cluster service; raise when the gateway runs redundantly.
    Slo("availability", 0.995, "requests answered without a server error (5xx)"),
    # 99% under 2.5 s end to end: what an interactive caller with ~64 new tokens tolerates.
    # Change with the default max_new_tokens or when the model gets bigger.
    Slo("latency", 0.99, "requests answered within 2.5 s end to end", threshold_le="2.5"),
    # 99% of requests under 100 ms per output token (10 tokens/s streamed is the readability
    # floor). Change when the model or the hardware changes class.
    Slo("tpot", 0.99, "requests generating faster than 100 ms per output token", "0.1"),
    # 99% of streams show their first token within 1 s: a chat reader waits about that long
    # before a reply feels stuck (counted over streamed requests only: a unary caller sees no
    # first token). Change with the streaming chunk size or when prefill gets slower.
    Slo("ttft", 0.99, "streams sending their first token within 1 s", "1.0"),
)

# Gateway status codes that count against availability: server errors only. 429 (rate limited,
# shed) is the caller's budget, not ours; change if shedding should burn the budget too.
ERROR_CODES = "5.."


@dataclass(frozen=True)
class BurnTier:
    """One multi-window burn-rate alert tier (SRE Workbook ch. 5)."""

    severity: str  # critical pages, warning tickets
    long: str  # long window: proves the burn is sustained
    short: str  # short window: makes the alert resolve quickly once the burn stops
    factor: float  # burn rate; fires when both windows burn faster than factor*(1-objective)
    for_: str  # how long both windows must agree before it fires


BURN_TIERS = (
    # Page: 2% of a 30d budget in 1 h. Change only with SLO_PERIOD.
    BurnTier("critical", "1h", "5m", 14.4, "2m"),
    # Page: 5% of the budget in 6 h.
    BurnTier("critical", "6h", "30m", 6.0, "15m"),
    # Ticket: 10% in a day (Sloth / kubernetes-mixin tier).
    BurnTier("warning", "1d", "2h", 3.0, "1h"),
    # Ticket: the whole budget would be gone by the end of the period.
    BurnTier("warning", "3d", "6h", 1.0, "3h"),
)

# Minimum traffic before any gateway SLO or quality alert may fire, requests per second over
# each of the alert's windows (a burn tier checks its long and its short window): with fewer
# requests a handful of errors is a large ratio. 0.05/s is 180 requests an hour, so the 1h page
# tier (7.2% bad) needs at least 13 bad requests, never the 3 that paged at 0.01/s. Raise for
# noisier models; lower only with a lower objective.
MIN_REQUEST_RATE = 0.05


@dataclass(frozen=True)
class Degradation:
    """A quality signal compared with its own past, with a floor and a traffic guard."""

    name: str
    window: str  # rate window of the current value; longer = steadier, slower to fire
    factor: float  # current > factor * baseline; raise when the alert flaps on noise
    floor: float  # and current > floor: an absolute level below which nobody cares
    for_: str  # how long it must hold
    # and at least this many bad events (empty, truncated outputs) in the window: one empty
    # answer among few is a large share, not an incident. 0: the signal is a mean, not a count.
    min_events: int = 0


# Baseline: the same signal over BASELINE_WINDOW ending BASELINE_OFFSET ago, so an ongoing
# incident is not part of its own baseline. Lengthen the offset if incidents last longer than a day.
BASELINE_WINDOW = "7d"
BASELINE_OFFSET = "1d"
# The baseline is never taken as lower than this share of the floor, so a perfect week does not
# make one bad output look like an infinite rise.
BASELINE_MIN_SHARE = 0.5

DEGRADATIONS = (
    # Empty outputs: 3x the usual share and above 2% of outputs.
    Degradation("empty_output", "30m", 3.0, 0.02, "15m", min_events=5),
    # Truncation: outputs stopped by max_new_tokens rather than a stop token; a model that stops
    # ending its sentences shows here first. Long-form callers have a high normal share: the
    # factor is relative to that.
    Degradation("truncation", "30m", 1.5, 0.5, "30m", min_events=5),
    # Repetition: mean share of repeated word 3-grams per output (degenerate loops).
    Degradation("repetition", "30m", 2.0, 0.15, "15m"),
)

# Negative feedback (POST /v1/feedback): share of feedback scored negative over FEEDBACK_WINDOW,
# against its own baseline (BASELINE_WINDOW ending BASELINE_OFFSET ago, as the degradations).
# Feedback is sparse: an hour window, and at least FEEDBACK_MIN_RATE feedback per second (about 18
# an hour) before it may fire. The share is recorded only while feedback arrives, so an idle
# night leaves a gap in the baseline, not a zero or NaN. Raise the factor if it flaps on moods.
FEEDBACK_WINDOW = "1h"
FEEDBACK_FACTOR = 2.0
FEEDBACK_FLOOR = 0.2  # and more than a fifth of the feedback is negative
FEEDBACK_MIN_RATE = 0.005
FEEDBACK_FOR = "30m"

# mean NLL drift: z-score of the 30m mean per-token NLL against the baseline mean and stddev of
# 30m means. 3 sigma is rare for a stable model; raise it if the traffic mix changes often.
NLL_WINDOW = "30m"
NLL_Z = 3.0
# And at least this many nats above the baseline mean (a tiny stddev makes tiny drifts huge z).
NLL_MIN_DELTA = 0.25
NLL_FOR = "30m"
# A drift is a ticket (warning): NLL is what moves first when a model or its inputs change.
NLL_SEVERITY = "warning"

# Throughput drop: generation speed (output tokens per second of upstream time, so a quiet hour
# is not a drop) below this share of its baseline. Lower it if batching mixes vary a lot.
TOKENS_DROP_SHARE = 0.5
TOKENS_WINDOW = "30m"
TOKENS_FOR = "30m"

# Canary: the exporter's golden prompts per version. A mismatch means the version's greedy output
# changed since export (numerics, a bad load); failure means it did not answer. 5 runs of the
# default 60 s canary interval: one flaky run does not page.
CANARY_FOR = "5m"
# A canary-labelled version whose golden-prompt mean NLL is this many nats above the stable
# label's: worse than what it replaces. Lower it for stricter rollouts.
CANARY_NLL_MARGIN = 0.5
CANARY_WORSE_FOR = "15m"

# Batching ineffective: mean processed batch size below this while, on average, at least
# BATCH_IN_FLIGHT_MIN predict calls per model-server replica are in flight from the gateway, so
# there were requests to batch. (The gateway's own queue is no witness: it only fills once every
# concurrency slot is taken upstream, when batches are full.) Change with max_batch_size.
BATCH_SIZE_MIN = 1.5
BATCH_IN_FLIGHT_MIN = 4
BATCH_WINDOW = "10m"
BATCH_FOR = "15m"
# p99 time a request waits in TF Serving's batch queue. Change with batch_timeout_micros (the
# default config waits at most a few ms; 250 ms means the batcher is saturated).
BATCH_QUEUE_P99_S = 0.25
BATCH_QUEUE_FOR = "10m"

# The gateway's load-protection limits as shipped: the defaults of its max_concurrency (upstream
# calls in flight across replicas) and max_queue (requests waiting for a slot; past it, shed with
# 503). The saturation panels draw them as their limits. Change with the gateway's settings
# (TOKENPULSE_GATEWAY_MAX_CONCURRENCY / _MAX_QUEUE); a test holds them equal to its defaults.
GATEWAY_MAX_CONCURRENCY = 64
GATEWAY_MAX_QUEUE = 256
# Share of a limit at which a saturation panel turns yellow.
SATURATION_WARN = 0.8

# Health `for`s: long enough to ride out a restart, short enough to page within minutes.
DOWN_FOR = "1m"  # a scrape target is unreachable
# After TF Serving comes back (or a model has an AVAILABLE version again), the outage still fills
# the windows of the symptoms it caused (burn rates, breaker, canaries) for up to the longest
# such window. An info alert holds them silenced this long so the outage pages once: the page
# tiers' longest short window (30m) and 5m of slack, since the hold is counted from the page's
# last firing evaluation while the burn clears only a recording and an alert evaluation after
# its window is clean (drill restart-no-available-version, compressed: with exactly 30m the hold
# outlasted the 6h tier's firing by 2-3 s only). Lengthen it with the page tiers' short windows.
RECOVERY_WINDOW = "35m"
# Crash loop: a model-server target whose `up` changed this often within the window went down
# and came back at least twice, even when no outage lasted DOWN_FOR (so TfServingDown never
# fired). Pages: every down spell fails requests.
FLAP_WINDOW = "15m"
FLAP_CHANGES = 4
FLAP_FOR = "1m"
# Requests TF Serving refused with RESOURCE_EXHAUSTED (out of memory, a full batch queue),
# per second over the window, per replica. Any sustained rate is a ticket.
RESOURCE_EXHAUSTED_WINDOW = "10m"
RESOURCE_EXHAUSTED_RATE = 0.01
RESOURCE_EXHAUSTED_FOR = "5m"
NO_VERSION_FOR = "1m"  # a model has no AVAILABLE version
LOAD_FAILURE_FOR = "5m"  # a version's status is an error after loading
BREAKER_FOR = "1m"  # the gateway's upstream circuit breaker is open
COLLECTOR_FOR = "10m"  # an exporter collector keeps failing

# GPU thresholds. Memory: TensorFlow reserves most of the GPU's memory up front, so "used" sits
# near 100% on a healthy GPU and means nothing alone. Pressure is the allocator failing: TF
# Serving answering RESOURCE_EXHAUSTED (on the same replica) while the GPU is this full.
GPU_MEMORY_FULL = 0.95
GPU_MEMORY_FOR = "5m"
# Throttle reasons that mean heat or power trouble (not idle or application clocks).
# Throttled: share of the window the clocks were held down by heat (the driver's thermal policy
# counter, throttle_seconds_total) or by a hardware slowdown or power brake (the share of samples
# with that reason active): intermittent throttling adds up instead of resetting a `for`. The
# power policy (the software power cap) is normal under load and does not count.
GPU_THROTTLE_POLICY = "thermal"
GPU_THROTTLE_HW_REASONS = "hw_slowdown|hw_thermal_slowdown|hw_power_brake_slowdown"
GPU_THROTTLE_WINDOW = "15m"
GPU_THROTTLE_SHARE = 0.25
GPU_THROTTLE_FOR = "10m"
# Core temperature: datacenter GPUs slow down from about 85-90 C; warn before.
GPU_TEMPERATURE_C = 85
GPU_TEMPERATURE_FOR = "10m"
# GPU idle while requests wait: utilization under this while the gateway queues or holds
# BATCH_IN_FLIGHT_MIN calls in flight per replica. The model server is stuck or on the CPU.
GPU_IDLE_UTILIZATION = 0.05
GPU_IDLE_WINDOW = "10m"
GPU_IDLE_FOR = "10m"
# XID codes that mean a GPU needs attention (NVIDIA's list of critical XIDs: ECC page retirement,
# GPU fallen off the bus, NVLink, row remap failures). Add codes from the driver release notes.
GPU_CRITICAL_XIDS = "48|61|62|63|64|74|79|92|94|95|119|120"
GPU_XID_WINDOW = "10m"
# Any uncorrected ECC error in the window.
GPU_ECC_WINDOW = "10m"
GPU_LOST_FOR = "1m"
# XID and ECC alerts fire on one event; this `for` only rides out a scrape glitch.
GPU_EVENT_FOR = "1m"

# Log pipeline. Oldest unshipped spool data: the store is this far behind the service.
SPOOL_BACKLOG_AGE_S = 600
SPOOL_BACKLOG_FOR = "10m"
# Any dead-lettered (permanently rejected) or dropped sample in the window.
PIPELINE_LOSS_WINDOW = "15m"
PIPELINE_LOSS_FOR = "5m"
# Dropped samples: a sustained rate, not one drop (a full sink queue in a burst is by design).
SAMPLES_DROPPED_RATE = 0.01  # per second over PIPELINE_LOSS_WINDOW: 9 in 15 minutes
SAMPLES_DROPPED_FOR = "15m"
# The spool's disk cap (`cap_bytes`): past it new samples are dropped. Warn at this share.
SPOOL_FULL_SHARE = 0.8
SPOOL_FULL_FOR = "10m"

# Traffic collapse: a model's request rate over TRAFFIC_WINDOW under this share of the same
# window a day and a week earlier (both: a quiet Sunday is compared with last Sunday too), when
# those had at least MIN_REQUEST_RATE. Clients that cannot reach the gateway send no errors.
TRAFFIC_WINDOW = "30m"
TRAFFIC_COLLAPSE_SHARE = 0.3
TRAFFIC_COLLAPSE_FOR = "15m"

# Gateway saturation over SATURATION_WINDOW: requests shed (503, no concurrency slot) above this
# share of requests, a mean wait for a concurrency slot above QUEUE_WAIT_S, or connections
# refused at max_connections at a sustained rate. Shed requests burn the availability budget
# too; this warns while the queue fills, before they do.
SATURATION_WINDOW = "10m"
SHED_SHARE = 0.01
QUEUE_WAIT_S = 0.5
REJECTED_CONNECTIONS_RATE = 0.1
SATURATION_FOR = "10m"

# Monitoring the monitoring (kube-prometheus's meta-alerts). They carry META_LABELS so that
# Alertmanager routes them apart from the receivers they may be reporting broken; the Watchdog
# (always firing, severity "none") has a route of its own to a dead man's switch.
META_LABELS = {"meta": "true", "team": "monitoring"}
WATCHDOG_NAME = "Watchdog"
META_WINDOW = "5m"
META_FOR = "15m"
# Alertmanager notifications failing above this share, per integration.
AM_FAILED_SHARE = 0.01
# Prometheus failing to send alerts above this share to every Alertmanager it knows.
PROM_SEND_ERROR_SHARE = 0.01
SHIPPER_STALLED_FOR = "5m"  # an output held by a config error (401/403/404) this long pages

# The generated time-compressed rule set divides every window, offset and `for` by this factor,
# so tests see an hour of alerting in a minute. Change with the test scrape interval (the
# shortest compressed window, 5m / factor, must still hold a few scrapes).
COMPRESSION_FACTOR = 60
# ... but never below this many seconds: a `for` of one scrape would fire on a single slow scrape.
COMPRESSED_MIN_SECONDS = 5

# Where each alert's runbook lives (kubernetes-mixin's runbookURLPattern); {alertname} is
# replaced. The default is the deployment's own runbooks, which its on-call receiver serves
# rendered (GET /runbooks/<alert>): the compose receiver published on the host's loopback, the
# local stack's on its port (9095 both by default; `up` points its rules at its own). Change it
# where runbooks are published elsewhere (a wiki, an internal site); keep one page per alert.
RUNBOOK_URL_PATTERN = f"http://127.0.0.1:{ports.ONCALL}/runbooks/{{alertname}}"
# The same for the Kubernetes deployment (deploy/k8s), whose rules and dashboards link this: its
# `runbooks` Deployment serves the runbooks (the on-call receiver's image, the pages from a
# generated ConfigMap) and its `runbooks` Ingress publishes them at this host and path. The host
# is the example Ingress's placeholder: change both together (a test holds them equal).
K8S_RUNBOOK_URL_PATTERN = "https://tokenpulse.example.com/runbooks/{alertname}"

# Grafana as the on-call engineer's browser reaches it: each notification links the dashboard
# panel of its alert there. The default is the compose Grafana's published address (loopback,
# GRAFANA_PUBLISH, 3000 by default); change it where Grafana is published elsewhere.
GRAFANA_URL = "http://127.0.0.1:3000"
# A notification's dashboard and sample-search links cover this long before and after the
# alert's start.
LINK_WINDOW = "1h"
# The dashboard panel a notification links, by alert name (after ALERT_PREFIX), else by component
# prefix: (DASHBOARD_UIDS key, panel title). Titles, not ids: ids are renumbered as panels are
# added; a title that no dashboard has fails `tokenpulse build`.
ALERT_PANELS: dict[str, tuple[str, str]] = {
    "Gateway": ("slo", "Requests/s by code"),
    "GatewayAvailabilityBudgetBurn": ("slo", "Errors by code"),
    "GatewayLatencyBudgetBurn": ("slo", "Latency percentiles"),
    "GatewayTokenLatencyBudgetBurn": ("slo", "Time per output token"),
    "GatewayCircuitBreakerOpen": ("slo", "Circuit breaker"),
    "GatewayThroughputDrop": ("slo", "Tokens/s"),
    "GatewayTtftBudgetBurn": ("slo", "Time to first token"),
    "GatewaySaturated": ("slo", "Queued for a slot"),
    "GatewayDown": ("pipeline", "Scrape targets up"),
    "Quality": ("quality", "Mean NLL per token"),
    "QualityEmptyOutputs": ("quality", "Empty outputs"),
    "QualityTruncation": ("quality", "Truncation"),
    "QualityRepetition": ("quality", "Repetition"),
    "QualityNllDrift": ("quality", "NLL drift from the mean"),
    "QualityNegativeFeedback": ("quality", "Negative feedback"),
    "Canary": ("quality", "Canary success and match"),
    "CanaryWorseThanStable": ("quality", "Canary NLL: answers vs golden"),
    "TfServing": ("serving", "Available versions"),
    "TfServingBatchQueueSlow": ("serving", "Batch queueing latency"),
    "TfServingBatchingIneffective": ("serving", "Batch size"),
    # a replica out (or in and out) of service: which one, as the gateway routes around it
    "TfServingDown": ("serving", "Replicas in the gateway's rotation"),
    "TfServingFlapping": ("serving", "Replicas in the gateway's rotation"),
    "TfServingRecentlyDown": ("serving", "Replicas in the gateway's rotation"),
    "TfServingFleetRecentlyDown": ("serving", "Replicas in the gateway's rotation"),
    "TfServingResourceExhausted": ("serving", "Requests/s by status"),
    "TfServingVersionLoadFailed": ("serving", "Version states"),
    "Exporter": ("pipeline", "Collector success"),
    "ExporterDown": ("pipeline", "Scrape targets up"),
    "Gpu": ("gpu", "GPUs seen"),
    "GpuThrottled": ("gpu", "Throttle reasons"),
    "GpuCriticalXid": ("gpu", "XID errors"),
    "GpuEccErrors": ("gpu", "ECC errors"),
    "GpuLost": ("gpu", "GPUs lost"),
    "GpuMemoryNearlyFull": ("gpu", "Memory"),
    "GpuTemperatureHigh": ("gpu", "Temperature"),
    "GpuIdleWhileQueued": ("gpu", "Utilization"),
    "GpuRowRemapFailed": ("gpu", "XID errors"),  # the driver reports the failed remap as an XID
    "Shipper": ("pipeline", "Backlog age"),
    "ShipperDown": ("pipeline", "Scrape targets up"),
    "ShipperDeadLetters": ("pipeline", "Dropped and dead-lettered"),
    "ShipperStalled": ("pipeline", "Stalled outputs and config errors"),
    "ShipperSegmentsSkipped": ("pipeline", "Stalled outputs and config errors"),
    # what fills the spool: the shipper falling behind (no panel shows the spool's bytes)
    "PipelineSpoolNearlyFull": ("pipeline", "Backlog age"),
    "Pipeline": ("pipeline", "Dropped and dead-lettered"),
}
# Any other alert (the monitoring's own) links the scrape targets.
DEFAULT_PANEL = ("pipeline", "Scrape targets up")

# Every alert name starts with this (component prefix in the name itself follows it).
ALERT_PREFIX = "TokenPulse"

# Stable Grafana dashboard UIDs: runbooks and alert links point at them, so keep them once
# published.
DASHBOARD_UIDS = {
    "slo": "tokenpulse-slo",
    "serving": "tokenpulse-serving",
    "quality": "tokenpulse-quality",
    "gpu": "tokenpulse-gpu",
    "pipeline": "tokenpulse-pipeline",
}

# Alertmanager timing. group_wait: how long to gather a first notification; group_interval: how
# soon changes in a group are sent; repeat: how often a still-firing page re-notifies.
AM_GROUP_BY = ("alertname", "model")
AM_GROUP_WAIT = "30s"
AM_GROUP_INTERVAL = "5m"
AM_REPEAT_INTERVAL = "4h"
AM_RESOLVE_TIMEOUT = "5m"
# The Watchdog (always firing) reaches the dead man's switch this often: the switch alarms when it
# has not arrived for a few of these. Shorter: faster alarm, more notifications.
AM_WATCHDOG_INTERVAL = "1m"
