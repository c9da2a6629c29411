"""The sample records as dicts, the readable reference for `log_pipeline.record.encode_records`
(which writes the same bytes from a template), and reading dead letters back: tests only."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

from log_pipeline.record import (
    DATASET,
    ECS_VERSION,
    MESSAGE,
    PROVIDER,
    SERVICE,
    iso_utc,
    operation,
    record_id,
    record_rows,
    request_params,
    response_model,
    trace_id,
    version_number,
)
from log_pipeline.sampler import max_new_tokens, truncated
from tokenpulse.samples import OutputSignals, RequestStats, Sample


def _timings(stats: RequestStats) -> dict[str, Any]:
    return {
        "queue_wait_s": round(stats.queue_wait_s, 6),
        "upstream_s": round(stats.upstream_s, 6),
        "total_s": round(stats.total_s, 6),
        "time_per_output_token_s": round(stats.time_per_output_token_s or 0.0, 6),
        "chunks": stats.chunks,
    }


def _quality(out: OutputSignals | None, limit: int | None) -> dict[str, Any]:
    if out is None:
        return {}
    return {
        "finish_reason": out.finish_reason,
        "empty": out.empty,
        "repetition_ratio": round(out.repetition_ratio, 6),
        "mean_nll": round(out.mean_nll, 6),
        "truncated": truncated(out, limit),
        "truncated_prompt_tokens": out.truncated_prompt_tokens,
    }


def build_records(
    sample: Sample,
    prompts: list[str],
    outputs: list[str],
    reasons: tuple[str, ...],
    head_rate: float,
    redactions: Counter[str],
    *,
    sample_id: str,
    feedback: dict[str, Any] | None = None,
) -> list[dict[str, Any]]:
    """Records for one kept request; `prompts`/`outputs` are already redacted; `feedback` is
    `log_pipeline.record.feedback_fields` when it was kept for its feedback."""
    stats = sample.stats
    number = version_number(stats.version)
    done_at = sample.timestamp + stats.total_s
    records = []
    for i, (signals, text_in, text_out) in enumerate(record_rows(stats, prompts, outputs)):
        failed = stats.status >= 400
        gen_ai: dict[str, Any] = {
            "operation": {"name": operation(stats.route)},
            "provider": {"name": PROVIDER},
            "request": {"model": stats.model, **request_params(sample.params)},
            **(
                {"server": {"time_to_first_token": round(stats.time_to_first_token_s, 6)}}
                if stats.time_to_first_token_s is not None
                else {}
            ),
            "response": {
                "id": stats.request_id,
                "model": response_model(stats),
                "finish_reasons": [signals.finish_reason] if signals else [],
            },
            "usage": {
                "input_tokens": signals.prompt_tokens if signals else 0,
                "output_tokens": signals.output_tokens if signals else 0,
            },
        }
        rec: dict[str, Any] = {
            "@timestamp": iso_utc(done_at),
            "message": MESSAGE,
            "event": {
                "id": record_id(sample_id, i),
                "kind": "event",
                "dataset": DATASET,
                "outcome": "failure" if failed else "success",
                "duration": int(stats.total_s * 1e9),
                "start": iso_utc(sample.timestamp),
            },
            "ecs": {"version": ECS_VERSION},
            "service": {"name": SERVICE},
            "trace": {"id": trace_id(stats.request_id)},
            "http": {"response": {"status_code": stats.status}},
            "gen_ai": gen_ai,
            "genai_sample": {
                "request_id": stats.request_id,
                "index": i,
                "route": stats.route,
                "model": stats.model,
                "version": stats.version,
                **({} if number is None else {"version_number": number}),
                "version_label": stats.version_label,
                "key_id": stats.key_id,
                "prompt": {"text": text_in},
                "output": {"text": text_out},
                "timings": _timings(stats),
                "quality": _quality(signals, max_new_tokens(sample.params)),
                "sampling": {
                    "reason": reasons[0],
                    "reasons": list(reasons),
                    "head_rate": head_rate,
                },
                **({} if feedback is None else {"feedback": feedback}),
                "redaction": {"total": sum(redactions.values()), "kinds": dict(redactions)},
            },
        }
        if failed:
            rec["error"] = {"type": stats.error_code or f"http_{stats.status}"}
        records.append(rec)
    return records


def read_deadletters(path: Path) -> list[dict[str, object]]:
    """Every entry of a dead-letter file (`log_pipeline.deadletter`)."""
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
