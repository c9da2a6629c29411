"""Model status and metadata documents of TF Serving's REST API, and the version states.

`GET /v1/models/{name}` answers
`{"model_version_status": [{"version": "2", "state": "AVAILABLE", "status": {"error_code": "OK",
"error_message": ""}}]}`: versions are strings, newest first. `GET .../metadata` answers
`{"model_spec": {...}, "metadata": {"signature_def": {"signature_def": {name: {...}}}}}` (the
signature map is nested twice).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tokenpulse.tfserving.errors import TfServingBadResponse

# ModelVersionStatus.State (apis/get_model_status.proto): name -> number, in lifecycle order.
STATE_NUMBER: dict[str, int] = {
    "START": 10,
    "LOADING": 20,
    "AVAILABLE": 30,
    "UNLOADING": 40,
    "END": 50,
    "UNKNOWN": 0,
}
VERSION_STATES: tuple[str, ...] = tuple(STATE_NUMBER)
AVAILABLE = "AVAILABLE"


@dataclass(frozen=True)
class VersionStatus:
    """One entry of `model_version_status`."""

    version: int
    state: str  # one of VERSION_STATES
    error_code: str = "OK"
    error_message: str = ""


def status_path(model: str, version: int | None = None) -> str:
    """The REST path of a model's status (`model` must already be URL-safe)."""
    return f"/v1/models/{model}" + (f"/versions/{int(version)}" if version is not None else "")


def parse_model_status(doc: object) -> list[VersionStatus]:
    """Check and convert a status document; unknown states become UNKNOWN."""
    entries = doc.get("model_version_status") if isinstance(doc, dict) else None
    if not isinstance(entries, list):
        raise TfServingBadResponse("status has no model_version_status list")
    out: list[VersionStatus] = []
    for entry in entries:
        if not isinstance(entry, dict):
            raise TfServingBadResponse("model_version_status entry is not an object")
        try:
            version = int(entry["version"])
        except (KeyError, TypeError, ValueError) as exc:
            raise TfServingBadResponse("model_version_status entry without a version") from exc
        state = entry.get("state")
        if not isinstance(state, str):
            raise TfServingBadResponse(f"version {version} has no state")
        raw_status = entry.get("status")
        status: dict[str, Any] = raw_status if isinstance(raw_status, dict) else {}
        out.append(
            VersionStatus(
                version=version,
                state=state if state in STATE_NUMBER else "UNKNOWN",
                error_code=str(status.get("error_code", "OK") or "OK"),
                error_message=str(status.get("error_message", "") or ""),
            )
        )
    return out


def available_versions(statuses: list[VersionStatus]) -> list[int]:
    """Versions in state AVAILABLE, newest first."""
    return sorted((s.version for s in statuses if s.state == AVAILABLE), reverse=True)


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
