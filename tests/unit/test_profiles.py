"""Device profiles and energy constants: every built-in loads and cites its figures, key figures
match shared/reference/hardware_specs.csv (read here independently of the loader), and bad files
fail loudly naming file, field and value."""

from __future__ import annotations

import csv
import pickle
import re
import tomllib
from pathlib import Path

import pytest

from accelsim.datafiles import builtin_files
from accelsim.errors import ConfigError, UnknownNameError
from accelsim.profiles.device_schema import MEMORY_TECHNOLOGIES, PRECISIONS
from accelsim.profiles.devices import (
    builtin_profile_names,
    list_profiles,
    load_all_profiles,
    load_profile,
)
from accelsim.profiles.energy import load_energy_constants
from tests.helpers.paths import REFERENCE

REFERENCE_CSV = REFERENCE / "hardware_specs.csv"
EXPECTED = {
    "xeon-8380": "cpu", "xeon-8480": "cpu", "epyc-7763": "cpu",
    "v100": "gpu", "a100": "gpu", "h100": "gpu", "h200": "gpu", "t4": "gpu", "l4": "gpu",
    "mi300x": "gpu",
    "tpu-v1": "tpu", "tpu-v3": "tpu", "tpu-v4": "tpu",
    "alveo-u250": "fpga", "alveo-u280": "fpga",
    "edge-tpu": "npu", "jetson-orin": "npu", "ascend-310": "npu",
}


@pytest.fixture(scope="module")
def reference() -> list[dict[str, str]]:
    if not REFERENCE_CSV.is_file():
        pytest.skip(f"reference CSV not found at {REFERENCE_CSV}")
    with open(REFERENCE_CSV, newline="", encoding="utf-8") as fh:
        return list(csv.DictReader(fh))


def csv_values(rows: list[dict[str, str]], name: str, field: str) -> list[str]:
    values = [r["value"] for r in rows if r["name"] == name and r["field"] == field]
    assert values, f"no CSV row {name!r} / {field!r}"
    return values


def numeric_leaves(table: dict, prefix: str = "") -> dict[str, float]:
    out: dict[str, float] = {}
    for key, value in table.items():
        if key == "sources" and not prefix:
            continue
        if isinstance(value, dict):
            out.update(numeric_leaves(value, f"{prefix}{key}."))
        elif isinstance(value, int | float) and not isinstance(value, bool):
            out[prefix + key] = value
    return out


# ---- built-ins -------------------------------------------------------------------------------

def test_required_builtins_exist_and_load() -> None:
    assert set(EXPECTED) <= set(builtin_profile_names())
    profiles = load_all_profiles()
    for name, device_class in EXPECTED.items():
        assert profiles[name].name == name
        assert profiles[name].device_class == device_class
    assert [p.name for p in list_profiles()] == builtin_profile_names()


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_builtin_is_complete_and_picklable(name: str) -> None:
    profile = load_profile(name)
    assert pickle.loads(pickle.dumps(profile)) == profile
    assert profile.power.tdp_w > 0
    has_peak = profile.compute.matrix_peak_flops_per_s or profile.compute.vector_peak_flops_per_s
    assert has_peak
    if profile.device_class != "npu":
        assert profile.offchip_memory is not None
        assert profile.offchip_memory.bandwidth_bytes_per_s > 0
    if profile.device_class != "cpu":
        assert profile.host_link is not None and profile.host_link.bandwidth_bytes_per_s > 0


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_every_numeric_field_has_a_source(name: str, reference: list[dict[str, str]]) -> None:
    path = builtin_files("hw_profiles", "devices/*.toml")[name]
    raw = tomllib.loads(path.read_text(encoding="utf-8"))
    for field in numeric_leaves(raw):
        assert raw["sources"].get(field, "").strip(), f"{name}: {field} has no source"
    known_tags = {t for r in reference for t in re.findall(r"\[([A-Z0-9_]+)\]", r["source"])}
    for field, text in raw["sources"].items():
        for tag in re.findall(r"\[([A-Z0-9_]+)\]", text):
            assert tag in known_tags, f"{name}: {field} cites [{tag}], not a CSV source tag"


# ---- cross-checks against the reference CSV -------------------------------------------------

A100, V100, H100 = "NVIDIA A100 SXM4 80GB", "NVIDIA V100 SXM2 32GB", "NVIDIA H100 SXM5 80GB"
CROSS_CHECKS = [  # profile, attribute getter, CSV item, CSV field, factor to SI
    ("a100", lambda p: p.offchip_memory.bandwidth_bytes_per_s, A100, "memory_bandwidth", 1e9),
    ("a100", lambda p: p.peak_flops_per_s("bf16"), A100, "fp16_bf16_tensor_tflops_dense", 1e12),
    ("a100", lambda p: p.compute.sm_count, A100, "sm_count", 1),
    ("v100", lambda p: p.peak_flops_per_s("fp16"), V100, "fp16_tensor_tflops_dense", 1e12),
    ("v100", lambda p: p.offchip_memory.bandwidth_bytes_per_s, V100, "memory_bandwidth", 1e9),
    ("h100", lambda p: p.peak_flops_per_s("fp8"), H100, "fp8_tflops_dense", 1e12),
    ("h100", lambda p: p.peak_flops_per_s("int8", sparse=True), H100, "int8_tops_sparse", 1e12),
    ("h200", lambda p: p.offchip_memory.bandwidth_bytes_per_s, "NVIDIA H200 SXM 141GB",
     "memory_bandwidth", 1e9),
    ("t4", lambda p: p.peak_flops_per_s("int8"), "NVIDIA T4", "int8_tops", 1e12),
    ("mi300x", lambda p: p.peak_flops_per_s("fp16"), "AMD Instinct MI300X",
     "fp16_bf16_matrix_tflops_dense", 1e12),
    ("tpu-v1", lambda p: p.peak_flops_per_s("int8"), "Google TPU v1", "int8_tops_peak", 1e12),
    ("tpu-v1", lambda p: p.onchip_memory.unified_buffer_bytes, "Google TPU v1", "unified_buffer",
     2**20),
    ("tpu-v1", lambda p: p.offchip_memory.bandwidth_bytes_per_s, "Google TPU v1",
     "dram_bandwidth", 1e9),
    ("tpu-v4", lambda p: p.peak_flops_per_s("bf16"), "Google TPU v4", "bf16_tflops_per_chip",
     1e12),
    ("tpu-v4", lambda p: p.offchip_memory.bandwidth_bytes_per_s, "Google TPU v4", "hbm_bandwidth",
     1e9),
    ("edge-tpu", lambda p: p.peak_flops_per_s("int8"), "Google Coral Edge TPU", "int8_tops", 1e12),
    ("ascend-310", lambda p: p.peak_flops_per_s("fp16"), "Huawei Ascend 310", "fp16_tflops", 1e12),
    ("alveo-u280", lambda p: p.offchip_memory.bandwidth_bytes_per_s, "AMD/Xilinx Alveo U280",
     "hbm2_bandwidth", 1e9),
    ("alveo-u250", lambda p: p.compute.dsp_slices, "AMD/Xilinx Alveo U250", "dsp_user_available",
     1),
    ("epyc-7763", lambda p: p.offchip_memory.bandwidth_bytes_per_s, "AMD EPYC 7763 (Milan)",
     "memory_bw_per_socket", 1e9),
    ("xeon-8480", lambda p: p.peak_flops_per_s("bf16"),
     "Intel Xeon Platinum 8480+ (Sapphire Rapids)", "amx_bf16_peak_per_socket", 1e12),
    ("xeon-8380", lambda p: p.compute.cores, "Intel Xeon Platinum 8380 (Ice Lake-SP)", "cores", 1),
]


@pytest.mark.parametrize(("name", "get", "item", "field", "factor"), CROSS_CHECKS)
def test_figure_matches_reference(name, get, item, field, factor, reference) -> None:
    value = get(load_profile(name))
    allowed = [float(v) * factor for v in csv_values(reference, item, field)]
    assert any(value == pytest.approx(v) for v in allowed), (value, allowed)


def test_tpu_v1_mxu_is_256x256(reference) -> None:
    rows, cols = csv_values(reference, "Google TPU v1", "mxu_shape")[0].split("x")
    tpu = load_profile("tpu-v1").compute
    assert (tpu.mxu_rows, tpu.mxu_cols, tpu.mxu_count) == (int(rows), int(cols), 1)
    assert load_profile("tpu-v1").offchip_memory.technology == "ddr3"


def test_tdp_matches_reference_where_published(reference) -> None:
    items = {"v100": V100, "a100": A100, "h100": H100, "t4": "NVIDIA T4", "l4": "NVIDIA L4",
             "mi300x": "AMD Instinct MI300X", "tpu-v1": "Google TPU v1",
             "xeon-8380": "Intel Xeon Platinum 8380 (Ice Lake-SP)"}
    for name, item in items.items():
        assert load_profile(name).power.tdp_w == float(csv_values(reference, item, "tdp")[0])


# ---- internal consistency: peaks against unit counts x clock --------------------------------

@pytest.mark.parametrize("name", ["tpu-v1", "tpu-v3", "tpu-v4"])
def test_systolic_peak_is_array_size_times_clock(name: str) -> None:
    p = load_profile(name)
    c = p.compute
    macs_per_s = c.mxu_rows * c.mxu_cols * c.mxu_count * c.clock_hz
    assert max(c.matrix_peak_flops_per_s.values()) == pytest.approx(2 * macs_per_s, rel=0.02)


@pytest.mark.parametrize("name", ["xeon-8380", "xeon-8480", "epyc-7763"])
def test_cpu_fp32_peak_is_cores_fma_lanes_clock(name: str) -> None:
    c = load_profile(name).compute
    lanes = c.simd_width_bits // 32
    expected = c.cores * c.sockets * c.fma_units_per_core * lanes * 2 * c.clock_hz
    assert c.vector_peak_flops_per_s["fp32"] == pytest.approx(expected, rel=0.01)


@pytest.mark.parametrize("name", ["alveo-u250", "alveo-u280"])
def test_fpga_peaks_follow_dsp_budget(name: str) -> None:
    c = load_profile(name).compute
    fabric = c.dsp_slices * c.macs_per_dsp["int8"] * 2 * c.clock_hz
    assert c.matrix_peak_flops_per_s["int8"] == pytest.approx(fabric, rel=0.01)
    assert c.overlay is not None
    assert c.overlay.macs_per_cycle == c.overlay.cores * 8 * 16 * 16
    assert c.overlay.peak_int8_ops_per_s < c.matrix_peak_flops_per_s["int8"]


# ---- the Python API --------------------------------------------------------------------------

def test_peak_flops_per_s() -> None:
    a100, v100 = load_profile("a100"), load_profile("v100")
    assert a100.peak_flops_per_s("bf16") == 312e12
    assert a100.peak_flops_per_s("bf16", sparse=True) == 624e12
    assert a100.peak_flops_per_s("fp32", tensor=False) == 19.5e12
    assert a100.peak_flops_per_s("fp8") is None
    assert v100.peak_flops_per_s("bf16") is None
    assert v100.supported_precisions() == ("fp16",)
    with pytest.raises(UnknownNameError):
        a100.peak_flops_per_s("fp64")


def test_si_units_and_names() -> None:
    a100 = load_profile("a100")
    assert a100.compute.clock_hz == 1410e6
    assert a100.onchip_memory.l2_cache_bytes == 40 * 2**20
    assert a100.offchip_memory.capacity_bytes == 80 * 10**9
    assert a100.peer_link is not None and a100.peer_link.total_bandwidth_bytes_per_s == 300e9
    assert load_profile("edge-tpu").offchip_memory is None
    assert "conv2d" in load_profile("edge-tpu").compute.supported_ops


def test_unknown_builtin_name() -> None:
    with pytest.raises(UnknownNameError, match="a100"):
        load_profile("a1000")


def test_load_by_path(tmp_path: Path) -> None:
    path = tmp_path / "my-gpu.toml"
    path.write_text(builtin_files("hw_profiles", "devices/*.toml")["t4"].read_text())
    assert load_profile(str(path)).name == "my-gpu"
    assert load_profile(path).peak_flops_per_s("int8") == 130e12


def test_flagged_fields_are_reported() -> None:
    assert "offchip_memory.bandwidth_gb_s" in load_profile("jetson-orin").flagged_fields()
    assert load_profile("a100").flagged_fields() == ()


# ---- energy constants ------------------------------------------------------------------------

def test_energy_constants(reference) -> None:
    energy = load_energy_constants()
    assert set(energy.mac_j) == set(PRECISIONS)
    assert set(energy.offchip_j_per_byte) == set(MEMORY_TECHNOLOGIES)
    for profile in list_profiles():
        for memory in (profile.offchip_memory, profile.secondary_memory):
            if memory is not None:
                assert energy.offchip_energy_j_per_byte(memory.technology) > 0
    horowitz = "Horowitz ISSCC 2014 (45 nm, 0.9 V)"
    fp32_mult_pj = float(csv_values(reference, horowitz, "fp32_mult")[0])
    assert energy.op_j["fp32_mult"] == pytest.approx(fp32_mult_pj * 1e-12)
    hbm2e_pj_bit = float(csv_values(reference, "Interconnect / memory I/O energy",
                                    "hbm2e_device")[0])
    assert energy.offchip_energy_j_per_byte("hbm2e") == pytest.approx(hbm2e_pj_bit * 8e-12)
    assert energy.sram_energy_j_per_byte(4096) == pytest.approx(10e-12 / 8)
    assert energy.sram_energy_j_per_byte(2**30) == pytest.approx(100e-12 / 8)


def test_energy_constants_missing_source(tmp_path: Path) -> None:
    text = builtin_files("hw_profiles", "energy/*.toml")["constants"].read_text()
    path = tmp_path / "energy.toml"
    path.write_text(re.sub(r'^"op_energy.fp32_mult_pj" = .*$', "", text, flags=re.M))
    with pytest.raises(ConfigError) as info:
        load_energy_constants(path)
    assert (info.value.source, info.value.field, info.value.value) == (
        str(path), "op_energy.fp32_mult_pj", 3.7)


# ---- bad files: ConfigError naming file, field and value ------------------------------------

MINIMAL = """
class = "gpu"
display_name = "Test GPU"
vendor = "Nobody"

[compute]
clock_mhz = 1000
sm_count = 10

[compute.matrix]
peak_tflops_fp16_dense = 100
peak_tflops_fp16_sparse = 200

[onchip_memory]
l2_cache_mib = 4

[offchip_memory]
technology = "hbm2e"
capacity_gb = 16
bandwidth_gb_s = 1000

[host_link]
kind = "pcie-gen4-x16"
bandwidth_gb_s = 31.5

[power]
tdp_w = 300

[sources]
"compute.clock_mhz" = "assumed: test"
"compute.sm_count" = "assumed: test"
"compute.matrix.peak_tflops_fp16_dense" = "assumed: test"
"compute.matrix.peak_tflops_fp16_sparse" = "assumed: test"
"onchip_memory.l2_cache_mib" = "assumed: test"
"offchip_memory.capacity_gb" = "assumed: test"
"offchip_memory.bandwidth_gb_s" = "assumed: test"
"host_link.bandwidth_gb_s" = "assumed: test"
"power.tdp_w" = "[BRIEF] test"
"""

BAD = {  # case: (text replaced, replacement, field named, value named)
    "unknown key": ("sm_count = 10", "sm_count = 10\nwarp_size = 32", "compute.warp_size", 32),
    "unknown top-level key": ('vendor = "Nobody"', 'vendor = "Nobody"\ncolour = "green"',
                              "colour", "green"),
    "missing key": ("bandwidth_gb_s = 1000\n", "", "offchip_memory.bandwidth", None),
    "missing table": ("[power]\ntdp_w = 300\n", "", "power", None),
    "wrong type": ("bandwidth_gb_s = 1000", 'bandwidth_gb_s = "fast"',
                   "offchip_memory.bandwidth_gb_s", "fast"),
    "negative bandwidth": ("bandwidth_gb_s = 1000", "bandwidth_gb_s = -1000",
                           "offchip_memory.bandwidth_gb_s", -1000),
    "zero bandwidth": ("bandwidth_gb_s = 31.5", "bandwidth_gb_s = 0",
                       "host_link.bandwidth_gb_s", 0),
    "negative size": ("capacity_gb = 16", "capacity_gb = -16", "offchip_memory.capacity_gb", -16),
    "bool as number": ("tdp_w = 300", "tdp_w = true", "power.tdp_w", True),
    "fractional count": ("sm_count = 10", "sm_count = 10.5", "compute.sm_count", 10.5),
    "missing source": ('"power.tdp_w" = "[BRIEF] test"\n', "", "power.tdp_w", 300),
    "unknown class": ('class = "gpu"', 'class = "quantum"', "class", "quantum"),
    "unknown precision": ("peak_tflops_fp16_sparse = 200", "peak_tflops_fp64_dense = 200",
                          "compute.matrix.peak_tflops_fp64_dense", 200),
    "int8 in tflops": ("peak_tflops_fp16_sparse = 200", "peak_tflops_int8_dense = 200",
                       "compute.matrix.peak_tflops_int8_dense", 200),
    "sparse below dense": ("peak_tflops_fp16_sparse = 200", "peak_tflops_fp16_sparse = 50",
                           "compute.matrix.peak_tflops_fp16_sparse", 50),
    "field of another class": ("sm_count = 10", "sm_count = 10\nmxu_rows = 128",
                               "compute.mxu_rows", 128),
    "table of another class": ("[onchip_memory]", "[compute.macs_per_dsp]\nint8 = 2\n\n"
                               "[onchip_memory]", "compute.macs_per_dsp", {"int8": 2}),
    "unknown technology": ('technology = "hbm2e"', 'technology = "hbm9"',
                           "offchip_memory.technology", "hbm9"),
    "one field in two units": ("l2_cache_mib = 4", "l2_cache_mib = 4\nl2_cache_mb = 4",
                               "onchip_memory.l2_cache_mb", 4),
    "source names no field": ('"power.tdp_w" = "[BRIEF] test"', '"power.tdp_w" = "[BRIEF] test"'
                              '\n"power.idle_w" = "assumed: x"', "sources.power.idle_w",
                              "assumed: x"),
    "source without a known prefix": ('"power.tdp_w" = "[BRIEF] test"',
                                      '"power.tdp_w" = "trust me"', "sources.power.tdp_w",
                                      "trust me"),
    "not found beside a value": ('"power.tdp_w" = "[BRIEF] test"',
                                 '"power.tdp_w" = "not found: no"', "sources.power.tdp_w",
                                 "not found: no"),
}


def write(tmp_path: Path, text: str, name: str = "bad.toml") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def test_minimal_profile_is_valid(tmp_path: Path) -> None:
    profile = load_profile(write(tmp_path, MINIMAL, "ok.toml"))
    assert profile.peak_flops_per_s("fp16", sparse=True) == 200e12
    extra = MINIMAL + '"power.idle_w" = "not found: not published"\n'
    assert load_profile(write(tmp_path, extra, "ok2.toml")).power.idle_w is None


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_profile_names_file_field_and_value(case: str, tmp_path: Path) -> None:
    old, new, field, value = BAD[case]
    assert old in MINIMAL
    path = write(tmp_path, MINIMAL.replace(old, new, 1))
    with pytest.raises(ConfigError) as info:
        load_profile(path)
    err = info.value
    assert (err.source, err.field, err.value) == (str(path), field, value), str(err)
    assert str(path) in str(err) and field in str(err)


def test_unknown_op_kind_on_npu(tmp_path: Path) -> None:
    text = builtin_files("hw_profiles", "devices/*.toml")["edge-tpu"].read_text()
    path = write(tmp_path, text.replace('"conv2d",', '"conv2d", "warp_drive",', 1))
    with pytest.raises(ConfigError) as info:
        load_profile(path)
    assert (info.value.field, info.value.value) == ("compute.supported_ops", "warp_drive")


@pytest.mark.parametrize("text", ["class = ", None])
def test_unreadable_file(text: str | None, tmp_path: Path) -> None:
    path = tmp_path / "broken.toml"
    if text is not None:
        path.write_text(text)
    with pytest.raises(ConfigError) as info:
        load_profile(path)
    assert info.value.source == str(path) and info.value.field == "<file>"
