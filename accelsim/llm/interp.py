"""Linear interpolation of one value in a table, as `numpy.interp` computes it, without the
array machinery: the serving loop asks for one value millions of times (`accelsim.llm.steps`),
where numpy's per-call overhead is about ten times the arithmetic.

    xs, ys = Table.of(np.array([1.0, 2.0, 4.0]), np.array([10.0, 20.0, 30.0]))
    interp1(3.0, xs, ys)  # 25.0, the same float numpy.interp(3.0, xs, ys) gives
"""

from __future__ import annotations

import bisect
import math

import numpy as np


def table(xp: np.ndarray, fp: np.ndarray) -> tuple[list[float], list[float]]:
    """The nodes and values as Python floats (xp ascending, as numpy.interp requires)."""
    return [float(x) for x in xp], [float(y) for y in fp]


def interp1(x: float, xp: list[float], fp: list[float]) -> float:
    """numpy.interp(x, xp, fp) for one finite x: the end values outside the nodes, the node's
    value on a node, else slope * (x - xp[j]) + fp[j] in the same order of operations (and the
    same fall-backs where that is NaN), so the result is the same double."""
    if x < xp[0]:
        return fp[0]
    j = bisect.bisect_right(xp, x) - 1
    if j >= len(xp) - 1:
        return fp[-1]
    if xp[j] == x:
        return fp[j]
    slope = (fp[j + 1] - fp[j]) / (xp[j + 1] - xp[j])
    y = slope * (x - xp[j]) + fp[j]
    if math.isnan(y):
        y = slope * (x - xp[j + 1]) + fp[j + 1]
        if math.isnan(y) and fp[j] == fp[j + 1]:
            y = fp[j]
    return y
