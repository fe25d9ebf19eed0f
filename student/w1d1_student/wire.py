"""Plain-data encoding of probe results: JSON + base64 arrays, never pickle."""
import base64
import json

import numpy as np
from w1d1_format import MIME  # noqa: F401 (the type a result travels under)

MAX_PAYLOAD_BYTES = 4_000_000
_KINDS = "biuf"  # bool, int, uint, float
_JSON_DUMPS = json.dumps  # bound at import: a notebook that rebinds json.dumps does not rewrite a check's result


def encode(value):
    """Turn nested dict/list/array/scalar data into JSON-ready data."""
    if isinstance(value, np.ndarray):
        if value.dtype.kind not in _KINDS:
            raise TypeError(f"数组的 dtype {value.dtype} 不是数值类型")
        arr = np.array(value, order="C", copy=True)  # keeps 0-d shapes
        return {"__nd__": [arr.dtype.str, list(arr.shape), base64.b64encode(arr.tobytes()).decode()]}
    if isinstance(value, np.generic):
        return encode(np.asarray(value))
    if isinstance(value, dict):
        return {str(k): encode(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [encode(v) for v in value]
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    raise TypeError(f"无法传回类型为 {type(value).__name__} 的结果")


def decode(value):
    """Inverse of `encode`; rejects anything that is not plain numeric data."""
    if isinstance(value, dict):
        if set(value) == {"__nd__"}:
            dtype_str, shape, data = value["__nd__"]
            dtype = np.dtype(dtype_str)
            if dtype.kind not in _KINDS:
                raise ValueError(f"bad dtype {dtype_str}")
            arr = np.frombuffer(base64.b64decode(data), dtype=dtype)
            return arr.reshape([int(s) for s in shape]).copy()
        return {k: decode(v) for k, v in value.items()}
    if isinstance(value, list):
        return [decode(v) for v in value]
    return value


def dumps(payload):
    return _JSON_DUMPS(encode(payload))


def loads(text):
    if len(text) > MAX_PAYLOAD_BYTES:
        raise ValueError("payload too large")
    return decode(json.loads(text))
