"""Builders shared by the log pipeline tests."""

from __future__ import annotations

import random
import time
from pathlib import Path

import pytest

from log_pipeline.sampler import SamplingRules
from log_pipeline.settings import SinkSettings
from log_pipeline.writer import SampleWriter
from tokenpulse.samples import OutputSignals, RequestStats, Sample


def make_sample(
    i: int,
    *,
    prompt: str = "",
    output: str = "a fine answer",
    status: int = 200,
    total_s: float = 0.1,
    mean_nll: float = 1.0,
    finish_reason: str = "stop",
    version: str = "1",
    version_label: str = "stable",
    key_id: str = "key-a",
    timestamp: float | None = None,
) -> Sample:
    """One finished request with one output."""
    signals = OutputSignals(6, 4, finish_reason, not output, 0.0, mean_nll)
    outputs = [] if status >= 400 else [signals]
    stats = RequestStats(
        request_id=f"req-{i}", route="generate", model="gen", version=version,
        version_label=version_label, key_id=key_id, status=status,
        error_code="upstream_error" if status >= 400 else "", total_s=total_s, upstream_s=total_s,
        outputs=outputs,
    )  # fmt: skip
    return Sample(
        stats,
        prompts=(prompt or f"prompt number {i} about the weather",),
        outputs=(output,) if status < 400 else (),
        params={"max_new_tokens": 16, "temperature": 0.8},
        timestamp=time.time() if timestamp is None else timestamp,
    )


KEEP_ALL_TOML = "head_rate = 1.0\n[caps]\nper_key_per_minute = 0\n"


def keep_all_rules() -> SamplingRules:
    """Head rate 1 and no caps: every request becomes a record."""
    return SamplingRules.model_validate({"head_rate": 1.0, "caps": {"per_key_per_minute": 0}})


@pytest.fixture
def keep_all(tmp_path: Path) -> Path:
    """The same rules as a file, for a writer process."""
    path = tmp_path / "keep-all.toml"
    path.write_text(KEEP_ALL_TOML)
    return path


def write_samples(spool: Path, samples: list[Sample], **settings: object) -> SampleWriter:
    """Write samples through the sink's real writer (keep-all rules) and close it."""
    config = SinkSettings.model_validate({"spool_dir": spool, **settings})
    writer = SampleWriter(config, rng=random.Random(1))
    writer.sampler.rules = keep_all_rules()
    for s in samples:
        writer.write(s)
    writer.close()
    return writer


@pytest.fixture
def spool(tmp_path: Path) -> Path:
    """An empty spool directory."""
    path = tmp_path / "spool"
    path.mkdir()
    return path
