"""The sample record: an ECS envelope, OpenTelemetry `gen_ai.*` names, and `genai_sample.*`.

One record per generated output (a request with several prompts gives several records; a failed
request gives one record with no output). `SCHEMA.md` documents every field; a test holds this
module to it.
"""

from __future__ import annotations

import functools
import hashlib
import time
from collections import Counter
from typing import Any

from serving.gateway.sink import Sample
from serving.gateway.stats import OutputSignals

MESSAGE = "generation sample"
DATASET = "genai.samples"
SERVICE = "tokenpulse-gateway"
PROVIDER = "tensorflow_serving"
OPERATION = "text_completion"
_PARAMS = ("max_tokens", "temperature", "top_p", "top_k", "seed")


@functools.lru_cache(maxsize=64)
def _second(whole: int) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(whole))


def iso_utc(ts: float) -> str:
    """Unix seconds as ISO-8601 UTC with milliseconds and a Z (the second's text is cached: a
    busy gateway formats thousands of timestamps in the same second)."""
    millis = round(ts * 1000)
    return f"{_second(millis // 1000)}.{millis % 1000:03d}Z"


def record_id(request_id: str, index: int) -> str:
    """The deterministic document id (`_id` in Elasticsearch, the key in SQLite)."""
    return hashlib.sha256(f"{request_id}/{index}".encode()).hexdigest()[:32]


def _trace_id(request_id: str) -> str:
    # ECS trace.id is 32 hex digits; the gateway's request id is the only trace it has
    return hashlib.sha256(request_id.encode()).hexdigest()[:32]


def _request_params(params: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name in _PARAMS:
        src = "max_new_tokens" if name == "max_tokens" and name not in params else name
        value = params.get(src)
        if isinstance(value, int | float) and not isinstance(value, bool):
            out[name] = value
    return out


def _quality(out: OutputSignals | None) -> dict[str, Any]:
    if out is None:
        return {}
    return {
        "finish_reason": out.finish_reason,
        "empty": out.empty,
        "repetition_ratio": round(out.repetition_ratio, 6),
        "mean_nll": round(out.mean_nll, 6),
        "truncated": out.finish_reason == "length",
        "truncated_prompt_tokens": out.truncated_prompt_tokens,
    }


def build_records(
    sample: Sample,
    prompts: list[str],
    outputs: list[str],
    reasons: tuple[str, ...],
    head_rate: float,
    redactions: Counter[str],
) -> list[dict[str, Any]]:
    """Records for one kept request; `prompts`/`outputs` are already redacted."""
    stats = sample.stats
    done_at = sample.timestamp + stats.total_s
    rows = max(len(outputs), len(stats.outputs), 1 if not prompts else len(prompts))
    records = []
    for i in range(rows):
        signals = stats.outputs[i] if i < len(stats.outputs) else None
        text_out = outputs[i] if i < len(outputs) else ""
        text_in = prompts[i] if i < len(prompts) else (prompts[0] if len(prompts) == 1 else "")
        failed = stats.status >= 400
        gen_ai: dict[str, Any] = {
            "operation": {"name": OPERATION},
            "provider": {"name": PROVIDER},
            "request": {"model": stats.model, **_request_params(sample.params)},
            "response": {
                "id": stats.request_id,
                "model": stats.model,
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
                "id": record_id(stats.request_id, i),
                "kind": "event",
                "dataset": DATASET,
                "outcome": "failure" if failed else "success",
                "duration": int(stats.total_s * 1e9),
                "start": iso_utc(sample.timestamp),
            },
            "service": {"name": SERVICE},
            "trace": {"id": _trace_id(stats.request_id)},
            "gen_ai": gen_ai,
            "genai_sample": {
                "request_id": stats.request_id,
                "index": i,
                "route": stats.route,
                "model": stats.model,
                "version": stats.version,
                "version_label": stats.version_label,
                "key_id": stats.key_id,
                "status": stats.status,
                "prompt": {"text": text_in},
                "output": {"text": text_out},
                "timings": {
                    "queue_wait_s": round(stats.queue_wait_s, 6),
                    "upstream_s": round(stats.upstream_s, 6),
                    "total_s": round(stats.total_s, 6),
                    "time_per_output_token_s": round(stats.time_per_output_token_s or 0.0, 6),
                },
                "quality": _quality(signals),
                "sampling": {
                    "reason": reasons[0],
                    "reasons": list(reasons),
                    "head_rate": head_rate,
                },
                "redaction": {"total": sum(redactions.values()), "kinds": dict(redactions)},
            },
        }
        if failed:
            rec["error"] = {"type": stats.error_code or f"http_{stats.status}"}
        records.append(rec)
    return records
