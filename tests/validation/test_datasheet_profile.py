"""The worked example of the README's recipe "A GPU from its datasheet" (hw_profiles/devices/
rtx-a6000.toml): it loads as a GPU, every peak it writes is the closed form SMs x clock x the
GA102 whitepaper's per-SM rate, computed here from the file's own fields (read with `tomllib`,
not through the loader), the loader returns those figures, and ResNet-50 simulates at fp16
within the tensor-core roofline."""

from __future__ import annotations

import json
import tomllib

import pytest

from accelsim.cli import main
from accelsim.devices.estimate import estimate
from accelsim.profiles.devices import load_profile
from accelsim.workload.zoo import build_model
from tests.helpers.paths import ROOT

NAME = "rtx-a6000"
RAW = tomllib.loads((ROOT / "hw_profiles" / "devices" / f"{NAME}.toml").read_text("utf-8"))
T = 1e12

# Per-SM rates of a GA10x SM on a professional card (GA102 whitepaper: 128 FP32 lanes, 4 tensor
# cores of 128 dense FP16 FMA per clock each, full rate with FP32 accumulate), FLOP (or int8 op)
# per clock per SM, dense; 2:4 sparsity doubles the tensor-core rates.
CUDA_CORES_PER_SM, TENSOR_CORES_PER_SM = 128, 4
FP16_FMA_PER_TENSOR_CORE = 128
PER_SM_DENSE = {
    "fp16": TENSOR_CORES_PER_SM * FP16_FMA_PER_TENSOR_CORE * 2,  # 1024
    "bf16": TENSOR_CORES_PER_SM * FP16_FMA_PER_TENSOR_CORE * 2,
    "tf32": TENSOR_CORES_PER_SM * FP16_FMA_PER_TENSOR_CORE,  # half the fp16 rate
    "int8": TENSOR_CORES_PER_SM * FP16_FMA_PER_TENSOR_CORE * 2 * 2,  # twice the fp16 rate
}


def closed_form(precision: str, sparse: bool) -> float:
    """SMs x clock x per-SM rate, from the file's fields, FLOP/s (OP/s for int8)."""
    compute = RAW["compute"]
    rate = PER_SM_DENSE[precision] * (2 if sparse else 1)
    return compute["sm_count"] * compute["clock_mhz"] * 1e6 * rate


def written(precision: str, sparse: bool) -> float:
    unit = "tops" if precision == "int8" else "tflops"
    key = f"peak_{unit}_{precision}_{'sparse' if sparse else 'dense'}"
    return RAW["compute"]["matrix"][key] * T


CASES = [(p, s) for p in PER_SM_DENSE for s in (False, True)]


def test_the_counts_agree_with_the_sm_geometry() -> None:
    compute = RAW["compute"]
    assert compute["cuda_cores"] == compute["sm_count"] * CUDA_CORES_PER_SM
    assert compute["tensor_cores"] == compute["sm_count"] * TENSOR_CORES_PER_SM
    assert compute["base_clock_mhz"] <= compute["clock_mhz"]


@pytest.mark.parametrize(("precision", "sparse"), CASES)
def test_each_peak_is_sms_times_clock_times_the_per_sm_rate(precision: str, sparse: bool
                                                             ) -> None:
    # written to 0.1 TFLOPS: within half a unit of the last digit
    assert written(precision, sparse) == pytest.approx(closed_form(precision, sparse),
                                                       abs=0.05 * T)


def test_fp32_peak_is_cuda_cores_times_fma_times_clock() -> None:
    compute = RAW["compute"]
    expected = compute["cuda_cores"] * 2 * compute["clock_mhz"] * 1e6
    assert RAW["compute"]["vector"]["peak_tflops_fp32"] * T == pytest.approx(expected,
                                                                              abs=0.05 * T)


def test_the_closed_form_reproduces_the_published_figures() -> None:
    """NVIDIA's published 154.8 TFLOPS fp16 dense and 309.7 with sparsity (the figures the
    profile's sources quote) follow from 84 SMs at 1800 MHz, not from the 1860 MHz of
    pre-launch listings."""
    assert closed_form("fp16", False) == pytest.approx(154.8 * T, abs=0.05 * T)
    assert closed_form("fp16", True) == pytest.approx(309.7 * T, abs=0.05 * T)
    at_1860 = RAW["compute"]["sm_count"] * 1860e6 * PER_SM_DENSE["fp16"]
    assert at_1860 != pytest.approx(154.8 * T, abs=0.05 * T)


@pytest.mark.parametrize(("precision", "sparse"), CASES)
def test_the_loader_returns_the_written_peaks(precision: str, sparse: bool) -> None:
    profile = load_profile(NAME)
    assert profile.peak_flops_per_s(precision, sparse=sparse) == pytest.approx(
        written(precision, sparse))


def test_loads_as_a_gpu_cites_every_field_and_says_how_it_was_written() -> None:
    profile = load_profile(NAME)
    assert profile.device_class == "gpu"
    assert profile.flagged_fields() == ()  # nothing proxy, unverified or assumed
    assert "A GPU from its datasheet" in RAW["notes"]
    assert profile.onchip_memory.l2_cache_bytes == 6144 * 1024
    assert profile.offchip_memory.bandwidth_bytes_per_s == 768e9


def test_resnet50_simulates_at_fp16_within_the_tensor_core_roofline() -> None:
    """estimate() checks the invariants on its result; independently, a batch can go no faster
    than its FLOPs at the fp16 tensor-core peak of the closed form."""
    graph = build_model("resnet50")
    est = estimate(graph, load_profile(NAME), 64, "fp16")
    assert est.throughput_samples_per_s > 0
    flops_per_sample = 2 * 4.0e9  # ResNet-50 at 224 x 224: > 4.0 GMACs a sample
    assert est.throughput_samples_per_s <= closed_form("fp16", False) / flops_per_sample
    assert est.device_power_w <= RAW["power"]["tdp_w"] * (1 + 1e-9)


def test_accelsim_list_shows_it(capsys) -> None:
    assert main(["list", "--json"]) == 0
    listed = {p["name"]: p["class"] for p in json.loads(capsys.readouterr().out)["profiles"]}
    assert listed.get(NAME) == "gpu"
