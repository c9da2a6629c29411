"""The sample record: an ECS envelope, OpenTelemetry `gen_ai.*` names, and `genai_sample.*`.

One record per generated output (a request with several prompts gives several records; a failed
request gives one record with no output). `SCHEMA.md` documents every field; a test holds this
module to it.
"""

from __future__ import annotations

import functools
import hashlib
import json
import math
import time
from collections import Counter
from typing import Any

from serving.gateway.sink import Sample
from serving.gateway.stats import OutputSignals, RequestStats

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


def _timings(stats: RequestStats) -> dict[str, Any]:
    return {
        "queue_wait_s": round(stats.queue_wait_s, 6),
        "upstream_s": round(stats.upstream_s, 6),
        "total_s": round(stats.total_s, 6),
        "time_per_output_token_s": round(stats.time_per_output_token_s or 0.0, 6),
    }


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


def _rows(
    stats: RequestStats, prompts: list[str], outputs: list[str]
) -> list[tuple[OutputSignals | None, str, str]]:
    """(signals, prompt, output) per record: one per output, or one for a request without any."""
    rows = max(len(outputs), len(stats.outputs), 1 if not prompts else len(prompts))
    return [
        (
            stats.outputs[i] if i < len(stats.outputs) else None,
            prompts[i] if i < len(prompts) else (prompts[0] if len(prompts) == 1 else ""),
            outputs[i] if i < len(outputs) else "",
        )
        for i in range(rows)
    ]


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
    records = []
    for i, (signals, text_in, text_out) in enumerate(_rows(stats, prompts, outputs)):
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
                "timings": _timings(stats),
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


# --- the sink's hot path: the same records, written straight to JSON-lines bytes ---------------
# `build_records` + `json.dumps` cost more than redaction on the gateway's writer thread; this
# writes the identical bytes (a test holds the two together) from a template, with the constant
# parts encoded once.
_enc = json.encoder.encode_basestring  # the C escaper json.dumps uses with ensure_ascii=False
# json.dumps with these arguments builds this very encoder on every call; build it once
_compact = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode


def _j(value: Any) -> str:
    """One value exactly as json.dumps(ensure_ascii=False) writes it."""
    kind = type(value)
    if kind is str:
        return str(_enc(value))
    if kind is int:
        return int.__repr__(value)
    if kind is float and math.isfinite(value):
        return float.__repr__(value)
    if kind is bool:
        return "true" if value else "false"
    return _compact(value)


def _fields(values: dict[str, Any]) -> str:
    """A flat object of scalars under our own identifier keys (json.dumps builds a whole encoder
    per call; this does not)."""
    return "{" + ",".join(f'"{k}":{_j(v)}' for k, v in values.items()) + "}"


_HEAD = '{"@timestamp":'
_MESSAGE = f',"message":{_enc(MESSAGE)},"event":{{"id":'
_EVENT = f',"kind":"event","dataset":{_enc(DATASET)},"outcome":'
_SERVICE = f',"service":{{"name":{_enc(SERVICE)}}},"trace":{{"id":'
_GEN_AI = (
    f',"gen_ai":{{"operation":{{"name":{_enc(OPERATION)}}},'
    f'"provider":{{"name":{_enc(PROVIDER)}}},"request":{{"model":'
)


def encode_records(
    sample: Sample,
    prompts: list[str],
    outputs: list[str],
    reasons: tuple[str, ...],
    head_rate: float,
    redactions: Counter[str],
) -> tuple[bytes, int]:
    """The spool lines of `build_records(...)` (each JSON ending in a newline) and their count."""
    stats = sample.stats
    rid, model = _j(stats.request_id), _j(stats.model)
    failed = stats.status >= 400
    params = "".join(f",{_enc(k)}:{_j(v)}" for k, v in _request_params(sample.params).items())
    timings = _fields(_timings(stats))
    kinds = ",".join(f"{_enc(k)}:{_j(n)}" for k, n in redactions.items())
    tail = (
        f'"sampling":{{"reason":{_j(reasons[0])},"reasons":[{",".join(map(_j, reasons))}],'
        f'"head_rate":{_j(head_rate)}}},'
        f'"redaction":{{"total":{_j(sum(redactions.values()))},"kinds":{{{kinds}}}}}}}'
    )
    if failed:
        tail += f',"error":{{"type":{_j(stats.error_code or f"http_{stats.status}")}}}'
    common = (
        f'"route":{_j(stats.route)},"model":{model},"version":{_j(stats.version)},'
        f'"version_label":{_j(stats.version_label)},"key_id":{_j(stats.key_id)},'
        f'"status":{_j(stats.status)},'
    )
    done_at = sample.timestamp + stats.total_s
    head = f'{_HEAD}"{iso_utc(done_at)}"{_MESSAGE}'  # ISO times and hex ids need no escaping
    outcome = '"failure"' if failed else '"success"'
    event = (
        f"{_EVENT}{outcome},"
        f'"duration":{_j(int(stats.total_s * 1e9))},"start":"{iso_utc(sample.timestamp)}"}}'
    )
    envelope = f'{_SERVICE}"{_trace_id(stats.request_id)}"}}{_GEN_AI}{model}{params}}},'
    lines = []
    for i, (signals, text_in, text_out) in enumerate(_rows(stats, prompts, outputs)):
        lines.append(
            f'{head}"{record_id(stats.request_id, i)}"{event}{envelope}'
            f'"response":{{"id":{rid},"model":{model},"finish_reasons":'
            f"[{_j(signals.finish_reason) if signals else ''}]}},"
            f'"usage":{{"input_tokens":{_j(signals.prompt_tokens if signals else 0)},'
            f'"output_tokens":{_j(signals.output_tokens if signals else 0)}}}}},'
            f'"genai_sample":{{"request_id":{rid},"index":{i},{common}'
            f'"prompt":{{"text":{_j(text_in)}}},"output":{{"text":{_j(text_out)}}},'
            f'"timings":{timings},"quality":{_fields(_quality(signals))},{tail}}}\n'
        )
    return "".join(lines).encode(), len(lines)
