"""Systolic (TPU), FPGA and NPU class models: the SCALE-Sim fold formula against a naive fold
loop and a cycle-stepped PE-grid emulator, buffer/DRAM traffic and stalls, DSP packing, NPU
host fallback, and properties (non-negative, monotone in batch, power within TDP)."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from accelsim.devices import registry
from accelsim.devices.core import finish, kernel_groups
from accelsim.devices.energy import static_power_w
from accelsim.devices.fpga import model as fpga
from accelsim.devices.mapping import DOUBLE_BUFFERED_RESIDENT_FRACTION, refetch_bytes
from accelsim.devices.systolic import model as systolic
from accelsim.devices.systolic.emulator import emulate_gemm
from accelsim.profiles.device_types import DeviceProfile
from accelsim.profiles.devices import load_all_profiles, load_profile
from accelsim.profiles.stack_choice import default_stack, resolve_software
from accelsim.workload.graph import Graph, GraphBuilder
from accelsim.workload.work import gemms_for, work_table
from accelsim.workload.zoo import build_model

# the NPU's through its record, which gives it the stand-in host CPU and its class model
MODELS = {"tpu": systolic.systolic_costs, "fpga": fpga.fpga_costs, "npu": registry.get("npu").cost}


def naive_cycles(m: int, n: int, k: int, rows: int, cols: int, dataflow: str) -> int:
    """Enumerate the folds one by one, each charged in full (SCALE-Sim)."""
    sr, sc, t = {"ws": (k, n, m), "is": (k, m, n), "os": (m, n, k)}[dataflow]
    total = 0
    for _r0 in range(0, sr, rows):
        for _c0 in range(0, sc, cols):
            preload = rows if dataflow in ("ws", "is") else 0
            total += preload + rows + cols + t - 2
    return total - 1


def run(profile: DeviceProfile, graph: Graph, batch: int, precision: str,
        software: str = "eager", mode: str = "infer") -> pd.DataFrame:
    work = work_table(graph, batch, precision, mode)
    stack = resolve_software(software, profile.device_class)[0]  # as `estimate` does
    costs = MODELS[profile.device_class](profile, work, gemms_for(graph, batch), precision,
                                         stack)
    return finish(work, costs, profile.power.tdp_w, static_power_w(profile))


def with_(profile: DeviceProfile, section: str, **changes: object) -> DeviceProfile:
    part = dataclasses.replace(getattr(profile, section), **changes)
    return dataclasses.replace(profile, **{section: part})


def one_gemm(m: int, n: int, k: int) -> tuple[pd.DataFrame, pd.DataFrame]:
    work = pd.DataFrame({"name": ["g"], "op": ["matmul"], "phase": ["forward"], "matmul": [True],
                         "flops": [2.0 * m * n * k], "read_bytes": [float(m * k + k * n)],
                         "write_bytes": [float(m * n)], "weight_bytes": [float(k * n)],
                         "op_index": [0]})
    gemms = pd.DataFrame({"op_index": [0], "m": [m], "n": [n], "k": [k], "count": [1]})
    return work, gemms


# ---- the fold formula -------------------------------------------------------------------

@settings(max_examples=60, deadline=None)
@given(m=st.integers(1, 300), n=st.integers(1, 300), k=st.integers(1, 300),
       rows=st.integers(1, 40), cols=st.integers(1, 40), flow=st.sampled_from(["ws", "is", "os"]))
def test_fold_formula_matches_naive_fold_loop(m: int, n: int, k: int, rows: int, cols: int,
                                              flow: str) -> None:
    assert systolic.gemm_cycles(m, n, k, rows, cols, flow) == naive_cycles(m, n, k, rows, cols,
                                                                           flow)


def test_partial_fold_is_charged_in_full() -> None:
    full = systolic.gemm_cycles(64, 32, 256, 128, 128, "ws")
    partial = systolic.gemm_cycles(64, 32, 129, 128, 128, "ws")  # one row of the 2nd fold used
    assert partial == full == 2 * (2 * 128 + 128 + 64 - 2) - 1


def test_os_vs_ws_cycle_counts() -> None:
    # Tall GEMM (large M, small K): ws streams M once; os folds M over the rows.
    assert systolic.gemm_cycles(1000, 16, 16, 16, 16, "ws") == 2 * 16 + 16 + 1000 - 2 - 1
    assert systolic.gemm_cycles(1000, 16, 16, 16, 16, "os") == 63 * (16 + 16 + 16 - 2) - 1
    # Deep GEMM (small M, large K): os wins.
    assert systolic.gemm_cycles(16, 16, 1000, 16, 16, "os") == 16 + 16 + 1000 - 2 - 1
    assert systolic.gemm_cycles(16, 16, 1000, 16, 16, "ws") == 63 * (2 * 16 + 16 + 16 - 2) - 1


def test_arrays_share_the_folds() -> None:
    per_fold = 2 * 128 + 128 + 50 - 2
    folds = math.ceil(1000 / 128) * math.ceil(700 / 128)  # 8 x 6 = 48
    got = systolic.gemm_cycles(50, 700, 1000, 128, 128, "ws", count=3, arrays=8)
    assert got == math.ceil(3 * folds / 8) * per_fold - 1


def test_dataflow_selected_by_profile() -> None:
    tpu = load_profile("tpu-v4")
    work, gemms = one_gemm(1024, 1024, 8192)
    jax = default_stack("tpu")
    ws = systolic.systolic_costs(tpu, work, gemms, "bf16", jax).to_frame()["compute_s"].iloc[0]
    os_tpu = dataclasses.replace(tpu, compute=dataclasses.replace(tpu.compute, dataflow="os"))
    os_ = systolic.systolic_costs(os_tpu, work, gemms, "bf16", jax).to_frame()["compute_s"].iloc[0]
    assert systolic.dataflow_of(tpu) == "ws" and systolic.dataflow_of(os_tpu) == "os"
    clock_hz = tpu.compute.clock_hz
    # 512 folds over 8 MXUs (ws) vs 64 folds over 8 MXUs (os)
    assert ws * clock_hz == pytest.approx(64 * (2 * 128 + 128 + 1024 - 2) - 1)
    assert os_ * clock_hz == pytest.approx(8 * (128 + 128 + 8192 - 2) - 1)
    assert os_ < ws  # K = 8192 deep: output stationary pays the fill far less often


# ---- the emulator -----------------------------------------------------------------------

SHAPES = [(5, 7, 9, 4, 4), (1, 1, 1, 2, 3), (16, 8, 12, 4, 8), (10, 3, 20, 8, 2),
          (33, 17, 40, 8, 8)]


@pytest.mark.parametrize("flow", ["ws", "is", "os"])
@pytest.mark.parametrize("m,n,k,rows,cols", SHAPES)
def test_emulator_int8_product_and_cycles(flow: str, m: int, n: int, k: int, rows: int,
                                          cols: int) -> None:
    rng = np.random.default_rng(m * 1000 + n * 10 + k)
    a = rng.integers(-128, 128, (m, k), dtype=np.int8)
    b = rng.integers(-128, 128, (k, n), dtype=np.int8)
    c, cycles = emulate_gemm(a, b, rows, cols, flow)
    assert c.dtype == np.int32
    np.testing.assert_array_equal(c, a.astype(np.int32) @ b.astype(np.int32))
    assert cycles == systolic.gemm_cycles(m, n, k, rows, cols, flow)


@pytest.mark.parametrize("flow", ["ws", "is", "os"])
def test_emulator_float_product(flow: str) -> None:
    rng = np.random.default_rng(7)
    a, b = rng.standard_normal((13, 21)), rng.standard_normal((21, 6))
    c, cycles = emulate_gemm(a, b, 4, 5, flow)
    np.testing.assert_allclose(c, a @ b, rtol=1e-12, atol=1e-12)
    assert cycles == systolic.gemm_cycles(13, 6, 21, 4, 5, flow)


# ---- buffer traffic and stalls ----------------------------------------------------------

def test_small_unified_buffer_means_more_dram_bytes() -> None:
    tpu = load_profile("tpu-v1")
    graph = build_model("resnet18")
    big = run(tpu, graph, 8, "int8")
    small = run(with_(tpu, "onchip_memory", unified_buffer_bytes=64 * 2**10,
                      accumulator_bytes=64 * 2**10), graph, 8, "int8")
    assert small["dram_bytes"].sum() > 1.5 * big["dram_bytes"].sum()
    assert (small["dram_bytes"] >= big["dram_bytes"] - 1e-6).all()


def test_dram_stall_appears_when_bandwidth_is_cut() -> None:
    tpu = load_profile("tpu-v4")
    work, gemms = one_gemm(4096, 4096, 4096)
    fast = systolic.systolic_costs(tpu, work, gemms, "bf16", default_stack("tpu")).to_frame()
    compute_cycles = fast["compute_s"].iloc[0] * tpu.compute.clock_hz
    assert fast["cycles"].iloc[0] == pytest.approx(compute_cycles)  # no stall at 1.2 TB/s
    slow_tpu = with_(tpu, "offchip_memory", bandwidth_bytes_per_s=1e9)
    slow = systolic.systolic_costs(slow_tpu, work, gemms, "bf16", default_stack("tpu")).to_frame()
    assert slow["cycles"].iloc[0] > 2 * compute_cycles
    assert finish(work, slow, tpu.power.tdp_w, 0.0)["bound"].iloc[0] == "memory"


# ---- FPGA -------------------------------------------------------------------------------

def test_fpga_int8_doubles_int16_where_dsp_packing_says_so() -> None:
    card = load_profile("alveo-u250")
    assert card.compute.macs_per_dsp == {"int8": 2, "int16": 1}
    assert fpga.dsp_macs_per_s(card, "int8") == 2 * fpga.dsp_macs_per_s(card, "int16")
    fabric = dataclasses.replace(card, compute=dataclasses.replace(card.compute, overlay=None))
    work, gemms = one_gemm(2048, 2048, 2048)
    t8 = fpga.fpga_costs(fabric, work, gemms, "int8", default_stack("fpga"))["compute_s"][0]
    t16 = fpga.fpga_costs(fabric, work, gemms, "fp16", default_stack("fpga"))["compute_s"][0]
    assert t16 == pytest.approx(2 * t8, rel=1e-6)


def test_fpga_overlay_quantises_the_gemm() -> None:
    ov = load_profile("alveo-u250").compute.overlay
    assert fpga.mapping_efficiency(ov.pixel_parallelism * ov.cores, ov.output_channel_parallelism,
                                   ov.input_channel_parallelism, ov)[()] == 1.0
    # One input channel more than the engine's parallelism needs a second, nearly empty pass.
    eff = fpga.mapping_efficiency(ov.pixel_parallelism * ov.cores, ov.output_channel_parallelism,
                                  ov.input_channel_parallelism + 1, ov)
    assert eff == pytest.approx((ov.input_channel_parallelism + 1)
                                / (2 * ov.input_channel_parallelism))


# ---- NPU --------------------------------------------------------------------------------

def gelu_mlp() -> Graph:
    g = GraphBuilder("gelu_mlp")
    x = g.input("x", (256,))
    x = g.gelu(g.linear(x, out_features=256, name="fc1"), name="act")
    g.linear(x, out_features=256, name="fc2")
    return g.build()


def test_refetch_blocks_the_smaller_operand() -> None:
    cap, half = 8e6, DOUBLE_BUFFERED_RESIDENT_FRACTION
    acts, weights = np.array([3e6, 20e6, 30e6, 30e6]), np.array([30e6, 3e6, 10e6, 50e6])
    extra = refetch_bytes(acts, weights, cap, half)
    # One operand fits half the buffer: it stays, the other streams once.
    assert extra[:2].tolist() == [0.0, 0.0]
    # Neither fits: the smaller is cut into 4 MB blocks, the larger re-streamed per extra block.
    assert extra[2] == 30e6 * (math.ceil(10 / 4) - 1)
    assert extra[3] == 50e6 * (math.ceil(30 / 4) - 1)
    assert (refetch_bytes(weights, acts, cap, half) == extra).all()
    assert (refetch_bytes(acts, weights, None, half) == 0.0).all()  # capacity unpublished
    # Everything fits the buffer: nothing extra, whatever the split.
    assert refetch_bytes(np.array([5e6]), np.array([3e6]), cap, half)[0] == 0.0


def test_unsupported_op_runs_on_host_and_pays_transfers() -> None:
    edge = load_profile("edge-tpu")
    assert "gelu" not in edge.compute.supported_ops
    graph = gelu_mlp()
    out = run(edge, graph, 4, "int8")
    act = out.set_index("name").loc["act"]
    assert act["unit"] == "host" and (out["unit"] == "npu").sum() == 2
    moved = act["read_bytes"] - act["weight_bytes"] + act["write_bytes"]
    assert act["overhead_s"] > moved / edge.host_link.bandwidth_bytes_per_s
    on_chip = with_(edge, "compute", supported_ops=(*edge.compute.supported_ops, "gelu"))
    native = run(on_chip, graph, 4, "int8").set_index("name").loc["act"]
    assert native["unit"] == "fused" and native["time_s"] < act["time_s"]  # fused into fc1


def test_npu_rejects_a_precision_it_cannot_run() -> None:
    from accelsim.errors import AccelsimError

    with pytest.raises(AccelsimError, match="edge-tpu cannot run bf16"):
        run(load_profile("edge-tpu"), gelu_mlp(), 1, "bf16")


# ---- properties -------------------------------------------------------------------------

CASES = [("tpu-v1", "int8"), ("tpu-v3", "bf16"), ("alveo-u280", "int8"), ("edge-tpu", "int8"),
         ("jetson-orin", "int8"), ("ascend-310", "fp16")]
NUMERIC = ["compute_s", "memory_s", "overhead_s", "dynamic_energy_j", "dram_bytes",
           "onchip_bytes", "time_s", "energy_j"]


@settings(max_examples=20, deadline=None)
@given(case=st.sampled_from(CASES), batch=st.integers(1, 64), extra=st.integers(1, 64))
def test_costs_nonnegative_and_grow_with_batch(case: tuple[str, str], batch: int,
                                               extra: int) -> None:
    profile, precision = load_profile(case[0]), case[1]
    graph = gelu_mlp()
    small = run(profile, graph, batch, precision)
    large = run(profile, graph, batch + extra, precision)
    assert (small[NUMERIC].to_numpy() >= 0).all()
    assert (large["time_s"].to_numpy() >= small["time_s"].to_numpy() * (1 - 1e-12)).all()
    assert (large["dram_bytes"].to_numpy() >= small["dram_bytes"].to_numpy() - 1e-6).all()


def _runnable(profile: DeviceProfile) -> str:
    if profile.device_class == "fpga":
        return "int8"
    # a device without a matrix engine (the Jetson Nano's CUDA cores) runs on its vector path
    precisions = (profile.supported_precisions(tensor=True)
                  or profile.supported_precisions(tensor=False))
    return "int8" if "int8" in precisions else precisions[0]


def test_busy_device_power_within_tdp() -> None:
    graph = build_model("resnet18")
    profiles = [p for p in load_all_profiles().values() if p.device_class in MODELS]
    assert {p.device_class for p in profiles} == set(MODELS)
    for profile in profiles:
        out = run(profile, graph, 16, _runnable(profile), mode="train")
        # a fused row spends its energy within its producer's time: power is per kernel
        out = out.assign(kernel=kernel_groups(out, out))
        if "unit" in out:  # the host's share of an NPU fallback is not the device's power
            out = out[out["unit"] != "host"]
        kernels = out.groupby("kernel")[["energy_j", "time_s"]].sum()
        busy = kernels[kernels["time_s"] > 0]
        power_w = busy["energy_j"] / busy["time_s"]
        assert (power_w <= profile.power.tdp_w * (1 + 1e-9)).all(), profile.name
        assert out["energy_j"].sum() / out["time_s"].sum() <= profile.power.tdp_w * (1 + 1e-9)


def test_fpga_fp8_runs_one_mac_per_dsp():
    """fp8 cannot use the two-int8-MACs-per-DSP packing: every matmul row of a ZCU104 fp8 run
    stays under DSP slices x 1 MAC x 2 FLOP x clock (the board's published resources), and
    the fp8 run is slower than its int8 run."""
    from accelsim.profiles.devices import load_profile
    from accelsim.run import run_simulation
    from accelsim.sim.knobs import make_config

    c = load_profile("zcu104").compute
    ceiling = c.dsp_slices * 1 * 2 * c.clock_hz
    rec = run_simulation(make_config("resnet50", "zcu104", precision="fp8", batch=4)).record
    rows = [r for r in rec["layers"] if r["op"] in ("conv2d", "linear") and r["time_s"] > 0]
    assert rows and max(r["flops"] / r["time_s"] for r in rows) <= ceiling * (1 + 1e-9)
    int8 = run_simulation(make_config("resnet50", "zcu104", precision="int8", batch=4)).record
    assert rec["latency_s"] > int8["latency_s"]
