"""Plain JSON views of engine values (numpy scalars and arrays, paths, dataclasses, pydantic models).

The one copy used by the sinks (summary.json), the evaluator (results.json) and the edge server
(session info).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from typing import Any

import numpy as np


def to_jsonable(obj: Any, *, float_digits: int | None = None, max_array_size: int | None = None) -> Any:
    """Plain JSON types; NaN and infinities become null, anything unknown its ``str``.

    ``float_digits`` rounds floats; arrays larger than ``max_array_size`` become ``"<array SHAPE>"``.
    """

    def convert(value: Any) -> Any:
        if isinstance(value, bool | np.bool_):
            return bool(value)
        if isinstance(value, float | np.floating):
            f = float(value)
            if not math.isfinite(f):
                return None
            return f if float_digits is None else round(f, float_digits)
        if isinstance(value, int | np.integer):
            return int(value)
        if value is None or isinstance(value, str):
            return value
        if isinstance(value, Mapping):
            return {str(k): convert(v) for k, v in value.items()}
        if isinstance(value, np.ndarray):
            if max_array_size is not None and value.size > max_array_size:
                return f"<array {value.shape}>"
            return [convert(v) for v in value.tolist()]
        if isinstance(value, list | tuple | set | frozenset):
            return [convert(v) for v in value]
        if dataclasses.is_dataclass(value) and not isinstance(value, type):
            return convert({f.name: getattr(value, f.name) for f in dataclasses.fields(value)})
        if hasattr(value, "model_dump"):  # pydantic models (config)
            return convert(value.model_dump(mode="json"))
        return str(value)

    return convert(obj)


__all__ = ["to_jsonable"]
