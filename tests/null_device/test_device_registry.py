"""A device class is one folder and one registration: a toy class registered from this module
alone (its cost model, peaks, profile-schema rules and default stack) is listed, loaded from a
profile TOML, simulated, compared and swept like a built-in one, and is gone once unregistered.

The toy's cost model is a closed form: every row takes its FLOPs at the profile's matrix peak
(no memory or fixed time, no dynamic energy), so a batch's latency is sum(FLOPs) / peak plus
the toy stack's host time per step (scaled to the host CPU, `SoftwareStack.host_scale`).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

import accelsim
from accelsim.cli import main
from accelsim.devices import registry
from accelsim.devices.invariants import InvariantError
from accelsim.errors import ConfigError
from accelsim.explore.compare import compare_runs
from accelsim.profiles.device_schema import ClassSchema, device_classes
from accelsim.profiles.devices import load_profile
from accelsim.profiles.hardware import host_clock_hz, resolve_hardware
from accelsim.profiles.software import stack_classes
from accelsim.workload.work import work_table
from accelsim.workload.zoo import build_model

PEAK_FLOPS_PER_S = 10e12  # the toy profile's fp16 matrix peak, 10 TFLOP/s
STEP_S = 100e-6  # the toy stack's host time per step on its reference host
REFERENCE_HZ = 3.0e9  # the toy stack's reference host single-thread clock

STACK = """description = "the toy class's runtime"
classes = ["toy"]
[host]
per_step_us = 100.0
reference_single_thread_ghz = 3.0
framework_cores_per_device = 1
[host.per_kernel_us]
toy = 0.0
[graph]
weight_casts = false
layout_conversions_per_conv = 0.0
[efficiency]
tensor_core = 1.0
cuda_core = 1.0
dram_bandwidth = 1.0
[sources]
"host.per_step_us" = "defined: toy"
"host.reference_single_thread_ghz" = "defined: toy"
"host.framework_cores_per_device" = "defined: toy"
"host.per_kernel_us.toy" = "defined: toy"
"graph.weight_casts" = "defined: toy"
"graph.layout_conversions_per_conv" = "defined: toy"
"efficiency.tensor_core" = "defined: toy"
"efficiency.cuda_core" = "defined: toy"
"efficiency.dram_bandwidth" = "defined: toy"
"""
HOST_LINK = """[host_link]
kind = "pcie-gen4-x16"
bandwidth_gb_s = 31.5
"""
PROFILE = """class = "toy"
display_name = "Toy accelerator"
vendor = "nobody"
[compute]
clock_mhz = 1000
[compute.matrix]
peak_tflops_fp16_dense = 10
[onchip_memory]
[offchip_memory]
technology = "hbm2"
capacity_gb = 16
bandwidth_gb_s = 500
{host_link}[power]
tdp_w = 100
[sources]
"compute.clock_mhz" = "defined: toy"
"compute.matrix.peak_tflops_fp16_dense" = "defined: toy"
"offchip_memory.technology" = "defined: toy"
"offchip_memory.capacity_gb" = "defined: toy"
"offchip_memory.bandwidth_gb_s" = "defined: toy"
"power.tdp_w" = "defined: toy"
{host_sources}"""
HOST_SOURCES = """"host_link.kind" = "defined: toy"
"host_link.bandwidth_gb_s" = "defined: toy"
"""


def toy_costs(profile: Any, work: pd.DataFrame, gemms: pd.DataFrame, precision: str,
              software: Any) -> pd.DataFrame:
    """Every row's FLOPs at the matrix peak; each operand moved once; no energy of its own."""
    n = len(work)
    return pd.DataFrame({
        "compute_s": work["flops"].to_numpy(dtype=float)
        / profile.compute.matrix_peak_flops_per_s[precision],
        "memory_s": np.zeros(n), "overhead_s": np.zeros(n), "dynamic_energy_j": np.zeros(n),
        "dram_bytes": (work["read_bytes"] + work["write_bytes"]).to_numpy(dtype=float),
        "onchip_bytes": np.zeros(n), "cycles": np.full(n, np.nan),
    }, index=work.index)


def toy_peaks(profile: Any, precision: str) -> tuple[float, float]:
    """One unit for matrices and vectors alike, at the profile's matrix peak."""
    peak = profile.compute.matrix_peak_flops_per_s[precision]
    return peak, peak


@pytest.fixture
def toy(tmp_path: Path) -> Iterator[Path]:
    """Register the toy class (the one registration a class folder's __init__ makes), write
    its default stack and a profile; unregister it afterwards."""
    stack = tmp_path / "toy-stack.toml"
    stack.write_text(STACK)
    profile = tmp_path / "toy.toml"
    profile.write_text(PROFILE.format(host_link=HOST_LINK, host_sources=HOST_SOURCES))
    registry.register(registry.DeviceClass(
        name="toy", model=toy_costs, peaks=toy_peaks, default_stack=str(stack),
        schema=ClassSchema.of(must="compute.clock offchip_memory offchip_memory.capacity "
                                   "host_link")))
    try:
        yield profile
    finally:
        registry.unregister("toy")
    assert "toy" not in registry.names() + list(device_classes()) + list(stack_classes())
    with pytest.raises(ConfigError, match="class"):
        load_profile(profile)  # no longer a class a profile may name


def closed_form_latency_s(profile: Path, batch: int) -> float:
    """sum(FLOPs) / peak + the stack's step time on the host CPU of the default host system."""
    flops = work_table(build_model("resnet50"), batch, "fp16", "infer", "sgd")["flops"].sum()
    host_hz = host_clock_hz(resolve_hardware(str(profile))[0])
    return flops / PEAK_FLOPS_PER_S + STEP_S * REFERENCE_HZ / host_hz


def test_a_registered_class_is_listed_and_its_profile_loads(toy: Path) -> None:
    assert "toy" in registry.names()
    assert "toy" in device_classes() and "toy" in stack_classes()
    profile = load_profile(toy)
    assert profile.device_class == "toy"
    assert registry.peaks(profile, "fp16") == (PEAK_FLOPS_PER_S, PEAK_FLOPS_PER_S)


def test_its_schema_rules_are_the_ones_the_loader_applies(toy: Path) -> None:
    no_link = toy.with_name("no-link.toml")
    no_link.write_text(PROFILE.format(host_link="", host_sources=""))
    with pytest.raises(ConfigError, match="host_link"):  # `must` in the toy's rules
        load_profile(no_link)
    gpu_key = toy.with_name("gpu-key.toml")
    gpu_key.write_text(toy.read_text().replace("[compute]\n", "[compute]\nsm_count = 4\n"))
    with pytest.raises(ConfigError, match=r"not a field of class 'toy' \(only gpu, npu\)"):
        load_profile(gpu_key)


def test_it_simulates_at_its_cost_models_closed_form(
        toy: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["simulate", "resnet50", "--hw", str(toy), "--batch", "4", "--precision",
                 "fp16", "--json"]) == 0
    record = json.loads(capsys.readouterr().out)
    assert record["hardware"]["class"] == "toy"
    assert record["hardware"]["software"] == "toy-stack"  # its registered default stack
    assert record["hardware"]["software_default"] is True
    assert record["latency_s"] == pytest.approx(closed_form_latency_s(toy, 4), rel=1e-12)
    api = accelsim.simulate("resnet50", hw=str(toy), batch=4, precision="fp16")
    assert api.latency_s == pytest.approx(record["latency_s"], rel=1e-12)


def test_it_is_compared_with_another_device_on_its_own_roofline(toy: Path) -> None:
    runs = compare_runs("resnet50", [str(toy), "a100"], batch=4, precision="fp16")
    assert [r.row["device_class"] for r in runs] == ["toy", "gpu"]
    assert runs[0].row["latency_s"] == pytest.approx(closed_form_latency_s(toy, 4), rel=1e-12)
    assert runs[0].roof["peak_flops_per_s"] == PEAK_FLOPS_PER_S  # the toy's peaks
    alone = accelsim.compare("resnet50", "a100", batch=4, precision="fp16")
    assert runs[1].row["latency_s"] == alone.loc[0, "latency_s"]  # the other device unmoved


def test_it_is_swept_over_batch(toy: Path) -> None:
    frame = accelsim.sweep("resnet50", hw=str(toy), batch=[1, 2, 8], precision="fp16")
    assert list(frame["batch"]) == [1, 2, 8]
    for batch, latency_s in zip(frame["batch"], frame["latency_s"], strict=True):
        assert latency_s == pytest.approx(closed_form_latency_s(toy, int(batch)), rel=1e-12)


def test_the_invariants_hold_it_to_its_own_peaks(toy: Path, monkeypatch: pytest.MonkeyPatch
                                                 ) -> None:
    def twice_as_fast(*args: Any) -> pd.DataFrame:
        costs = toy_costs(*args)
        costs["compute_s"] /= 2
        return costs

    monkeypatch.setitem(registry.CLASSES, "toy", dataclasses.replace(
        registry.get("toy"), model=twice_as_fast))
    with pytest.raises(InvariantError, match="peak"):
        accelsim.simulate("resnet50", hw=str(toy), batch=1, precision="fp16")
