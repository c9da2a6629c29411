"""What a version must export for the gateway to serve it, and what each optional part enables.

`signature.py` names every input and output; this module says which of them a version needs at
all (the model server refuses a version without them) and which TokenPulse feature each optional
one turns on (`tokenpulse model check` reports those as supported or degraded). The gateway's
own tests of a version's caps read the same triggers: `continue` present, a `stop` input on
`serving_default`. No TensorFlow: signatures come in as dtype names and shapes, read from a
SavedModel's protos by `signature_specs`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from tokenpulse.tfserving.signature import (
    CONTINUE_INPUTS,
    CONTINUE_OUTPUTS,
    CONTINUE_SIGNATURE_NAME,
    INPUTS,
    OUTPUTS,
    RESUME_INPUTS,
    RESUME_OUTPUTS,
    SIGNATURE_NAME,
    STOP_INPUTS,
    STOP_OUTPUTS,
    STOP_SLOTS,
)

REQUIRED = "required"  # what every version needs: without it the gateway cannot serve it
# `mean_nll` is required too: the gateway's answers, samples and NLL histograms and the
# exporter's canary read it from every row, and none of them falls back without it yet
STREAMING, STOP_IN_GRAPH, RESUMES = "streaming", "stop_in_graph", "resumes_from_ids"
ERROR, DEGRADED, OK = "error", "degraded", "ok"


@dataclass(frozen=True)
class Feature:
    """An optional part of the contract: what turns it on, and what a version lacking it loses."""

    name: str
    trigger: str  # the part whose presence turns the feature on, as the gateway tests it
    without: str


FEATURES: dict[str, Feature] = {
    f.name: f
    for f in (
        Feature(
            STREAMING,
            f"the `{CONTINUE_SIGNATURE_NAME}` signature",
            'no streaming: `"stream": true` gets a 400 naming `stream`',
        ),
        Feature(
            RESUMES,
            f"the `{RESUME_INPUTS[0]}` input of `{CONTINUE_SIGNATURE_NAME}`",
            "each `continue` call decodes a subword row again from its first token (a stream "
            "of n tokens in chunks of c costs about n*n/2c decode steps); a byte model loses "
            "nothing",
        ),
        Feature(
            STOP_IN_GRAPH,
            f"the `stop` input of `{SIGNATURE_NAME}`",
            "stop sequences cut by the gateway after the whole budget is decoded; no ignore_eos",
        ),
    )
}


@dataclass(frozen=True)
class Part:
    """One input or output of the contract and the features that need it (empty: required)."""

    signature: str
    kind: str  # "input" | "output"
    name: str
    dtype: str
    dims: tuple[str | int, ...]  # "batch" first (-1: the batcher concatenates along it)
    features: tuple[str, ...]

    @property
    def needed_for(self) -> str:
        """The table's last column: `required`, or the features that need the part."""
        return " + ".join(self.features) or REQUIRED


_DIMS: dict[str, tuple[str | int, ...]] = {
    "stop": ("batch", STOP_SLOTS),
    "tokens": ("batch", "chunk"),
}


def _features(signature: str, name: str) -> tuple[str, ...]:
    features = [STREAMING] if signature == CONTINUE_SIGNATURE_NAME else []
    if name in STOP_INPUTS or name in STOP_OUTPUTS:
        features.append(STOP_IN_GRAPH)  # the gateway sends `stop` to both signatures or neither
    if signature == CONTINUE_SIGNATURE_NAME and (name in RESUME_INPUTS or name in RESUME_OUTPUTS):
        features.append(RESUMES)
    return tuple(features)


PARTS: tuple[Part, ...] = tuple(
    Part(signature, kind, name, dtype, _DIMS.get(name, ("batch",)), _features(signature, name))
    for signature, kind, table in (
        (SIGNATURE_NAME, "input", INPUTS),
        (SIGNATURE_NAME, "output", OUTPUTS),
        (CONTINUE_SIGNATURE_NAME, "input", CONTINUE_INPUTS),
        (CONTINUE_SIGNATURE_NAME, "output", CONTINUE_OUTPUTS),
    )
    for name, dtype in table.items()
)


@dataclass(frozen=True)
class TensorSpec:
    """One signature tensor as the SavedModel declares it; shape None: unknown rank."""

    dtype: str
    shape: tuple[int, ...] | None


@dataclass(frozen=True)
class SignatureSpec:
    """A signature's inputs and outputs by alias."""

    inputs: Mapping[str, TensorSpec]
    outputs: Mapping[str, TensorSpec]


@dataclass(frozen=True)
class Finding:
    """One line of a check: ERROR breaks the contract, DEGRADED loses a feature, OK is fine."""

    level: str
    check: str  # "contract", "ops", "predict", "stream"
    subject: str  # the signature, tensor or feature it is about
    message: str


def enabled_features(specs: Mapping[str, SignatureSpec]) -> set[str]:
    """The features whose trigger the version exports (broken or not)."""
    default = specs.get(SIGNATURE_NAME)
    on = {STREAMING} if CONTINUE_SIGNATURE_NAME in specs else set()
    if default is not None and "stop" in default.inputs:
        on.add(STOP_IN_GRAPH)
    cont = specs.get(CONTINUE_SIGNATURE_NAME)
    if cont is not None and RESUME_INPUTS[0] in cont.inputs:
        on.add(RESUMES)
    return on


def _part_problem(part: Part, spec: TensorSpec | None) -> str:
    if spec is None:
        return "missing"
    if spec.dtype != part.dtype:
        return f"is {spec.dtype}, not {part.dtype}"
    if spec.shape is None:
        return ""  # unknown rank: TF Serving takes any shape
    if len(spec.shape) != len(part.dims):
        return f"has shape {list(spec.shape)}, not rank {len(part.dims)} {_shape(part.dims)}"
    if spec.shape[0] != -1:
        return f"has a fixed batch dimension {spec.shape[0]}: the batcher needs -1"
    for want, got in zip(part.dims[1:], spec.shape[1:], strict=True):
        if isinstance(want, int) and got not in (-1, want):
            return f"has shape {list(spec.shape)}, not {_shape(part.dims)}"
    return ""


def _wrong_parts(specs: Mapping[str, SignatureSpec], on: set[str]) -> list[Finding]:
    """An error per part the version needs (required, or of a feature it turns on) but lacks or
    declares wrongly."""
    errors = []
    if SIGNATURE_NAME not in specs:
        errors.append(Finding(ERROR, "contract", SIGNATURE_NAME, "missing signature"))
    for part in PARTS:
        sig = specs.get(part.signature)
        if sig is None or not set(part.features) <= on:
            continue
        tensors = sig.inputs if part.kind == "input" else sig.outputs
        if problem := _part_problem(part, tensors.get(part.name)):
            subject = f"{part.signature}.{part.name}"
            errors.append(Finding(ERROR, "contract", subject, f"{part.kind} {problem}"))
    return errors


def _unsent_inputs(specs: Mapping[str, SignatureSpec], on: set[str]) -> list[Finding]:
    """An error per input the gateway never sends: TF Serving rejects a request lacking one."""
    errors = []
    for name in (SIGNATURE_NAME, CONTINUE_SIGNATURE_NAME):
        sent = {
            p.name
            for p in PARTS
            if p.signature == name and p.kind == "input" and set(p.features) <= on
        }
        for alias in specs[name].inputs if name in specs else ():
            if alias not in sent:
                subject = f"{name}.{alias}"
                errors.append(Finding(ERROR, "contract", subject, "input the gateway never sends"))
    return errors


def check_signatures(specs: Mapping[str, SignatureSpec]) -> list[Finding]:
    """The contract's findings for a version's signatures: errors, then degraded, then ok."""
    on = enabled_features(specs)
    errors = _wrong_parts(specs, on) + _unsent_inputs(specs, on)
    findings = list(errors)
    findings += [
        Finding(DEGRADED, "contract", f.name, f.without)
        for f in FEATURES.values()
        if f.name not in on
        and (f.name != RESUMES or STREAMING in on)  # no stream: nothing to resume
    ]
    subjects = {f.subject for f in errors}
    if not any(s.startswith(SIGNATURE_NAME) for s in subjects):
        findings.append(Finding(OK, "contract", REQUIRED, "every required input and output"))
    for feature in sorted(on):
        parts = {f"{p.signature}.{p.name}" for p in PARTS if feature in p.features}
        if feature == STREAMING:
            parts = {s for s in subjects if s.startswith(f"{CONTINUE_SIGNATURE_NAME}.")}
        if not parts & subjects:
            findings.append(Finding(OK, "contract", feature, "supported"))
    return findings


def refusal(specs: Mapping[str, SignatureSpec]) -> str:
    """Why the model server must not load a version, in one line ('' when it may)."""
    errors = [f"{f.subject} {f.message}" for f in check_signatures(specs) if f.level == ERROR]
    if not errors:
        return ""
    return "the gateway could not serve this version: " + "; ".join(errors)


# DataType enum -> name (tensorflow/core/framework/types.proto), for the dtypes a signature uses
_DTYPE_NAMES = {
    1: "float32",
    2: "float64",
    3: "int32",
    4: "uint8",
    5: "int16",
    6: "int8",
    7: "string",
    9: "int64",
    10: "bool",
    19: "float16",
    22: "uint32",
    23: "uint64",
}


def signature_specs(meta_graph: Any) -> dict[str, SignatureSpec]:
    """A MetaGraphDef's predict signatures as specs (the init op's pseudo-signature left out)."""
    return {
        key: SignatureSpec(
            {a: _tensor_spec(t) for a, t in sig.inputs.items()},
            {a: _tensor_spec(t) for a, t in sig.outputs.items()},
        )
        for key, sig in meta_graph.signature_def.items()
        if not key.startswith("__")
    }


def _tensor_spec(info: Any) -> TensorSpec:
    shape = info.tensor_shape
    dims = None if shape.unknown_rank else tuple(int(d.size) for d in shape.dim)
    return TensorSpec(_DTYPE_NAMES.get(int(info.dtype), f"type{int(info.dtype)}"), dims)


def _shape(dims: tuple[str | int, ...]) -> str:
    return "[" + ", ".join(str(d) for d in dims) + "]"


def markdown_table() -> str:
    """The contract as README shows it: every part with its dtype, shape and who needs it."""
    lines = [
        "| signature | input/output | name | dtype | shape | required, or the feature |",
        "|---|---|---|---|---|---|",
    ]
    for p in PARTS:
        lines.append(
            f"| `{p.signature}` | {p.kind} | `{p.name}` | {p.dtype} | {_shape(p.dims)} "
            f"| {p.needed_for} |"
        )
    lines += ["", "| feature | turned on by | without it |", "|---|---|---|"]
    lines += [f"| {f.name} | {f.trigger} | {f.without} |" for f in FEATURES.values()]
    return "\n".join(lines) + "\n"
