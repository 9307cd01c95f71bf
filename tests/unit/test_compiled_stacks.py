"""Software stacks on the classes that run a graph compiled ahead of time (TPU, FPGA, NPU):
the stack's `graph.fuses`, `[efficiency]` modifiers and per-kernel host time are honoured,
fields such a class cannot use are refused with one line naming file, field and value; and an
NPU's host-fallback rows are held to the system's own CPU, not the stand-in host.

Expected values come from closed forms (SCALE-Sim's fold formula, PP x ICP x OCP tiles,
MACs / rate) and the profiles' published numbers, not from the code under test."""

from __future__ import annotations

import dataclasses
import math
import re
import tomllib
from pathlib import Path

import numpy as np
import pytest

from accelsim.cli import main
from accelsim.datafiles import builtin_files
from accelsim.devices.estimate import estimate
from accelsim.devices.fpga import model as fpga
from accelsim.devices.invariants import InvariantError
from accelsim.devices.npu import model as npu
from accelsim.devices.systolic import model as systolic
from accelsim.errors import ConfigError
from accelsim.profiles.devices import load_profile
from accelsim.profiles.software import SoftwareStack, load_stack
from accelsim.profiles.stack_choice import default_stack
from accelsim.workload.graph import GraphBuilder
from accelsim.workload.work import gemms_for, work_table


def stack_file(tmp_path, name: str, **subs: str):
    """A copy of built-in stack `name` with each `key = ...` line replaced (key -> new line)."""
    text = builtin_files("hw_profiles", "software/*.toml")[name].read_text()
    if subs.get("fuses") == "":  # absent: nothing fused (an empty list is refused)
        text = re.sub(r'^"graph.fuses" = .*$', "", text, count=1, flags=re.MULTILINE)
    for key, line in subs.items():
        assert re.search(rf"^{key} = ", text, flags=re.MULTILINE), key
        text = re.sub(rf"^{key} = .*$", line, text, count=1, flags=re.MULTILINE)
    path = tmp_path / f"my-{name}.toml"
    path.write_text(text)
    return str(path)


def stack(tmp_path, name: str, **subs: str) -> SoftwareStack:
    """`stack_file`'s stack, loaded (what a class model takes)."""
    return load_stack(Path(stack_file(tmp_path, name, **subs)))


def conv_bn_relu(channels: int = 64, size: int = 28):
    g = GraphBuilder("conv_bn_relu")
    y = g.conv2d(g.input("x", (channels, size, size)), out_channels=channels, kernel=3,
                 stride=1, padding=1, bias=False, name="conv")
    g.relu(g.batchnorm(y, name="bn"), name="act")
    graph = g.build()
    return graph, work_table(graph, 1, "int8", "infer"), gemms_for(graph, 1)


# ---- refused: fields a compiled class cannot use --------------------------------------------

@pytest.mark.parametrize(("device", "field", "line"), [
    ("tpu-v4", "graph.weight_casts", "weight_casts = true"),
    ("zcu102", "graph.layout_conversions_per_conv", "layout_conversions_per_conv = 2.0"),
    ("edge-tpu", "graph.weight_casts", "weight_casts = true"),
])
def test_a_field_the_class_cannot_use_is_refused_naming_file_field_value(
        tmp_path, capsys, device: str, field: str, line: str) -> None:
    base = {"tpu-v4": "jax-xla", "zcu102": "vitis-ai", "edge-tpu": "tflite-edgetpu"}[device]
    path = stack_file(tmp_path, base, **{field.split(".")[1]: line})
    graph, _, _ = conv_bn_relu()
    with pytest.raises(ConfigError) as err:
        estimate(graph, load_profile(device), 1, "int8" if device != "tpu-v4" else "bf16",
                 software=path)
    assert err.value.source == path and err.value.field == field
    code = main(["simulate", "resnet50", "--hw", device, "--software", path])
    out = capsys.readouterr().err.strip()
    assert code == 2 and len(out.splitlines()) == 1 and "Traceback" not in out, out
    assert path in out and field in out


# ---- honoured: efficiency modifiers ----------------------------------------------------------

def test_tpu_tensor_core_and_dram_modifiers_scale_the_fold_count_and_memory_time(tmp_path):
    tpu = load_profile("tpu-v4")
    c = tpu.compute
    g = GraphBuilder("one_fc")
    g.linear(g.input("x", (1024,)), out_features=1024, bias=False, name="fc")
    graph = g.build()
    work, gemms = work_table(graph, 256, "bf16", "infer"), gemms_for(graph, 256)
    slow = stack(tmp_path, "jax-xla", tensor_core="tensor_core = 0.5",
                      dram_bandwidth="dram_bandwidth = 0.25")
    base = systolic.systolic_costs(tpu, work, gemms, "bf16",
                                   default_stack("tpu")).to_frame().iloc[0]
    half = systolic.systolic_costs(tpu, work, gemms, "bf16", slow).to_frame().iloc[0]
    # SCALE-Sim ws: folds = ceil(K / R) * ceil(N / C) shared over the MXUs, each 2R + C + M - 2
    rows, cols = int(c.mxu_rows), int(c.mxu_cols)
    folds = math.ceil(1024 / rows) * math.ceil(1024 / cols)
    cycles = math.ceil(folds / int(c.mxu_count)) * (2 * rows + cols + 256 - 2) - 1
    assert base["compute_s"] * c.clock_hz == pytest.approx(cycles, abs=1)
    assert half["compute_s"] * c.clock_hz == pytest.approx(2 * cycles, abs=2)
    assert half["memory_s"] == pytest.approx(4 * base["memory_s"])


def test_a_modifier_above_one_cannot_lift_a_unit_above_its_datasheet_rate(tmp_path) -> None:
    graph, work, gemms = conv_bn_relu()
    edge = load_profile("edge-tpu")
    fast = stack(tmp_path, "tflite-edgetpu", tensor_core="tensor_core = 2.0")
    base = npu.npu_costs(edge, work, gemms, "int8", default_stack("npu")).to_frame()
    lifted = npu.npu_costs(edge, work, gemms, "int8", fast).to_frame()
    assert np.allclose(lifted["compute_s"], base["compute_s"])


def test_npu_tensor_core_modifier_halves_the_mac_array_rate(tmp_path) -> None:
    g = GraphBuilder("one_fc")
    g.linear(g.input("x", (512,)), out_features=512, bias=False, name="fc")
    graph = g.build()
    work, gemms = work_table(graph, 64, "int8", "infer"), gemms_for(graph, 64)
    orin = load_profile("jetson-orin")  # no array geometry: MACs / rate, a closed form
    assert orin.compute.mxu_rows is None
    half = stack(tmp_path, "tflite-edgetpu", tensor_core="tensor_core = 0.5")
    rate = npu.matmul_rate(orin, "int8")[1]
    got = npu.npu_costs(orin, work, gemms, "int8", half).to_frame()["compute_s"].iloc[0]
    assert got == pytest.approx(64 * 512 * 512 / (0.5 * rate))


def test_fpga_overlay_tensor_core_modifier_multiplies_the_fitted_mac_efficiency(tmp_path):
    eff = tomllib.loads(builtin_files("hw_profiles", "efficiency/*.toml")["fpga"].read_text())
    fitted = eff["fitted"]["overlay_mac_efficiency"]
    board = load_profile("zcu104")
    ov = board.compute.overlay
    graph, work, gemms = conv_bn_relu()
    half = stack(tmp_path, "vitis-ai", tensor_core="tensor_core = 0.5")
    costs = fpga.fpga_costs(board, work, gemms, "int8", half, batch=1).to_frame()
    tiles = math.ceil(28 * 28 / ov.pixel_parallelism) * math.ceil(
        64 / ov.output_channel_parallelism) * math.ceil(64 * 9 / ov.input_channel_parallelism)
    # batch 1: one image on one engine (a DPU core does not split an image over the others)
    assert costs["compute_s"].iloc[0] * ov.clock_hz == pytest.approx(
        math.ceil(tiles / (0.5 * fitted)), abs=1.0)


# ---- honoured: the fusion list and the host time per kernel ----------------------------------

@pytest.mark.parametrize(("device", "base", "precision"), [
    ("zcu104", "vitis-ai", "int8"), ("orin-dla", "tflite-edgetpu", "int8"),
    ("tpu-v4", "jax-xla", "bf16")])
def test_the_stack_fusion_list_decides_what_fuses(tmp_path, device, base, precision) -> None:
    g = GraphBuilder("conv_bn_relu")
    y = g.conv2d(g.input("x", (64, 28, 28)), out_channels=64, kernel=3, stride=1, padding=1,
                 bias=False, name="conv")
    g.relu(g.batchnorm(y, name="bn"), name="act")
    graph = g.build()
    work, gemms = work_table(graph, 1, precision, "infer"), gemms_for(graph, 1)
    model = {"zcu104": fpga.fpga_costs, "orin-dla": npu.npu_costs,
             "tpu-v4": systolic.systolic_costs}[device]
    profile = load_profile(device)
    act_bytes = float(work["write_bytes"].iloc[0])  # the conv's 64 x 28 x 28 output
    for fuses, fused in (('fuses = ["elementwise", "normalization"]', {"bn", "act"}),
                         ('fuses = ["normalization"]', {"bn"}), ("", set())):
        costs = model(profile, work, gemms, precision,
                      stack(tmp_path, base, fuses=fuses)).to_frame(index=work["name"])
        unit = costs["unit"] if "unit" in costs else None
        got = set() if unit is None else {n for n in ("bn", "act") if unit[n] == "fused"}
        assert got == fused, fuses
        for name in ("bn", "act"):  # a fused row moves no activation through DRAM
            if name in fused:
                assert costs.loc[name, "dram_bytes"] < act_bytes
            else:
                assert costs.loc[name, "dram_bytes"] >= 2 * act_bytes


def test_npu_waits_on_the_stacks_host_time_per_kernel_beyond_its_own(tmp_path) -> None:
    """Issue overlaps the device (as on a GPU): a kernel waits max(host - own time, 0); the
    rows fused into it issue nothing."""
    graph, work, gemms = conv_bn_relu()
    edge = load_profile("edge-tpu")
    base = npu.npu_costs(edge, work, gemms, "int8", default_stack("npu")).to_frame()
    own_s = float(np.maximum(base["compute_s"], base["memory_s"]).iloc[0]
                  + base["overhead_s"].iloc[0])
    for host_us in (100.0, 1e5):
        slow = stack(tmp_path, "tflite-edgetpu", npu=f"npu = {host_us}")
        more = npu.npu_costs(edge, work, gemms, "int8", slow).to_frame()
        added = (more["overhead_s"] - base["overhead_s"]).to_numpy()
        assert added == pytest.approx([max(host_us * 1e-6 - own_s, 0.0), 0.0, 0.0])
    assert 1e5 * 1e-6 > own_s  # the long one is charged


# ---- the NPU's host-fallback rows against the system's own CPU -------------------------------

def host_chain_on_npu():
    """Three 4096-wide linears an Edge TPU without `linear` runs on its host: host rows in a
    row move no data over the link, so the host's own matrix peak sets their time."""
    g = GraphBuilder("host_chain")
    x = g.input("x", (4096,))
    for i in range(3):
        x = g.linear(x, out_features=4096, name=f"fc{i}")
    edge = load_profile("edge-tpu")
    ops = tuple(o for o in edge.compute.supported_ops if o != "linear")
    return g.build(), dataclasses.replace(edge, compute=dataclasses.replace(
        edge.compute, supported_ops=ops))


def test_host_rows_are_held_to_the_systems_own_cpu_not_the_stand_in() -> None:
    graph, edge = host_chain_on_npu()
    host = load_profile("xeon-8480")
    stand_in = load_profile(npu.DEFAULT_HOST)
    est = estimate(graph, edge, 4096, "int8", host_cpu=host)  # no false alarm
    middle = est.layers.iloc[1]
    assert middle["unit"] == "host"
    rate = middle["flops"] / middle["time_s"]
    stand_in_peak = max([*stand_in.compute.matrix_peak_flops_per_s.values(),
                         *stand_in.compute.vector_peak_flops_per_s.values()])
    assert rate > stand_in_peak  # the stand-in's peak would have flagged it
    assert rate <= host.compute.matrix_peak_flops_per_s["int8"]  # its own AMX peak does not


def test_a_host_row_above_the_systems_own_cpu_peak_is_still_caught() -> None:
    graph, edge = host_chain_on_npu()
    host = load_profile("xeon-8480")
    est = estimate(graph, edge, 4096, "int8", host_cpu=host)
    from accelsim.devices.invariants import check_estimate

    slow_host = dataclasses.replace(host, compute=dataclasses.replace(
        host.compute, matrix_peak_flops_per_s={}))
    with pytest.raises(InvariantError, match="peak"):
        check_estimate(est.layers, edge, "int8", edge.power.tdp_w, 0.0, {"test": 1},
                       slow_host)
