"""The request path of both endpoints: auth, limits, admission, breaker, routing, upstream."""

from __future__ import annotations

import dataclasses
import math
import time
import weakref
from collections.abc import Callable
from typing import Any

from serving.gateway.admission import Admission, Shed
from serving.gateway.breaker import CircuitBreaker
from serving.gateway.caps import UNKNOWN, VersionCaps
from serving.gateway.errors import (
    BadRequest,
    CircuitOpen,
    DeadlineExceeded,
    Forbidden,
    InvalidParameter,
    ModelNotFound,
    Overloaded,
    RateLimited,
    Unauthenticated,
    UpstreamFailed,
    UpstreamRejected,
    UpstreamUnavailable,
)
from serving.gateway.jobs import Job
from serving.gateway.keys import ApiKey, KeyStore
from serving.gateway.ratelimit import BudgetTooLarge, RateLimiter, Reservation
from serving.gateway.replicas import Replicas
from serving.gateway.routing import Route, Router
from serving.gateway.settings import GatewaySettings
from serving.gateway.signals import signals_for
from serving.gateway.textstream import apply_stop
from serving.gateway.upstream import (
    Prediction,
    UpstreamError,
    UpstreamHTTPError,
    UpstreamTimeout,
    UpstreamUnreachable,
)
from tokenpulse.samples import RequestStats
from tokenpulse.tfserving.signature import FINISH_STOP


@dataclasses.dataclass
class Deadline:
    """When the request must be answered, and whether the client chose it."""

    at: float  # perf_counter() seconds
    from_client: bool
    span: float = 0.0  # the seconds it was given (0: unknown, never renewed)

    def remaining(self) -> float:
        """Seconds left."""
        return self.at - time.perf_counter()

    def renewed(self) -> Deadline:
        """The same span from now: a stream's deadline is per chunk (an idle deadline), as the
        openai SDK's timeout is per read."""
        if not self.span:
            return self
        return Deadline(time.perf_counter() + self.span, self.from_client, self.span)


MIN_REQUEST_TIMEOUT_S = 1.0  # shorter deadlines only buy 504s: a request is rarely faster


def authenticate(keys: KeyStore, header: str | None) -> ApiKey:
    """`Authorization: Bearer <key>` → the key's record, or 401."""
    if not header:
        raise Unauthenticated("missing api key: send Authorization: Bearer <key>")
    scheme, _, token = header.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise Unauthenticated("authorization must be: Bearer <key>")
    key = keys.lookup(token.strip())
    if key is None:
        raise Unauthenticated("invalid api key")
    return key


def _seconds(value: str, name: str) -> float:
    try:
        seconds = float(value)
    except ValueError as exc:
        raise BadRequest(f"{name} must be a number of seconds") from exc
    if not math.isfinite(seconds) or seconds <= 0:
        raise BadRequest(f"{name} must be a positive number of seconds")
    return seconds


def deadline_for(headers: Any, start: float, settings: GatewaySettings) -> Deadline:
    """X-Request-Timeout (up to the max) or the openai SDK timeout (only shortens)."""
    explicit = headers.get("X-Request-Timeout")
    if explicit is not None:
        seconds = _seconds(explicit, "X-Request-Timeout")
        low, high = MIN_REQUEST_TIMEOUT_S, settings.max_request_timeout_s
        if not low <= seconds <= high:
            # the range /openapi.json declares; a silent clamp would hide the client's mistake
            raise BadRequest(
                f"X-Request-Timeout must be between {low:g} and {high:g} seconds, got {seconds:g}",
                param="X-Request-Timeout",
            )
        return Deadline(start + seconds, seconds < settings.request_timeout_s, seconds)
    sdk = headers.get("X-Stainless-Read-Timeout")
    if sdk is not None:
        try:
            seconds = _seconds(sdk, "X-Stainless-Read-Timeout")
        except BadRequest:
            seconds = settings.request_timeout_s
        if seconds < settings.request_timeout_s:
            return Deadline(start + seconds, True, seconds)
    return Deadline(start + settings.request_timeout_s, False, settings.request_timeout_s)


class Pipeline:
    """Runs one validated job against the upstream under every protection."""

    def __init__(
        self,
        settings: GatewaySettings,
        router: Router,
        client: Replicas,
        breaker: CircuitBreaker,
        admission: Admission,
        limiter: RateLimiter,
        refresh: Callable[[str], Any],
        caps: dict[tuple[str, int], VersionCaps] | None = None,
    ) -> None:
        self.settings = settings
        self.router = router
        self.client = client
        self.breaker = breaker
        self.admission = admission
        self.limiter = limiter
        self._refresh = refresh  # async (model) -> None: re-read the model's versions
        self.caps = caps if caps is not None else {}  # what each version's signatures take
        self._no_metadata: set[tuple[str, int]] = set()  # versions whose server has no metadata
        # failures already on the breaker: the streams of one shared `continue` call all get its
        # one exception, and one failed call is one failure
        self._recorded: weakref.WeakSet[UpstreamError] = weakref.WeakSet()

    async def version_caps(self, route: Route, timeout_s: float) -> VersionCaps:
        """What the version's signatures take (read now if the poll has not)."""
        version = (route.model, route.version)
        caps = self.caps.get(version)
        if caps is None:
            if version in self._no_metadata:
                return UNKNOWN
            try:
                signatures = await self.client.signatures(route.model, route.version, timeout_s)
            except UpstreamHTTPError:
                self._no_metadata.add(version)  # asked once: a server without metadata
                return UNKNOWN
            except UpstreamError:
                return UNKNOWN  # the call itself will say what is wrong with the upstream
            caps = self.caps[version] = VersionCaps.from_signatures(signatures)
        return caps

    async def in_graph(self, route: Route, timeout_s: float) -> bool:
        """Whether the version takes `stop` and `ignore_eos`."""
        return (await self.version_caps(route, timeout_s)).stop_in_graph

    async def refresh(self, model: str) -> None:
        """Re-read the model's AVAILABLE versions (a version vanished between poll and call)."""
        await self._refresh(model)

    def check_model(self, key: ApiKey, model: str) -> None:
        """403 when the key may not use the model, 404 when it is not served here."""
        if not key.allows(model):
            raise Forbidden(f"this key may not use model {model!r}", param="model")
        if model not in self.router.models:
            raise ModelNotFound(
                f"The model `{model}` does not exist: not served here", param="model"
            )

    def limit_headers(self, key: ApiKey) -> dict[str, str]:
        """The key's `x-ratelimit-*` headers (OpenAI's), from the buckets that limit it."""
        return self.limiter.headers(
            key.id,
            requests_per_minute=key.requests_per_minute
            or self.settings.default_requests_per_minute,
            tokens_per_minute=key.tokens_per_minute or self.settings.default_tokens_per_minute,
        )

    def take_request(
        self, key: ApiKey, tokens: int = 0, stats: RequestStats | None = None
    ) -> Reservation:
        """One request (and `tokens` tokens) from the key's budget, or RateLimited; feedback
        takes a request too, so a key cannot write to the sample store without limit."""
        reservation, wait, which = self.limiter.acquire(
            key.id,
            requests_per_minute=key.requests_per_minute
            or self.settings.default_requests_per_minute,
            tokens_per_minute=key.tokens_per_minute or self.settings.default_tokens_per_minute,
            tokens=tokens,
        )
        if reservation is None:
            if stats is not None:
                stats.rate_limited = which
            raise RateLimited(f"rate limit on {which} exceeded for this key", retry_after=wait)
        return reservation

    async def run(
        self, job: Job, key: ApiKey, deadline: Deadline, stats: RequestStats
    ) -> list[str]:
        """Generate, filling `stats`; returns the texts the client gets."""
        try:
            reservation = self.take_request(key, job.token_budget, stats)
        except BudgetTooLarge as exc:
            raise InvalidParameter(f"request is larger than this key's token limit: {exc}") from exc
        used = 0
        try:
            preds = await self._generate(job, key, deadline, stats)
            used = sum(p.output_tokens for p in preds)
        finally:
            self.limiter.refund(reservation, used)
        dropped = max((p.truncated_prompt_tokens for p in preds), default=0)
        if dropped and job.truncate_prompt_tokens != -1:
            # the model's window is smaller than the gateway was told: still no silent cut
            raise BadRequest(
                f"the model dropped {dropped} prompt tokens to fit its context window, which is "
                f"smaller than this gateway's setting of {self.settings.context_window_tokens}; "
                "shorten the prompt or set truncate_prompt_tokens",
                param="prompt",
            )
        texts: list[str] = []
        for pred in preds:
            text, stopped = apply_stop(pred.text, job.stop) if job.stop else (pred.text, False)
            sig = signals_for(pred, text)
            if stopped:
                sig = dataclasses.replace(sig, finish_reason=FINISH_STOP)
            stats.outputs.append(sig)
            texts.append(text)
        return texts

    async def route(self, job: Job, key: ApiKey) -> Route:
        """The version `job` goes to (re-reading the model's versions when none is known)."""
        if not self.router.models[job.model].available:
            await self._refresh(job.model)
        return self.router.route(job.model, job.user or key.id, job.version_label)

    async def _generate(
        self, job: Job, key: ApiKey, deadline: Deadline, stats: RequestStats
    ) -> list[Prediction]:
        for _attempt in range(2):  # once more if the version vanished
            route = await self.route(job, key)
            stats.version, stats.version_label = str(route.version), route.label or ""
            if not self.breaker.allow():
                stats.breaker_rejected = True
                raise CircuitOpen(
                    "upstream circuit is open", retry_after=self.breaker.retry_after()
                )
            outcome = "neutral"
            queued_at = time.perf_counter()
            try:
                try:
                    await self.admission.acquire(timeout_s=deadline.remaining())
                except Shed as exc:
                    stats.shed = True
                    raise Overloaded(f"gateway overloaded: {exc.reason}", retry_after=1) from exc
                stats.queue_wait_s += time.perf_counter() - queued_at
                try:
                    preds, outcome = await self._call(job, route, deadline, stats)
                finally:
                    self.admission.release()
            finally:
                # failures were recorded where they happened; this frees a half-open probe
                if outcome == "success":
                    self.breaker.record_success()
                else:
                    self.breaker.record_neutral()
            if preds is not None:
                return preds
            await self._refresh(job.model)  # the version went away between poll and call
        raise UpstreamUnavailable("model version is no longer available", retry_after=1)

    async def _call(
        self, job: Job, route: Route, deadline: Deadline, stats: RequestStats
    ) -> tuple[list[Prediction] | None, str]:
        """One upstream call → (predictions or None to retry, breaker outcome)."""
        remaining = deadline.remaining()
        if remaining <= 0:
            raise DeadlineExceeded("deadline passed while waiting for a slot")
        started = time.perf_counter()
        if not await self.settle_window(job, route, deadline):
            stats.upstream_s = time.perf_counter() - started
            return None, "neutral"
        counted = time.perf_counter() - started  # the window's count, when it took a call
        started = time.perf_counter()
        try:
            rows = job.rows(await self.in_graph(route, min(remaining, 1.0)))
            preds, seconds = await self.client.predict(
                route.model, route.version, rows, deadline.remaining()
            )
        except UpstreamError as exc:
            if isinstance(exc, (UpstreamTimeout, UpstreamHTTPError)):
                stats.upstream_s = counted + time.perf_counter() - started
            return self.upstream_failed(exc, deadline)
        stats.upstream_s = counted + seconds
        return preds, "success"

    async def settle_window(self, job: Job, route: Route, deadline: Deadline) -> bool:
        """Settle a window check the byte bound left open (`Job.recount`) on the routed
        version's own count of each prompt's tokens: the prompts run with no new tokens (a
        prefill; its `prompt_tokens` and `truncated_prompt_tokens` are every prompt token), and
        the job gets its new tokens or a 400 naming the window. False: the version went away."""
        if job.recount is None:
            return True
        in_graph = await self.in_graph(route, min(deadline.remaining(), 1.0))
        probe = dataclasses.replace(job, max_new_tokens=0, stop=(), ignore_eos=False)
        try:
            preds, _ = await self.client.predict(
                route.model, route.version, probe.rows(in_graph), deadline.remaining()
            )
        except UpstreamError as exc:
            self.upstream_failed(exc, deadline)  # raises, or says: route again
            return False
        # the start token the byte bound counts (`jobs.byte_bound`): GPT-2's and ours
        job.settle([p.prompt_tokens + p.truncated_prompt_tokens + 1 for p in preds])
        return True

    def _record_failure(self, exc: UpstreamError) -> None:
        """One failure per failed call, however many streams shared it."""
        if exc not in self._recorded:
            self._recorded.add(exc)
            self.breaker.record_failure()

    def upstream_failed(self, exc: UpstreamError, deadline: Deadline) -> tuple[None, str]:
        """An upstream call's failure as the client's error (raised), recorded on the breaker;
        returns (None, "neutral") when the version went away (404: route again)."""
        if isinstance(exc, UpstreamTimeout):
            # a deadline the client chose shorter than ours says nothing about upstream health
            if not deadline.from_client:
                self._record_failure(exc)
            raise DeadlineExceeded(f"deadline exceeded: {exc.message}") from exc
        if isinstance(exc, UpstreamUnreachable):
            self._record_failure(exc)
            raise UpstreamUnavailable(exc.message, retry_after=1) from exc
        if isinstance(exc, UpstreamHTTPError):
            return self._http_error(exc)
        self._record_failure(exc)  # a bad response (or any other upstream failure)
        raise UpstreamFailed(exc.message) from exc

    def _http_error(self, exc: UpstreamHTTPError) -> tuple[None, str]:
        # whose fault each status is: serving/config/gateway/README.md, "Upstream errors"
        status = exc.status or 502
        if status == 404:
            return None, "neutral"  # the version went away between poll and call: route again
        self._record_failure(exc)
        if status in (429, 503):
            raise UpstreamUnavailable(f"upstream busy: {exc.message}", retry_after=1) from exc
        if status >= 500:
            raise UpstreamFailed(f"upstream error {status}: {exc.message}") from exc
        # every request is validated before it is sent, so a refusal (TF Serving answers
        # FAILED_PRECONDITION and INVALID_ARGUMENT with 400) says the version cannot serve
        raise UpstreamRejected(
            f"the model server refused a validated request (upstream {status}): {exc.message}"
        ) from exc
