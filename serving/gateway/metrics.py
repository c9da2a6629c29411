"""Every gateway metric, declared once with explicit buckets; handlers call `observe(stats)`.

Labels are only `model`, `version`, `route`, `code` (plus the bounded `finish_reason` on its own
counter, and `replica`, `outcome` on the per-replica upstream series): never the key, the user or
the prompt. `replica` is the 0-based index of a configured upstream URL, fixed at start-up.
Every label value comes from a closed set: a model name the gateway does not serve (anyone
holding a key can send any name) and a finish reason the model should not give are counted under
`__unknown__`, so no request can add series.
Versions only come from the router, which only knows versions the model server reported.

A series exists before its first event: a series born with its first observation hides that
observation from `rate()`. So every closed-set combination is created at 0 when its values
become known: per model and route at start-up, per version when the status poll first sees it
AVAILABLE (`version_available`): the request counters for every status the gateway answers,
the latency histogram of answered requests (code 200: the latency SLI reads only those; an
error's duration is in no ratio, and a histogram per error code would cost 20 series each), the
per-output series (TTFT, inter-token latency, time per output token, tokens, quality, finish
reasons, disconnects) and the feedback counters.

Streams (SSE) follow vLLM's semantics: time to first token is arrival to the first generated
token; inter-token latency is the time between chunks spread over the chunk's tokens (one
observation per token, so its mean is the time per output token); time per output token is
(last token - first token) / (tokens - 1). The request-latency, TTFT and NLL histograms carry the
request id (`X-Request-ID`, the id `tokenpulse samples show` resolves) as an OpenMetrics exemplar,
sent when the scraper asks for `application/openmetrics-text`.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST
from prometheus_client.openmetrics import exposition as openmetrics

from serving.gateway.errors import GatewayError
from tokenpulse.samples import FEEDBACK_CLASSES, RequestStats
from tokenpulse.tfserving.signature import FINISH_LENGTH, FINISH_STOP

LATENCY_BUCKETS = (
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 20.0, 30.0, 60.0,
    120.0,
)  # fmt: skip
QUEUE_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)
TPOT_BUCKETS = (
    0.001, 0.0025, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.15, 0.2, 0.3, 0.5, 1.0, 2.5,
)  # fmt: skip
TTFT_BUCKETS = (
    0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.5, 0.75, 1.0, 2.5, 5.0, 10.0, 20.0,
    60.0,
)  # fmt: skip
ITL_BUCKETS = TPOT_BUCKETS
TOKEN_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192)
RATIO_BUCKETS = (0.0, 0.05, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0)
NLL_BUCKETS = (0.25, 0.5, 1.0, 1.5, 2.0, 2.5, 3.0, 4.0, 5.0, 6.0, 8.0, 10.0)

REQ = ("model", "version", "route", "code")
OUT = ("model", "version", "route")
PFX = "tokenpulse_gateway_"
CONNECTION_REJECT_REASONS = ("header_timeout", "max_connections")
# how one upstream call ended, per replica (serving/gateway/replicas.py)
UPSTREAM_OUTCOMES = ("success", "http_error", "unreachable", "timeout", "bad_response")
FINISH_REASONS = (FINISH_STOP, FINISH_LENGTH)
MODES = ("stream", "unary")
ROUTES = ("generate", "completions", "chat")  # the generation endpoints' `route` values
CLIENT_GONE = 499  # a client that left before the answer (nginx's code): its own outcome


def _error_codes(cls: type[GatewayError] = GatewayError) -> set[int]:
    return {cls.status}.union(*(_error_codes(sub) for sub in cls.__subclasses__()))


# every status a generation endpoint answers: the typed errors' (and 500 for a bug), 200, 499
ERROR_CODES = tuple(str(c) for c in sorted(_error_codes()))
ANSWER_CODES = ("200", str(CLIENT_GONE), *ERROR_CODES)
EXEMPLAR_LABEL = "request_id"  # the exemplar's one label: what `samples show` looks up
UNKNOWN = "__unknown__"


class GatewayMetrics:
    """The gateway's metrics on their own registry (so tests can build many apps)."""

    def __init__(
        self, models: Collection[str], registry: CollectorRegistry | None = None, replicas: int = 1
    ) -> None:
        self.models = frozenset(models)
        self.replicas = tuple(str(i) for i in range(replicas))
        self.registry = r = registry or CollectorRegistry(auto_describe=False)
        self.requests = Counter(f"{PFX}requests", "Requests answered.", REQ, registry=r)
        self.request_duration = Histogram(
            f"{PFX}request_duration_seconds", "Time from arrival to response.", REQ,
            buckets=LATENCY_BUCKETS, registry=r,
        )  # fmt: skip
        self.upstream_duration = Histogram(
            f"{PFX}upstream_duration_seconds", "Time spent in the upstream predict call.", OUT,
            buckets=LATENCY_BUCKETS, registry=r,
        )  # fmt: skip
        self.queue_wait = Histogram(
            f"{PFX}queue_wait_seconds", "Time waiting for a concurrency slot.", ("model", "route"),
            buckets=QUEUE_BUCKETS, registry=r,
        )  # fmt: skip
        self.time_per_output_token = Histogram(
            f"{PFX}time_per_output_token_seconds", "Seconds per generated token after the first "
            "(streams: (last - first token) / (tokens - 1); unary: upstream time / tokens).", OUT,
            buckets=TPOT_BUCKETS, registry=r,
        )  # fmt: skip
        self.time_to_first_token = Histogram(
            f"{PFX}time_to_first_token_seconds", "Streams: arrival to the first generated token.",
            OUT, buckets=TTFT_BUCKETS, registry=r,
        )  # fmt: skip
        self.inter_token_latency = Histogram(
            f"{PFX}inter_token_latency_seconds", "Streams: time between chunks per token in the "
            "chunk (one observation per token after the first chunk).", OUT,
            buckets=ITL_BUCKETS, registry=r,
        )  # fmt: skip
        self.requests_by_mode = Counter(
            f"{PFX}requests_by_mode", "Requests answered, streamed (SSE) or unary.",
            (*OUT, "mode"), registry=r,
        )  # fmt: skip
        self.client_disconnects = Counter(
            f"{PFX}client_disconnects", "Requests (streamed or unary) the client left before the "
            "end (the upstream work was cancelled; answered code 499, not an error).", OUT,
            registry=r,
        )  # fmt: skip
        self.prompt_tokens = Counter(f"{PFX}prompt_tokens", "Prompt tokens.", OUT, registry=r)
        self.output_tokens = Counter(f"{PFX}output_tokens", "Generated tokens.", OUT, registry=r)
        self.request_prompt_tokens = Histogram(
            f"{PFX}request_prompt_tokens", "Prompt tokens per output.", OUT,
            buckets=TOKEN_BUCKETS, registry=r,
        )  # fmt: skip
        self.request_output_tokens = Histogram(
            f"{PFX}request_output_tokens", "Generated tokens per output.", OUT,
            buckets=TOKEN_BUCKETS, registry=r,
        )  # fmt: skip
        self.finish_reason = Counter(
            f"{PFX}finish_reason", "Outputs by finish reason.", (*OUT, "finish_reason"), registry=r
        )
        self.empty_outputs = Counter(
            f"{PFX}empty_outputs", "Outputs with no visible text.", OUT, registry=r
        )
        self.repetition_ratio = Histogram(
            f"{PFX}repetition_ratio", "Share of repeated word 3-grams per output.", OUT,
            buckets=RATIO_BUCKETS, registry=r,
        )  # fmt: skip
        self.mean_nll = Histogram(
            f"{PFX}mean_nll_nats", "Mean negative log-likelihood per generated token.", OUT,
            buckets=NLL_BUCKETS, registry=r,
        )  # fmt: skip
        self.in_flight = Gauge(
            f"{PFX}in_flight_requests", "Requests being handled now.", ("route",), registry=r
        )
        self.queued = Gauge(
            f"{PFX}queued_requests", "Requests waiting for a concurrency slot.", registry=r
        )
        self.saturation = Gauge(
            f"{PFX}saturation_ratio", "This gateway's own saturation, 0 to 1: requests holding "
            "an upstream slot plus requests queued for one, over the slots plus the queue "
            "(max_concurrency + max_queue); at 1 every new request is shed with 503. The "
            "gateway's autoscaling signal: it rises with this replica's load, not with the "
            "upstream's in-flight work.", registry=r,
        )  # fmt: skip
        self.breaker_state = Gauge(
            f"{PFX}circuit_breaker_state",
            "Upstream circuit breaker: 0 closed, 1 half-open, 2 open.", registry=r,
        )  # fmt: skip
        self.breaker_rejected = Counter(
            f"{PFX}circuit_breaker_rejected", "Requests failed fast by an open breaker.",
            ("model", "route"), registry=r,
        )  # fmt: skip
        self.rate_limited = Counter(
            f"{PFX}rate_limited", "Requests refused by a per-key rate limit.", ("model", "route"),
            registry=r,
        )  # fmt: skip
        self.shed = Counter(
            f"{PFX}shed", "Requests shed for lack of a concurrency slot.", ("model", "route"),
            registry=r,
        )  # fmt: skip
        self.samples_dropped = Counter(
            f"{PFX}samples_dropped", "Samples dropped because the sink queue was full.", registry=r
        )
        self.feedback = Counter(
            f"{PFX}feedback", "Feedback on responses (POST /v1/feedback) by the response's model "
            "and version (__unknown__ and empty when the gateway no longer remembered it) and "
            "score class (negative, neutral, positive).", ("model", "version", "score_class"),
            registry=r,
        )  # fmt: skip
        self.connections_rejected = Counter(
            f"{PFX}connections_rejected", "Connections closed by a limit: a request head too "
            "slow (header_timeout) or too many open (max_connections).", ("reason",), registry=r,
        )  # fmt: skip
        for reason in CONNECTION_REJECT_REASONS:
            self.connections_rejected.labels(reason)
        self.upstream_requests = Counter(
            f"{PFX}upstream_requests", "Upstream predict calls by replica and how they ended.",
            ("replica", "outcome"), registry=r,
        )  # fmt: skip
        self.upstream_retries = Counter(
            f"{PFX}upstream_retries", "Predict calls retried on another replica after a "
            "connection failure on this one.", ("replica",), registry=r,
        )  # fmt: skip
        self.upstream_healthy = Gauge(
            f"{PFX}upstream_healthy", "1 while the replica is in rotation (its last status poll "
            "saw an AVAILABLE version and no connection failed since), else 0.", ("replica",),
            registry=r,
        )  # fmt: skip
        self.upstream_in_flight = Gauge(
            f"{PFX}upstream_in_flight_requests", "Predict calls outstanding per replica.",
            ("replica",), registry=r,
        )  # fmt: skip
        for replica in self.replicas:
            for outcome in UPSTREAM_OUTCOMES:
                self.upstream_requests.labels(replica, outcome)
            self.upstream_retries.labels(replica)
            self.upstream_healthy.labels(replica)
            self.upstream_in_flight.labels(replica)
        self._bound: dict[tuple[str, str, str], _OutputChildren] = {}
        # (model, version, route, code) -> (requests, request_duration, queue_wait) children
        self._answered: dict[tuple[str, str, str, str], tuple[Any, Any, Any]] = {}
        self._modes: dict[tuple[str, str, str, str], Any] = {}
        self._versions: set[tuple[str, str]] = set()  # (model, version) created at 0
        for route in ROUTES:
            self.in_flight.labels(route)
            for model in self.models:
                self.rate_limited.labels(model, route)
                self.shed.labels(model, route)
                self.breaker_rejected.labels(model, route)
                self.queue_wait.labels(model, route)
                for code in ERROR_CODES:  # refused before a version was chosen: version ""
                    self.requests.labels(model, "", route, code)

    def version_available(self, model: str, version: str) -> None:
        """Create the series of a version the status poll saw AVAILABLE, at 0 (once)."""
        if model not in self.models or (model, version) in self._versions:
            return
        self._versions.add((model, version))
        self._feedback_at_zero(model, version)
        for route in ROUTES:
            self._children(model, version, route)
            self._answered_children((model, version, route, "200"))
            for code in ANSWER_CODES:
                self.requests.labels(model, version, route, code)
            for mode in MODES:
                self._mode(model, version, route, mode)

    def _feedback_at_zero(self, model: str, version: str) -> None:
        # from when the version is known: rates see its first feedback
        for score_class in FEEDBACK_CLASSES:
            self.feedback.labels(model, version, score_class)

    def observe_feedback(self, model: str, version: str, score_class: str) -> None:
        """Count one feedback (labels from closed sets: served models, known versions)."""
        if model not in self.models:
            model, version = UNKNOWN, ""
        if score_class in FEEDBACK_CLASSES:
            self.feedback.labels(model, version, score_class).inc()

    def connection_rejected(self, reason: str) -> None:
        """Count one connection closed by `tokenpulse.http_limits`."""
        if reason in CONNECTION_REJECT_REASONS:
            self.connections_rejected.labels(reason).inc()

    def _children(self, model: str, version: str, route: str) -> _OutputChildren:
        # label lookups cost more than the observations: bind once per (model, version, route)
        key = (model, version, route)
        children = self._bound.get(key)
        if children is None:
            children = self._bound[key] = _OutputChildren(self, key)
            self._feedback_at_zero(model, version)  # also for a version no poll announced
        return children

    def _answered_children(self, key: tuple[str, str, str, str]) -> tuple[Any, Any, Any]:
        children = self._answered.get(key)
        if children is None:
            model, version, route, code = key
            children = self._answered[key] = (
                self.requests.labels(model, version, route, code),
                self.request_duration.labels(model, version, route, code),
                self.queue_wait.labels(model, route),
            )
        return children

    def observe(self, s: RequestStats) -> None:
        """Record one finished request (label children looked up once per label set)."""
        model = s.model if s.model in self.models else UNKNOWN
        requests, duration, queue_wait = self._answered_children(
            (model, s.version, s.route, str(s.status))
        )
        requests.inc()
        exemplar = {EXEMPLAR_LABEL: s.request_id} if s.request_id else None
        duration.observe(s.total_s, exemplar)
        self._mode(model, s.version, s.route, s.mode).inc()
        if s.rate_limited:
            self.rate_limited.labels(model, s.route).inc()
        if s.shed:
            self.shed.labels(model, s.route).inc()
        if s.breaker_rejected:
            self.breaker_rejected.labels(model, s.route).inc()
        if s.queue_wait_s > 0 or s.upstream_s > 0:
            queue_wait.observe(s.queue_wait_s)
        if s.disconnected:  # also before any chunk came back: its own outcome, always counted
            self._children(model, s.version, s.route).client_disconnects.inc()
        if s.upstream_s <= 0 and not s.outputs:
            return
        c = self._children(model, s.version, s.route)
        if s.upstream_s > 0:
            c.upstream_duration.observe(s.upstream_s)
        tpot = s.time_per_output_token_s
        if tpot is not None:
            c.time_per_output_token.observe(tpot)
        if s.time_to_first_token_s is not None:
            c.time_to_first_token.observe(s.time_to_first_token_s, exemplar)
        for gap, tokens in s.chunk_gaps:
            for _ in range(tokens):
                c.inter_token_latency.observe(gap / tokens)
        for o in s.outputs:
            c.prompt_tokens.inc(o.prompt_tokens)
            c.output_tokens.inc(o.output_tokens)
            c.request_prompt_tokens.observe(o.prompt_tokens)
            c.request_output_tokens.observe(o.output_tokens)
            reason = o.finish_reason if o.finish_reason in FINISH_REASONS else UNKNOWN
            c.finish(reason).inc()
            if o.empty:
                c.empty_outputs.inc()
            c.repetition_ratio.observe(o.repetition_ratio)
            c.mean_nll.observe(o.mean_nll, exemplar)

    def _mode(self, model: str, version: str, route: str, mode: str) -> Any:
        key = (model, version, route, mode if mode in MODES else UNKNOWN)
        child = self._modes.get(key)
        if child is None:
            child = self._modes[key] = self.requests_by_mode.labels(*key)
        return child

    def render(self) -> bytes:
        """The exposition page in the classic text format (no exemplars)."""
        return generate_latest(self.registry)

    def exposition(self, accept: str = "") -> tuple[bytes, str]:
        """The page and its content type: OpenMetrics (with exemplars) when the `Accept` header
        asks for it, as Prometheus does, else the classic text format."""
        if "application/openmetrics-text" in accept:
            return openmetrics.generate_latest(self.registry), openmetrics.CONTENT_TYPE_LATEST
        return self.render(), CONTENT_TYPE_LATEST


class _OutputChildren:
    """The per-(model, version, route) children of the output metrics, bound once."""

    def __init__(self, m: GatewayMetrics, key: tuple[str, str, str]) -> None:
        self.upstream_duration = m.upstream_duration.labels(*key)
        self.time_per_output_token = m.time_per_output_token.labels(*key)
        self.prompt_tokens = m.prompt_tokens.labels(*key)
        self.output_tokens = m.output_tokens.labels(*key)
        self.request_prompt_tokens = m.request_prompt_tokens.labels(*key)
        self.request_output_tokens = m.request_output_tokens.labels(*key)
        self.empty_outputs = m.empty_outputs.labels(*key)
        self.repetition_ratio = m.repetition_ratio.labels(*key)
        self.mean_nll = m.mean_nll.labels(*key)
        self.time_to_first_token = m.time_to_first_token.labels(*key)
        self.inter_token_latency = m.inter_token_latency.labels(*key)
        self.client_disconnects = m.client_disconnects.labels(*key)  # 0 from the first output
        self._key = key
        self._finish_reason = m.finish_reason
        self._finish: dict[str, Any] = {}
        for reason in (*FINISH_REASONS, UNKNOWN):  # the closed set, at 0
            self.finish(reason)

    def finish(self, reason: str) -> Any:
        """The finish_reason child of one (closed-set) reason."""
        child = self._finish.get(reason)
        if child is None:
            child = self._finish[reason] = self._finish_reason.labels(*self._key, reason)
        return child
