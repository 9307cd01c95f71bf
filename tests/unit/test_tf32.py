"""TF32 as a choice (`tf32` knob): fp32 GEMMs on an Ampere-or-later GPU run as TF32 on tensor
cores or in fp32 on CUDA cores, whatever the stack's default, and the output says which."""

from __future__ import annotations

import json

import pytest

from accelsim.errors import AccelsimError
from accelsim.run import run_simulation
from accelsim.sim.knobs import make_config, parse_knob_values
from tests.helpers.cli import run_cli


def _layers(record: dict) -> list[dict]:
    return [r for r in record["layers"] if r["op"] in ("conv2d", "linear", "matmul")]


def test_off_runs_every_fp32_gemm_on_cuda_cores_and_says_so(capsys) -> None:
    code, out, _ = run_cli(capsys, "simulate", "resnet50", "--hw", "a100", "--precision",
                           "fp32", "--tf32", "off", "--json")
    record = json.loads(out)
    assert code == 0
    assert {r["unit"] for r in _layers(record)} == {"cuda_core"}
    assert any("CUDA cores" in n and "as asked" in n for n in record["notes"])


def test_the_stacks_default_follows_its_file() -> None:
    """pytorch-eager (cudnn.allow_tf32 on, cuda.matmul.allow_tf32 off): convolutions as TF32,
    the classifier's matmul in fp32; the note names the stack's default."""
    record = run_simulation(make_config("resnet50", "a100", precision="fp32")).record
    units = {r["op"]: r["unit"] for r in _layers(record)}
    assert units == {"conv2d": "tensor_core", "linear": "cuda_core"}
    assert any("pytorch-eager's default" in n for n in record["notes"])


def test_on_costs_fp32_gemms_as_precision_tf32_does() -> None:
    """--tf32 on at fp32 and precision tf32 are two routes to the same tensor-core rate."""
    on = run_simulation(make_config("bert_base", "a100", precision="fp32", tf32=True,
                                    batch=8)).record
    tf32 = run_simulation(make_config("bert_base", "a100", precision="tf32", batch=8)).record
    for a, b in zip(_layers(on), _layers(tf32), strict=True):
        assert a["unit"] == b["unit"] == "tensor_core"
        assert a["time_s"] == pytest.approx(b["time_s"], rel=1e-9)


def test_off_is_slower_where_compute_bound() -> None:
    """A100: 156 TFLOP/s dense TF32 against 19.5 TFLOP/s fp32 on CUDA cores (datasheet), so
    a large batch runs markedly faster with TF32 (its non-GEMM layers, memory-bound, do not
    change) and never by more than the peak ratio."""
    def tput(tf32: bool) -> float:
        cfg = make_config("resnet50", "a100", precision="fp32", batch=256, tf32=tf32)
        return run_simulation(cfg).record["throughput_samples_per_s"]

    assert 1.5 < tput(True) / tput(False) < 156 / 19.5


def test_train_and_serve_honour_it() -> None:
    def tput(mode_knobs: dict, tf32: bool) -> float:
        cfg = make_config("resnet50", "dgx-a100", precision="fp32", tf32=tf32, **mode_knobs)
        return run_simulation(cfg).record["throughput_samples_per_s"]

    train = {"mode": "train", "steps": 3, "devices": 1, "batch": 128}
    assert tput(train, True) > 1.5 * tput(train, False)
    serve = {"mode": "serve", "concurrency": 64, "requests": 256, "max_batch": 64}
    assert tput(serve, True) > 1.5 * tput(serve, False)


def test_where_tensor_cores_have_no_tf32_the_knob_says_it_changes_nothing() -> None:
    """V100 (Volta) and a CPU list no TF32 peak: without the knob no TF32 note, with it a
    note that it changed nothing (a knob is never silently ignored), and the same figures."""
    for hw in ("v100", "xeon-8380"):
        plain = run_simulation(make_config("resnet18", hw, precision="fp32")).record
        asked = run_simulation(make_config("resnet18", hw, precision="fp32", tf32=True)).record
        assert not any("TF32" in n for n in plain["notes"])
        assert any("changes nothing" in n for n in asked["notes"])
        assert asked["latency_s"] == plain["latency_s"]


def test_a_knob_that_cannot_apply_is_an_error() -> None:
    with pytest.raises(AccelsimError, match="this run is fp16"):
        run_simulation(make_config("resnet50", "a100", precision="fp16", tf32=False))
    with pytest.raises(AccelsimError, match="decoder"):
        run_simulation(make_config("llama2_7b", "a100", prompt_tokens=64, tf32=False))
    assert parse_knob_values("tf32", "on,off") == [True, False]
