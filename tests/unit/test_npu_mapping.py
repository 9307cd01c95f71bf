"""NPU mapping losses against closed forms: grouped / depthwise convs packed block-diagonally on
the MAC array (`systolic.packed_rounds`), a depthwise conv keeping about 1/cols of the array
busy, time growing with groups at fixed MACs, fused BN/activation rows, per-layer dispatch."""

from __future__ import annotations

import math

import pytest

from accelsim.devices.core import finish
from accelsim.devices.energy import static_power_w
from accelsim.devices.npu import model as npu
from accelsim.devices.systolic import model as systolic
from accelsim.profiles.devices import load_profile
from accelsim.profiles.efficiency import load_efficiency
from accelsim.profiles.stack_choice import default_stack
from accelsim.workload.graph import Graph, GraphBuilder
from accelsim.workload.work import gemms_for, work_table

EDGE = load_profile("edge-tpu")
R, C = EDGE.compute.mxu_rows, EDGE.compute.mxu_cols
CLOCK_HZ = EDGE.compute.clock_hz


def conv_graph(channels: int, groups: int, hw: int, bn: bool = False) -> Graph:
    g = GraphBuilder(f"conv_g{groups}")
    x = g.input("x", (channels, hw, hw))
    y = g.conv2d(x, out_channels=channels, kernel=3, stride=1, padding=1, groups=groups,
                 bias=False, name="conv")
    if bn:
        g.relu6(g.batchnorm(y, name="bn"), name="act")
    return g.build()


def conv_row(graph: Graph) -> dict:
    work = work_table(graph, 1, "int8", "infer")
    costs = npu.npu_costs(EDGE, work, gemms_for(graph, 1), "int8", default_stack("npu")).to_frame()
    out = finish(work, costs, EDGE.power.tdp_w, static_power_w(EDGE))
    return out.set_index("name").loc["conv"].to_dict()


def test_packed_rounds_closed_form() -> None:
    # depthwise 3x3 (ws: S_R = 9 taps, S_C = 1 output channel): R // 9 groups per fold
    assert systolic.packed_rounds(3136, 1, 9, 144, 64, 64, "ws") == math.ceil(144 / (64 // 9))
    # a group wider than the array folds alone: one round per group
    assert systolic.packed_rounds(100, 32, 288, 8, 64, 64, "ws") == 8
    # os: S_R = m pixels; 16-pixel groups, 2 output channels each -> min(4, 32) per fold
    assert systolic.packed_rounds(16, 2, 9, 40, 64, 64, "os") == 10


def test_depthwise_conv_uses_one_column_per_packed_channel() -> None:
    channels, hw = 96, 56
    row = conv_row(conv_graph(channels, channels, hw))
    per_fold = R // 9
    rounds = math.ceil(channels / per_fold)
    cycles = rounds * (2 * R + C + hw * hw - 2) - 1  # SCALE-Sim ws, T = output pixels
    assert row["compute_s"] * CLOCK_HZ == pytest.approx(cycles)
    busy = channels * hw * hw * 9 / (cycles * R * C)  # useful MACs / array MAC slots
    assert busy <= 1.0 / C
    assert busy == pytest.approx(per_fold * 9 / (R * C), rel=0.15)


@pytest.mark.parametrize("channels", [256])
def test_time_grows_with_groups_at_fixed_macs(channels: int) -> None:
    base_hw = 8
    times, macs = [], []
    for groups in (4, 16, 64, 256):  # squares, so hw stays whole
        hw = base_hw * math.isqrt(groups)  # MACs = hw^2 x C x C/g x 9: fixed
        row = conv_row(conv_graph(channels, groups, hw))
        times.append(row["compute_s"])
        macs.append(row["flops"] / 2)
    assert macs == pytest.approx([macs[0]] * len(macs))
    assert all(b > a for a, b in zip(times, times[1:], strict=False))
    assert times[-1] > 20 * times[0]


def test_bn_and_activation_fuse_into_the_conv_and_dispatch_is_per_kernel() -> None:
    graph = conv_graph(64, 1, 28, bn=True)
    work = work_table(graph, 1, "int8", "infer")
    costs = npu.npu_costs(EDGE, work, gemms_for(graph, 1), "int8",
                          default_stack("npu")).to_frame(index=work["name"])
    assert list(costs.loc[["bn", "act"], "unit"]) == ["fused", "fused"]
    assert (costs.loc[["bn", "act"], ["compute_s", "overhead_s", "kernels"]] == 0).all().all()
    dispatch_s = load_efficiency("npu")["fitted.layer_dispatch_s"]
    assert costs.loc["conv", "overhead_s"] == pytest.approx(dispatch_s)


def test_profile_without_geometry_keeps_ideal_mapping() -> None:
    dla = load_profile("orin-dla")
    assert dla.compute.mxu_rows is None
    graph = conv_graph(64, 64, 28)
    work = work_table(graph, 1, "int8", "infer")
    costs = npu.npu_costs(dla, work, gemms_for(graph, 1), "int8", default_stack("npu")).to_frame()
    macs = 64 * 28 * 28 * 9
    assert costs["compute_s"].iloc[0] == pytest.approx(
        macs / (dla.compute.matrix_peak_flops_per_s["int8"] / 2))
