"""The device profiles of issue 8 item 5 (more GPUs, Jetsons, DPU boards, the Coral USB
Accelerator, Raspberry Pis): each peak figure equals the spec sheet's row in
tests/reference/hardware_specs.csv (read here with `csv`, not through the loader); DPU peaks are
count x ops/cycle x clock; fabric and CPU peaks follow their unit counts; every source tag is a
reference tag; the USB link costs bytes / bandwidth + latency per transfer; the DPU overlay's
tile time and fused rows follow their closed forms."""

from __future__ import annotations

import csv
import json
import math
import re
import statistics
import tomllib

import pytest

from accelsim.cli import main
from accelsim.devices.fpga import model as fpga
from accelsim.profiles.devices import load_profile
from accelsim.profiles.efficiency import load_efficiency
from accelsim.profiles.stack_choice import default_stack
from accelsim.sim.service import device_host_link, service_table
from accelsim.workload.graph import GraphBuilder
from accelsim.workload.work import gemms_for, work_table
from tests.helpers import fidelity_dpu
from tests.helpers.paths import BENCHMARKS, REFERENCE, ROOT

SPECS = REFERENCE / "hardware_specs.csv"
NEW = {
    "a100-40gb": "gpu", "a100-pcie": "gpu", "a10": "gpu", "a30": "gpu", "a40": "gpu",
    "l40s": "gpu", "h100-pcie": "gpu", "b200": "gpu", "rtx-4090": "gpu",
    "jetson-nano": "npu", "jetson-xavier-nx": "npu", "coral-usb": "npu",
    "alveo-u200": "fpga", "zcu102": "fpga", "zcu104": "fpga", "kv260": "fpga", "vck190": "fpga",
    "raspberry-pi-4": "cpu", "raspberry-pi-5": "cpu",
}
T, G = 1e12, 1e9


@pytest.fixture(scope="module")
def specs() -> list[dict[str, str]]:
    with open(SPECS, newline="", encoding="utf-8") as fh:
        return list(csv.DictReader(fh))


def spec(rows: list[dict[str, str]], item: str, field: str) -> list[float]:
    """Every numeric value the reference gives for item / field (disagreeing rows included)."""
    values = [r["value"] for r in rows if r["name"] == item and r["field"] == field]
    assert values, f"no reference row {item!r} / {field!r}"
    return [float(re.match(r"[\d.]+", v).group()) for v in values]


def peak(precision: str, sparse: bool = False, tensor: bool = True):  # noqa: ANN201
    return lambda p: p.peak_flops_per_s(precision, tensor=tensor, sparse=sparse)


A100_40, A100_PCIE = "NVIDIA A100 SXM4 40GB", "NVIDIA A100 PCIe 80GB"
CROSS = [
    ("a100-40gb", peak("fp16"), A100_40, "fp16_bf16_tensor_tflops_dense", T),
    ("a100-40gb", peak("int8", sparse=True), A100_40, "int8_tops_sparse", T),
    ("a100-40gb", lambda p: p.offchip_memory.bandwidth_bytes_per_s, A100_40, "memory_bandwidth",
     G),
    ("a100-pcie", peak("fp32", tensor=False), A100_PCIE, "fp32_tflops", T),
    ("a100-pcie", lambda p: p.offchip_memory.bandwidth_bytes_per_s, A100_PCIE,
     "memory_bandwidth", G),
    ("a10", peak("bf16"), "NVIDIA A10", "fp16_bf16_tensor_tflops_dense", T),
    ("a10", peak("int8"), "NVIDIA A10", "int8_tops_dense", T),
    ("a30", peak("int8"), "NVIDIA A30", "int8_tops_dense", T),
    ("a30", lambda p: p.offchip_memory.bandwidth_bytes_per_s, "NVIDIA A30", "memory_bandwidth",
     G),
    ("a40", peak("tf32"), "NVIDIA A40", "tf32_tensor_tflops_dense", T),
    ("a40", peak("int8", sparse=True), "NVIDIA A40", "int8_tops_sparse", T),
    ("l40s", peak("fp8"), "NVIDIA L40S", "fp8_tflops_dense", T),
    ("l40s", peak("bf16"), "NVIDIA L40S", "fp16_bf16_tensor_tflops_dense", T),
    ("h100-pcie", peak("fp16", sparse=True), "NVIDIA H100 PCIe 80GB",
     "fp16_bf16_tensor_tflops_sparse", T),
    ("h100-pcie", peak("fp8"), "NVIDIA H100 PCIe 80GB", "fp8_tflops_dense", T),
    ("b200", peak("bf16"), "NVIDIA B200 (HGX, 1000 W)", "fp16_bf16_tensor_tflops_dense", T),
    ("b200", peak("fp8", sparse=True), "NVIDIA B200 (HGX, 1000 W)", "fp8_tflops_sparse", T),
    ("rtx-4090", peak("int8"), "NVIDIA GeForce RTX 4090", "int8_tops_dense", T),
    ("rtx-4090", peak("fp32", tensor=False), "NVIDIA GeForce RTX 4090", "fp32_tflops", T),
    ("jetson-nano", peak("fp16", tensor=False), "NVIDIA Jetson Nano (4GB)", "gpu_fp16_gflops",
     G),
    ("jetson-nano", lambda p: p.offchip_memory.bandwidth_bytes_per_s,
     "NVIDIA Jetson Nano (4GB)", "memory_bandwidth", G),
    ("jetson-xavier-nx", peak("int8"), "NVIDIA Jetson Xavier NX", "ai_int8_tops", T),
    ("coral-usb", peak("int8"), "Google Coral USB Accelerator", "int8_tops", T),
    ("coral-usb", lambda p: p.power.tdp_w, "Google Coral USB Accelerator", "power", 1),
    ("raspberry-pi-5", lambda p: p.offchip_memory.bandwidth_bytes_per_s, "Raspberry Pi 5",
     "memory_bandwidth", G),
    ("raspberry-pi-5", lambda p: p.compute.clock_hz, "Raspberry Pi 5", "cpu_clock", G),
    ("raspberry-pi-4", lambda p: p.compute.clock_hz, "Raspberry Pi 4 Model B", "cpu_clock", G),
    ("vck190", lambda p: p.compute.overlay.clock_hz, "AMD/Xilinx Versal VCK190", "aie_clock", G),
]
TDP = {"a100-40gb": A100_40, "a100-pcie": A100_PCIE, "a10": "NVIDIA A10", "a30": "NVIDIA A30",
       "a40": "NVIDIA A40", "l40s": "NVIDIA L40S", "h100-pcie": "NVIDIA H100 PCIe 80GB",
       "b200": "NVIDIA B200 (HGX, 1000 W)", "rtx-4090": "NVIDIA GeForce RTX 4090"}


@pytest.mark.parametrize(("name", "get", "item", "field", "factor"), CROSS)
def test_peak_figures_equal_the_spec_sheet(name, get, item, field, factor, specs) -> None:
    value = get(load_profile(name))
    assert any(value == pytest.approx(v * factor) for v in spec(specs, item, field)), value


@pytest.mark.parametrize("name", sorted(TDP))
def test_tdp_is_one_the_reference_gives(name: str, specs) -> None:
    assert load_profile(name).power.tdp_w in spec(specs, TDP[name], "tdp")


@pytest.mark.parametrize("name", sorted(NEW))
def test_loads_in_its_class_and_cites_reference_tags(name: str, specs) -> None:
    assert load_profile(name).device_class == NEW[name]
    raw = tomllib.loads((ROOT / "hw_profiles" / "devices" / f"{name}.toml").read_text("utf-8"))
    known = {t for r in specs for t in re.findall(r"\[([A-Z0-9_]+)\]", r["source"])}
    for field, text in raw["sources"].items():
        for tag in re.findall(r"\[([A-Z0-9_]+)\]", text):
            assert tag in known, f"{name}: {field} cites [{tag}], not a reference tag"


def test_accelsim_list_shows_every_new_profile(capsys) -> None:
    assert main(["list", "--json"]) == 0
    listed = {p["name"]: p["class"] for p in json.loads(capsys.readouterr().out)["profiles"]}
    assert {n: listed.get(n) for n in NEW} == NEW


# ---- DPU peaks: count x ops per cycle x clock ---------------------------------------------

def dpu_ops_per_cycle(specs, size: str) -> int:
    """ops/clock of one DPUCZDX8G core of `size`, from PG338's PP x ICP x OCP row (x 2)."""
    geometry = spec_text(specs, "AMD/Xilinx DPUCZDX8G (Zynq UltraScale+ DPU)",
                         f"{size}_parallelism_PPxICPxOCP")
    return 2 * math.prod(int(x) for x in geometry.split("x"))


def spec_text(rows, item: str, field: str) -> str:
    return next(r["value"] for r in rows if r["name"] == item and r["field"] == field)


def test_zcu104_dpu_peak_is_count_times_ops_times_clock(specs) -> None:
    config = spec_text(specs, "AMD/Xilinx ZCU104", "dpu_reference_config")
    count, size, mhz = re.match(r"(\d+)x DPUCZDX8G (B\d+) @ (\d+) MHz", config).groups()
    expected = int(count) * dpu_ops_per_cycle(specs, size) * float(mhz) * 1e6
    overlay = load_profile("zcu104").compute.overlay
    assert overlay.peak_int8_ops_per_s == pytest.approx(expected)
    published = spec(specs, "AMD/Xilinx ZCU104", "dpu_peak_int8_tops")
    assert any(overlay.peak_int8_ops_per_s == pytest.approx(v * T, rel=0.03) for v in published)


@pytest.mark.parametrize(("name", "size"), [("zcu102", "B4096"), ("kv260", "B3136")])
def test_zynq_dpu_geometry_is_pg338s(name: str, size: str, specs) -> None:
    ov = load_profile(name).compute.overlay
    assert 2 * ov.macs_per_cycle == ov.cores * dpu_ops_per_cycle(specs, size)
    assert ov.peak_int8_ops_per_s == pytest.approx(
        ov.cores * dpu_ops_per_cycle(specs, size) * ov.clock_hz)


def test_versal_dpu_peak_is_pg389s_formula(specs) -> None:
    """PG389: peak = 256 ops x CPB_N x BATCH_N x CU_N x AIE clock; C32B1CU1 = 10.24 TOPS."""
    ov = load_profile("vck190").compute.overlay
    per_aie = spec(specs, "AMD/Xilinx DPUCVDX8G (Versal DPU)", "aie_ops_per_clock")[0]
    # engines = BATCH_N x CU_N (cores x images_per_core)
    assert ov.peak_int8_ops_per_s == pytest.approx(per_aie * 32 * ov.engines * ov.clock_hz)
    c32b1 = spec(specs, "AMD/Xilinx DPUCVDX8G (Versal DPU)", "peak_tops_C32B1CU1")[0]
    assert ov.peak_int8_ops_per_s == pytest.approx(ov.engines * c32b1 * T)


@pytest.mark.parametrize("name", ["alveo-u200", "zcu102", "zcu104", "kv260"])
def test_fabric_peak_follows_the_dsp_budget(name: str) -> None:
    c = load_profile(name).compute
    fabric = c.dsp_slices * c.macs_per_dsp["int8"] * 2 * c.clock_hz
    assert c.matrix_peak_flops_per_s["int8"] == pytest.approx(fabric, rel=0.01)


@pytest.mark.parametrize("name", ["raspberry-pi-4", "raspberry-pi-5"])
def test_cpu_fp32_peak_is_cores_fma_lanes_clock(name: str, specs) -> None:
    c = load_profile(name).compute
    item = {"raspberry-pi-4": "Raspberry Pi 4 Model B", "raspberry-pi-5": "Raspberry Pi 5"}[name]
    cores = int(re.match(r"(\d+)x", spec_text(specs, item, "cpu")).group(1))
    assert c.cores == cores
    expected = cores * c.fma_units_per_core * (c.simd_width_bits // 32) * 2 * c.clock_hz
    assert c.vector_peak_flops_per_s["fp32"] == pytest.approx(expected, rel=0.01)
    assert c.single_thread_equiv_clock_hz < c.clock_hz  # an Arm core does less per clock


# ---- the Edge TPU behind USB: the link apart from the chip -----------------------------------

def test_usb_copy_is_bytes_over_bandwidth_plus_latency() -> None:
    """coral-usb is edge-tpu's chip behind USB 3: served, each copy is bytes / bandwidth + the
    link's latency, and the two devices differ by the link alone."""
    usb = tomllib.loads((ROOT / "hw_profiles" / "links" / "usb3.toml").read_text("utf-8"))
    pcie = tomllib.loads((ROOT / "hw_profiles" / "links" / "pcie-gen2-x1.toml").read_text("utf-8"))
    g = GraphBuilder("one_conv")
    g.relu(g.conv2d(g.input("x", (3, 64, 64)), out_channels=16, kernel=3, stride=1, padding=1,
                    bias=False, name="conv"), name="act")
    graph = g.build()
    served = {}
    for name in ("coral-usb", "edge-tpu"):
        profile = load_profile(name)
        served[name] = service_table(graph, profile, device_host_link(profile), 1, "int8").loc[1]
    row = served["coral-usb"]
    bw = usb["bandwidth_gb_s_per_direction"] * 1e9
    assert row["h2d_s"] == pytest.approx(3 * 64 * 64 / bw + usb["latency_us"] * 1e-6)
    assert row["d2h_s"] == pytest.approx(16 * 64 * 64 / bw + usb["latency_us"] * 1e-6)
    assert row["compute_s"] == pytest.approx(served["edge-tpu"]["compute_s"])  # the same chip
    gap_s = 2 * (usb["latency_us"] - pcie["latency_us"]) * 1e-6  # same 0.5 GB/s both
    assert row["service_s"] - served["edge-tpu"]["service_s"] == pytest.approx(gap_s)


# ---- the DPU overlay: tile time / efficiency, fused rows ----------------------------------

def test_overlay_conv_time_is_tiles_over_efficiency_and_bn_relu_fuse() -> None:
    eff = tomllib.loads((ROOT / "hw_profiles" / "efficiency" / "fpga.toml").read_text("utf-8"))
    efficiency = eff["fitted"]["overlay_mac_efficiency"]
    board = load_profile("zcu104")
    ov = board.compute.overlay
    g = GraphBuilder("conv_bn_relu")
    y = g.conv2d(g.input("x", (64, 28, 28)), out_channels=64, kernel=3, stride=1, padding=1,
                 bias=False, name="conv")
    g.relu(g.batchnorm(y, name="bn"), name="act")
    graph = g.build()
    work = work_table(graph, 1, "int8", "infer")
    costs = fpga.fpga_costs(board, work, gemms_for(graph, 1), "int8",
                            default_stack("fpga")).to_frame(index=work["name"])
    # GEMM m = 28 x 28 output pixels, n = 64 output channels, k = 64 x 9 taps
    tiles = math.ceil(28 * 28 / ov.pixel_parallelism) * math.ceil(
        64 / ov.output_channel_parallelism) * math.ceil(64 * 9 / ov.input_channel_parallelism)
    cycles = math.ceil(math.ceil(tiles / ov.cores) / efficiency)
    assert costs.loc["conv", "compute_s"] * ov.clock_hz == pytest.approx(cycles, abs=1.0)
    assert list(costs.loc[["bn", "act"], "unit"]) == ["fused", "fused"]
    # no DRAM round trip of the 64 x 28 x 28 activation: at most BN's per-channel parameters
    assert (costs.loc[["bn", "act"], "dram_bytes"] <= 4 * 64).all()


def test_dpu_fit_error_does_not_grow_beyond_the_recorded_value() -> None:
    """Guard of the DPU factor (benchmarks/fidelity_dpu.py): with hw_profiles/efficiency/
    fpga.toml as loaded, the median |error| over the Vitis AI rows may not exceed the value
    recorded in benchmarks/results/fidelity_dpu.md by more than 2 points."""
    text = (BENCHMARKS / "results" / "fidelity_dpu.md").read_text(encoding="utf-8")
    recorded_pct = float(re.search(r"Fit: median \|error\| ([\d.]+)%", text).group(1))
    efficiency = load_efficiency("fpga")["fitted.overlay_mac_efficiency"]
    cases = fidelity_dpu.cases()
    assert {c.board for c in cases} == {"zcu102", "alveo-u200"}
    errors = [abs(fidelity_dpu.predicted_fps(c, efficiency) / c.measured_fps - 1) for c in cases]
    assert 100 * statistics.median(errors) <= recorded_pct + 2
