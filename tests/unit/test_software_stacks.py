"""Software stacks as data (hw_profiles/software/): loading, validation, selection, and what each
part of a stack does to a GPU's cost, checked against closed forms."""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from accelsim.devices.estimate import estimate
from accelsim.devices.gpu.model import gpu_costs
from accelsim.devices.mapping import FUSION_GROUP_OPS
from accelsim.errors import ConfigError, UnknownNameError
from accelsim.profiles.devices import load_profile
from accelsim.profiles.hardware import host_clock_hz, resolve_hardware
from accelsim.profiles.software import builtin_stacks, load_stack
from accelsim.profiles.stack_choice import check_software, default_stack, resolve_software
from accelsim.profiles.systems import load_system
from accelsim.workload.work import gemms_for, work_table
from accelsim.workload.zoo import build_model
from tests.helpers.paths import HW_PROFILES

ISSUE_STACKS = ("pytorch-eager", "pytorch-compiled", "tensorflow-graph", "tensorflow-xla",
                "mxnet", "tensorrt", "onnxruntime-tensorrt", "triton", "tflite-edgetpu",
                "vitis-ai", "openvino", "jax-xla")
STACK_DIR = HW_PROFILES / "software"


def test_every_stack_the_issue_names_is_built_in_and_sourced() -> None:
    stacks = builtin_stacks()
    assert set(ISSUE_STACKS) <= set(stacks)
    for stack in stacks.values():
        for key in ("host.per_step_us", "graph.weight_casts", "efficiency.tensor_core"):
            assert stack.sources[key].strip(), (stack.name, key)
    # every device class runs some stack by default, and only one
    for device_class in ("gpu", "cpu", "tpu", "fpga", "npu", "null"):
        owners = [s.name for s in stacks.values() if device_class in s.default_for]
        assert len(owners) == 1, (device_class, owners)
    assert default_stack("tpu").name == "jax-xla" and default_stack("fpga").name == "vitis-ai"


def test_old_names_are_aliases_and_unknown_names_list_the_stacks() -> None:
    assert check_software("eager") == "pytorch-eager"
    assert check_software("compiled") == "pytorch-compiled"
    with pytest.raises(UnknownNameError, match="tensorflow-xla"):
        check_software("jit")


def _write(tmp_path: Path, old: str, new: str) -> Path:
    text = (STACK_DIR / "tensorrt.toml").read_text(encoding="utf-8")
    assert old in text
    path = tmp_path / "mine.toml"
    path.write_text(text.replace(old, new, 1), encoding="utf-8")
    return path


@pytest.mark.parametrize(("old", "new", "field"), [
    ("per_step_us = 10.0", "per_step_us = -1.0", "host.per_step_us"),
    ("per_step_us = 10.0", "per_step_s = 1e-5", "host.per_step_s"),
    ("[host.per_kernel_us]\ngpu = 1.0", "[host.per_kernel_us]\nnpu2 = 1.0", "host.per_kernel_us"),
    ("tensor_core = 1.0", "tensor_core = 3.0", "efficiency.tensor_core"),
    ('fuses = ["elementwise", "normalization"]', 'fuses = ["everything"]', "graph.fuses"),
    ('classes = ["gpu", "npu"]', 'classes = ["gpu", "npu", "qpu"]', "classes"),
    ("framework_cores_per_device = 1", "framework_cores_per_device = 1.5",
     "host.framework_cores_per_device"),
    ("kv_block_tokens = 16", "kv_block_tokens = 0", "llm.kv_block_tokens"),
    ("memory_reserve_fraction = 0.1", "memory_reserve_fraction = 1.5",
     "llm.memory_reserve_fraction"),
])
def test_a_bad_stack_file_names_file_field_and_value(tmp_path: Path, old: str, new: str,
                                                     field: str) -> None:
    path = _write(tmp_path, old, new)
    with pytest.raises(ConfigError) as err:
        load_stack(path)
    assert str(path) in str(err.value) and field in str(err.value)


def test_a_gpu_stack_without_a_gpu_host_time_is_refused(tmp_path: Path) -> None:
    path = _write(tmp_path, "[host.per_kernel_us]\ngpu = 1.0\n", "[host.per_kernel_us]\n")
    text = path.read_text(encoding="utf-8")
    path.write_text(text.replace('"host.per_kernel_us.gpu"', '"host.per_kernel_us.npu2"'),
                    encoding="utf-8")
    with pytest.raises(ConfigError):
        load_stack(path)


def test_a_stack_that_does_not_run_on_the_class_gives_way_with_a_note() -> None:
    stack, note = resolve_software("tensorrt", "tpu")
    assert stack.name == "jax-xla" and "tensorrt" in note and "TPU" in note
    stack, note = resolve_software("default", "gpu")
    assert stack.name == "pytorch-eager" and note is None


def _one_relu(nbytes: float) -> tuple[pd.DataFrame, pd.DataFrame]:
    work = pd.DataFrame({"name": ["r"], "op": ["relu"], "phase": ["forward"],
                         "matmul": [False], "flops": [0.0], "read_bytes": [nbytes / 2],
                         "write_bytes": [nbytes / 2], "weight_bytes": [0.0], "op_index": [0]})
    return work, pd.DataFrame(columns=["op_index", "m", "n", "k", "count"])


def test_host_time_per_kernel_scales_with_the_host_cpu() -> None:
    """A tiny op is host-bound: its overhead is launch + the stack's host time x reference
    clock / host clock. The DGX-1's host (Ice Lake proxy, 3.4 GHz) and the DGX H100's
    (Sapphire Rapids, 3.8 GHz x 1.19 IPC) differ by their single-thread clocks."""
    v100 = load_profile("v100")
    work, gemms = _one_relu(1e3)
    eager = builtin_stacks()["pytorch-eager"]
    dgx1, dgxh = host_clock_hz(load_system("dgx-1")), host_clock_hz(load_system("dgx-h100"))
    assert dgx1 == pytest.approx(3.4e9) and dgxh == pytest.approx(3.8e9 * 1.19, rel=1e-3)
    launch_s = 3e-6  # gpu.toml assumed.kernel_launch_s
    for clock in (dgx1, dgxh):
        costs = gpu_costs(v100, work, gemms, "fp16", eager.on_host(clock)).to_frame()
        expected = launch_s + eager.per_kernel_s["gpu"] * 3.4e9 / clock - float(
            max(costs["compute_s"].iloc[0], costs["memory_s"].iloc[0]))
        assert costs["overhead_s"].iloc[0] == pytest.approx(expected, rel=1e-9)


def test_a_device_alone_runs_in_the_default_host() -> None:
    system, _ = resolve_hardware("t4")
    assert system.host.cpu == "epyc-7763"
    assert host_clock_hz(system) == pytest.approx(3.5e9)


def test_triton_adds_its_per_request_time_to_the_same_kernels() -> None:
    """triton and onnxruntime-tensorrt run the same kernels; triton adds a request's time once
    per batch (NB: one request per batch), its inputs' bytes at its payload rate (4 fp16
    224 x 224 x 3 images) and its own tensor-core modifier."""
    graph, v100 = build_model("resnet18"), load_profile("v100")
    ort = builtin_stacks()["onnxruntime-tensorrt"]
    triton = dataclasses.replace(builtin_stacks()["triton"], efficiency=ort.efficiency)
    a = estimate(graph, v100, 4, "fp16", "infer", ort)
    b = estimate(graph, v100, 4, "fp16", "infer", triton)
    payload_s = 4 * 3 * 224 * 224 * 2 / triton.payload_bytes_per_s
    extra_s = triton.per_step_s + triton.per_request_s + payload_s - ort.per_step_s
    assert b.step_time_s - a.step_time_s == pytest.approx(extra_s, rel=1e-6)


def test_fusion_follows_the_stack_groups() -> None:
    """tensorflow-graph fuses elementwise ops only: relus join their producer, batchnorms do
    not; pytorch-eager fuses nothing; pytorch-compiled fuses both groups."""
    graph, v100 = build_model("resnet18"), load_profile("v100")
    work = work_table(graph, 2, "fp16", "infer")
    gemms = gemms_for(graph, 2)
    units = {name: gpu_costs(v100, work, gemms, "fp16", builtin_stacks()[name])["unit"]
             for name in ("tensorflow-graph", "pytorch-eager", "pytorch-compiled")}
    ops = work["op"].to_numpy()
    relu, bn = ops == "relu", ops == "batchnorm"
    assert (units["tensorflow-graph"][relu] == "fused").all()
    assert not (units["tensorflow-graph"][bn] == "fused").any()
    assert not (units["pytorch-eager"] == "fused").any()
    norm_ops = np.isin(ops, list(FUSION_GROUP_OPS["normalization"]))
    assert (units["pytorch-compiled"][norm_ops] == "fused").all()


def test_layout_conversions_add_transposes_around_tensor_core_convs() -> None:
    """Each conversion is one kernel that reads and writes the conv's input activation."""
    graph, v100 = build_model("resnet18"), load_profile("v100")
    work = work_table(graph, 2, "fp16", "infer")
    gemms = gemms_for(graph, 2)
    base = builtin_stacks()["pytorch-eager"]
    nchw = dataclasses.replace(base, layout_conversions_per_conv=2.0)
    a = gpu_costs(v100, work, gemms, "fp16", base).to_frame()
    b = gpu_costs(v100, work, gemms, "fp16", nchw).to_frame()
    conv = (work["op"] == "conv2d").to_numpy()
    activation = (work["read_bytes"] - work["weight_bytes"]).to_numpy(dtype=float)
    assert (b["kernels"] - a["kernels"]).to_numpy() == pytest.approx(np.where(conv, 2.0, 0.0))
    assert (b["dram_bytes"] - a["dram_bytes"]).to_numpy() == pytest.approx(
        np.where(conv, 4.0 * activation, 0.0))
    fp32 = gpu_costs(v100, work_table(graph, 2, "fp32", "infer"), gemms, "fp32", nchw).to_frame()
    assert (fp32["kernels"] == gpu_costs(v100, work_table(graph, 2, "fp32", "infer"), gemms,
                                         "fp32", base)["kernels"]).all()  # CUDA cores: none


def test_an_efficiency_modifier_divides_a_big_gemms_compute_time() -> None:
    v100 = load_profile("v100")
    m = n = k = 4096
    work = pd.DataFrame({"name": ["g"], "op": ["matmul"], "phase": ["forward"], "matmul": [True],
                         "flops": [2.0 * m * n * k], "read_bytes": [2.0 * (m * k + k * n)],
                         "write_bytes": [2.0 * m * n], "weight_bytes": [0.0], "op_index": [0]})
    gemms = pd.DataFrame({"op_index": [0], "m": [m], "n": [n], "k": [k], "count": [1]})
    base = builtin_stacks()["pytorch-eager"]
    half = dataclasses.replace(base, efficiency={**base.efficiency, "tensor_core": 0.5})
    a = gpu_costs(v100, work, gemms, "fp16", base).to_frame()["compute_s"].iloc[0]
    b = gpu_costs(v100, work, gemms, "fp16", half).to_frame()["compute_s"].iloc[0]
    assert b == pytest.approx(2 * a)


def test_the_cli_states_the_stack_and_lists_them(capsys) -> None:  # noqa: ANN001
    from accelsim.cli import main

    main(["simulate", "resnet50", "--hw", "a100", "--batch", "2", "--json"])
    obj = json.loads(capsys.readouterr().out)
    assert obj["hardware"]["software"] == "pytorch-eager"
    assert obj["hardware"]["software_default"] is True
    main(["list", "--json"])
    listed = {s["name"] for s in json.loads(capsys.readouterr().out)["software"]}
    assert set(ISSUE_STACKS) <= listed


def test_a_served_batch_pays_the_server_stack_per_request(tmp_path: Path) -> None:
    """Serving batches single-sample requests: a server stack's per-request time is charged
    once per request, i.e. (b - 1) more times than in the estimate of one b-sample request.
    (A copy of triton with 20 us per request: the shipped fitted value may be 0.)"""
    from accelsim.sim.service import service_table

    text = (STACK_DIR / "triton.toml").read_text(encoding="utf-8")
    stack = tmp_path / "server.toml"
    stack.write_text(re.sub(r"(?m)^per_request_us = .*$", "per_request_us = 20.0", text),
                     encoding="utf-8")
    graph, v100 = build_model("resnet18"), load_profile("v100")
    table = service_table(graph, v100, None, 4, "fp16", str(stack))
    per_request_s = 20e-6
    for b in (1, 4):
        one_request = estimate(graph, v100, b, "fp16", "infer", str(stack)).step_time_s
        assert table.loc[b, "compute_s"] == pytest.approx(one_request + (b - 1) * per_request_s)


def test_gpu_fitted_modifiers_do_not_reach_other_classes() -> None:
    """A stack whose [efficiency] modifiers hold on GPUs only (`efficiency_classes`) runs a CPU
    at modifiers 1; without the field a modifier holds on every class of the stack."""
    from accelsim.profiles.software import load_stack

    mxnet = load_stack("mxnet")
    assert mxnet.efficiency_classes == ("gpu",)
    assert mxnet.modifier("tensor_core", "gpu") == mxnet.efficiency["tensor_core"] != 1.0
    assert mxnet.modifier("tensor_core", "cpu") == 1.0
    assert mxnet.modifier("cuda_core", "cpu") == 1.0
    open_stack = dataclasses.replace(mxnet, efficiency_classes=None)
    assert open_stack.modifier("cuda_core", "cpu") == mxnet.efficiency["cuda_core"]


def test_a_stack_with_the_old_cpu_tile_keys_is_refused_naming_the_field(tmp_path) -> None:
    """`[cpu_tiling]` keys name the register micro-tile (`micro_tile_m/_n`); a file written
    with the former per-core tile keys fails loudly instead of being read with a new meaning."""
    from accelsim.errors import ConfigError
    from accelsim.profiles.software import load_stack

    text = Path("hw_profiles/software/pytorch-eager.toml").read_text(encoding="utf-8")
    old = tmp_path / "old.toml"
    old.write_text(text + "\n[cpu_tiling]\ncore_tile_m = 4\ncore_tile_n = 4\n", encoding="utf-8")
    with pytest.raises(ConfigError, match="core_tile_m"):
        load_stack(old)
    new = tmp_path / "new.toml"
    new.write_text(text.replace("[sources]\n", "[cpu_tiling]\nmicro_tile_m = 4\n"
                                "micro_tile_n = 16\n\n[sources]\n")
                   + '"cpu_tiling.micro_tile_m" = "assumed: test"\n'
                   + '"cpu_tiling.micro_tile_n" = "assumed: test"\n', encoding="utf-8")
    assert load_stack(new).cpu_micro_tile == (4, 16)


def _without(tmp_path: Path, section: str, key: str) -> Path:
    """pytorch-eager with `key` (of `[section]`) and its source taken out."""
    text = (STACK_DIR / "pytorch-eager.toml").read_text(encoding="utf-8")
    bare = re.sub(rf'(?m)^({key} = .*|"{section}\.{key}" = .*)\n', "", text)
    assert bare.count("\n") == text.count("\n") - 2
    path = tmp_path / f"no-{key}.toml"
    path.write_text(bare, encoding="utf-8")
    return path


@pytest.mark.parametrize(("section", "key"), [
    ("host", "framework_cores_per_device"), ("llm", "kv_block_tokens"),
    ("llm", "max_running_sequences"), ("llm", "memory_reserve_fraction"),
])
def test_a_stack_without_an_optional_figure_takes_the_class_defaults(
        tmp_path: Path, section: str, key: str,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """An optional figure a stack file leaves out is the device class's default stack's (the
    same number: a run on such a stack moves nothing); where the default has none either, the
    run is refused in one line naming the file and the field."""
    from accelsim.profiles import stack_choice

    path = _without(tmp_path, section, key)
    bare = load_stack(path)
    assert getattr(bare, key) is None
    eager = builtin_stacks()["pytorch-eager"]
    assert bare.figure(f"{section}.{key}", "gpu") == getattr(eager, key) is not None
    other_dir = tmp_path / "default"
    other_dir.mkdir()
    default_bare = load_stack(_without(other_dir, section, key))
    monkeypatch.setattr(stack_choice, "default_stack", lambda device_class: default_bare)
    with pytest.raises(ConfigError, match=f"{section}.{key}") as err:
        bare.figure(f"{section}.{key}", "gpu")
    # the user's file is the one named first: it is the one to mend
    assert str(err.value).startswith(str(path)) and "\n" not in str(err.value)


def test_a_calibrated_stack_without_the_figures_still_trains_and_serves(tmp_path: Path) -> None:
    """A stack file written before the figures moved out of Python (as `accelsim calibrate`
    writes one) trains and serves as before: the class default's figures stand in."""
    from accelsim.run import run_simulation
    from accelsim.sim.config import TrainConfig, resolve_config
    from accelsim.sim.knobs import make_config
    from accelsim.workload.scenario import resolve_workload

    text = (STACK_DIR / "pytorch-compiled.toml").read_text(encoding="utf-8")
    old = re.sub(r'(?m)^\[llm\]\n(\w+ = [^\n]*\n)*\n|^(framework_cores_per_device|'
                 r'"host\.framework_cores_per_device"|"llm\.\w+") = [^\n]*\n', "", text)
    assert "[llm]" not in old and "framework_cores" not in old and '"llm.' not in old
    path = tmp_path / "old.toml"
    path.write_text(old, encoding="utf-8")
    assert load_stack(path).kv_block_tokens is None
    plan = resolve_config(TrainConfig(resolve_workload("resnet50-train"),
                                      load_system("dgx-a100"), devices=2, steps=2,
                                      software=str(path)))
    assert plan.framework_cores == 2
    knobs = {"mode": "serve", "rate": 1.0, "requests": 4, "prompt_tokens": 64,
             "output_tokens": 4}
    mine = run_simulation(make_config("llama2_7b", "a100", software=str(path), **knobs)).record
    ref = run_simulation(make_config("llama2_7b", "a100", software="compiled", **knobs)).record
    assert mine["memory"]["kv_block_tokens"] == 16
    assert mine["memory"] == ref["memory"] and mine["ttft_p50_s"] == ref["ttft_p50_s"]


def test_the_shipped_stacks_keep_the_figures_moved_out_of_python() -> None:
    """Moving the figures into the stack files kept them, on every built-in stack: one host
    core per accelerator for the framework, and vLLM's defaults (Kwon et al. 2023; docs.vllm.ai
    engine arguments): 16-token KV blocks, 256 running sequences, gpu_memory_utilization 0.9."""
    # the LLM serving stacks give their own (sourced in their files and in
    # benchmarks/fidelity/llm_sources.md): TensorRT-LLM tokens_per_block 64 and build
    # max_batch_size 2048; SGLang's token-level radix cache and mem_fraction_static 0.88;
    # FasterTransformer's one contiguous KV cache per batch (ParallelGpt::allocateBuffer)
    own = {"tensorrt-llm": (64, 2048, 0.1), "sglang": (1, 4096, 0.12),
           "fastertransformer": (1, 256, 0.1)}
    for stack in builtin_stacks().values():
        assert stack.framework_cores_per_device == 1, stack.name
        blocks, running, reserve = own.get(stack.name, (16, 256, 0.1))
        assert stack.kv_block_tokens == blocks, stack.name
        assert stack.max_running_sequences == running, stack.name
        assert stack.memory_reserve_fraction == reserve, stack.name


def test_a_serving_stack_gives_its_default_chunked_prefill() -> None:
    """SGLang chunks prompts at 8,192 tokens a step by default (ServerArgs), vLLM 0.4 does not
    (enable_chunked_prefill False): a run that sets nothing is the run that sets the stack's
    figure, and --chunked-prefill 0 turns a stack's chunking off."""
    from accelsim.run import run_simulation
    from accelsim.sim.knobs import make_config

    knobs = {"mode": "serve", "rate": 20.0, "requests": 60, "prompt_tokens": 1024,
             "output_tokens": 16}

    def run(**more: object) -> dict:
        rec = run_simulation(make_config("llama2_7b", "a100", **knobs, **more)).record
        return {k: rec[k] for k in ("ttft_p50_s", "tpot_p50_s", "engine_steps")}

    assert run(software="sglang") == run(software="sglang", chunked_prefill=8192)
    assert run(software="sglang", chunked_prefill=0) == run(software="vllm", chunked_prefill=0)
    assert run(software="vllm") == run(software="vllm", chunked_prefill=0)
    assert run(software="sglang") != run(software="sglang", chunked_prefill=0)
