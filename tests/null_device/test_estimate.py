"""The device layer above the class models, on the null device (fixed, known costs)."""

import dataclasses

import pytest

from accelsim.devices.estimate import estimate, summary
from accelsim.devices.null import NullProfile
from accelsim.errors import AccelsimError
from accelsim.workload.graph import GraphBuilder
from accelsim.workload.memory import memory_need, peak_live_elems
from accelsim.workload.zoo import build_model


def test_null_step_time_is_rows_times_fixed_cost():
    g = build_model("resnet18", image_size=64)
    n = len(g.ops)  # every op kind has a formula: one row per op and phase
    p = NullProfile(op_time_s=1e-3, backward_factor=2.0)
    infer = estimate(g, p, 4, "fp32", "infer")
    assert infer.step_time_s == pytest.approx(n * 1e-3)
    train = estimate(g, p, 4, "fp32", "train")
    assert train.step_time_s == pytest.approx(n * 1e-3 + n * 2e-3 + 1e-3)
    assert train.phase_time_s("backward") == pytest.approx(2 * train.phase_time_s("forward"))
    assert train.throughput_samples_per_s == pytest.approx(4 / train.step_time_s)


def test_power_cap_stretches_time_to_tdp():
    g = build_model("mlp")
    # Each row would draw 10 J in 1 ms = 10 kW; a 100 W device (20 W static) needs 10/80 s.
    p = NullProfile(op_time_s=1e-3, op_energy_j=10.0, tdp_w=100.0, static_w=20.0)
    est = estimate(g, p, 1, "fp32")
    assert (est.layers["bound"] == "power").all()
    assert est.layers["time_s"].to_numpy() == pytest.approx(10.0 / 80.0)
    assert est.average_power_w == pytest.approx(100.0)


def test_memory_that_does_not_fit_is_a_result():
    g = build_model("resnet50")
    est = estimate(g, NullProfile(capacity_bytes=1e9), 256, "fp16", "train")
    assert est.memory["fits"] is False and est.memory["required_bytes"] > 1e9
    rec = summary(est, g)
    assert rec["memory"]["fits"] is False and rec["workload"]["params"] == g.params


def test_training_memory_parts_closed_form():
    g = build_model("mlp")
    need = memory_need(g, 32, "fp16", "train", "adam")
    p = g.params
    assert need.weights_bytes == p * 2 + p * 4  # fp16 copy + fp32 master
    assert need.gradients_bytes == p * 4  # AMP: fp32 gradients of the fp32 master weights
    assert need.optimizer_state_bytes == p * 4 * 2  # Adam: two moments in fp32


def test_peak_live_counts_skip_connections():
    # x feeds both branches and the add: x, a and b are alive together at the add.
    g = GraphBuilder("skip")
    x = g.input("x", (100,))
    a = g.relu(x)
    b = g.relu(a)
    g.add(x, b)
    assert peak_live_elems(g.build()) == 300


def test_bad_software_and_batch():
    g = build_model("mlp")
    with pytest.raises(AccelsimError, match="software"):
        estimate(g, NullProfile(), 1, "fp32", software="jit")
    with pytest.raises(AccelsimError, match="batch"):
        estimate(g, dataclasses.replace(NullProfile()), 0, "fp32")
