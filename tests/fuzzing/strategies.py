"""Hypothesis strategies over the fuzz cases: the same generators as the seeded benchmark, with
every choice drawn from hypothesis (so a failing case shrinks to a simpler one).

    @given(case=cases("profile"))          # damaged device profiles, simulated
    @given(case=cases("cli"))              # argument lists with extreme, conflicting flags
    def test_...(case): run_case(case, folder)
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, TypeVar

from hypothesis import strategies as st

from .api_cases import ApiCase
from .cases import Case
from .run import make_case

T = TypeVar("T")


class DrawPicker:
    """A `fuzzing.mutate.Picker` drawing from hypothesis: choices shrink to the first option,
    integers to the low end, chances to "yes"."""

    def __init__(self, draw: Any) -> None:
        self.draw = draw

    def choice(self, options: Sequence[T]) -> T:
        return self.draw(st.sampled_from(list(options)))

    def integer(self, low: int, high: int) -> int:
        return self.draw(st.integers(low, high))

    def chance(self, p: float) -> bool:
        return self.draw(st.integers(0, 999)) < p * 1000


@st.composite
def cases(draw: Any, kind: str | None = None) -> Case | ApiCase:
    """Fuzz cases of `kind` ("profile", "system", "link", "part", "scenario", "cli", "path",
    or a surface of `fuzzing.surface_cases`: "onnx", "scalesim", "trace", "measurements",
    "store", "grid"; "api": a Python API call (`fuzzing.api_cases`); None: any of the
    first, by the benchmark's weights)."""
    return make_case(DrawPicker(draw), kind)

