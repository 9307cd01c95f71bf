"""The front door: out of memory is a result, the answer comes first, no flag is ignored, every
mode writes a trace, closed-loop serving works, and the Python API's examples run."""

import doctest
import json

import pytest

import accelsim
from accelsim.errors import AccelsimError
from accelsim.profiles.devices import load_profile
from accelsim.workload.memory import largest_batch, memory_need
from accelsim.workload.zoo import build_model
from tests.helpers.cli import one_line_error, run_cli


@pytest.mark.parametrize("mode,extra", [  # a served decoder's prompt: --prompt-tokens
    ("infer", ("--seq-len", "2048")), ("train", ("--seq-len", "2048", "--steps", "2")),
    ("serve", ("--prompt-tokens", "2048", "--rate", "10", "--requests", "50")),
])
def test_out_of_memory_is_a_result_in_every_mode(capsys, mode, extra):
    code, out, err = run_cli(capsys, "simulate", "llama2_7b", "--hw", "t4", "--mode", mode,
                             "--precision", "fp16", "--batch", "64", *extra, "--json")
    assert code == 0, err
    obj = json.loads(out)
    mem = obj["memory"]
    assert mem["fits"] is False and mem["required_bytes"] > mem["capacity_bytes"]
    for key in ("throughput_samples_per_s", "latency_s", "energy_j_per_sample",
                "average_power_w"):
        assert obj[key] is None
    assert mem["weights_bytes"] > 0 and mem["activations_bytes"] > 0
    assert obj["notes"][0].startswith("does not fit")
    code, out, _ = run_cli(capsys, "simulate", "llama2_7b", "--hw", "t4", "--mode", mode,
                           "--precision", "fp16", "--batch", "64", *extra)
    assert code == 0 and out.splitlines()[0].startswith("DOES NOT FIT")


@pytest.mark.parametrize("model,mode,precision,device", [
    ("resnet50", "train", "bf16", "a100"), ("bert_large", "infer", "fp16", "t4"),
    ("llama2_7b", "infer", "fp16", "a100"), ("vgg16", "train", "fp32", "tpu-v3"),
])
def test_largest_batch_is_the_boundary_of_the_memory_need(model, mode, precision, device):
    graph = build_model(model)
    cap = load_profile(device).offchip_memory.capacity_bytes
    b = largest_batch(graph, cap, precision, mode)
    assert b >= 1
    assert memory_need(graph, b, precision, mode).required_bytes <= cap
    assert memory_need(graph, b + 1, precision, mode).required_bytes > cap


def test_largest_batch_without_room_or_capacity():
    graph = build_model("llama2_7b")
    assert largest_batch(graph, 1e9, "fp16") == 0
    assert largest_batch(graph, None, "fp16") is None


@pytest.mark.parametrize("args,knob", [
    (("--steps", "3"), "steps"), (("--rate", "10"), "rate"), (("--devices", "2"), "devices"),
    (("--dataset", "imagenet-raw"), "dataset"), (("--max-batch", "8"), "max_batch"),
])
def test_flags_of_another_mode_are_rejected_in_one_line(capsys, args, knob):
    code, _, err = run_cli(capsys, "simulate", "resnet50", "--hw", "a100", *args)
    assert code == 2 and f"'{knob}'" in err and "mode" in err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err


def test_training_flags_are_rejected_when_serving(capsys):
    code, _, err = run_cli(capsys, "simulate", "resnet50", "--hw", "t4", "--mode", "serve",
                           "--rate", "10", "--prep-workers", "4")
    assert code == 2 and "prep_workers" in err


def test_precision_the_matrix_units_replace_is_noted(capsys):
    code, out, err = run_cli(capsys, "simulate", "resnet50", "--hw", "tpu-v3", "--precision",
                             "fp16", "--json")
    assert code == 0, err
    obj = json.loads(out)
    assert obj["workload"]["precision"] == "fp16"
    assert obj["hardware"]["compute_precision"] == "bf16"
    assert any("bf16" in n for n in obj["notes"])
    # With no --software the TPU runs its class's default stack, and says it is the default.
    assert obj["hardware"]["software"] == "jax-xla" and obj["hardware"]["software_default"]
    # ... and a software flag an ahead-of-time compiled device cannot honour is noted.
    code, out, err = run_cli(capsys, "simulate", "resnet50", "--hw", "tpu-v3", "--software",
                             "eager", "--json")
    obj = json.loads(out)
    assert obj["hardware"]["software"] == "jax-xla" and not obj["hardware"]["software_default"]
    assert any("'pytorch-eager' does not run on a TPU" in n for n in obj["notes"])


def test_fp8_encodings_run_on_the_fp8_units(capsys):
    a = accelsim.simulate("resnet50", hw="h100", batch=32, precision="fp8_e4m3")
    b = accelsim.simulate("resnet50", hw="h100", batch=32, precision="fp8")
    assert a.latency_s == pytest.approx(b.latency_s)


def test_closed_loop_serving_works(capsys):
    code, out, err = run_cli(capsys, "simulate", "resnet50", "--hw", "t4", "--mode", "serve",
                             "--concurrency", "4", "--requests", "100", "--json")
    assert code == 0, err
    obj = json.loads(out)
    assert obj["requests_served"] == 100 and obj["offered_load"] is None
    # Four clients, one device, batch 1: each request waits for the three ahead of it.
    service_s = obj["device_only"]["latency_s"]
    assert obj["latency_p50_s"] == pytest.approx(4 * service_s, rel=0.05)


def test_infer_trace_is_the_layers_back_to_back(capsys, tmp_path):
    trace = tmp_path / "infer.json"
    code, out, err = run_cli(capsys, "simulate", "resnet18", "--hw", "a100", "--trace",
                             str(trace), "--json")
    assert code == 0, err
    obj = json.loads(out)
    events = [e for e in json.loads(trace.read_text())["traceEvents"] if e["ph"] == "X"]
    assert len(events) == len(obj["layers"])
    end_us = max(e["ts"] + e["dur"] for e in events)
    assert end_us == pytest.approx(obj["latency_s"] * 1e6, rel=1e-9)


def test_human_output_leads_with_the_answer(capsys):
    code, out, _ = run_cli(capsys, "simulate", "resnet50", "--hw", "a100", "--batch", "64")
    lines = out.splitlines()
    assert code == 0 and lines[0].startswith("resnet50 infer")
    assert lines[1].strip().startswith("throughput") and "bottleneck" in out[:800]
    table = lines[lines.index(next(x for x in lines if x.startswith("Top 10"))) + 3:]
    assert len(table) == 10  # under the header and its rule
    times = [float(row.split()[5]) for row in table]
    assert times == sorted(times, reverse=True)
    code, out, _ = run_cli(capsys, "simulate", "resnet50", "--hw", "a100", "--layers", "all")
    assert code == 0 and "All 174 layer rows" in out


def test_api_result_and_errors():
    r = accelsim.simulate("resnet18", hw="a100", batch=8, precision="fp16")
    assert r.layers["time_s"].sum() == pytest.approx(r.latency_s)
    assert r.summary["samples_per_j"] == pytest.approx(
        r.throughput_samples_per_s / r.record["average_power_w"])
    d = r.to_dict()
    d["latency_s"] = -1
    assert r.latency_s > 0  # to_dict is a copy
    with pytest.raises(AccelsimError, match="unknown knob 'bacth'"):
        accelsim.simulate("resnet18", hw="a100", bacth=8)
    with pytest.raises(AccelsimError, match="whole number"):
        accelsim.simulate("resnet18", hw="a100", batch="eight")


@pytest.mark.parametrize("module", ["accelsim.api", "accelsim.run", "accelsim.sim.knobs"])
def test_docstring_examples_run(module):
    import importlib

    mod = importlib.import_module(module)
    result = doctest.testmod(mod, optionflags=doctest.ELLIPSIS)
    assert result.failed == 0


@pytest.mark.parametrize(("args", "hint"), [
    (("simulate", "resnet50", "--hw", "a1000"), "did you mean a100"),
    (("simulate", "resnet5", "--hw", "a100"), "did you mean resnet50"),
    (("simulate", "resnet50", "--hw", "a100", "--software", "tensorrtt"),
     "did you mean tensorrt"),
    (("sweep", "resnet50", "--hw", "a100", "--set", "bach=1,2"), "did you mean batch"),
])
def test_a_mistyped_name_gets_the_closest_names(capsys, args, hint):
    """Issue 23: an unknown name is answered with the nearest known ones (difflib's ratio),
    still in one line with every choice."""
    line = one_line_error(capsys, *args)
    assert hint in line
    if "--software" not in args:
        assert "choose one of" in line
