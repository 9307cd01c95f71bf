"""Phone SoC NPU profiles (issue 26 item 1): hw_profiles/devices/apple-a17-pro.toml,
snapdragon-8-gen3.toml and exynos-2400.toml.

Each loads as an NPU sold for inference, every number it writes has a `[sources]` entry in the
project's vocabulary, and `accelsim simulate mobilenet_v2 --hw <profile> --precision int8` runs
and is bounded below by two closed forms built from the profile's own figures (read with
`tomllib`, not through the loader) and MobileNetV2's published size, not the simulator's count:
a batch takes at least its multiply-adds at the int8 peak and at least its int8 weights and
input images at the LPDDR bandwidth. MobileNetV2 1.0 at 224 x 224: 300 M multiply-adds and
3.4 M parameters (Sandler et al., CVPR 2018, Table 4 / the torchvision weights table's
0.30 GFLOPS and 3,504,872 parameters).
"""

from __future__ import annotations

import json
import tomllib
from collections.abc import Iterator
from typing import Any

import pytest

from accelsim.cli import main
from accelsim.errors import PrecisionError
from accelsim.profiles.devices import load_profile
from accelsim.run import run_simulation
from accelsim.schema import FLAGGED_PREFIXES, NOT_FOUND, SOURCE_PREFIXES
from accelsim.sim.knobs import make_config
from tests.helpers.paths import HW_PROFILES

PHONES = ("apple-a17-pro", "snapdragon-8-gen3", "exynos-2400")
TERA = 1e12
GB = 1e9

# MobileNetV2 1.0, 224 x 224 (module docstring). 300 M is a rounded figure: 1% below it is a
# safe floor on the multiply-adds a sample needs; the parameters as published (3.4 M, below
# torchvision's 3.50 M), one byte each at int8; an int8 224 x 224 x 3 input image a sample.
MOBILENET_V2_MACS = 300e6 * 0.99
MOBILENET_V2_PARAMS = 3.4e6
INPUT_BYTES = 224 * 224 * 3


def raw(name: str) -> dict[str, Any]:
    return tomllib.loads((HW_PROFILES / "devices" / f"{name}.toml").read_text("utf-8"))


def numbers(table: dict[str, Any], prefix: str = "") -> Iterator[tuple[str, float]]:
    """(dotted path as written, value) of every number in the profile's tables."""
    for key, value in table.items():
        path = f"{prefix}{key}"
        if isinstance(value, dict):
            if key != "sources":
                yield from numbers(value, path + ".")
        elif isinstance(value, (int, float)) and not isinstance(value, bool):
            yield path, value


def int8_peak(name: str) -> float:
    return raw(name)["compute"]["matrix"]["peak_tops_int8_dense"] * TERA


def bandwidth(name: str) -> float:
    return raw(name)["offchip_memory"]["bandwidth_gb_s"] * GB


def record(name: str, batch: int) -> dict[str, Any]:
    return run_simulation(make_config("mobilenet_v2", name, precision="int8",
                                      batch=batch)).record


@pytest.mark.parametrize("name", PHONES)
def test_loads_as_an_inference_only_npu_with_shared_soc_memory(name: str) -> None:
    profile = load_profile(name)
    assert profile.device_class == "npu"
    assert profile.inference_only is True
    assert profile.host_link.kind == "integrated"
    # the SoC's LPDDR is the NPU's DRAM and its link to the CPU: one figure for both
    assert profile.host_link.bandwidth_bytes_per_s == profile.offchip_memory.bandwidth_bytes_per_s
    assert profile.offchip_memory.bandwidth_bytes_per_s == bandwidth(name)
    assert profile.peak_flops_per_s("int8") == pytest.approx(int8_peak(name))
    assert profile.power.tdp_w == raw(name)["power"]["tdp_w"]
    assert "shared with its CPU" in raw(name)["notes"]


@pytest.mark.parametrize("name", PHONES)
def test_every_number_has_a_source_in_the_vocabulary(name: str) -> None:
    data = raw(name)
    sources = data["sources"]
    written = dict(numbers(data))
    assert written, name
    for path in written:
        assert path in sources, f"{name}: {path} has no [sources] entry"
        entry = sources[path]
        assert entry.startswith(SOURCE_PREFIXES) and not entry.startswith(NOT_FOUND), (name, path)
        # a recalled, secondary or stand-in figure names where it was read
        if entry.startswith(FLAGGED_PREFIXES):
            assert "http" in entry, (name, path)
    # a `not found:` entry explains a field left out, never one written
    for path, entry in sources.items():
        if entry.startswith(NOT_FOUND):
            assert path not in written, (name, path)


@pytest.mark.parametrize("name", PHONES)
def test_no_fp16_rate_is_published_so_fp16_is_refused(name: str) -> None:
    """No source gives these NPUs an fp16 rate: the profile has none, and asking for fp16 is
    refused with the precisions it runs rather than quantised silently."""
    assert "peak_tflops_fp16_dense" not in raw(name)["compute"]["matrix"]
    with pytest.raises(PrecisionError) as err:
        run_simulation(make_config("mobilenet_v2", name, precision="fp16"))
    assert "int8" in str(err.value)


def test_the_exynos_peak_is_its_macs_times_two_times_its_clock() -> None:
    """17,408 MACs x 2 ops x 1196 MHz = 41.64 TOPS, the figure its sources state."""
    compute = raw("exynos-2400")["compute"]
    assert compute["mac_count"] == 2 * 8192 + 2 * 512
    closed = compute["mac_count"] * 2 * compute["clock_mhz"] * 1e6
    assert closed == pytest.approx(int8_peak("exynos-2400"), abs=0.005 * TERA)
    assert raw("exynos-2400")["onchip_memory"]["sram_mb"] == 6


@pytest.mark.parametrize("batch", [1, 16])
@pytest.mark.parametrize("name", PHONES)
def test_mobilenet_v2_int8_is_bounded_by_peak_and_bandwidth(name: str, batch: int) -> None:
    rec = record(name, batch)
    assert rec["hardware"]["name"] == name
    assert rec["workload"]["precision"] == "int8"
    assert rec["memory"]["fits"] is True
    per_batch_s = batch / rec["throughput_samples_per_s"]
    compute_floor = batch * 2 * MOBILENET_V2_MACS / int8_peak(name)
    memory_floor = (MOBILENET_V2_PARAMS + batch * INPUT_BYTES) / bandwidth(name)
    assert per_batch_s >= compute_floor
    assert per_batch_s >= memory_floor
    assert rec["latency_s"] >= max(compute_floor, memory_floor)
    assert rec["device_power_w"] <= raw(name)["power"]["tdp_w"] * (1 + 1e-9)


def test_accelsim_list_shows_them(capsys) -> None:
    assert main(["list", "--json"]) == 0
    listed = {p["name"]: p["class"] for p in json.loads(capsys.readouterr().out)["profiles"]}
    assert {name: listed.get(name) for name in PHONES} == dict.fromkeys(PHONES, "npu")
