"""GEMM efficiency from shape on the GPU class model (accelsim/devices/gpu/gemm.py) against
closed forms worked by hand: K-depth pipeline fill, occupancy, Winograd multiply counts, the
tf32 tensor-core path."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from accelsim.devices.estimate import class_model
from accelsim.devices.gpu.gemm import ctas_per_sm, gemm_factors, winograd_gemms
from accelsim.profiles.devices import load_profile
from accelsim.profiles.efficiency import load_efficiency
from accelsim.profiles.stack_choice import resolve_software
from accelsim.workload.work import gemms_for
from accelsim.workload.zoo import build_model

EFF = load_efficiency("gpu")
KIB = 1024

EAGER = resolve_software("pytorch-eager", "gpu")[0]


def gemm_work(m: int, n: int, k: int, width: int, conv_hw: tuple[int, int] = (0, 0)
              ) -> tuple[pd.DataFrame, pd.DataFrame]:
    """One forward GEMM row (no weights) and its gemms table."""
    work = pd.DataFrame({
        "name": ["g"], "op": ["conv2d" if conv_hw[0] else "matmul"], "phase": ["forward"],
        "matmul": [True], "flops": [2.0 * m * n * k],
        "read_bytes": [float(m * k + k * n) * width], "write_bytes": [float(m * n) * width],
        "weight_bytes": [0.0], "op_index": [0]})
    gemms = pd.DataFrame({"op_index": [0], "m": [m], "n": [n], "k": [k], "count": [1],
                          "conv3x3_h": [conv_hw[0]], "conv3x3_w": [conv_hw[1]]})
    return work, gemms


def compute_s(device: str, work: pd.DataFrame, gemms: pd.DataFrame, precision: str) -> float:
    costs = class_model("gpu")(load_profile(device), work, gemms, precision, EAGER).to_frame()
    return float(costs["compute_s"].iloc[0])


def test_occupancy_from_shared_memory_and_registers_by_hand() -> None:
    v100 = load_profile("v100")  # 96 KiB shared memory, 256 KiB registers per SM
    assert v100.onchip_memory.shared_mem_per_sm_bytes == 96 * KIB
    assert v100.onchip_memory.register_file_per_sm_bytes == 256 * KIB
    stages = EFF["assumed.pipeline_stages"]
    regs = EFF["assumed.register_bytes_per_accumulator_byte"]
    assert (stages, regs) == (2, 2)  # the hand figures below assume these
    # fp32 SIMT 128x128x8: smem 2*8*256*4 = 16 KiB -> 6; registers 128*128*4*2 = 128 KiB -> 2.
    assert ctas_per_sm(v100, 128, 128, 8, 4, EFF) == 2
    # fp16 tensor-op 256x128x32: smem 2*32*384*2 = 48 KiB -> 2; registers 256 KiB -> 1.
    assert ctas_per_sm(v100, 256, 128, 32, 2, EFF) == 1
    # a100 publishes no register file: one CTA per SM, no hiding assumed.
    assert load_profile("a100").onchip_memory.register_file_per_sm_bytes is None
    assert ctas_per_sm(load_profile("a100"), 128, 128, 8, 4, EFF) == 1


def test_efficiency_rises_with_k_to_the_class_factor() -> None:
    a100 = load_profile("a100")
    tile_m, tile_n = EFF["assumed.cta_tile.fp16"]
    fill_k = EFF["assumed.cta_tile_k.fp16"] * EFF["assumed.pipeline_fill_k_steps"]  # 1 CTA/SM
    m, n = tile_m, tile_n * a100.compute.sm_count  # exactly one wave of tiles, no split-K
    peak = a100.peak_flops_per_s("fp16") * EFF["fitted.tensor_core_efficiency"]
    achieved = []
    for k in (32, 64, 128, 256, 1024, 4096, 65536):
        t = compute_s("a100", *gemm_work(m, n, k, 2), "fp16")
        achieved.append(2.0 * m * n * k / t)
        if k < EFF["assumed.split_k_min_k"] * 2:  # no split-K: closed form k / (k + fill)
            assert achieved[-1] == pytest.approx(peak * k / (k + fill_k), rel=1e-9)
    assert all(b > a for a, b in zip(achieved, achieved[1:], strict=False))
    assert achieved[-1] == pytest.approx(peak, rel=0.01)
    assert achieved[-1] <= peak


def test_winograd_multiplies_by_hand() -> None:
    # A 3x3 unit-stride conv, N=2, 56x56 output, C=K=64: direct 9*C MACs per output.
    direct = 2 * 56 * 56 * 64 * 64 * 9
    g = pd.DataFrame({"op_index": [0], "m": [2 * 56 * 56], "n": [64], "k": [9 * 64],
                      "count": [1], "conv3x3_h": [56], "conv3x3_w": [56]})
    for tile, ratio in ((4, 4.0), (2, 2.25)):  # F(4x4,3x3): 36/16 per output; F(2x2): 16/4
        w, mask = winograd_gemms(g, tile)
        assert mask.tolist() == [True]
        macs = float((w["m"] * w["n"] * w["k"] * w["count"])[0])
        assert direct / macs == pytest.approx(ratio, rel=1e-12)
    # A 7x7 output at t = 4 pads to 2x2 tiles of 4x4: 36 * 4 tiles / (9 * 49) of direct.
    g7 = g.assign(m=[2 * 49], conv3x3_h=[7], conv3x3_w=[7])
    w7, _ = winograd_gemms(g7, 4)
    assert float((w7["m"] * w7["k"] * w7["count"])[0]) == 2 * 4 * 36 * 64


def test_resnet50_has_thirteen_unit_stride_3x3_convs() -> None:
    # ResNet-50 v1.5 (He et al. 2016, the stride on the 3x3): 16 bottleneck 3x3 convs, the
    # first of stages 2, 3 and 4 at stride 2.
    g = gemms_for(build_model("resnet50"), 1)
    assert int((g["conv3x3_h"] > 0).sum()) == 13


def test_fp32_winograd_conv_runs_a_quarter_of_the_multiplies() -> None:
    v100 = load_profile("v100")
    n, hw, c = 32, 56, 128
    work, gemms = gemm_work(n * hw * hw, c, 9 * c, 4, (hw, hw))
    peak = v100.peak_flops_per_s("fp32", tensor=False)
    f = gemm_factors(work, gemms, v100, "fp32", "cuda_core", EFF, 4, peak,
                     v100.offchip_memory.bandwidth_bytes_per_s).to_frame()
    assert f["winograd"].tolist() == [True]
    # By hand: waves over the 80 SMs; 2 CTAs per SM (above) hide half the fill: 8 * 2 / 2.
    slots, fill_k = v100.compute.sm_count, 8 * 2 / 2
    direct_tiles = n * hw * hw / 128 * 1  # 784 tiles of 128x128
    wino_tiles = n * (hw // 4) ** 2 / 128 * 36  # 49 x 36 batched tiles
    spent = math.ceil(wino_tiles / slots) * slots * 128 * 128 * (c + fill_k)
    assert f["quantization"].iloc[0] == pytest.approx(spent / (n * hw * hw * c * 9 * c))
    direct_spent = math.ceil(direct_tiles / slots) * slots * 128 * 128 * (9 * c + fill_k)
    # 1764 Winograd tiles in 23 waves of 80, 784 direct tiles in 10 waves.
    assert spent / direct_spent == pytest.approx(23 * 136 / (10 * 1160))
    # Its transforms' DRAM round trips: 2 x (V + U + M) elements at 4 bytes.
    tiles = n * (hw // 4) ** 2
    assert f["transform_bytes"].iloc[0] == pytest.approx(
        2 * 4 * 36 * (tiles * c + c * c + tiles * c))


def test_no_winograd_on_tensor_cores_or_other_shapes() -> None:
    v100 = load_profile("v100")
    work, gemms = gemm_work(32 * 56 * 56, 128, 9 * 128, 2, (56, 56))
    f = gemm_factors(work, gemms, v100, "fp16", "tensor_core", EFF, 2, 1e14, 9e11).to_frame()
    assert not f["winograd"].any() and (f["transform_bytes"] == 0).all()
    work, gemms = gemm_work(32 * 56 * 56, 128, 9 * 128, 4)  # not flagged 3x3 unit stride
    f = gemm_factors(work, gemms, v100, "fp32", "cuda_core", EFF, 4, 1.5e13, 9e11).to_frame()
    assert not f["winograd"].any()


def test_tf32_matmul_on_a100_runs_at_the_tf32_tensor_core_peak() -> None:
    a100 = load_profile("a100")
    tf32_peak = 156e12  # A100 datasheet dense TF32 (hw_profiles/devices/a100.toml)
    assert a100.compute.matrix_peak_flops_per_s["tf32"] == pytest.approx(tf32_peak)
    tile_m, tile_n = EFF["assumed.cta_tile.tf32"]
    m, n, k = tile_m, tile_n * a100.compute.sm_count, 8192
    work, gemms = gemm_work(m, n, k, 4)
    costs = class_model("gpu")(a100, work, gemms, "tf32", EAGER).to_frame()
    assert costs["unit"].iloc[0] == "tensor_core"
    fill_k = EFF["assumed.cta_tile_k.tf32"] * EFF["assumed.pipeline_fill_k_steps"]
    expected = 2.0 * m * n * (k + fill_k) / (tf32_peak * EFF["fitted.tensor_core_efficiency"])
    assert float(costs["compute_s"].iloc[0]) == pytest.approx(expected, rel=1e-9)


def test_fp32_resnet50_on_v100_picks_winograd_only_where_faster() -> None:
    from accelsim.workload.work import work_table
    v100 = load_profile("v100")
    graph = build_model("resnet50")
    work, gemms = work_table(graph, 64, "fp32"), gemms_for(graph, 64)
    peak, bw = v100.peak_flops_per_s("fp32", tensor=False), 9e11
    f = gemm_factors(work, gemms, v100, "fp32", "cuda_core", EFF, 4, peak, bw).to_frame()
    no_wino = {k: v for k, v in EFF.items() if not k.startswith("assumed.winograd")}
    d = gemm_factors(work, gemms, v100, "fp32", "cuda_core", no_wino, 4, peak, bw).to_frame()
    picked = f["winograd"].to_numpy()
    assert 0 < picked.sum() <= 13
    assert np.all(f["quantization"][picked] < d["quantization"][picked])



def test_publishing_a_register_file_never_slows_a_gemm() -> None:
    """Occupancy hides pipeline fill; it is no reason for a GEMM to run slower: the same V100
    without its register-file figure (one CTA per SM) spends at least as many MACs."""
    import dataclasses

    v100 = load_profile("v100")
    bare = dataclasses.replace(v100, onchip_memory=dataclasses.replace(
        v100.onchip_memory, register_file_per_sm_bytes=None))
    for m, n, k in ((128 * 80, 128, 256), (64, 4096, 4096), (3136 * 8, 64, 576)):
        work, gemms = gemm_work(m, n, k, 4)
        peak = v100.peak_flops_per_s("fp32", tensor=False)
        bw = v100.offchip_memory.bandwidth_bytes_per_s
        with_regs = gemm_factors(work, gemms, v100, "fp32", "cuda_core", EFF, 4, peak,
                                 bw).to_frame()
        without = gemm_factors(work, gemms, bare, "fp32", "cuda_core", EFF, 4, peak, bw).to_frame()
        assert (with_regs["quantization"].iloc[0]
                <= without["quantization"].iloc[0] * (1 + 1e-12))
