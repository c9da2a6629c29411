"""The sample record: an ECS envelope, OpenTelemetry `gen_ai.*` names, and `genai_sample.*`.

One record per generated output (a request with several prompts gives several records; a failed
request gives one record with no output). Feedback on a response rides in its sample's records
(`genai_sample.feedback`) when the writer still held the request, else it is a record of its own
(`genai_sample.kind` "feedback", no texts) under the response id. `SCHEMA.md` documents every
field; a test holds this module to it.
"""

from __future__ import annotations

import functools
import hashlib
import json
import math
import os
import time
from collections import Counter
from typing import Any

from log_pipeline.sampler import max_new_tokens, truncated
from tokenpulse.samples import Feedback, OutputSignals, RequestStats, Sample

MESSAGE = "generation sample"
FEEDBACK_MESSAGE = "generation feedback"
FEEDBACK_KIND = "feedback"  # genai_sample.kind of a feedback record (absent on samples)
DATASET = "genai.samples"
SERVICE = "tokenpulse-gateway"
PROVIDER = "tensorflow_serving"
OPERATION = "text_completion"
CHAT_OPERATION = "chat"  # OpenTelemetry's name for the chat route (`/v1/chat/completions`)
ECS_VERSION = "8.17.0"  # `ecs.version`: the ECS release whose fields the envelope follows
FEEDBACK_STATUS = 202  # a feedback record's `http.response.status_code`: the feedback's answer
_PARAMS = ("max_tokens", "temperature", "top_p", "top_k", "seed")
_DOUBLES = ("top_k",)  # OpenTelemetry types gen_ai.request.top_k as a double
_NUMBER = (int, float)


@functools.lru_cache(maxsize=64)
def _second(whole: int) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(whole))


_MILLIS = tuple(f".{n:03d}Z" for n in range(1000))


def iso_utc(ts: float) -> str:
    """Unix seconds as ISO-8601 UTC with milliseconds and a Z (the second's text is cached: a
    busy gateway formats thousands of timestamps in the same second)."""
    whole, millis = divmod(round(ts * 1000), 1000)
    return _second(whole) + _MILLIS[millis]


def new_sample_id() -> str:
    """A fresh id for one sample (128 random bits, 32 hex), drawn by the sink's writer: never the
    client's X-Request-ID, which a client may reuse for different requests."""
    return os.urandom(16).hex()


def record_id(sample_id: str, index: int) -> str:
    """The document id (`_id` in Elasticsearch, the key in SQLite) of output `index` of a sample:
    fixed once the record is in the spool, so every resend of it carries the same id."""
    return hashlib.sha256(f"{sample_id}/{index}".encode()).hexdigest()[:32]


def trace_id(request_id: str) -> str:
    """ECS `trace.id` (32 hex digits): the gateway's request id is the only trace it has."""
    return hashlib.sha256(request_id.encode()).hexdigest()[:32]


def request_params(params: dict[str, Any]) -> dict[str, Any]:
    """The request parameters a record keeps, under their `gen_ai.request` names: the numeric
    ones, and the stop sequences (`stop`, strings only) as `stop_sequences`."""
    out: dict[str, Any] = {}
    for name in _PARAMS:
        src = "max_new_tokens" if name == "max_tokens" and name not in params else name
        value = params.get(src)
        if value is not None and isinstance(value, _NUMBER) and not isinstance(value, bool):
            out[name] = float(value) if name in _DOUBLES else value
    stop = params.get("stop")
    if isinstance(stop, (list, tuple)):
        sequences = [s for s in stop if isinstance(s, str)]
        if sequences:
            out["stop_sequences"] = sequences
    return out


def served_model(model: str, version: str) -> str:
    """`gen_ai.response.model`: the model and the version that served it (`gen/3`; "" when no
    version served the request, or it is unknown), where `gen_ai.request.model` is the name the
    client asked for."""
    return f"{model}/{version}" if version else ""


def response_model(stats: RequestStats) -> str:
    """`served_model` of a request."""
    return served_model(stats.model, stats.version)


def record_rows(
    stats: RequestStats, prompts: list[str], outputs: list[str]
) -> list[tuple[OutputSignals | None, str, str]]:
    """(signals, prompt, output) per record: one per output, or one for a request without any."""
    if len(prompts) == len(outputs) == len(stats.outputs) == 1:  # the usual request
        return [(stats.outputs[0], prompts[0], outputs[0])]
    rows = max(len(outputs), len(stats.outputs), 1 if not prompts else len(prompts))
    return [
        (
            stats.outputs[i] if i < len(stats.outputs) else None,
            prompts[i] if i < len(prompts) else (prompts[0] if len(prompts) == 1 else ""),
            outputs[i] if i < len(outputs) else "",
        )
        for i in range(rows)
    ]


# --- the sink's hot path: the same records, written straight to JSON-lines bytes ---------------
# building dicts + `json.dumps` (tests.support.records.build_records, the readable reference)
# cost more than redaction on the gateway's writer thread; this writes the identical bytes (a
# test holds the two together) from a template: the constant parts encoded once, the parts one
# deployment repeats cached, and no dict built on the way.
_enc = json.encoder.encode_basestring  # the C escaper json.dumps uses with ensure_ascii=False
# json.dumps with these arguments builds this very encoder on every call; build it once
_compact = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode
_INF = math.inf


def _j(value: Any) -> str:
    """One value exactly as json.dumps(ensure_ascii=False) writes it."""
    kind = type(value)
    if kind is str:
        return _enc(value)
    if kind is float and -_INF < value < _INF:  # NaN and the infinities go to the encoder
        return float.__repr__(value)
    if kind is int:
        return int.__repr__(value)
    if kind is bool:
        return "true" if value else "false"
    return _compact(value)


def _r6(value: float) -> str:
    """`_j(round(value, 6))`, the form durations and ratios take, at half the cost for floats
    from 1e-4 to 1e9. There `.6f` formatting rounds to the very digits `round` does (both round
    the exact binary value correctly), and those digits, trailing zeros cut, are what repr
    writes for the rounded float: 15 significant digits at most, which a float tells apart,
    and a size for which repr writes no exponent (it does below 1e-4 and from 1e16)."""
    if type(value) is float:
        if 1e-4 <= value < 1e9:
            text = f"{value:.6f}".rstrip("0")
            return text + "0" if text[-1] == "." else text
        if value == 0.0:  # a zero rounds to itself, sign and all
            return float.__repr__(value)
    return _j(round(value, 6))


_HEAD = '{"@timestamp":'
_MESSAGE = f',"message":{_enc(MESSAGE)},"event":{{"id":'
_EVENT = f',"kind":"event","dataset":{_enc(DATASET)},"outcome":'
_ECS = f',"ecs":{{"version":{_enc(ECS_VERSION)}}}'
_SERVICE = f'{_ECS},"service":{{"name":{_enc(SERVICE)}}},"trace":{{"id":'
_GEN_AI = (
    f',"gen_ai":{{"operation":{{"name":{_enc(OPERATION)}}},'
    f'"provider":{{"name":{_enc(PROVIDER)}}},"request":{{"model":'
)
_GEN_AI_CHAT = _GEN_AI.replace(_enc(OPERATION), _enc(CHAT_OPERATION))


def operation(route: str) -> str:
    """`gen_ai.operation.name` of a sample: chat for the chat route, else text_completion."""
    return CHAT_OPERATION if route == "chat" else OPERATION


_NO_REDACTION = '"redaction":{"total":0,"kinds":{}}}'


def version_number(version: str) -> int | None:
    """A version that is all digits as a number (10 sorts after 9), else None."""
    if version.isascii() and version.isdigit() and int(version) < 1 << 63:
        return int(version)
    return None


@functools.lru_cache(maxsize=256, typed=True)
def _deployment_json(route: str, model: str, version: str, version_label: str, key_id: str) -> str:
    """The `genai_sample` fields from route to key id, with their trailing comma: a handful of
    values that every request of one deployment and key repeats."""
    number = version_number(version)
    return (
        f'"route":{_j(route)},"model":{_j(model)},"version":{_j(version)},'
        + (f'"version_number":{number},' if number is not None else "")
        + f'"version_label":{_j(version_label)},"key_id":{_j(key_id)},'
    )


@functools.lru_cache(maxsize=256, typed=True)
def _sampling_json(reasons: tuple[str, ...], head_rate: float) -> str:
    """`"sampling":{...},` (the sampler gives a few reason tuples and one head rate)."""
    return (
        f'"sampling":{{"reason":{_j(reasons[0])},"reasons":[{",".join(map(_j, reasons))}],'
        f'"head_rate":{_j(head_rate)}}},'
    )


def _redaction_json(redactions: Counter[str]) -> str:
    """`"redaction":{...}}`, closing `genai_sample` (most records have nothing redacted)."""
    if not redactions:
        return _NO_REDACTION
    kinds = ",".join(f"{_enc(k)}:{_j(n)}" for k, n in redactions.items())
    return f'"redaction":{{"total":{_j(sum(redactions.values()))},"kinds":{{{kinds}}}}}}}'


def _params_json(params: dict[str, Any]) -> str:
    """The request parameters as `,"name":value` pairs, the tail of `gen_ai.request`."""
    return "".join([f',"{name}":{_j(value)}' for name, value in request_params(params).items()])


def _timings_json(stats: RequestStats) -> str:
    """`genai_sample.timings`: the four durations, rounded to the microsecond, and the number
    of chunks a stream took (0 for a unary request)."""
    per_token = stats.time_per_output_token_s or 0.0
    return (
        f'{{"queue_wait_s":{_r6(stats.queue_wait_s)},"upstream_s":{_r6(stats.upstream_s)},'
        f'"total_s":{_r6(stats.total_s)},"time_per_output_token_s":{_r6(per_token)},'
        f'"chunks":{_j(stats.chunks)}}}'
    )


def _server_json(stats: RequestStats) -> str:
    """`gen_ai.server` with its comma: time to first token, only for a stream that got one."""
    ttft = stats.time_to_first_token_s
    return "" if ttft is None else f'"server":{{"time_to_first_token":{_r6(ttft)}}},'


def _output_json(out: OutputSignals | None, limit: int | None) -> tuple[str, str]:
    """The finish reasons and usage that close `gen_ai`, and `genai_sample.quality`; `limit` is
    the request's max_new_tokens (`truncated` is the sampler's rule)."""
    if out is None:
        return '"finish_reasons":[]},"usage":{"input_tokens":0,"output_tokens":0}}', "{}"
    reason = _j(out.finish_reason)
    usage = (
        f'"finish_reasons":[{reason}]}},'
        f'"usage":{{"input_tokens":{_j(out.prompt_tokens)},'
        f'"output_tokens":{_j(out.output_tokens)}}}}}'
    )
    quality = (
        f'{{"finish_reason":{reason},"empty":{_j(out.empty)},'
        f'"repetition_ratio":{_r6(out.repetition_ratio)},"mean_nll":{_r6(out.mean_nll)},'
        f'"truncated":{"true" if truncated(out, limit) else "false"},'
        f'"truncated_prompt_tokens":{_j(out.truncated_prompt_tokens)}}}'
    )
    return usage, quality


def encode_records(
    sample: Sample,
    prompts: list[str],
    outputs: list[str],
    reasons: tuple[str, ...],
    head_rate: float,
    redactions: Counter[str],
    *,
    sample_id: str,
    feedback: str = "",
) -> tuple[bytes, int]:
    """The spool lines of one kept request (each JSON ending in a newline) and their count;
    `prompts`/`outputs` are already redacted; `sample_id` (`new_sample_id`) makes the record ids;
    `feedback` is `feedback_json`'s object when the request was kept for its feedback."""
    stats = sample.stats
    rid, model = _j(stats.request_id), _j(stats.model)
    failed = stats.status >= 400
    tail = _sampling_json(reasons, head_rate)
    if feedback:
        tail += f'"feedback":{feedback},'
    tail += _redaction_json(redactions)
    if failed:
        tail += f',"error":{{"type":{_j(stats.error_code or f"http_{stats.status}")}}}'
    deployment = _deployment_json(
        stats.route, stats.model, stats.version, stats.version_label, stats.key_id
    )
    done_at = sample.timestamp + stats.total_s
    head = f'{_HEAD}"{iso_utc(done_at)}"{_MESSAGE}'  # ISO times and hex ids need no escaping
    outcome = '"failure"' if failed else '"success"'
    event = (
        f"{_EVENT}{outcome},"
        f'"duration":{_j(int(stats.total_s * 1e9))},"start":"{iso_utc(sample.timestamp)}"}}'
    )
    envelope = (
        f'{_SERVICE}"{trace_id(stats.request_id)}"}},'
        f'"http":{{"response":{{"status_code":{_j(stats.status)}}}}}'
        f"{_GEN_AI_CHAT if stats.route == 'chat' else _GEN_AI}{model}"
        f"{_params_json(sample.params)}}},{_server_json(stats)}"
        f'"response":{{"id":{rid},"model":{_j(response_model(stats))},'
    )
    timings = _timings_json(stats)
    limit = max_new_tokens(sample.params)
    lines = []
    for i, (signals, text_in, text_out) in enumerate(record_rows(stats, prompts, outputs)):
        usage, quality = _output_json(signals, limit)
        lines.append(
            f'{head}"{record_id(sample_id, i)}"{event}{envelope}{usage},'
            f'"genai_sample":{{"request_id":{rid},"index":{i},{deployment}'
            f'"prompt":{{"text":{_j(text_in)}}},"output":{{"text":{_j(text_out)}}},'
            f'"timings":{timings},"quality":{quality},{tail}}}\n'
        )
    return "".join(lines).encode(), len(lines)


def feedback_fields(feedback: Feedback, comment: str, outcome: str) -> dict[str, Any]:
    """`genai_sample.feedback`: the score as sent and as a class, and the redacted comment."""
    return {
        "response_id": feedback.response_id,
        "score": float(feedback.score),
        "scale": feedback.scale,
        "value": round(feedback.value, 6),
        "class": feedback.score_class,
        "comment": comment,
        "key_id": feedback.key_id,
        "time": iso_utc(feedback.timestamp),
        "outcome": outcome,
    }


def feedback_json(feedback: Feedback, comment: str, outcome: str) -> str:
    """`feedback_fields` as the JSON object `encode_records` embeds."""
    return _compact(feedback_fields(feedback, comment, outcome))


def encode_feedback_record(
    feedback: Feedback, comment: str, outcome: str, redactions: Counter[str], *, sample_id: str
) -> bytes:
    """The spool line of feedback stored on its own (its request is no longer held, or its sample
    was already written): the response's identity as the gateway knew it, and the feedback, with
    the standard fields a sample has; `comment` is already redacted."""
    number = version_number(feedback.version)
    sample: dict[str, Any] = {
        "kind": FEEDBACK_KIND,
        "request_id": feedback.request_id,
        "model": feedback.model,
        "version": feedback.version,
        **({} if number is None else {"version_number": number}),
        "version_label": feedback.version_label,
        "key_id": feedback.key_id,
        "feedback": feedback_fields(feedback, comment, outcome),
        "redaction": {"total": sum(redactions.values()), "kinds": dict(redactions)},
    }
    record: dict[str, Any] = {
        "@timestamp": iso_utc(feedback.timestamp),
        "message": FEEDBACK_MESSAGE,
        "event": {"id": record_id(sample_id, 0), "kind": "event", "dataset": DATASET,
                  "start": iso_utc(feedback.timestamp)},
        "ecs": {"version": ECS_VERSION},
        "service": {"name": SERVICE},
        "trace": {"id": trace_id(feedback.request_id)},
        "http": {"response": {"status_code": FEEDBACK_STATUS}},
        "gen_ai": {
            "operation": {"name": OPERATION},
            "provider": {"name": PROVIDER},
            "request": {"model": feedback.model},
            "response": {"id": feedback.request_id,
                         "model": served_model(feedback.model, feedback.version)},
        },
        "genai_sample": sample,
    }  # fmt: skip
    return (_compact(record) + "\n").encode()
