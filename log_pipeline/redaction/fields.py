"""Every free-text field of a sample, redacted: the texts, and every string the request carried.

Prompts and outputs are the obvious ones; the client also names the model (any string, and on a
failed request it is stored as given), sends its own X-Request-ID, and may pass strings among
the parameters (stop sequences, a user label). Every `str` field of `RequestStats` and every
string (or list of strings) in `params` goes through redaction, so a field added later is
covered without a change here.
"""

from __future__ import annotations

import dataclasses
import functools
from collections import Counter
from typing import Any

from log_pipeline.redaction.text import redact, redact_all
from tokenpulse.samples import RequestStats, Sample

_STR_FIELDS = tuple(
    f.name for f in dataclasses.fields(RequestStats) if f.type in ("str", str)
)  # the annotations are strings under `from __future__ import annotations`


@functools.lru_cache(maxsize=4096)
def _redact_label(text: str) -> tuple[str, tuple[tuple[str, int], ...]]:
    """`redact` of a short string most requests repeat (a model name, a key id), cached."""
    out, counts = redact(text)
    return out, tuple(counts.items())


def _field(text: str, counts: Counter[str]) -> str:
    if not text:
        return text
    out, found = _redact_label(text)
    for kind, n in found:
        counts[kind] += n
    return out


def _param(value: Any, counts: Counter[str]) -> Any:
    if isinstance(value, str):
        return _field(value, counts)
    if isinstance(value, (list, tuple)) and any(isinstance(v, str) for v in value):
        return type(value)(_param(v, counts) for v in value)
    return value


def redact_sample(sample: Sample, counts: Counter[str]) -> Sample:
    """The sample with its prompts, outputs, string stats and string parameters redacted,
    adding what was found to `counts` (the same stats and params objects when nothing
    changed)."""
    stats = sample.stats
    changed: dict[str, Any] = {}
    for name in _STR_FIELDS:
        value = getattr(stats, name)
        redacted = _field(value, counts)
        if redacted != value:
            changed[name] = redacted
    if changed:
        stats = dataclasses.replace(stats, **changed)
    params = sample.params
    if any(isinstance(v, (str, list, tuple)) for v in params.values()):
        params = {k: _param(v, counts) for k, v in params.items()}
    return dataclasses.replace(
        sample,
        stats=stats,
        prompts=tuple(redact_all(sample.prompts, counts)),
        outputs=tuple(redact_all(sample.outputs, counts)),
        params=params,
    )
