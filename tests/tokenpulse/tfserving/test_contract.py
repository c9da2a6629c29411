"""The contract's one table: what a version needs, what each optional part enables."""

from __future__ import annotations

import pytest

from serving.gateway.caps import VersionCaps
from tokenpulse.paths import ROOT
from tokenpulse.tfserving import signature as sig
from tokenpulse.tfserving.contract import (
    ERROR,
    OK,
    PARTS,
    RESUMES,
    STOP_IN_GRAPH,
    STREAMING,
    SignatureSpec,
    TensorSpec,
    check_signatures,
    enabled_features,
    markdown_table,
    refusal,
)


def full(**changes: TensorSpec | None) -> dict[str, SignatureSpec]:
    """Every part as the contract wants it; `changes` ("signature__name") replace or drop one."""
    specs: dict[str, SignatureSpec] = {}
    for p in PARTS:
        spec = specs.setdefault(p.signature, SignatureSpec({}, {}))
        shape = tuple(-1 for _ in p.dims)
        tensor = changes.get(f"{p.signature}__{p.name}", TensorSpec(p.dtype, shape))
        if tensor is not None:
            (spec.inputs if p.kind == "input" else spec.outputs)[p.name] = tensor  # type: ignore[index]
    return specs


def errors(specs: dict[str, SignatureSpec]) -> dict[str, str]:
    return {f.subject: f.message for f in check_signatures(specs) if f.level == ERROR}


def test_the_readme_shows_the_contract_as_the_code_defines_it() -> None:
    assert markdown_table() in (ROOT / "README.md").read_text()


def test_the_full_contract_supports_every_feature_and_loads() -> None:
    found = {f.subject for f in check_signatures(full()) if f.level == OK}
    assert found == {"required", STREAMING, STOP_IN_GRAPH, RESUMES}
    assert refusal(full()) == ""


@pytest.mark.parametrize(
    ("change", "subject", "message"),
    [
        ({"serving_default__prompt": TensorSpec("string", (4,))}, "prompt", "fixed batch"),
        ({"serving_default__stop": TensorSpec("string", (-1, 17))}, "stop", "[batch, 16]"),
        ({"serving_default__seed": TensorSpec("int64", (-1, -1))}, "seed", "not rank 1"),
        ({"serving_default__text": TensorSpec("int32", (-1,))}, "text", "is int32, not string"),
        ({"serving_default__finish_reason": None}, "finish_reason", "output missing"),
        # the gateway, its samples and the canary read it from every answer
        ({"serving_default__mean_nll": None}, "mean_nll", "output missing"),
    ],
)
def test_a_broken_part_is_refused_by_name(
    change: dict[str, TensorSpec | None], subject: str, message: str
) -> None:
    found = errors(full(**change))
    assert message in found[f"serving_default.{subject}"]
    assert f"serving_default.{subject}" in refusal(full(**change))


def test_unknown_rank_is_fine_as_tf_serving_takes_any_shape() -> None:
    assert errors(full(serving_default__prompt=TensorSpec("string", None))) == {}


def test_optional_parts_absent_degrade_but_half_present_break() -> None:
    specs = full(serving_default__stop=None, serving_default__ignore_eos=None)
    specs.pop(sig.CONTINUE_SIGNATURE_NAME)
    del specs[sig.SIGNATURE_NAME].outputs["stop_index"]  # type: ignore[attr-defined]
    degraded = {f.subject for f in check_signatures(specs) if f.level == "degraded"}
    assert degraded == {STREAMING, STOP_IN_GRAPH} and refusal(specs) == ""
    # `stop` on serving_default turns in-graph stops on: the gateway then sends it to both
    half = full(continue__stop=None)
    assert errors(half) == {"continue.stop": "input missing"}
    # without it, the gateway sends `stop` to neither: a `continue` that needs it would fail
    other_half = full(serving_default__stop=None, serving_default__ignore_eos=None)
    assert errors(other_half)["continue.stop"] == "input the gateway never sends"


def test_a_continue_from_before_generated_ids_degrades_and_half_of_it_breaks() -> None:
    old = full(continue__generated_ids=None, continue__token_ids=None)
    degraded = {f.subject for f in check_signatures(old) if f.level == "degraded"}
    assert degraded == {RESUMES} and refusal(old) == ""
    # the input turns it on: the gateway then reads `token_ids` from every chunk
    assert errors(full(continue__token_ids=None)) == {"continue.token_ids": "output missing"}
    # no `continue` at all: streaming is what is lost, not resuming
    no_stream = full()
    no_stream.pop(sig.CONTINUE_SIGNATURE_NAME)
    degraded = {f.subject for f in check_signatures(no_stream) if f.level == "degraded"}
    assert degraded == {STREAMING}


@pytest.mark.parametrize(
    "specs",
    [
        full(),
        {sig.SIGNATURE_NAME: full()[sig.SIGNATURE_NAME]},
        full(serving_default__stop=None),
        full(continue__generated_ids=None, continue__token_ids=None),
    ],
)
def test_the_gateway_reads_the_same_triggers(specs: dict[str, SignatureSpec]) -> None:
    caps = VersionCaps.from_signatures({k: set(v.inputs) for k, v in specs.items()})
    on = enabled_features(specs)
    assert (caps.streams, caps.stop_in_graph, caps.resumes) == (
        STREAMING in on, STOP_IN_GRAPH in on, RESUMES in on
    )  # fmt: skip
