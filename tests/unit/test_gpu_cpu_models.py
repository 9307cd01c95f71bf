"""GPU and CPU class models and the energy module against closed forms and properties."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from accelsim.devices.core import finish
from accelsim.devices.cpu import model as cpu
from accelsim.devices.energy import die_energy_scale, energy_constants, static_power_w
from accelsim.devices.estimate import class_model, estimate
from accelsim.devices.mapping import forward_dims, refetch_bytes, row_gemms
from accelsim.devices.tiling import gemm_quantization, row_gemm_factors
from accelsim.errors import AccelsimError
from accelsim.formats import get_format
from accelsim.profiles.devices import load_all_profiles, load_profile
from accelsim.profiles.efficiency import load_efficiency
from accelsim.profiles.software import load_stack
from accelsim.profiles.stack_choice import resolve_software
from accelsim.workload.zoo import build_model

PROFILES = load_all_profiles()
GPUS = [n for n, p in PROFILES.items() if p.device_class == "gpu"]
CPUS = [n for n, p in PROFILES.items() if p.device_class == "cpu"]
EFF = load_efficiency("gpu")


def gemm_case(m: int, n: int, k: int, precision: str) -> tuple[pd.DataFrame, pd.DataFrame]:
    """A work table of one forward GEMM (no weights) and its gemms table."""
    width = get_format(precision).bytes_per_element
    work = pd.DataFrame({
        "name": ["g"], "op": ["matmul"], "phase": ["forward"], "matmul": [True],
        "flops": [2.0 * m * n * k], "read_bytes": [float(m * k + k * n) * width],
        "write_bytes": [float(m * n) * width], "weight_bytes": [0.0], "op_index": [0],
    })
    gemms = pd.DataFrame({"op_index": [0], "m": [m], "n": [n], "k": [k], "count": [1]})
    return work, gemms


def stream_case(nbytes: float) -> tuple[pd.DataFrame, pd.DataFrame]:
    """A work table of one relu reading and writing nbytes / 2 each."""
    work = pd.DataFrame({
        "name": ["r"], "op": ["relu"], "phase": ["forward"], "matmul": [False],
        "flops": [0.0], "read_bytes": [nbytes / 2], "write_bytes": [nbytes / 2],
        "weight_bytes": [0.0], "op_index": [0],
    })
    return work, pd.DataFrame(columns=["op_index", "m", "n", "k", "count"])


def gpu_row(profile_name: str, work: pd.DataFrame, gemms: pd.DataFrame, precision: str,
            software: str = "eager") -> pd.Series:
    profile = load_profile(profile_name)
    costs = class_model("gpu")(profile, work, gemms, precision,
                               resolve_software(software, "gpu")[0]).to_frame()
    return finish(work, costs, profile.power.tdp_w, static_power_w(profile)).iloc[0]


def test_big_square_gemm_approaches_efficiency_times_peak() -> None:
    a100 = load_profile("a100")
    row = gpu_row("a100", *gemm_case(8192, 8192, 8192, "fp16"), "fp16")
    peak = a100.peak_flops_per_s("fp16") * EFF["fitted.tensor_core_efficiency"]
    # Each CTA tile's pipeline fill adds its K depth (a100: one CTA per SM, nothing hides it).
    fill_k = EFF["assumed.cta_tile_k.fp16"] * EFF["assumed.pipeline_fill_k_steps"]
    assert row["bound"] == "compute"
    assert row["flops"] / row["time_s"] == pytest.approx(peak * 8192 / (8192 + fill_k),
                                                         rel=0.005)


def test_elementwise_time_is_bytes_over_bandwidth_plus_overhead() -> None:
    nbytes = 4e9
    row = gpu_row("v100", *stream_case(nbytes), "fp16")
    bw = load_profile("v100").offchip_memory.bandwidth_bytes_per_s
    expected = nbytes / (bw * EFF["fitted.dram_bandwidth_efficiency"]) + EFF[
        "assumed.kernel_launch_s"]  # a 4 GB stream hides the host's framework time
    assert row["time_s"] == pytest.approx(expected, rel=1e-9)
    assert row["bound"] == "memory"


def test_small_elementwise_op_is_host_bound_in_eager() -> None:
    row = gpu_row("v100", *stream_case(1e3), "fp16")
    host_s = load_stack("pytorch-eager").per_kernel_s["gpu"]  # the eager stack's, as read
    assert row["time_s"] == pytest.approx(host_s + EFF["assumed.kernel_launch_s"], rel=1e-3)


@pytest.mark.parametrize("name", ["v100", "a100", "h100"])
def test_one_tile_more_than_sms_takes_two_waves(name: str) -> None:
    sms = load_profile(name).compute.sm_count
    tile_m, tile_n = EFF["assumed.cta_tile.fp16"]
    k = 64  # shallower than a split-K slice: no split
    full = gpu_row(name, *gemm_case(tile_m, tile_n * sms, k, "fp16"), "fp16")
    plus_one = gpu_row(name, *gemm_case(tile_m, tile_n * (sms + 1), k, "fp16"), "fp16")
    assert plus_one["compute_s"] / full["compute_s"] == pytest.approx(2.0, rel=1e-9)


def test_tensor_vs_cuda_core_ratio_is_the_peak_ratio() -> None:
    a100 = load_profile("a100")
    size = 256 * 108  # whole tiles and whole waves at both tile shapes
    tensor = gpu_row("a100", *gemm_case(size, 1024, 4096, "fp16"), "fp16")
    cuda = gpu_row("a100", *gemm_case(size, 1024, 4096, "fp32"), "fp32")
    eff_ratio = EFF["fitted.tensor_core_efficiency"] / EFF["fitted.cuda_core_efficiency"]
    peak_ratio = a100.peak_flops_per_s("fp16") / a100.peak_flops_per_s("fp32", tensor=False)
    # Pipeline fill adds each tile's fill depth to K (a100: one CTA per SM, nothing hides it).
    fill = {p: EFF[f"assumed.cta_tile_k.{p}"] * EFF["assumed.pipeline_fill_k_steps"]
            for p in ("fp16", "fp32")}
    eff_ratio *= (4096 + fill["fp32"]) / (4096 + fill["fp16"])
    assert cuda["compute_s"] / tensor["compute_s"] == pytest.approx(peak_ratio * eff_ratio,
                                                                    rel=1e-6)
    assert tensor["unit"] == "tensor_core" and cuda["unit"] == "cuda_core"


@pytest.mark.parametrize("mode", ["infer", "train"])
def test_compiled_is_not_slower_than_eager(mode: str) -> None:
    graph = build_model("resnet50")
    for batch in (1, 64):
        eager = estimate(graph, load_profile("a100"), batch, "fp16", mode, "eager", "momentum")
        compiled = estimate(graph, load_profile("a100"), batch, "fp16", mode, "compiled",
                            "momentum")
        assert compiled.step_time_s <= eager.step_time_s
        assert (compiled.layers["unit"] == "fused").any()


@pytest.mark.parametrize(("name", "precision"), [("v100", "bf16"), ("v100", "tf32"),
                                                 ("a100", "fp8"), ("t4", "bf16")])
def test_unsupported_precision_raises(name: str, precision: str) -> None:
    with pytest.raises(AccelsimError, match=precision):
        estimate(build_model("mlp"), load_profile(name), 4, precision, "infer")


@pytest.mark.parametrize("name", GPUS + CPUS)
def test_fully_busy_device_stays_within_tdp(name: str) -> None:
    profile = PROFILES[name]
    precisions = [*profile.compute.matrix_peak_flops_per_s,
                  *profile.compute.vector_peak_flops_per_s]
    for precision in dict.fromkeys(precisions):
        work, gemms = gemm_case(16384, 16384, 8192, precision)
        stream, _ = stream_case(8e9)
        both = pd.concat([work, stream], ignore_index=True)
        eager = resolve_software("eager", profile.device_class)[0]
        costs = class_model(profile.device_class)(profile, both, gemms, precision, eager).to_frame()
        out = finish(both, costs, profile.power.tdp_w, static_power_w(profile))
        power_w = out["energy_j"].to_numpy() / out["time_s"].to_numpy()
        assert (power_w <= profile.power.tdp_w * (1 + 1e-9)).all()
        # A GPU with a process node takes V100's energy per op scaled by node (issue 8 item 3),
        # so a card whose load outruns its board limit (T4, L4) may be power-bound; a device
        # whose factor comes from its own TDP, and V100 itself, never is.
        if not profile.process_node_nm or name == "v100":
            assert not (out["bound"] == "power").any(), (name, precision)


def test_energy_constants_and_scales() -> None:
    c = energy_constants()
    assert c.mac_j["fp16"] == pytest.approx(2.0e-12)
    assert c.dram_j_per_byte["hbm2e"] == pytest.approx(6.0e-12 * 8)
    # V100 (the reference of dvfs.toml): its sustained tensor-core load (fp16 peak x the
    # fitted efficiency) plus a 1 MiB-array L2 stream at full DRAM bandwidth, HBM2 at peak
    # and static power fill its 300 W exactly; other GPUs scale it by process node.
    busy = EFF["fitted.tensor_core_efficiency"]
    headroom_w = 300.0 * (1 - c.static_fraction_of_tdp) - 900e9 * c.dram_j_per_byte["hbm2"]
    die_45nm_w = 125e12 / 2 * c.mac_j["fp16"] * busy + 900e9 * 100e-12 / 8
    v100 = die_energy_scale(load_profile("v100"))
    assert v100 == pytest.approx(headroom_w / die_45nm_w, rel=1e-6)
    assert die_energy_scale(load_profile("t4")) == pytest.approx(v100)  # both 12 nm
    assert die_energy_scale(load_profile("a100")) == pytest.approx(v100 * 7 / 12)
    assert die_energy_scale(load_profile("h100")) < die_energy_scale(load_profile("v100"))
    assert static_power_w(load_profile("a100")) == pytest.approx(
        c.static_fraction_of_tdp * 400.0)
    assert static_power_w(load_profile("tpu-v4")) == pytest.approx(90.0)  # measured_min_w


def test_cpu_peaks_amx_and_formula() -> None:
    for name in CPUS:
        profile = PROFILES[name]
        c = profile.compute
        formula = c.cores * c.simd_width_bits / 32 * c.fma_units_per_core * 2 * c.clock_hz
        assert cpu.fp32_vector_peak_flops_per_s(profile) == pytest.approx(formula, rel=0.01)
    assert cpu.matmul_path(PROFILES["xeon-8480"], "bf16")[0] == "amx"
    assert cpu.matmul_path(PROFILES["epyc-7763"], "bf16")[0] == "vector"
    est = estimate(build_model("resnet18"), PROFILES["xeon-8480"], 8, "int8", "infer")
    assert set(est.layers.loc[est.layers["matmul"], "unit"]) == {"amx"}
    assert np.isfinite(est.layers["cycles"]).all()


def test_backward_row_maps_to_dx_and_dw_gemms() -> None:
    m, n, k, width, cache = 4096, 1024, 512, 2.0, 1e6
    work, gemms = gemm_case(m, n, k, "fp16")
    work = pd.concat([work, work.assign(phase="backward")], ignore_index=True)
    g = row_gemms(work, gemms).to_frame()
    dims = {name: tuple(r[["m", "n", "k"]]) for name, r in g.set_index("gemm").iterrows()}
    assert dims == {"forward": (m, n, k), "dx": (m, k, n), "dw": (k, n, m)}
    assert all((d == v).all() for d, v in zip(forward_dims(g), (m, n, k), strict=True))
    f = row_gemm_factors(work, gemms, width, 128, 128, 80, 256, cache, 0.5)

    def q(a: int, b: int, r: int) -> float:
        return float(gemm_quantization(np.array([a]), np.array([b]), np.array([r]),
                                       np.array([1]), 128, 128, 80, 256)[0])

    assert f["quantization"].tolist() == pytest.approx(
        [q(m, n, k) / (m * n * k), (q(m, k, n) + q(k, n, m)) / (2 * m * n * k)])
    # Each gradient GEMM re-reads what the forward GEMM does.
    fwd = refetch_bytes(np.array([m * k * width]), np.array([k * n * width]), cache, 0.5)[0]
    assert fwd > 0
    assert f["reread_bytes"].tolist() == pytest.approx([fwd, 2 * fwd])
