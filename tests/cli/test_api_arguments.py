"""The Python API's arguments (issue 24): a number, None or a list where a name is expected is
an `AccelsimError` of one line, as the README promises (it was a TypeError or AttributeError
from deep inside), and a `pathlib.Path` works wherever a path does."""

from __future__ import annotations

import pytest

import accelsim
from accelsim.errors import AccelsimError
from tests.helpers.paths import HW_PROFILES, WORKLOADS

A100 = HW_PROFILES / "devices" / "a100.toml"


@pytest.mark.parametrize("fn,args,kwargs,says", [
    ("simulate", (5,), {"hw": "a100"}, "workload: give"),
    ("simulate", (None,), {"hw": "a100"}, "not None"),
    ("simulate", (["resnet18"],), {"hw": "a100"}, "not list"),
    ("simulate", ("",), {"hw": "a100"}, "not ''"),
    ("simulate", ("resnet18",), {"hw": 5}, "hw: give"),
    ("simulate", ("resnet18",), {"hw": None}, "hw: give"),
    ("simulate", ("resnet18",), {"hw": ["a100"]}, "not list"),
    ("simulate", ("resnet18",), {"hw": "a100", "execute": "yes"}, "execute: give True"),
    ("simulate", ("resnet18",), {"hw": "a100", "batch": 10**5000}, "digits"),
    ("compare", ("resnet18",), {"hw": 5}, "hw: give"),
    ("compare", ("resnet18",), {"hw": None}, "hw: give"),
    ("compare", ("resnet18",), {"hw": [5, None]}, "hw[0]: give"),
    ("compare", ("resnet18",), {"hw": []}, "at least one"),
    ("compare", (5,), {"hw": "a100"}, "workload: give"),
    ("sweep", (None,), {"hw": "t4"}, "workload: give"),
    ("sweep", ("mlp",), {"hw": 5, "batch": [1, 2]}, "hw: give"),
    ("write_report", ("resnet18",), {"hw": None}, "hw: give"),
    ("write_report", (5,), {"hw": "a100"}, "workload: give"),
    ("write_report", ("resnet18",), {"hw": "a100", "out": 3}, "out: give"),
])
def test_a_wrong_type_is_one_accelsim_error(fn, args, kwargs, says):
    with pytest.raises(AccelsimError) as err:
        getattr(accelsim, fn)(*args, **kwargs)
    assert says in str(err.value) and "\n" not in str(err.value)
    assert len(str(err.value)) < 300


def test_paths_work_wherever_a_path_does(tmp_path):
    by_path = accelsim.simulate("resnet18", hw=A100, batch=2)
    by_name = accelsim.simulate("resnet18", hw=str(A100), batch=2)
    assert by_path.throughput_samples_per_s == by_name.throughput_samples_per_s
    scenario = accelsim.simulate(WORKLOADS / "resnet50-infer.toml", hw="a100")
    assert scenario.throughput_samples_per_s > 0
    df = accelsim.compare("mlp", hw=[A100, "t4"])
    assert len(df) == 2 and ("error" not in df or df["error"].isna().all())  # no error column: none
    assert len(accelsim.sweep("mlp", hw=[A100], batch=[1, 2])) == 2
    trace = tmp_path / "trace.csv"
    trace.write_text("arrival_s,prompt_tokens,output_tokens\n0.0,100,5\n")
    served = accelsim.simulate("llama2_7b", hw="a100", mode="serve", requests_file=trace)
    assert served.record["requests"] == 1
