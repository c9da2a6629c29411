"""Tensors on the wire: TensorProto <-> numpy, and TF Serving's REST JSON (json_tensor.cc)."""

from __future__ import annotations

import base64
import json
import math
import re
from collections.abc import Mapping
from typing import Any

import numpy as np

from serving.modelserver.status import ServingError, invalid_argument
from tokenpulse.tfserving.predict import is_b64

# DataType enum value -> (TF name, numpy dtype); only the types a signature can take over JSON.
DTYPES: dict[int, tuple[str, Any]] = {
    1: ("float", np.float32),
    2: ("double", np.float64),
    3: ("int32", np.int32),
    4: ("uint8", np.uint8),
    5: ("int16", np.int16),
    6: ("int8", np.int8),
    7: ("string", object),
    9: ("int64", np.int64),
    10: ("bool", np.bool_),
    22: ("uint32", np.uint32),
    23: ("uint64", np.uint64),
}
_FLOATS = {1, 2}
_INTS = {3, 4, 5, 6, 9, 22, 23}
_VAL_FIELD = {
    1: "float_val",
    2: "double_val",
    3: "int_val",
    4: "int_val",
    5: "int_val",
    6: "int_val",
    7: "string_val",
    9: "int64_val",
    10: "bool_val",
    22: "uint32_val",
    23: "uint64_val",
}


def dtype_name(dtype: int) -> str:
    """TF's DataTypeString, e.g. `int32`."""
    return DTYPES.get(dtype, (f"type{dtype}", None))[0]


def numpy_dtype(dtype: int) -> Any:
    """The numpy dtype that carries a TF DataType."""
    if dtype not in DTYPES:
        raise ServingError("UNIMPLEMENTED", f"unsupported tensor type {dtype}")
    return DTYPES[dtype][1]


# ---------------------------------------------------------------- TensorProto


def proto_to_numpy(proto: Any) -> np.ndarray:
    """A TensorProto (any encoding: *_val fields or tensor_content) as a numpy array."""
    import tensorflow as tf

    try:
        return np.asarray(tf.make_ndarray(proto))
    except Exception as exc:  # TF raises several types for malformed protos
        raise invalid_argument(f"Cannot parse tensor from proto: {exc}") from exc


def numpy_to_proto(array: np.ndarray, dtype: int) -> Any:
    """A numpy array as a TensorProto in `*_val` fields (TF Serving's `AsProtoField`)."""
    from tensorflow.core.framework import tensor_pb2, tensor_shape_pb2

    proto = tensor_pb2.TensorProto(dtype=dtype)
    proto.tensor_shape.CopyFrom(
        tensor_shape_pb2.TensorShapeProto(
            dim=[tensor_shape_pb2.TensorShapeProto.Dim(size=int(d)) for d in array.shape]
        )
    )
    flat = array.reshape(-1)
    field = getattr(proto, _VAL_FIELD[dtype])
    if dtype == 7:
        field.extend(v if isinstance(v, bytes) else str(v).encode() for v in flat)
    else:
        field.extend(flat.tolist())
    return proto


# ---------------------------------------------------------------- JSON in


def _debug(value: Any) -> str:
    try:
        text = json.dumps(value, separators=(", ", ": "), allow_nan=True)
    except RecursionError:
        return "<nested too deeply to print>"
    return text if len(text) <= 256 else text[:256]


def _json_type(value: Any) -> str:
    if value is None:
        return "Null"
    if value is True:
        return "True"
    if value is False:
        return "False"
    if isinstance(value, dict):
        return "Object"
    if isinstance(value, list):
        return "Array"
    if isinstance(value, str):
        return "String"
    return "Number"


def _type_error(value: Any, dtype: int) -> ServingError:
    return invalid_argument(
        f"JSON Value: {_debug(value)} Type: {_json_type(value)} "
        f"is not of expected type: {dtype_name(dtype)}"
    )


def _scalar(value: Any, dtype: int) -> Any:
    if isinstance(value, dict):
        if dtype != 7:
            raise _type_error(value, dtype)
        if not is_b64(value):
            raise invalid_argument(
                f"JSON Value: {_debug(value)} not formatted correctly for base64 data"
            )
        try:
            return base64.b64decode(value["b64"], validate=True)
        except ValueError as exc:
            raise invalid_argument("Unable to base64 decode") from exc
    if dtype in _FLOATS:
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise _type_error(value, dtype)
        return value
    if dtype in _INTS:
        if isinstance(value, bool) or not isinstance(value, int):
            raise _type_error(value, dtype)
        return value
    if dtype == 7:
        if not isinstance(value, str):
            raise _type_error(value, dtype)
        return value.encode()
    if dtype == 10:
        if not isinstance(value, bool):
            raise _type_error(value, dtype)
        return value
    raise ServingError(
        "UNIMPLEMENTED", f"Conversion of JSON Value: {_debug(value)} to type: {dtype_name(dtype)}"
    )


def _shape_of(value: Any) -> list[int]:
    shape: list[int] = []
    while isinstance(value, list):
        shape.append(len(value))
        if not value:
            break
        value = value[0]
    return shape


def _fill(value: Any, level: int, shape: list[int], dtype: int, out: list[Any]) -> None:
    if not isinstance(value, list):
        if level != len(shape):
            raise invalid_argument(
                f"JSON Value: {_debug(value)} found at incorrect level: {level + 1} "
                f"in the JSON DOM. Expected at level: {len(shape)}"
            )
        out.append(_scalar(value, dtype))
        return
    if level >= len(shape):
        raise invalid_argument(
            f"Encountered list at unexpected level: {level} expected < {len(shape)}"
        )
    if len(value) != shape[level]:
        raise invalid_argument(
            f"Encountered list at unexpected size: {len(value)} at level: {level} "
            f"expected size: {shape[level]}"
        )
    for item in value:
        _fill(item, level + 1, shape, dtype, out)


def json_to_array(value: Any, dtype: int) -> np.ndarray:
    """One JSON value (scalar or nested lists) as a dense array of `dtype`."""
    shape = _shape_of(value)
    if len(shape) > MAX_RANK:
        raise invalid_argument(
            f"JSON Value nests {len(shape)} lists; a tensor has at most rank {MAX_RANK}"
        )
    flat: list[Any] = []
    _fill(value, 0, shape, dtype, flat)
    np_dtype = numpy_dtype(dtype)
    if dtype == 7:
        arr = np.empty(len(flat), dtype=object)
        arr[:] = flat
        return arr.reshape(shape)
    try:
        return np.asarray(flat, dtype=np_dtype).reshape(shape)
    except OverflowError as exc:
        raise invalid_argument(f"value out of range for {dtype_name(dtype)}") from exc


MAX_RANK = 254  # TensorShape::MaxDimensions()
_SURROGATE = re.compile("[\ud800-\udfff]")


def parse_json(body: bytes) -> Any:
    """A request body as JSON, refusing what TF Serving's parser refuses: an empty document, bad
    UTF-8, unpaired surrogate escapes (`"\\ud800"`) and nesting too deep to parse."""
    if not body:
        raise invalid_argument("JSON Parse error: The document is empty")
    try:
        doc = json.loads(body)
    except RecursionError as exc:
        raise invalid_argument("JSON Parse error: The document is nested too deeply") from exc
    except (ValueError, UnicodeDecodeError) as exc:
        raise invalid_argument(f"JSON Parse error: {exc}") from exc
    # Valid UTF-8 cannot carry a surrogate; only a `\\uD8xx`-style escape can, so the walk runs
    # only when the body holds one.
    if re.search(rb"\\u[dD][89a-fA-F]", body) and _has_lone_surrogate(doc):
        raise invalid_argument("JSON Parse error: The surrogate pair in string is invalid.")
    return doc


def _has_lone_surrogate(doc: Any) -> bool:
    stack = [doc]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            if _SURROGATE.search(item):
                return True
        elif isinstance(item, list):
            stack.extend(item)
        elif isinstance(item, dict):
            stack.extend(item)
            stack.extend(item.values())
    return False


def parse_predict_body(
    body: bytes, input_dtypes_for: Any, *, max_rows: int | None = None
) -> tuple[str, dict[str, np.ndarray], str]:
    """A REST predict body -> (signature_name, inputs, format 'row'|'columnar').

    `input_dtypes_for(signature_name)` returns {input alias: dtype enum} or raises ServingError.
    `max_rows` (the batching max_batch_size) refuses longer `instances` lists with the batch
    queue's own error before they are converted into tensors.
    """
    doc = parse_json(body)
    if not isinstance(doc, dict):
        raise invalid_argument(f"JSON Value: {_debug(doc)} Is not object")
    signature_name = doc.get("signature_name", "")
    if not isinstance(signature_name, str):
        raise invalid_argument(
            f"JSON Value: {_debug(doc)} not formatted correctly. "
            "'signature_name' key must be a string value."
        )
    dtypes: Mapping[str, int] = input_dtypes_for(signature_name)
    if not dtypes:
        raise invalid_argument(
            f"Failed to get input map for signature: {signature_name or 'DEFAULT'}"
        )
    if "instances" in doc and "inputs" in doc:
        raise invalid_argument(
            f"JSON Value: {_debug(doc)} Not formatted correctly expecting only one of "
            "'inputs' or 'instances' keys to exist "
        )
    if "instances" in doc:
        instances = doc["instances"]
        if not isinstance(instances, list):
            raise invalid_argument(
                f"JSON Value: {_debug(doc)} Expecting 'instances' to be an list/array"
            )
        if not instances:
            raise invalid_argument(f"JSON Value: {_debug(doc)} No values in 'instances' array")
        if max_rows is not None and len(instances) > max_rows:
            raise invalid_argument(
                f"Task size {len(instances)} is larger than maximum input batch size {max_rows}"
            )
        return signature_name, _from_instances(instances, dtypes), "row"
    if "inputs" in doc:
        return signature_name, _from_inputs(doc["inputs"], dtypes), "columnar"
    raise invalid_argument("Missing 'inputs' or 'instances' key")


def _from_instances(instances: list[Any], dtypes: Mapping[str, int]) -> dict[str, np.ndarray]:
    def is_object(v: Any) -> bool:
        return isinstance(v, dict) and not is_b64(v)

    if not isinstance(instances[0], dict) and len(dtypes) > 1:
        raise invalid_argument(
            "instances is a plain list, but expecting list of objects as multiple input "
            "tensors required as per tensorinfo_map"
        )
    objects = is_object(instances[0])
    names = sorted(dtypes)
    columns: dict[str, list[np.ndarray]] = {n: [] for n in names}
    for i, elem in enumerate(instances):
        if objects:
            if not is_object(elem):
                raise invalid_argument(f"Expecting object but got list at item {i} of input list")
            for name, value in elem.items():
                if name not in dtypes:
                    raise invalid_argument(
                        f"Failed to process element: {i} key: {name} of 'instances' list. "
                        f"Error: INVALID_ARGUMENT: JSON object: does not have named input: {name}"
                    )
                columns[name].append(_instance_item(value, dtypes[name], columns[name], i, name))
            if set(elem) != set(names):
                raise invalid_argument(
                    f"Failed to process element: {i} of 'instances' list. JSON object: "
                    f"{_debug(elem)} keys must be equal to: {','.join(names)}"
                )
        else:
            if is_object(elem):
                raise invalid_argument(
                    f"Expecting value/list but got object at item {i} of input list"
                )
            name = names[0]
            columns[name].append(_instance_item(elem, dtypes[name], columns[name], i, None))
    return {name: np.stack(rows) for name, rows in columns.items()}


def _instance_item(
    value: Any, dtype: int, seen: list[np.ndarray], i: int, name: str | None
) -> np.ndarray:
    where = f"{i} key: {name}" if name is not None else f"{i}"
    try:
        arr = json_to_array(value, dtype)
    except ServingError as exc:
        raise invalid_argument(
            f"Failed to process element: {where} of 'instances' list. "
            f"Error: {exc.code}: {exc.message}"
        ) from exc
    if seen and seen[0].shape != arr.shape:
        detail = (
            f"Expecting tensor size: {seen[0].size} but got: {arr.size}"
            if seen[0].size != arr.size
            else f"Expecting shape [{','.join(map(str, seen[0].shape))}] but got: "
            f"[{','.join(map(str, arr.shape))}]"
        )
        raise invalid_argument(
            f"Failed to process element: {where} of 'instances' list. "
            f"Error: INVALID_ARGUMENT: {detail}"
        )
    return arr


def _from_inputs(value: Any, dtypes: Mapping[str, int]) -> dict[str, np.ndarray]:
    if not isinstance(value, dict) or is_b64(value):
        if len(dtypes) > 1:
            raise invalid_argument(
                "inputs is a plain value/list, but expecting an object as multiple input "
                "tensors required as per tensorinfo_map"
            )
        name = next(iter(dtypes))
        return {name: json_to_array(value, dtypes[name])}
    out = {}
    for name in sorted(dtypes):
        if name not in value:
            raise invalid_argument(f"Missing named input: {name} in 'inputs' object.")
        out[name] = json_to_array(value[name], dtypes[name])
    return out


# ---------------------------------------------------------------- JSON out


def format_float(value: float, single: bool) -> str:
    """TF Serving's WriteDecimal: %g, widened until it round-trips, `.0` on whole numbers."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "-Infinity" if value < 0 else "Infinity"
    text = f"{value:g}"
    parsed = float(np.float32(text)) if single else float(text)
    if parsed != value:
        text = f"{value:.{9 if single else 17}g}"
    if "." not in text and "e" not in text:
        text += ".0"
    return text


def _value_json(value: Any, dtype: int, as_b64: bool) -> str:
    if dtype in _FLOATS:
        return format_float(float(value), dtype == 1)
    if dtype == 7:
        raw = value if isinstance(value, bytes) else str(value).encode()
        if as_b64:
            return '{ "b64": ' + json.dumps(base64.b64encode(raw).decode()) + " }"
        return json.dumps(raw.decode("utf-8", errors="replace"), ensure_ascii=False)
    if dtype == 10:
        return "true" if value else "false"
    return str(int(value))


def _tensor_json(value: Any, dtype: int, as_b64: bool) -> str:
    if isinstance(value, np.ndarray):
        if value.ndim == 0:
            return _value_json(value[()], dtype, as_b64)
        return "[" + ", ".join(_tensor_json(sub, dtype, as_b64) for sub in value) + "]"
    return _value_json(value, dtype, as_b64)


def outputs_to_json(outputs: Mapping[str, np.ndarray], dtypes: Mapping[str, int], fmt: str) -> str:
    """Predict outputs as TF Serving writes them: `predictions` (row) or `outputs` (columnar)."""
    names = sorted(outputs)
    if not names:
        raise invalid_argument("Cannot convert empty tensor map to JSON")
    b64 = {n: dtypes[n] == 7 and n.endswith("_bytes") for n in names}
    multi = len(names) > 1
    if fmt == "columnar":
        if not multi:
            n = names[0]
            return '{\n    "outputs": ' + _tensor_json(outputs[n], dtypes[n], b64[n]) + "\n}"
        parts = [f'        "{n}": {_tensor_json(outputs[n], dtypes[n], b64[n])}' for n in names]
        return '{\n    "outputs": {\n' + ",\n".join(parts) + "\n    }\n}"
    batch = -1
    for n in names:
        if outputs[n].ndim == 0:
            raise invalid_argument(f"Tensor name: {n} has no shape information ")
        if batch >= 0 and outputs[n].shape[0] != batch:
            raise invalid_argument(
                f"Tensor name: {n} has inconsistent batch size: {outputs[n].shape[0]} "
                f"expecting: {batch}"
            )
        batch = outputs[n].shape[0]
    rows = []
    for i in range(batch):
        if multi:
            fields = [
                f'            "{n}": {_tensor_json(outputs[n][i], dtypes[n], b64[n])}'
                for n in names
            ]
            rows.append("        {\n" + ",\n".join(fields) + "\n        }")
        else:
            n = names[0]
            rows.append("        " + _tensor_json(outputs[n][i], dtypes[n], b64[n]))
    return '{\n    "predictions": [\n' + ",\n".join(rows) + "\n    ]\n}"


def error_json(message: str) -> str:
    """TF Serving's error body (rapidjson PrettyWriter); text that UTF-8 cannot carry (a lone
    surrogate echoed from a request) becomes U+FFFD instead of failing the answer."""
    text = json.dumps(_SURROGATE.sub("\ufffd", message), ensure_ascii=False)
    return '{\n    "error": ' + text + "\n}"
