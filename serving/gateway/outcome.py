"""What every answered generation request leaves behind: its metrics, the response remembered
for feedback, the access-log line and the sample."""

from __future__ import annotations

from collections.abc import Callable

from serving.gateway.jobs import Job
from serving.gateway.metrics import GatewayMetrics
from serving.gateway.sink import SampleDispatcher
from tokenpulse.logging import get_logger
from tokenpulse.samples import RequestStats, Sample

log = get_logger(__name__)


class Outcomes:
    """Records one request's outcome everywhere it is read from."""

    def __init__(
        self,
        metrics: GatewayMetrics,
        remember: Callable[[str, str, str, str, str], None],
        samples: SampleDispatcher,
        access_log: bool,
    ) -> None:
        self.metrics = metrics
        self._remember = remember  # (request id, model, version, label, key id): for feedback
        self.samples = samples
        self.access_log = access_log

    def record(
        self, stats: RequestStats, job: Job | None, texts: list[str], arrival: float
    ) -> None:
        """Count it, remember it for feedback, log it, and offer its sample."""
        self.metrics.observe(stats)
        self._remember(
            stats.request_id, stats.model, stats.version, stats.version_label, stats.key_id
        )
        if self.access_log:
            log.info(
                "request",
                request_id=stats.request_id,
                key_id=stats.key_id,
                route=stats.route,
                model=stats.model,
                version=stats.version,
                version_label=stats.version_label,
                status=stats.status,
                error_code=stats.error_code,
                queue_wait_s=round(stats.queue_wait_s, 6),
                upstream_s=round(stats.upstream_s, 6),
                total_s=round(stats.total_s, 6),
                prompt_tokens=stats.prompt_tokens,
                output_tokens=stats.output_tokens,
            )
        if self.samples.discards:
            return
        self.samples.offer(
            Sample(
                stats=stats,
                prompts=tuple(job.prompts) if job else (),
                outputs=tuple(texts),
                params=job.params() if job else {},
                timestamp=arrival,
            )
        )
