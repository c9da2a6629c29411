"""The one mixin config: every threshold, window, name and link of the rules, routes, dashboards.

Data only: `MixinConfig`, a frozen value that every builder takes (as it takes a `Timing`), so a
deployment's variant is a config of its own, never an edit of rendered text. `MixinConfig.local()`
is the local stack's (the committed generated files and the promtool tests carry it);
`up`, compose and Kubernetes render with theirs (`MixinConfig.local().with_links(...)`: the
links of monitoring/deploy_links.py, or `up`'s own ports). Change a default here, run
`tokenpulse build`, commit the regenerated files; never edit the generated YAML by hand (a test
fails when it drifts). Durations are Prometheus duration strings ("5m", "1h", "3d").
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from monitoring.mixin.promql import Timing, render_seconds, seconds
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
    # training workers (`tokenpulse model train --metrics-port`): file_sd locally, the compose
    # `training` service, a PodMonitor on Kubernetes (its pods' port named `metrics`)
    training: str = "tokenpulse-training"

    def selector(self, component: str) -> str:
        """`job="<name>"` for a component field name, e.g. selector("gateway")."""
        return f'job="{getattr(self, component)}"'

    def sel(self, component: str, extra: str = "") -> str:
        """A label selector for a component's job plus extra matchers, e.g. sel("gateway")."""
        job = self.selector(component)
        return f"{{{job},{extra}}}" if extra else f"{{{job}}}"


@dataclass(frozen=True)
class Slo:
    """One service-level objective over the gateway's counters or histograms."""

    name: str  # short id used in recording-rule names and the `slo` label
    objective: float  # share of good events; change when the product promise changes
    description: str
    # For latency SLOs: the histogram bucket bound (seconds, exactly as exposed in `le`) under
    # which a request is good. Must be one of the gateway's bucket bounds.
    threshold_le: str = ""


@dataclass(frozen=True)
class BurnTier:
    """One multi-window burn-rate alert tier (SRE Workbook ch. 5)."""

    severity: str  # critical pages, warning tickets
    long: str  # long window: proves the burn is sustained
    short: str  # short window: makes the alert resolve quickly once the burn stops
    factor: float  # burn rate; fires when both windows burn faster than factor*(1-objective)
    for_: str  # how long both windows must agree before it fires


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


@dataclass(frozen=True)
class Links:
    """Where a deployment's pages and dashboards link: runbooks, Grafana, Kibana, as the on-call
    engineer's browser reaches them (links.check holds their shape and refuses loopback)."""

    runbook_url_pattern: str  # ends with {alertname}, which is replaced
    grafana_url: str  # no trailing slash; + /d/<uid>/?viewPanel=<id>
    kibana_url: str  # no trailing slash; + /app/discover#...
    # the training dashboard's link: TensorBoard over a run's `RUN/tensorboard` (`tensorboard
    # --logdir RUN/tensorboard`); empty: the dashboard has no TensorBoard link
    tensorboard_url: str = ""

    def runbook_url(self, alertname: str) -> str:
        """The runbook page of one alert."""
        return self.runbook_url_pattern.format(alertname=alertname)


# The local stack's links, which every committed generated file (and the promtool tests) carries:
# its on-call receiver serves the runbooks rendered (GET /runbooks/<alert>; `up` renders with its
# own port), Grafana and Kibana on this machine. Compose and Kubernetes link their own addresses,
# from settings (monitoring/deploy_links.py: TOKENPULSE_LINKS_* in .env, deploy/k8s/links.env).
# Keep one runbook page per alert (kubernetes-mixin's runbookURLPattern; {alertname} replaced).
LOCAL_LINKS = Links(
    runbook_url_pattern=f"http://127.0.0.1:{ports.ONCALL}/runbooks/{{alertname}}",
    grafana_url="http://127.0.0.1:3000",
    kibana_url="http://127.0.0.1:5601",
    tensorboard_url="http://127.0.0.1:6006",
)


@dataclass(frozen=True)
class MixinConfig:
    """Everything the generated rules, routes, dashboards and deployment objects are made from.

    `links` first: the one part that differs between deployments. Every other field has the
    shipped default; a test or a deployment changes one with `dataclasses.replace`.
    """

    links: Links
    # Prometheus job names of each scraped component (the `job` label of its series). Change
    # with the scrape config of a deployment that names its jobs differently (e.g. a Kubernetes
    # ServiceMonitor); every rule selects on these.
    jobs: Jobs = Jobs()

    # The label that tells model-server replicas apart across jobs: a target label on each TF
    # Serving target and on the exporter watching it (locally `replica="0"`, `"1"`, ...; in
    # Kubernetes the pod name, relabelled into it). Replica-level alerts keep it, fleet rules sum it
    # away with `instance`, and inhibitions between replica-level alerts hold it `equal`. A
    # deployment with one model server may leave it out: an absent label is equal to an absent
    # label.
    replica_label: str = "replica"
    # The label that names the machine a series comes from where one exporter serves a whole node
    # (Kubernetes' GPU DaemonSet: the node name, relabelled onto TF Serving's and the exporters'
    # series). GPU alerts join a GPU to the model servers beside it on this label, and their
    # inhibitions hold it equal; locally and on compose it is absent everywhere (one machine: absent
    # equals absent).
    node_label: str = "node"

    # The one label of the gateway's OpenMetrics exemplars (latency, TTFT and NLL histograms): the
    # request id of the sample, which Kibana's genai_sample.request_id and `tokenpulse samples show`
    # resolve. Grafana's Prometheus datasource maps it to a link (monitoring/grafana/provisioning).
    exemplar_label: str = "request_id"

    # Scrape and rule evaluation interval of the production Prometheus. Change it only together with
    # the shortest rate window below (a rate window must hold at least four scrapes).
    scrape_interval: str = "15s"
    evaluation_interval: str = "30s"

    # SLO period: the budget is `(1 - objective) * period`. Change only with the burn-rate factors
    # (they are computed for a 30-day period).
    slo_period: str = "30d"

    slos: tuple[Slo, ...] = (
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
    error_codes: str = "5.."

    burn_tiers: tuple[BurnTier, ...] = (
        # Page: 2% of a 30d budget in 1 h. Change only with slo_period.
        BurnTier("critical", "1h", "5m", 14.4, "2m"),
        # Page: 5% of the budget in 6 h.
        BurnTier("critical", "6h", "30m", 6.0, "15m"),
        # Ticket: 10% in a day (Sloth / kubernetes-mixin tier).
        BurnTier("warning", "1d", "2h", 3.0, "1h"),
        # Ticket: the whole budget would be gone by the end of the period.
        BurnTier("warning", "3d", "6h", 1.0, "3h"),
    )

    # Minimum traffic before a quality alert may fire, requests per second over its window, and
    # before a traffic collapse counts (a day and a week ago): with fewer requests a handful of bad
    # outputs is a large share. Raise for noisier models.
    min_request_rate: float = 0.05
    # A burn tier needs at least this many bad events (5xx, slow answers, slow tokens or first
    # tokens) in its long window: a count, not a rate (issue 26 A.4). The old guard, 0.05 req/s in
    # both windows, let a model at 0.02-0.04 req/s fail half or all of its requests for an hour
    # with no page. 6 is twice the 3 errors in an hour at 0.01 req/s that must not page (a blip
    # of one failed second at that rate); a model at 0.01 req/s failing every request has 6 after
    # 10 minutes, so the 1h tier (for 2m) fires by 13 minutes and pages within 14 (group_wait);
    # at 0.02 req/s with half failing, the same. The short window needs no count: its ratio over
    # the threshold says the burn goes on (at 0.01 req/s, a 5m window holds about 3 requests).
    # Raise it for a model whose errors come in harmless bursts.
    min_bad_events: int = 6

    # Baseline: the same signal over baseline_window ending baseline_offset ago, so an ongoing
    # incident is not part of its own baseline. Lengthen the offset if incidents last longer than a
    # day.
    baseline_window: str = "7d"
    baseline_offset: str = "1d"
    # The baseline is never taken as lower than this share of the floor, so a perfect week does not
    # make one bad output look like an infinite rise.
    baseline_min_share: float = 0.5

    degradations: tuple[Degradation, ...] = (
        # Empty outputs: 3x the usual share and above 2% of outputs.
        Degradation("empty_output", "30m", 3.0, 0.02, "15m", min_events=5),
        # Truncation: outputs stopped by max_new_tokens rather than a stop token; a model that stops
        # ending its sentences shows here first. Long-form callers have a high normal share: the
        # factor is relative to that.
        Degradation("truncation", "30m", 1.5, 0.5, "30m", min_events=5),
        # Repetition: mean share of repeated word 3-grams per output (degenerate loops).
        Degradation("repetition", "30m", 2.0, 0.15, "15m"),
    )

    # Negative feedback (POST /v1/feedback): share of feedback scored negative over feedback_window,
    # against its own baseline (baseline_window ending baseline_offset ago, as the degradations).
    # Feedback is sparse: an hour window, and at least feedback_min_rate feedback per second (about
    # 18 an hour) before it may fire. The share is recorded only while feedback arrives, so an idle
    # night leaves a gap in the baseline, not a zero or NaN. Raise the factor if it flaps on moods.
    feedback_window: str = "1h"
    feedback_factor: float = 2.0
    feedback_floor: float = 0.2  # and more than a fifth of the feedback is negative
    feedback_min_rate: float = 0.005
    feedback_for: str = "30m"

    # mean NLL drift: z-score of the 30m mean per-token NLL against the baseline mean and stddev of
    # 30m means. 3 sigma is rare for a stable model; raise it if the traffic mix changes often.
    nll_window: str = "30m"
    nll_z: float = 3.0
    # And at least this many nats above the baseline mean (a tiny stddev makes tiny drifts huge z).
    nll_min_delta: float = 0.25
    nll_for: str = "30m"
    # A drift is a ticket (warning): NLL is what moves first when a model or its inputs change.
    nll_severity: str = "warning"

    # Throughput drop: generation speed (output tokens per second of upstream time, so a quiet hour
    # is not a drop) below this share of its baseline. Lower it if batching mixes vary a lot.
    tokens_drop_share: float = 0.5
    tokens_window: str = "30m"
    tokens_for: str = "30m"

    # Canary: the exporter's golden prompts per version. A mismatch means the version's greedy
    # output changed since export (numerics, a bad load); failure means it did not answer. 5 runs of
    # the default 60 s canary interval: one flaky run does not page.
    canary_for: str = "5m"
    # A canary-labelled version whose golden-prompt mean NLL is this many nats above the stable
    # label's: worse than what it replaces. Lower it for stricter rollouts.
    canary_nll_margin: float = 0.5
    canary_worse_for: str = "15m"

    # Canary vs stable on live traffic (TokenPulseCanaryDegradedVsStable). A version exported broken
    # answers its own golden prompts as recorded, so CanaryMismatch stays quiet, and at a 5% weight
    # it moves the model-level quality signals too little for their 30m windows. So each signal of
    # the gateway's outputs (empty share, truncated share, mean repetition, mean NLL) and the share
    # of slow requests is compared per version between the versions behind the canary and stable
    # labels, over the same window. Timing: a canary broken from its first output fires once
    # canary_live_min_outputs are in the window, plus canary_live_for, a scrape and an evaluation:
    # at 1 req/s total and a 5% weight (0.05 canary outputs/s) 30 outputs take 10m, firing at
    # 12m30s, the chat message at 13m. The 15-minute bound (chat message included) holds from 0.044
    # canary outputs/s (0.87 req/s total at 5%); below 30 outputs per window (0.033/s: 0.67 req/s at
    # 5%) it never fires, and the model-level alerts remain. Longer window: more outputs, later
    # alarm at low traffic; the guard sets the delay, not the window.
    canary_live_window: str = "15m"
    # Counts, not rates, guard it: at least this many outputs of the canary AND of stable in the
    # window. 30 is the smallest sample the margins below are computed for.
    canary_live_min_outputs: int = 30
    # Worse by this much (canary - stable, absolute) counts as broken, per signal. Each margin keeps
    # a healthy canary with 30 outputs quiet (one-sided chance of crossing it, per evaluation):
    # - empty_output 0.2: a healthy canary at the stable's share p needs more than 30 * (p + 0.2)
    #   empty outputs: binomial tail 2e-6 at p = 2%, 5e-4 at p = 10%. An all-empty canary (100%) or
    #   a half-empty one (50%) is far past it.
    # - truncation 0.3: 3e-4 at most for any stable share (the binomial spread is widest at 50%, sd
    #   0.09 at 30 outputs: 0.3 is 3.3 sd). A canary that never stops (100%) fires while stable cuts
    #   under 70% of its outputs; long-form traffic cut more often than that cannot show it here.
    # - repetition 0.15: mean of per-output ratios; with a per-output sd up to 0.25, 0.15 is 3.3
    #   standard errors at 30 outputs (5e-4). Degenerate loops sit at 0.5 and above.
    # - nll 0.5 nats (as canary_nll_margin): with a per-output sd of the mean NLL up to 0.7 nats,
    #   0.5 is 3.9 standard errors at 30 outputs (5e-5); at sd 1.0 nat it is 2.7 (3e-3): raise it
    #   for a model whose per-output NLL spreads that wide (the "Mean NLL per token" panel's p90 -
    #   mean is about 1.3 sd). Measured on the `tiny` preset (64 sampled outputs at temperature
    #   0.8): sd 0.15 nats, and its noise-2 degraded export only 0.11 nats above it on its own
    #   samples, with the same empty, truncated and repetition shares: the gibberish of a tiny model
    #   hides a broken one (CanaryMismatch against stable's golden answers is what catches that
    #   drill).
    # - latency 0.2: share of answered requests slower than the latency SLO's bound (2.5 s); the
    #   same binomial tails as empty_output (stable is meant to be slow under 1%). A canary 5x
    #   slower than stable, right in every answer, shows here only.
    # Stable's own noise is small beside it (19x the canary's outputs at 5%). Callers stick to a
    # side (the gateway hashes the caller), so a canary serving one odd caller can differ by its
    # mix: the runbook says how to tell.
    canary_live_margins: dict[str, float] = field(
        default_factory=lambda: {
            "empty_output": 0.2,
            "truncation": 0.3,
            "repetition": 0.15,
            "nll": 0.5,
            "latency": 0.2,
        }  # fmt: skip
    )
    # Held this long: the window already smooths, so this only rides out one odd evaluation.
    canary_live_for: str = "2m"
    # Chat, not a page: the canary serves a few per cent of callers and rolling back is one command
    # for whoever runs the rollout; a canary failing requests pages through the availability SLO.
    canary_live_severity: str = "warning"

    # Batching ineffective: mean processed batch size below this while, on average, at least
    # batch_in_flight_min predict calls per model-server replica are in flight from the gateway, so
    # there were requests to batch. (The gateway's own queue is no witness: it only fills once every
    # concurrency slot is taken upstream, when batches are full.) Change with max_batch_size.
    batch_size_min: float = 1.5
    batch_in_flight_min: int = 4
    batch_window: str = "10m"
    batch_for: str = "15m"
    # p99 time a request waits in TF Serving's batch queue. Change with batch_timeout_micros (the
    # default config waits at most a few ms; 250 ms means the batcher is saturated).
    batch_queue_p99_s: float = 0.25
    batch_queue_for: str = "10m"

    # The gateway's load-protection limits as shipped: the defaults of its max_concurrency (upstream
    # calls in flight across replicas) and max_queue (requests waiting for a slot; past it, shed
    # with 503). The saturation panels draw them as their limits. Change with the gateway's settings
    # (TOKENPULSE_GATEWAY_MAX_CONCURRENCY / _MAX_QUEUE); a test holds them equal to its defaults.
    gateway_max_concurrency: int = 64
    gateway_max_queue: int = 256
    # Share of a limit at which a saturation panel turns yellow.
    saturation_warn: float = 0.8

    # Health `for`s: long enough to ride out a restart, short enough to page within minutes.
    down_for: str = "1m"  # a scrape target is unreachable
    # After TF Serving comes back (or a model has an AVAILABLE version again), the outage still
    # fills the windows of the symptoms it caused (burn rates, breaker, canaries) for up to the
    # longest such window. An info alert holds them silenced this long so the outage pages once: the
    # page tiers' longest short window (30m) and 5m of slack, since the hold is counted from the
    # page's last firing evaluation while the burn clears only a recording and an alert evaluation
    # after its window is clean (drill restart-no-available-version, compressed: with exactly 30m
    # the hold outlasted the 6h tier's firing by 2-3 s only). Lengthen it with the page tiers' short
    # windows. A hold may only hide what the outage explains (issue 26 A.2,
    # monitoring/mixin/holds.py):
    # - only a page that went out starts it: its cause active for its `for` plus am_group_wait. A
    #   firing shorter than group_wait was never sent, so the burn it leaves is the only page;
    # - fresh failures after the recovery end it for good: over fresh_window (the fast page tier's
    #   short window, so "fresh" is what that tier would page on), starting fresh_margin after the
    #   target (or the model's AVAILABLE version) came back, the model's 5xx share is above the fast
    #   tier's threshold (14.4 x 0.5%) with at least fresh_min_failed of them. Such a window holds
    #   none of the outage, so what it shows the outage does not explain. The margin rides out the
    #   gateway's own lag (its breaker stays open up to 5 s, a replica rejoins its rotation at the
    #   next status poll); the count keeps a stray error or two among few requests from counting
    #   (with the drill's compressed 5 s window at 2 req/s, one error is already 10%). Released, the
    #   burn tiers page on their own evidence (their guards still apply); a server that restarts and
    #   then fails every request pages within fresh_margin + fresh_window (6m) and an evaluation of
    #   coming back, plus Alertmanager's group_interval (up to 5m) for a burn that was already
    #   firing inhibited. A model at under fresh_min_failed / fresh_window (0.01 req/s) releases no
    #   hold: its burn waits for the window's end, as before.
    recovery_window: str = "35m"
    fresh_window: str = "5m"
    fresh_margin: str = "1m"
    # The gateway's own lag after a model server is back, in wall-clock time: its breaker stays
    # open breaker_open_s (5 s), a replica rejoins its rotation at the next status poll (5 s), and
    # the gateway's counters are scraped after that. The gateway's clocks are not compressed, so
    # the compressed rules' fresh margin (1m / 60, floored at 5 s) is never shorter than this:
    # with 5 s, the breaker's tail of a killed server's outage (drill model-server-killed on a busy
    # machine) counted as fresh failures and released the hold over the outage's own burn, which
    # paged beside the next drill's crash-loop page. Lengthen it with breaker_open_s and
    # status_poll_interval_s.
    gateway_recovery_lag: str = "15s"
    fresh_min_failed: int = 3
    # Crash loop (issue 26 A.3): a model-server target that went down, came back and went down
    # again (flap_changes changes of `up`) within flap_window, and was down within flap_recent, so
    # TfServingFlapping is true around every outage of the loop; keep_firing_for (Prometheus 2.42+)
    # carries it over the up-times between them, so a loop is ONE page, firing steadily, and
    # TfServingDown stays quiet while it fires (the loop's outages are not paged one by one).
    # - It fires at the first evaluation that sees the second outage (no `for`: the window's history
    #   is the evidence), so within a scrape and an evaluation (45 s) of it, plus group_wait.
    # - flap_window: two outages whose starts are this close make a loop: outages of 20 s to 10 min
    #   with up-times of 30 s to 10 min between them (alerts/tests/restarts.test.yml). It must
    #   exceed an outage plus an up-time (the second outage must find the first in the window) and
    #   hold two outages and an up-time to stay true through long outages. Two restarts within it
    #   page too: a deploy that needs a second restart within half an hour is worth a look.
    # - flap_recent: at least an evaluation interval, so a one-scrape outage is seen.
    # - flap_keep_firing: the longest up-time the page is carried over; it resolves that long (plus
    #   flap_recent) after the loop's last outage ended. A loop with longer up-times pages again.
    flap_window: str = "30m"
    flap_changes: int = 3
    flap_recent: str = "1m"
    flap_for: str = "0s"
    flap_keep_firing: str = "10m"
    # Requests TF Serving refused with RESOURCE_EXHAUSTED (out of memory, a full batch queue),
    # per second over the window, per replica. Any sustained rate is a ticket.
    resource_exhausted_window: str = "10m"
    resource_exhausted_rate: float = 0.01
    resource_exhausted_for: str = "5m"
    no_version_for: str = "1m"  # a model has no AVAILABLE version
    load_failure_for: str = "5m"  # a version's status is an error after loading
    breaker_for: str = "1m"  # the gateway's upstream circuit breaker is open
    collector_for: str = "10m"  # an exporter collector keeps failing

    # GPU thresholds. Memory: TensorFlow reserves most of the GPU's memory up front, so "used" sits
    # near 100% on a healthy GPU and means nothing alone. Pressure is the allocator failing: TF
    # Serving answering RESOURCE_EXHAUSTED (on the same replica) while the GPU is this full.
    gpu_memory_full: float = 0.95
    gpu_memory_for: str = "5m"
    # Throttle reasons that mean heat or power trouble (not idle or application clocks). Throttled:
    # share of the window the clocks were held down by heat (the driver's thermal policy counter,
    # throttle_seconds_total) or by a hardware slowdown or power brake (the share of samples with
    # that reason active): intermittent throttling adds up instead of resetting a `for`. The power
    # policy (the software power cap) is normal under load and does not count.
    gpu_throttle_policy: str = "thermal"
    gpu_throttle_hw_reasons: str = "hw_slowdown|hw_thermal_slowdown|hw_power_brake_slowdown"
    gpu_throttle_window: str = "15m"
    gpu_throttle_share: float = 0.25
    gpu_throttle_for: str = "10m"
    # Core temperature: datacenter GPUs slow down from about 85-90 C; warn before.
    gpu_temperature_c: int = 85
    gpu_temperature_for: str = "10m"
    # GPU idle while requests wait: utilization under this while the gateway queues or holds
    # batch_in_flight_min calls in flight per replica. The model server is stuck or on the CPU.
    gpu_idle_utilization: float = 0.05
    gpu_idle_window: str = "10m"
    gpu_idle_for: str = "10m"
    # XID codes that mean a GPU needs attention (NVIDIA's list of critical XIDs: ECC page
    # retirement, GPU fallen off the bus, NVLink, row remap failures). Add codes from the driver
    # release notes.
    gpu_critical_xids: str = "48|61|62|63|64|74|79|92|94|95|119|120"
    gpu_xid_window: str = "10m"
    # Any uncorrected ECC error in the window.
    gpu_ecc_window: str = "10m"
    gpu_lost_for: str = "1m"
    # XID and ECC alerts fire on one event; this `for` only rides out a scrape glitch.
    gpu_event_for: str = "1m"

    # Log pipeline. Oldest unshipped spool data: the store is this far behind the service.
    spool_backlog_age_s: int = 600
    spool_backlog_for: str = "10m"
    # Any dead-lettered (permanently rejected) or dropped sample in the window.
    pipeline_loss_window: str = "15m"
    pipeline_loss_for: str = "5m"
    # Dropped samples: a sustained rate, not one drop (a full sink queue in a burst is by design).
    samples_dropped_rate: float = 0.01  # per second over pipeline_loss_window: 9 in 15 minutes
    samples_dropped_for: str = "15m"
    # The spool's disk cap (`cap_bytes`): past it new samples are dropped. Warn at this share.
    spool_full_share: float = 0.8
    spool_full_for: str = "10m"

    # Training (`tokenpulse model train --metrics-port`, job jobs.training). Warnings: chat, not
    # the serving pager; a training run serves no user, and a stalled run loses time, not
    # requests (each runbook argues it). A worker that set tokenpulse_training_finished 1 (its
    # last step done) is quiet in every training alert for training_finished_window after its
    # last scrape: the run ended on purpose, and a run that ends on purpose also removes its
    # targets (serving/model/targets.py).
    training_finished_window: str = "1h"
    # Stalled: the global step has not moved over this window. Longer than the slowest step plus
    # a checkpoint write and a worker restart from the newest checkpoint (the supervisor's own
    # recovery), so a restart that works is not an alert.
    training_stall_window: str = "10m"
    training_stall_for: str = "5m"
    # A worker's metrics page unreachable (its process dead or hung): the run is not progressing
    # or is about to restart; the supervisor restarts within seconds, so 2m rides that out.
    training_down_for: str = "2m"
    # Loss not finite (NaN, or above this: an overflow), held for a scrape or two.
    training_loss_huge: float = 1e30
    training_loss_nonfinite_for: str = "2m"
    # Diverging: the mean loss over the current window above factor x its own mean over the
    # baseline window just before it, and by at least min_delta nats (early in training the loss
    # falls fast, then a noisy plateau: 1.5x and +0.5 nats is far outside that noise).
    training_loss_window: str = "5m"
    training_loss_baseline_window: str = "30m"
    training_loss_factor: float = 1.5
    training_loss_min_delta: float = 0.5
    training_loss_for: str = "10m"
    # Checkpoint stale: no checkpoint for more than factor x the cadence (checkpoint_interval_steps
    # x the mean step time over training_step_window), and at least floor seconds (a fast
    # run checkpoints every few seconds: a missed write or two is noise).
    training_checkpoint_factor: float = 3.0
    training_checkpoint_floor_s: int = 600
    training_checkpoint_for: str = "5m"
    # Step time regressed: the p50 step time over the window above factor x its own p50 over the
    # baseline window before it (a slower input pipeline, a straggler worker, a throttled GPU).
    training_step_window: str = "10m"
    training_step_baseline_window: str = "1h"
    training_step_factor: float = 1.5
    training_step_for: str = "15m"

    # Traffic collapse: a model's request rate over traffic_window under this share of the same
    # window a day and a week earlier (both: a quiet Sunday is compared with last Sunday too), when
    # those had at least min_request_rate. Clients that cannot reach the gateway send no errors.
    traffic_window: str = "30m"
    traffic_collapse_share: float = 0.3
    traffic_collapse_for: str = "15m"

    # Gateway saturation over saturation_window: requests shed (503, no concurrency slot) above this
    # share of requests, a mean wait for a concurrency slot above queue_wait_s, or connections
    # refused at max_connections at a sustained rate. Shed requests burn the availability budget
    # too; this warns while the queue fills, before they do.
    saturation_window: str = "10m"
    shed_share: float = 0.01
    queue_wait_s: float = 0.5
    rejected_connections_rate: float = 0.1
    saturation_for: str = "10m"

    # Monitoring the monitoring (kube-prometheus's meta-alerts). They carry meta_labels so that
    # Alertmanager routes them apart from the receivers they may be reporting broken; the Watchdog
    # (always firing, severity "none") has a route of its own to a dead man's switch.
    meta_labels: dict[str, str] = field(
        default_factory=lambda: {"meta": "true", "team": "monitoring"}
    )
    watchdog_name: str = "Watchdog"
    meta_window: str = "5m"
    meta_for: str = "15m"
    # Alertmanager notifications failing above this share, per integration.
    am_failed_share: float = 0.01
    # Prometheus failing to send alerts above this share to every Alertmanager it knows.
    prom_send_error_share: float = 0.01
    # an output held by a config error (401/403/404) this long warns
    shipper_stalled_for: str = "5m"

    # The generated time-compressed rule set divides every window, offset and `for` by this factor,
    # so tests see an hour of alerting in a minute. Change with the test scrape interval (the
    # shortest compressed window, 5m / factor, must still hold a few scrapes).
    compression_factor: int = 60
    # ... but never below this many seconds: a `for` of one scrape would fire on a single slow
    # scrape.
    compressed_min_seconds: int = 5

    # A notification's dashboard and sample-search links cover this long before and after the
    # alert's start.
    link_window: str = "1h"
    # The dashboard panel a notification links, by alert name (after alert_prefix), else by
    # component prefix: (dashboard_uids key, panel title). Titles, not ids: ids are renumbered as
    # panels are added; a title that no dashboard has fails `tokenpulse build`.
    alert_panels: dict[str, tuple[str, str]] = field(
        default_factory=lambda: {
            "Gateway": ("slo", "Requests/s by code"),
            "GatewayAvailabilityBudgetBurn": ("slo", "Errors by code"),
            "GatewayLatencyBudgetBurn": ("slo", "Latency percentiles"),
            "GatewayTokenLatencyBudgetBurn": ("slo", "Time per output token"),
            "GatewayCircuitBreakerOpen": ("slo", "Circuit breaker"),
            "GatewayThroughputDrop": ("slo", "Tokens/s"),
            "GatewayTtftBudgetBurn": ("slo", "Time to first token"),
            "GatewaySaturated": ("slo", "Queued for a slot"),
            "GatewayDown": ("pipeline", "Scrape targets up"),
            "GatewayFleetDown": ("pipeline", "Scrape targets up"),
            "Quality": ("quality", "Mean NLL per token"),
            "QualityEmptyOutputs": ("quality", "Empty outputs"),
            "QualityTruncation": ("quality", "Truncation"),
            "QualityRepetition": ("quality", "Repetition"),
            "QualityNllDrift": ("quality", "NLL drift from the mean"),
            "QualityNegativeFeedback": ("quality", "Negative feedback"),
            "Canary": ("quality", "Canary success and match"),
            "CanaryWorseThanStable": ("quality", "Canary NLL: answers vs golden"),
            "CanaryDegradedVsStable": ("quality", "Canary vs stable on live traffic"),
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
            "GpuRowRemapFailed": (
                "gpu",
                "XID errors",
            ),  # the driver reports the failed remap as an XID
            "Shipper": ("pipeline", "Backlog age"),
            "ShipperDown": ("pipeline", "Scrape targets up"),
            "ShipperDeadLetters": ("pipeline", "Dropped and dead-lettered"),
            "ShipperStalled": ("pipeline", "Stalled outputs and config errors"),
            "ShipperSegmentsSkipped": ("pipeline", "Stalled outputs and config errors"),
            # what fills the spool: the shipper falling behind (no panel shows the spool's bytes)
            "PipelineSpoolNearlyFull": ("pipeline", "Backlog age"),
            "Pipeline": ("pipeline", "Dropped and dead-lettered"),
            "Training": ("training", "Global step"),
            "TrainingLossDiverging": ("training", "Loss"),
            "TrainingCheckpointStale": ("training", "Checkpoint age"),
            "TrainingWorkerDown": ("training", "Training workers up"),
            "TrainingStepTimeRegressed": ("training", "Step time quantiles"),
        }
    )
    # Any other alert (the monitoring's own) links the scrape targets.
    default_panel: tuple[str, str] = ("pipeline", "Scrape targets up")

    # Every alert name starts with this (component prefix in the name itself follows it).
    alert_prefix: str = "TokenPulse"

    # Stable Grafana dashboard UIDs: runbooks and alert links point at them, so keep them once
    # published.
    dashboard_uids: dict[str, str] = field(
        default_factory=lambda: {
            "slo": "tokenpulse-slo",
            "serving": "tokenpulse-serving",
            "quality": "tokenpulse-quality",
            "gpu": "tokenpulse-gpu",
            "pipeline": "tokenpulse-pipeline",
            "training": "tokenpulse-training",
        }
    )

    # Alertmanager timing. group_wait: how long to gather a first notification; group_interval: how
    # soon changes in a group are sent; repeat: how often a still-firing page re-notifies.
    am_group_by: tuple[str, ...] = ("alertname", "model")
    am_group_wait: str = "30s"
    am_group_interval: str = "5m"
    am_repeat_interval: str = "4h"
    am_resolve_timeout: str = "5m"
    # The Watchdog (always firing) reaches the dead man's switch this often: the switch alarms when
    # it has not arrived for a few of these. Shorter: faster alarm, more notifications.
    am_watchdog_interval: str = "1m"

    @classmethod
    def local(cls) -> MixinConfig:
        """The local stack's config: the shipped defaults and loopback links."""
        return cls(LOCAL_LINKS)

    def with_links(self, links: Links) -> MixinConfig:
        """The same config linking a deployment's runbooks, Grafana and Kibana."""
        return replace(self, links=links)

    def timing(self, compressed: bool = False) -> Timing:
        """The durations of the rule set: as configured, or time-compressed for tests."""
        if not compressed:
            return Timing()
        return Timing(self.compression_factor, self.compressed_min_seconds)

    def sel(self, component: str, extra: str = "") -> str:
        """A label selector for a component's job plus extra matchers, e.g. sel("gateway")."""
        return self.jobs.sel(component, extra)

    @property
    def fresh_confirm(self) -> str:
        """How long a model server must stay up after fresh failures before they release its
        TfServingDown hold: a scrape interval and the scrape's timeout (the interval here), the
        most `up` lags a server that froze or died again. Without it a crash loop starting within
        the recovery window released the previous page's hold with its first outage's failures,
        and the burn those windows still held paged before TfServingFlapping (drill crash-loop
        after model-server-killed, CI r36). It delays a real release (drill failure-after-restart)
        as long. 30 s at the 15 s scrapes; compressed, the 5 s floor, against the compressed
        stacks' 2 s scrapes and timeouts."""
        return render_seconds(2 * seconds(self.scrape_interval))

    def alertname(self, name: str) -> str:
        """An alert's full name: the prefix, then `name` (the Watchdog keeps its own)."""
        return name if name == self.watchdog_name else self.alert_prefix + name

    def slo(self, name: str) -> Slo:
        """The SLO called `name`."""
        return next(s for s in self.slos if s.name == name)


# The shipped config, for readers outside the builders (the stack layer's defaults, drills, the
# load test's SLOs). Builders never read it: they are handed a config.
DEFAULT = MixinConfig.local()
