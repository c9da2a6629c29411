"""GetModelStatus / GetModelMetadata responses as protos, and as TF Serving's REST JSON."""

from __future__ import annotations

from typing import Any

from google.protobuf import json_format

from serving.modelserver.manager import VersionState
from serving.modelserver.servable import Servable
from serving.modelserver.status import CODE_NUMBER
from tokenpulse.tfserving.status import STATE_NUMBER


def status_response(states: dict[int, VersionState]) -> Any:
    """GetModelStatusResponse with versions in descending order."""
    from tensorflow_serving.apis import get_model_status_pb2

    response = get_model_status_pb2.GetModelStatusResponse()
    for version in sorted(states, reverse=True):
        state = states[version]
        entry = response.model_version_status.add()
        entry.version = version
        entry.state = STATE_NUMBER[state.state]
        entry.status.error_code = CODE_NUMBER[state.error_code]
        entry.status.error_message = state.error_message
    return response


def status_json(name: str, states: dict[int, VersionState]) -> str:
    """The REST status document (protobuf JSON, whitespace on, default fields printed)."""
    return json_format.MessageToJson(
        status_response(states), always_print_fields_with_no_presence=True, indent=1
    )


def metadata_response(servable: Servable) -> Any:
    """GetModelMetadataResponse carrying every signature def in a packed SignatureDefMap."""
    from tensorflow_serving.apis import get_model_metadata_pb2

    response = get_model_metadata_pb2.GetModelMetadataResponse()
    response.model_spec.name = servable.name
    response.model_spec.version.value = servable.version
    response.model_spec.signature_name = ""
    sig_map = get_model_metadata_pb2.SignatureDefMap()
    for key, sig in servable.meta_graph.signature_def.items():
        sig_map.signature_def[key].CopyFrom(sig)
    response.metadata["signature_def"].Pack(sig_map)
    return response


def metadata_json(servable: Servable) -> str:
    """The REST metadata document, assembled the way `http_rest_api_util.cc` concatenates it."""
    from tensorflow_serving.apis import get_model_metadata_pb2

    opts: dict[str, Any] = {
        "always_print_fields_with_no_presence": True,
        "preserving_proto_field_name": True,
        "indent": 1,
    }
    response = metadata_response(servable)
    sig_map = get_model_metadata_pb2.SignatureDefMap()
    response.metadata["signature_def"].Unpack(sig_map)
    spec = json_format.MessageToJson(response.model_spec, **opts)
    sigs = json_format.MessageToJson(sig_map, **opts)
    return '{\n"model_spec":' + spec + ',\n"metadata": {"signature_def": ' + sigs + "}\n}\n"
