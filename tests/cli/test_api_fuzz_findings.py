"""What fuzzing the Python API found (issue 24 items 3 and 8; `tests/fuzzing/api_cases.py`):
each bad call below was a TypeError, AttributeError, IndexError or UnicodeEncodeError from
deep inside, a message broken over lines, or an answer to a call it should have refused; each
is now one `AccelsimError` of one line naming the argument. And a `pathlib.Path` works in the
plans as it does in `simulate`."""

from __future__ import annotations

import pytest

import accelsim
from accelsim.errors import AccelsimError
from accelsim.explore.plan import make_plan
from accelsim.explore.plan_llm import make_serving_plan
from accelsim.profiles.devices import load_profile
from accelsim.profiles.systems import load_system
from tests.helpers.paths import HW_PROFILES, WORKLOADS

T4 = HW_PROFILES / "devices" / "t4.toml"
PLAN = ("mlp", ["t4"], [1, 2], ["fp16"], [1], "throughput")
SERVE = ("llama-3.1-8b", ["dgx-h100"], ["vllm"], ["fp16"], [1], [1], [8], 1.0, 32, 8, 500.0,
         50.0, "cost")


def one_error(call, *args, **kwargs) -> str:
    with pytest.raises(AccelsimError) as err:
        call(*args, **kwargs)
    text = str(err.value)
    assert text.strip() and "\n" not in text, repr(text)
    return text


@pytest.mark.parametrize("value", [{"a": 1}, [], 5, None, b"t4", ""])
def test_a_loader_given_no_name_or_path(value):
    """find_profile hashed or sliced whatever it was given (TypeError: unhashable type)."""
    assert "give a name or a .toml path" in one_error(load_profile, value)
    assert "give a name or a .toml path" in one_error(load_system, value)


@pytest.mark.parametrize("path", [7, 1j, None, "\ud800", "t\x00.json"])
def test_a_trace_path_that_is_no_path(path):
    """write_trace reached Path() or the file system with it (TypeError, UnicodeEncodeError)."""
    result = accelsim.simulate("mlp", hw="t4")
    assert "path" in one_error(result.write_trace, path)


def test_a_resume_store_that_is_no_path():
    assert "resume" in one_error(accelsim.sweep, "mlp", hw="t4", batch=[1, 2], resume=0)


@pytest.mark.parametrize("index,value,says", [
    (0, 1.5, "workload"), (1, 7, "hardware"), (1, [()], "hardware[0]"), (2, [], "batches"),
    (2, "12", "batches"), (3, True, "precisions"), (4, None, "counts"), (5, ["x"], "objective"),
])
def test_a_plan_argument_of_the_wrong_type(index, value, says):
    args = list(PLAN)
    args[index] = value
    assert says in one_error(make_plan, *args)


@pytest.mark.parametrize("keyword,value", [
    ("p99_ms", []), ("max_usd_per_hour", " "), ("max_power_kw", {}), ("knobs", float("nan")),
    ("knobs", {"batch": 2}),
])
def test_a_plan_keyword_of_the_wrong_type(keyword, value):
    assert keyword in one_error(make_plan, *PLAN, **{keyword: value})


def test_a_plan_takes_paths():
    """resolve_hardware called .endswith on a Path; the workload's loader .lower()."""
    by_path = make_plan("mlp", [T4], [1, 2], ["fp16"], [1], "throughput")
    by_name = make_plan("mlp", [str(T4)], [1, 2], ["fp16"], [1], "throughput")
    assert by_path.rows == by_name.rows
    assert make_plan(WORKLOADS / "resnet50-infer.toml", ["t4"], [1], ["fp16"], [1],
                     "latency").best


@pytest.mark.parametrize("index,value,says", [
    (4, "t4", "tps"), (5, 1.0, "pps"), (6, None, "caps"), (6, [], "caps"),
    (7, "nan", "rate"), (8, 0, "prompt_tokens"), (11, "8", "slo_tpot_ms"),
])
def test_a_serving_plan_argument_of_the_wrong_type(index, value, says):
    args = list(SERVE)
    args[index] = value
    assert says in one_error(make_serving_plan, *args, requests=50)


@pytest.mark.parametrize("keyword,value,says", [
    ("max_usd_per_hour", "T4", "max_usd_per_hour"), ("knobs", 1.5, "knobs"),
    ("knobs", {"tp": 2}, "set by the call"), ("requests", None, "requests"),
])
def test_a_serving_plan_keyword_of_the_wrong_type(keyword, value, says):
    assert says in one_error(make_serving_plan, *SERVE, **{"requests": 50, keyword: value})


@pytest.mark.parametrize("workload,knobs,says", [
    ("gpt2", None, "needs a decoder config"),  # was AttributeError: None has no .params
    ("llama-3.1-8b", {"nope": 1}, "unknown knob 'nope'"),  # was a plan of pruned rows
    ("llama-3.1-8bx", None, "unknown workload"),  # likewise
])
def test_a_serving_plan_of_a_bad_workload_or_knob_is_refused(workload, knobs, says):
    assert says in one_error(make_serving_plan, workload, *SERVE[1:], requests=50, knobs=knobs)


@pytest.mark.parametrize("call,kwargs", [
    (accelsim.simulate, {"hw": "t4\nx"}),
    (accelsim.simulate, {"hw": "t4", "batch\n": 1}),
    (accelsim.sweep, {"hw": "t4", "batch": [1, 2], "batch\n": 1}),
    (load_system, {}),
])
def test_a_name_with_a_newline_is_quoted_on_one_line(call, kwargs):
    args = ("t4\nx",) if call is load_system else ("mlp",)
    assert "\\n" in one_error(call, *args, **kwargs)


@pytest.mark.parametrize("call,kwargs", [
    (accelsim.simulate, {"hw": "t4", "bach": None}),  # a typo set to None was dropped
    (accelsim.write_report, {"hw": "t4", "bach": None}),
    (accelsim.compare, {"hw": ["t4", "a100"], "hardware": None}),  # was a TypeError
    (accelsim.compare, {"hw": ["t4", "a100"], "hardware": "t4"}),
])
def test_a_misspelt_or_clashing_keyword_is_an_unknown_knob(call, kwargs, tmp_path,
                                                           monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert "unknown knob" in one_error(call, "mlp", **kwargs)


@pytest.mark.parametrize("call,kwargs", [
    (accelsim.compare, {"hw": "t4,edge-tpu", "all_columns": "no"}),  # "no" kept every column
    (accelsim.compare, {"hw": "t4,edge-tpu", "fallback": "false"}),  # "false" fell back
    (accelsim.compare, {"hw": "t4", "fallback": 0}),
    (accelsim.sweep, {"hw": "t4", "batch": [1, 2], "progress": "yes"}),
    (accelsim.sweep, {"hw": "t4", "batch": [1, 2], "all_columns": 1}),
])
def test_a_flag_is_true_or_false(call, kwargs):
    assert "give True or False" in one_error(call, "mlp", **kwargs)


def test_every_device_left_out_or_every_point_failed_is_an_error():
    """The API answered a frame of nothing but errors where the CLI exits 2."""
    assert "every one of the 2 devices was left out" in one_error(
        accelsim.compare, "mlp", hw="t4,edge-tpu", dataflow="ws")
    assert "all 2 points failed" in one_error(accelsim.sweep, "mlp", hw="t4", batch=[1, 2],
                                              steps=2)
    df = accelsim.sweep("mlp", hw="t4", batch=1, image_size=[28, 10**9])
    assert df["error"].notna().tolist() == [False, True]  # one failed point stays a row


@pytest.mark.parametrize("kwargs,says", [
    ({"hw": "t4", "dataflow": ""}, "knob 'dataflow': give a name"),  # '' was taken as unset
    ({"hw": "t4", "dataflow": "  "}, "knob 'dataflow': give a name"),
    ({"hw": "raspberry-pi-5", "mode": "federated", "population": 10, "clients_per_round": 2,
      "rounds": 1, "local_steps": 1, "execute": True}, "not federated"),  # was ignored
])
def test_a_knob_that_changed_nothing_is_refused(kwargs, says):
    assert says in one_error(accelsim.simulate, "mlp", **kwargs)
