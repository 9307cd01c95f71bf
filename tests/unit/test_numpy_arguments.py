"""The Python API takes what numpy hands out: numpy scalars as knobs and numpy arrays as a
plan's lists give the same result as the Python values they hold; a numpy value that is not
what the knob takes is still refused in one line."""

from __future__ import annotations

import numpy as np
import pytest

from accelsim import api
from accelsim.errors import AccelsimError
from accelsim.explore.plan import make_plan


def test_numpy_scalars_as_knobs_run_as_python_ones() -> None:
    plain = api.simulate("resnet50", "a100", batch=8, precision="fp16", usd_per_kwh=0.2)
    numpy = api.simulate("resnet50", "a100", batch=np.int64(8), precision=np.str_("fp16"),
                         usd_per_kwh=np.float64(0.2))
    assert numpy.record == plain.record


@pytest.mark.parametrize("value, says", [
    (np.float64(8.5), "not a whole number"),
    (np.bool_(True), "not a whole number"),
    (np.array([8, 16]), "not a whole number"),
    (np.int64(0), "at least 1"),
])
def test_numpy_values_a_knob_does_not_take_are_refused(value, says) -> None:
    with pytest.raises(AccelsimError, match=says) as err:
        api.simulate("resnet50", "a100", batch=value)
    assert "\n" not in str(err.value)


def test_a_plan_takes_numpy_arrays() -> None:
    lists = make_plan("resnet50", ["a100"], [1, 2, 4], ["fp16"], [1, 2], "throughput",
                      p99_ms=20)
    arrays = make_plan("resnet50", np.array(["a100"]), np.array([1, 2, 4]), ["fp16"],
                       np.arange(1, 3), "throughput", p99_ms=np.float64(20))
    assert arrays.rows == lists.rows
