"""The CPU GEMM as a BLAS library runs it (accelsim/devices/cpu/blas.py, issue 10) and the
software-stack fields the CPU model honours, against closed forms derived here."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from accelsim.devices.cpu.model import cpu_costs
from accelsim.profiles.devices import load_profile
from accelsim.profiles.efficiency import load_efficiency
from accelsim.profiles.software import builtin_stacks
from accelsim.workload.graph import GraphBuilder
from accelsim.workload.work import gemms_for, work_table

EFF = load_efficiency("cpu")
DRAM_EFF = EFF["assumed.dram_bandwidth_efficiency"]
GEMM_EFF = EFF["assumed.gemm_efficiency"]
CPUS = ("xeon-8380", "xeon-8480", "epyc-7763", "raspberry-pi-5")


def linear(m: int, k: int, n: int, precision: str = "fp32"):
    g = GraphBuilder("g")
    g.linear(g.input("x", (k,)), out_features=n, bias=False, name="fc")
    graph = g.build()
    return work_table(graph, m, precision), gemms_for(graph, m)


def costs(profile, m, k, n, precision="fp32", stack="pytorch-eager"):
    work, gemms = linear(m, k, n, precision)
    software = builtin_stacks()[stack] if isinstance(stack, str) else stack
    return cpu_costs(profile, work, gemms, precision, software).to_frame().iloc[0]


@pytest.fixture(scope="module")
def two_core(write_profile):
    """xeon-8380 with 2 cores (its listed fp32 peak kept): few enough threads that the
    micro-kernel tiles of a skinny GEMM fill whole waves."""
    return load_profile(write_profile("xeon-8380", "cores = 40", "cores = 2", "two-core.toml"))


def test_gemv_is_bytes_of_the_matrix_over_bandwidth():
    # M = 1: OpenBLAS forwards to GEMV, which streams W once and packs nothing, so the row is
    # memory-bound at (K N + K + N) x 4 B / (bandwidth x DRAM efficiency).
    profile = load_profile("xeon-8380")
    k = n = 4096
    row = costs(profile, 1, k, n)
    bandwidth = profile.offchip_memory.bandwidth_bytes_per_s * DRAM_EFF
    assert row["memory_s"] == pytest.approx((k * n + k + n) * 4 / bandwidth, rel=1e-12)
    assert row["compute_s"] < row["memory_s"] / 3


def test_skinny_gemm_closed_form(two_core):
    # M = 8, K = N = 1024 on 2 threads: 2 x 64 micro-tiles of 4 x 16 in 64 whole waves, so the
    # micro-kernels spend exactly the useful MACs; packing reads and writes X (8 x 1024) and
    # W (1024 x 1024) once before them.
    m, k, n = 8, 1024, 1024
    row = costs(two_core, m, k, n)
    peak = two_core.compute.vector_peak_flops_per_s["fp32"]
    bandwidth = two_core.offchip_memory.bandwidth_bytes_per_s * DRAM_EFF
    pack_s = 2 * 4 * (m * k + k * n) / bandwidth
    assert row["compute_s"] == pytest.approx(2 * m * k * n / (peak * GEMM_EFF) + pack_s,
                                             rel=1e-12)
    assert row["memory_s"] == pytest.approx(4 * (m * k + k * n + m * n) / bandwidth, rel=1e-12)


def test_no_64x64_overcharge_at_small_m(two_core):
    # The micro-kernel time (compute less packing) of M = 8 is 1/8 of M = 64's: a 64 x 64 tile
    # charged M = 8 as M = 64 (8 times the work).
    k = n = 1024
    bandwidth = two_core.offchip_memory.bandwidth_bytes_per_s * DRAM_EFF

    def kernel_s(m: int) -> float:
        return costs(two_core, m, k, n)["compute_s"] - 2 * 4 * (m * k + k * n) / bandwidth

    assert kernel_s(64) / kernel_s(8) == pytest.approx(8.0, rel=1e-12)


@pytest.mark.parametrize("name", CPUS)
@pytest.mark.parametrize("precision", ["fp32", "bf16"])
def test_gemm_time_grows_with_m(name, precision):
    profile = load_profile(name)
    times = [costs(profile, m, 1024, 1024, precision) for m in (1, 2, 3, 4, 8, 16, 17, 32, 64,
                                                              100, 128, 512, 1024)]
    busy = np.array([max(r["compute_s"], r["memory_s"]) + r["overhead_s"] for r in times])
    assert (np.diff(busy) >= -1e-15).all(), busy


def _stack(**changes):
    return dataclasses.replace(builtin_stacks()["pytorch-eager"], **changes)


@pytest.mark.parametrize(("name", "precision", "modifier"), [
    ("xeon-8380", "fp32", "cuda_core"),  # vector units
    ("xeon-8480", "bf16", "tensor_core"),  # AMX
])
def test_stack_modifier_scales_compute_bound_rows_exactly(name, precision, modifier):
    profile = load_profile(name)
    base = _stack(weight_casts=False)
    slow = dataclasses.replace(base, efficiency={**base.efficiency, modifier: 0.5})
    m = k = n = 4096
    a, b = costs(profile, m, k, n, precision, base), costs(profile, m, k, n, precision, slow)
    bandwidth = profile.offchip_memory.bandwidth_bytes_per_s * DRAM_EFF
    width = 4 if precision == "fp32" else 2
    pack_s = 2 * width * (m * k + k * n) / bandwidth  # packing: not the modified unit
    assert a["compute_s"] > a["memory_s"]
    assert (b["compute_s"] - pack_s) == pytest.approx(2 * (a["compute_s"] - pack_s), rel=1e-12)


def test_modifier_cannot_lift_a_factor_above_one():
    profile = load_profile("xeon-8380")
    base = _stack(weight_casts=False)
    fast = dataclasses.replace(base, efficiency={**base.efficiency, "cuda_core": 2.0})
    a, b = costs(profile, 4096, 4096, 4096, "fp32", base), costs(profile, 4096, 4096, 4096,
                                                                   "fp32", fast)
    pack_s = 2 * 4 * 2 * 4096 * 4096 / (profile.offchip_memory.bandwidth_bytes_per_s * DRAM_EFF)
    # 0.7 x 2 is capped at 1: the micro-kernels run 1 / 0.7 faster, not 2x
    assert (b["compute_s"] - pack_s) == pytest.approx((a["compute_s"] - pack_s) * GEMM_EFF,
                                                      rel=1e-12)


def test_dram_modifier_scales_a_stream_row_exactly():
    g = GraphBuilder("s")
    g.relu(g.input("x", (1 << 22,)), name="r")
    graph = g.build()
    work = work_table(graph, 4, "fp32")
    profile = load_profile("epyc-7763")
    base = _stack()
    slow = dataclasses.replace(base, efficiency={**base.efficiency, "dram_bandwidth": 0.25})
    a = cpu_costs(profile, work, gemms_for(graph, 4), "fp32", base).to_frame().iloc[0]
    b = cpu_costs(profile, work, gemms_for(graph, 4), "fp32", slow).to_frame().iloc[0]
    assert b["memory_s"] == pytest.approx(4 * a["memory_s"], rel=1e-12)


def test_autocast_weight_casts_on_cpu():
    # bf16 autocast (pytorch-eager): one cast op per weighted forward matmul, reading the fp32
    # master weight and writing the bf16 copy, serial with the GEMM.
    profile = load_profile("epyc-7763")
    k, n = 1024, 4096
    cast = costs(profile, 64, k, n, "bf16", _stack(weight_casts=True))
    plain = costs(profile, 64, k, n, "bf16", _stack(weight_casts=False))
    bandwidth = profile.offchip_memory.bandwidth_bytes_per_s * DRAM_EFF
    cast_bytes = k * n * (4 + 2)
    assert cast["kernels"] == plain["kernels"] + 1
    assert cast["compute_s"] - plain["compute_s"] == pytest.approx(cast_bytes / bandwidth,
                                                                   rel=1e-9)
    assert cast["dram_bytes"] - plain["dram_bytes"] == pytest.approx(cast_bytes)
    fp32 = costs(profile, 64, k, n, "fp32", _stack(weight_casts=True))
    assert fp32["kernels"] == plain["kernels"]  # nothing to cast at 32 bits


def test_layout_conversions_around_amx_convs_only():
    g = GraphBuilder("c")
    g.conv2d(g.input("x", (64, 56, 56)), out_channels=64, kernel=3, padding=1, bias=False,
             name="conv")
    graph = g.build()
    work, gemms = work_table(graph, 2, "bf16"), gemms_for(graph, 2)
    act_bytes = 2 * 64 * 56 * 56 * 2  # batch 2, bf16
    base = _stack(weight_casts=False)
    two = dataclasses.replace(base, layout_conversions_per_conv=2.0)
    amx = load_profile("xeon-8480")  # bf16 on AMX
    a = cpu_costs(amx, work, gemms, "bf16", base).to_frame().iloc[0]
    b = cpu_costs(amx, work, gemms, "bf16", two).to_frame().iloc[0]
    bandwidth = amx.offchip_memory.bandwidth_bytes_per_s * DRAM_EFF
    assert b["kernels"] == a["kernels"] + 2
    assert b["compute_s"] - a["compute_s"] == pytest.approx(2 * 2 * act_bytes / bandwidth,
                                                            rel=1e-9)
    vector = load_profile("epyc-7763")  # no matrix engine: no conversions
    assert (cpu_costs(vector, work, gemms, "bf16", two).to_frame()["kernels"].iloc[0]
            == cpu_costs(vector, work, gemms, "bf16", base).to_frame()["kernels"].iloc[0])


def quantizing_stack(quantize: float, gemm: float):
    """pytorch-eager with numpy's int8 path: `quantize_int8` and `gemm_int8` given."""
    base = builtin_stacks()["pytorch-eager"]
    return dataclasses.replace(base, cpu_efficiency={"quantize_int8": quantize,
                                                     "gemm_int8": gemm})


@pytest.mark.parametrize(("m", "k", "n"), [(1, 2048, 1024), (8, 1024, 1024), (200, 1500, 700)])
def test_int8_quantise_passes_closed_form(m, k, n):
    # A stack that quantises per call (numpy's int8 kernels): compute = the integer loop's MACs
    # (no micro-tile: 2 m k n FLOPs at the gemm figure of the fp32 vector peak, whatever m)
    # + the quantisation of both fp32 operands, (m k + k n) x 4 B at the quantize figure of
    # the DRAM bandwidth; no packing and no weight cast beside it.
    profile = load_profile("xeon-8380")
    stack = quantizing_stack(quantize=0.03, gemm=0.015)
    row = costs(profile, m, k, n, "int8", stack)
    peak = profile.compute.vector_peak_flops_per_s["fp32"]
    assert "int8" not in profile.compute.vector_peak_flops_per_s  # else the peak differs
    bandwidth = profile.offchip_memory.bandwidth_bytes_per_s
    expected_s = 2 * m * k * n / (peak * 0.015) + 4 * (m * k + k * n) / (bandwidth * 0.03)
    assert row["compute_s"] == pytest.approx(expected_s, rel=1e-12)
    assert row["kernels"] == 1  # no separate cast op


def test_int8_without_a_quantize_figure_keeps_the_blas_model():
    # A stack without `quantize_int8` (every built-in) is costed as before: packing, casts and
    # the micro-tile, so M = 1 of K N = 1024^2 costs more MACs than its useful ones.
    profile = load_profile("xeon-8380")
    plain = costs(profile, 1, 1024, 1024, "int8")
    stack = quantizing_stack(quantize=1.0, gemm=1.0)
    quantised = costs(profile, 1, 1024, 1024, "int8", stack)
    assert plain["compute_s"] != pytest.approx(quantised["compute_s"], rel=1e-3)
    base = builtin_stacks()["pytorch-eager"]
    assert base.cpu_factor("quantize", "int8") is None
