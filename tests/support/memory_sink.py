"""A sample sink that keeps samples in memory, for tests (never in the runtime)."""

from __future__ import annotations

from tokenpulse.samples import Sample


class MemorySink:
    """Keeps the last `limit` samples in memory (tests, debugging)."""

    def __init__(self, limit: int = 10_000) -> None:
        self.limit = limit
        self.samples: list[Sample] = []

    async def handle(self, sample: Sample) -> None:
        """Keep it."""
        self.samples.append(sample)
        del self.samples[: -self.limit]
