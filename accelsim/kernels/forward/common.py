"""Small helpers shared by the forward kernels."""

from __future__ import annotations

from typing import Any

import numpy as np


def f32(x: np.ndarray) -> np.ndarray:
    """`x` as float32 (no copy when it already is)."""
    return np.asarray(x, dtype=np.float32)


def as_tuple(v: int | tuple[int, ...] | list[int], n: int) -> tuple[int, ...]:
    """An int or sequence attribute as an n-tuple (e.g. kernel=3 -> (3, 3))."""
    return (int(v),) * n if isinstance(v, int | np.integer) else tuple(int(e) for e in v)


def bias_of(params: dict[str, Any], name: str = "bias") -> np.ndarray | None:
    """The float32 bias parameter `name`, or None when the op has none."""
    b = params.get(name)
    return None if b is None else f32(b)
