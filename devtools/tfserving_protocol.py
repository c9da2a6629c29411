"""Parts of TF Serving's REST protocol that only the tests, stand-ins and benches speak.

The runtime sends row-format predicts and reads model status; these are the other halves: the
columnar request and answer, the metadata document, and the status document a server writes.
`GET /v1/models/{name}[/versions/{v}]/metadata` answers
`{"model_spec": {...}, "metadata": {"signature_def": {"signature_def": {name: {...}}}}}` (the
signature map is nested twice).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tokenpulse.tfserving.errors import TfServingBadResponse
from tokenpulse.tfserving.predict import is_b64
from tokenpulse.tfserving.status import VersionStatus


def columnar_request(inputs: dict[str, Any], signature_name: str | None = None) -> dict[str, Any]:
    """A columnar predict body."""
    body: dict[str, Any] = {"inputs": inputs}
    if signature_name is not None:
        body = {"signature_name": signature_name, **body}
    return body


def parse_outputs(doc: object) -> dict[str, Any]:
    """The `outputs` of a columnar answer, always as a name -> value map.

    With a single output TF Serving writes the value itself, not a map; it comes back as
    `{"": value}`.
    """
    if not isinstance(doc, dict) or "outputs" not in doc:
        raise TfServingBadResponse("predict response has no outputs")
    outputs = doc["outputs"]
    return outputs if isinstance(outputs, dict) and not is_b64(outputs) else {"": outputs}


def status_document(statuses: list[VersionStatus]) -> dict[str, Any]:
    """The status document TF Serving answers for these versions (newest first)."""
    return {
        "model_version_status": [
            {
                "version": str(s.version),
                "state": s.state,
                "status": {"error_code": s.error_code, "error_message": s.error_message},
            }
            for s in sorted(statuses, key=lambda s: s.version, reverse=True)
        ]
    }


@dataclass(frozen=True)
class TensorSpec:
    """One input or output of a signature: dtype name (`DT_STRING`) and shape (-1: any)."""

    dtype: str
    shape: tuple[int, ...] | None  # None: unknown rank


@dataclass(frozen=True)
class Signature:
    """One signature def of the metadata document."""

    method_name: str
    inputs: dict[str, TensorSpec]
    outputs: dict[str, TensorSpec]


@dataclass(frozen=True)
class ModelMetadata:
    """What `GET /v1/models/{name}[/versions/{v}]/metadata` says."""

    name: str
    version: int | None
    signatures: dict[str, Signature]


def _tensors(doc: object) -> dict[str, TensorSpec]:
    if not isinstance(doc, dict):
        raise TfServingBadResponse("signature inputs/outputs are not an object")
    out: dict[str, TensorSpec] = {}
    for alias, info in doc.items():
        if not isinstance(info, dict) or not isinstance(info.get("dtype"), str):
            raise TfServingBadResponse(f"tensor {alias!r} has no dtype")
        raw_shape = info.get("tensor_shape")
        shape: dict[str, Any] = raw_shape if isinstance(raw_shape, dict) else {}
        if shape.get("unknown_rank"):
            out[alias] = TensorSpec(info["dtype"], None)
            continue
        try:
            dims = tuple(int(d.get("size", 0)) for d in shape.get("dim", []))
        except (AttributeError, TypeError, ValueError) as exc:
            raise TfServingBadResponse(f"tensor {alias!r} has a malformed shape") from exc
        out[alias] = TensorSpec(info["dtype"], dims)
    return out


def parse_model_metadata(doc: object) -> ModelMetadata:
    """Check and convert a metadata document."""
    spec = doc.get("model_spec") if isinstance(doc, dict) else None
    meta = doc.get("metadata") if isinstance(doc, dict) else None
    if not isinstance(spec, dict) or not isinstance(meta, dict):
        raise TfServingBadResponse("metadata document lacks model_spec or metadata")
    outer = meta.get("signature_def")
    sigs = outer.get("signature_def") if isinstance(outer, dict) else None
    if not isinstance(sigs, dict):
        raise TfServingBadResponse("metadata has no signature_def.signature_def map")
    version = spec.get("version")
    try:
        number = int(version["value"]) if isinstance(version, dict) else None
    except (KeyError, TypeError, ValueError) as exc:
        raise TfServingBadResponse("model_spec.version has no value") from exc
    signatures = {}
    for key, sig in sigs.items():
        if not isinstance(sig, dict):
            raise TfServingBadResponse(f"signature {key!r} is not an object")
        signatures[key] = Signature(
            method_name=str(sig.get("method_name", "")),
            inputs=_tensors(sig.get("inputs", {})),
            outputs=_tensors(sig.get("outputs", {})),
        )
    return ModelMetadata(str(spec.get("name", "")), number, signatures)
