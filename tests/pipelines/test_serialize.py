"""One JSON view of engine values for the sinks, the evaluator and the server."""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from pipelines.serialize import to_jsonable


@dataclass(frozen=True)
class _Point:
    x: float
    label: str


@pytest.mark.parametrize(
    ("value", "options", "expected"),
    [
        (math.nan, {}, None),
        (np.float32(1.5), {}, 1.5),
        (np.int64(3), {}, 3),
        (np.bool_(True), {}, True),
        (True, {}, True),
        (Path("a/b"), {}, "a/b"),
        ((1, np.inf), {}, [1, None]),
        (np.array([[1, 2]]), {}, [[1, 2]]),
        ({"k": {np.str_("x"): np.float64(2)}}, {}, {"k": {"x": 2.0}}),
        (_Point(np.float64(0.5), "car"), {}, {"x": 0.5, "label": "car"}),
        (1 / 3, {"float_digits": 6}, 0.333333),
        ([np.float32(2.0000004)], {"float_digits": 6}, [2.0]),
        (np.zeros((8, 9)), {"max_array_size": 64}, "<array (8, 9)>"),
        (np.zeros(3), {"max_array_size": 64}, [0.0, 0.0, 0.0]),
    ],
)
def test_to_jsonable(value: object, options: dict, expected: object) -> None:
    assert to_jsonable(value, **options) == expected
