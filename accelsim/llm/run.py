"""The token-level LLM run behind `run_simulation` when a run sets an LLM knob or serves a
decoder (`routes_to_llm`): a pure function of the `SimulationConfig`, returning the usual record
with the LLM figures added. Prompt and output lengths not given are the defaults, said in the
notes.

    res = run_llm(make_config("llama2_7b", "a100", prompt_tokens=512, output_tokens=128,
                              batch=8))
    res.record["ttft_s"], res.record["tpot_s"], res.record["kv_cache_bytes"]

LLM knobs (`SimulationConfig.llm`): prompt_tokens, output_tokens, tp, pp, overlap_tp,
expert_parallel, weight_precision, kv_precision (infer and serve); batching, length_dist,
slo_ttft_s, slo_tpot_s, chunked_prefill, requests_file (serve); zero, recompute (train; with
the pipeline's accumulate, bucket_mb, overlap_allreduce, allreduce, nodes). Mode infer costs
one batch (`accelsim.llm.infer`), mode serve runs the server (`accelsim.llm.serve`), mode train
one training step (`accelsim.llm.train_record`). A split that does not fit in device memory
is a result: memory says why and how it could fit, the figures are None.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from accelsim.devices.estimate import capacity_bytes
from accelsim.errors import AccelsimError
from accelsim.formats import get_format
from accelsim.llm.costs import QUANTISED, Platform, check_platform
from accelsim.llm.infer import infer_batch
from accelsim.llm.memory import memory_plan
from accelsim.llm.models import DecoderConfig, decoder, decoder_names, is_decoder
from accelsim.llm.parallel import Layout, layout
from accelsim.llm.record import (
    DEFAULT_OUTPUT_TOKENS,
    DEFAULT_PROMPT_TOKENS,
    base_record,
    does_not_fit,
    memory_record,
)
from accelsim.llm.steps import StepModel
from accelsim.profiles.devices import with_dataflow
from accelsim.profiles.hardware import host_clock_hz, resolve_hardware
from accelsim.profiles.stack_choice import resolve_software
from accelsim.results.headline import Figures
from accelsim.results.records import Recorder
from accelsim.sim.spec import SimulationConfig, SimulationResult

SERVE_ONLY = ("batching", "length_dist", "slo_ttft_s", "slo_tpot_s", "chunked_prefill",
              "prefill_tokens", "requests_file")
# (prompt_tokens ... weight_precision: infer and serve; zero, recompute: train; tp, pp,
# expert_parallel: every mode; `accelsim.sim.knobs`)


def _formats(precision: str, weights: str | None, profile: Any, notes: list[str],
             mode: str = "infer") -> tuple[str, str, str | None]:
    """(compute format, weight format, W8A8 / W4A4 GEMM format or None) from the scenario
    precision and weight_precision. fp8 runs W8A8 on a GPU whose matrix units list fp8 (Hopper,
    Ada, Blackwell, CDNA3), fp4 (NVFP4) W4A4 on one that lists fp4 (Blackwell); each runs
    weight-only elsewhere or when --weight-precision is given. A training step in fp8 runs
    bf16 with fp8 GEMMs (Transformer Engine's recipe); fp4 training is not modelled."""
    fp8_units = (profile.device_class == "gpu"
                 and "fp8" in profile.compute.matrix_peak_flops_per_s)
    if get_format(precision).block_elements is not None:  # fp4, nvfp4, mxfp4
        return _fp4_formats(get_format(precision).name, weights, profile, notes, mode)
    if mode == "train" and precision.startswith("fp8") and weights is None:
        if not fp8_units:
            raise AccelsimError(f"{profile.name} has no fp8 matrix units to train in fp8: "
                                "choose bf16 or fp16")
        notes.append(f"--precision {precision} training: bf16 with the layers' GEMMs in fp8 "
                     "(forward, data and weight gradients; Transformer Engine's delayed "
                     "scaling), 16-bit weights, fp32 master weights and Adam state")
        return "bf16", "bf16", "fp8"
    if precision == "fp32" and mode == "train":
        notes.append("fp32 (a bare model's default) trains in fp16 mixed precision here, as "
                     "LLM training runs in 16 bits (--precision bf16 chooses bf16)")
        precision = "fp16"
    elif precision == "fp32":
        notes.append("fp32 (a bare model's default) runs as fp16 here, as LLM inference "
                     "stacks serve 16-bit weights (--precision bf16 or --weight-precision "
                     "choose others)")
        precision = "fp16"
    elif precision.startswith("fp8") and weights is None:
        if fp8_units:
            notes.append(f"--precision {precision}: W8A8, the layers' GEMMs on fp8 tensor "
                         "cores with fp8 weights and activations (static per-tensor scales); "
                         "LM head, attention and elementwise work in fp16 (--weight-precision "
                         "fp8 runs weight-only, --kv-precision fp8 an fp8 KV cache)")
            return "fp16", "fp8", "fp8"
        notes.append(f"{profile.name} has no fp8 matrix units: --precision {precision} runs "
                     "weight-only (fp8 weights dequantised to fp16 inside the GEMM, as "
                     "weight-only kernels such as vLLM's Marlin run it on Ampere)")
        return "fp16", "fp8", None
    elif precision in QUANTISED or precision.startswith("fp8"):
        base = "fp8" if precision.startswith("fp8") else precision
        notes.append(f"--precision {precision}: weight-only {base} (activations and KV cache "
                     "in fp16)")
        return "fp16", weights or base, None
    return precision, weights or precision, None


def _fp4_formats(precision: str, weights: str | None, profile: Any, notes: list[str],
                 mode: str) -> tuple[str, str, str | None]:
    """`_formats` for a 4-bit float precision: W4A4 NVFP4 where the GPU's matrix units list
    fp4, weight-only 4-bit elsewhere or under --weight-precision."""
    if mode == "train":
        raise AccelsimError(f"--precision {precision} training is not modelled (NVFP4 training "
                            "keeps some layers and the gradients' GEMMs in higher "
                            "precision): train in bf16, fp16 or fp8")
    layout = ("NVFP4 layout: e2m1 codes with an e4m3 scale per 16 elements, 0.5625 B per "
              "element" + ("; MXFP4's e8m0 scale per 32 would save 0.03 B, not modelled"
                           if precision == "mxfp4" else ""))
    fp4_units = (profile.device_class == "gpu"
                 and "fp4" in profile.compute.matrix_peak_flops_per_s)
    if weights is None and fp4_units:
        notes.append(f"--precision {precision}: W4A4, the layers' GEMMs on fp4 tensor cores "
                     f"with fp4 weights and activations ({layout}; each GEMM input quantised "
                     "per block by the kernel before it); LM head, attention and elementwise "
                     "work in fp16 (--kv-precision fp8 an fp8 KV cache)")
        return "fp16", "fp4", "fp4"
    why = (f"{profile.name} has no fp4 matrix units: " if weights is None else "")
    notes.append(f"{why}--precision {precision} runs weight-only (fp4 weights dequantised to "
                 f"fp16 inside the GEMM; {layout})")
    return "fp16", weights or "fp4", None


def _setup(cfg: Any, notes: list[str]) -> tuple[DecoderConfig, Any, Any, Platform, Layout]:
    sc = cfg.scenario
    if cfg.decoder is None and not is_decoder(sc.model):
        raise AccelsimError(f"LLM knobs ({', '.join(sorted(cfg.llm))}) apply to decoder models "
                            f"({', '.join(decoder_names())}), not '{sc.model}'")
    if sc.input and set(sc.input) != {"seq_len"}:
        raise AccelsimError(f"model inputs {sorted(sc.input)} do not apply to a token-level "
                            "LLM run: prompt_tokens and output_tokens set the lengths "
                            "(training: seq_len)")
    if getattr(cfg, "execute", False):
        raise AccelsimError("--execute does not apply to a token-level decoder run")
    # a config file's decoder was read when the config was made (`make_config`)
    model = cfg.decoder if cfg.decoder is not None else decoder(sc.model)
    system, profile = resolve_hardware(cfg.hardware)
    if cfg.dataflow:
        profile = with_dataflow(profile, cfg.dataflow)
    compute, weights, matmul = _formats(sc.precision, cfg.llm.get("weight_precision"),
                                        profile, notes, cfg.mode or sc.mode)
    ep = cfg.llm.get("expert_parallel", False)
    # the stack on this system's host CPU (its host times scale with the host's clock)
    stack, stack_note = resolve_software(cfg.software, profile.device_class,
                                         host_clock_hz(system))
    if stack_note:
        notes.append(stack_note)
    plat = Platform(model, profile, stack, compute, weights, cfg.llm.get("tp", 1), ep,
                    cfg.llm.get("kv_precision"), matmul)
    check_platform(plat)
    lay = layout(model, system, plat.tp, cfg.llm.get("pp", 1), cfg.llm.get("overlap_tp", False),
                 ep, _nodes(cfg))
    return model, system, profile, plat, lay


def _nodes(cfg: Any) -> int:
    """The nodes of the run: training's knob, or a decoder inference's (an LLM knob)."""
    return int(cfg.llm.get("nodes", cfg.train.get("nodes", 1)))


def routes_to_llm(cfg: Any) -> bool:
    """Whether `run_simulation` hands `cfg` to `run_llm`: an LLM knob is set, the model is a
    decoder without a layer graph (a config file, or a decoder name the zoo has not: its
    `decoder` is set), or a decoder is served (`--mode serve`: the token-level engine, not
    the request-level batcher)."""
    mode = cfg.mode or cfg.scenario.mode
    return (bool(cfg.llm) or cfg.decoder is not None
            or (mode == "serve" and is_decoder(cfg.scenario.model)))


def _scenario_prompt(cfg: Any, output: int, notes: list[str]) -> int:
    """Prompt tokens of an inference or serving run: the scenario's context (`seq_len` input)
    less the output tokens where it gives one, else the default."""
    seq_len = cfg.scenario.input.get("seq_len")
    if seq_len is None:
        return DEFAULT_PROMPT_TOKENS
    if seq_len <= output:
        raise AccelsimError(f"scenario seq_len {seq_len:,} leaves no prompt before "
                            f"{output:,} output tokens: set --prompt-tokens")
    notes.append(f"scenario seq_len {seq_len:,} taken as prompt + output: "
                 f"{seq_len - output:,} prompt and {output:,} output tokens per request")
    return int(seq_len - output)


def run_llm(cfg: SimulationConfig) -> SimulationResult:
    """The record of an LLM run."""
    mode = cfg.mode or cfg.scenario.mode
    misplaced = [k for k in SERVE_ONLY if k in cfg.llm and mode != "serve"]
    if misplaced:
        raise AccelsimError(f"{', '.join(misplaced)} apply to mode serve only: add --mode serve")
    notes: list[str] = []
    model, system, profile, plat, lay = _setup(cfg, notes)
    if mode == "train":
        from accelsim.llm.train_record import train_record

        cap = capacity_bytes(profile)
        if cap is None:
            raise AccelsimError(f"{profile.name} publishes no memory capacity")
        record = train_record(cfg, plat, lay, system, cap, notes)
        events = record.pop("records")
        return SimulationResult(record, pd.DataFrame() if events is None else events)
    output = cfg.llm.get("output_tokens", DEFAULT_OUTPUT_TOKENS)
    prompt = cfg.llm.get("prompt_tokens", _scenario_prompt(cfg, output, notes))
    unset = {k: v for k, v in (("prompt", prompt), ("output", output))
             if f"{k}_tokens" not in cfg.llm}
    if "seq_len" in cfg.scenario.input:
        unset.pop("prompt", None)
    if unset and not cfg.llm.get("requests_file"):
        notes.append(f"{' and '.join(f'{k}_tokens' for k in unset)} not given: "
                     f"{' and '.join(f'{v} {k}' for k, v in unset.items())} tokens per request "
                     f"(the default{'s' if len(unset) > 1 else ''}; "
                     f"{', '.join(f'--{k}-tokens' for k in unset)} "
                     f"{'set them' if len(unset) > 1 else 'sets it'})")
    if prompt + output > model.context:
        raise AccelsimError(f"prompt_tokens + output_tokens = {prompt + output:,} exceeds "
                            f"{model.name}'s context of {model.context:,} tokens")
    cap = capacity_bytes(profile)
    if cap is None:
        raise AccelsimError(f"{profile.name} publishes no memory capacity: an LLM run needs it")
    mem = memory_plan(plat, lay, cap)
    if mode == "serve":
        from accelsim.llm.serve import serve_record

        return serve_record(cfg, plat, lay, mem, system, prompt, output, notes)
    nodes = _nodes(cfg)
    if nodes != lay.replica_nodes:  # one batch runs on one replica
        raise AccelsimError(f"nodes = {nodes}: one inference batch runs on one tp x pp = "
                            f"{lay.gpus}-GPU replica, which fills {lay.replica_nodes} node(s)")
    batch = cfg.scenario.batch_size
    record = base_record(cfg, plat, lay, system, batch, mode)
    record["notes"] = notes
    need = mem.need_bytes(batch, prompt + output, batch * prompt)
    record["memory"] = memory_record(mem, need, batch, prompt, output)
    record["kv_cache_bytes"] = batch * (prompt + output) * model.kv_bytes_per_token(
        plat.formats.kv_bytes)
    if not record["memory"]["fits"]:
        return SimulationResult(does_not_fit(record, mem, plat, lay, system, need), pd.DataFrame())
    figures, step_s = infer_batch(StepModel(plat, lay), mem, batch, prompt, output)
    out = {k: (float(v) if isinstance(v, np.floating) else v) for k, v in figures.items()}
    record.update(out)
    record["workload"]["flops_per_sample"] = (
        out["prefill_flops"] + (output - 1) * (out["decode_flops_per_step"] or 0.0)) / batch
    latency = out["e2e_latency_s"]
    Figures(batch / latency, latency, out["energy_j"] / batch, out["energy_j"] / latency,
            *_bottleneck(out)).place(record)
    return SimulationResult(record, _events(out["ttft_s"], step_s, batch))


def _bottleneck(out: dict[str, Any]) -> tuple[str, str]:
    """What bounds the batch: prefill compute, decode bandwidth or overhead, or TP traffic."""
    total = out["e2e_latency_s"]
    pre_share = out["ttft_s"] / total
    comm_share = out["tp_comm_s"] / total
    util = out["decode_bandwidth_utilization"]
    if comm_share >= 0.3:
        kind = "communication"
    elif pre_share >= 0.5:
        kind = "compute"
    else:
        kind = "memory" if util is not None and util >= 0.5 else "overhead"
    used = "n/a" if util is None else f"{util:.0%}"
    return kind, (f"prefill {pre_share:.0%} of the time (MFU {_pct(out['mfu_prefill'])}), "
                  f"decode {1 - pre_share:.0%} (DRAM bandwidth used {used}); TP all-reduces "
                  f"{comm_share:.0%}")


def _pct(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.0%}"


def _events(ttft_s: float, step_s: list[float], batch: int) -> pd.DataFrame:
    """Prefill, then each decode step, as records on the (first) accelerator."""
    rec = Recorder()
    rec.add("accel0", "compute", 0.0, ttft_s, step=0, device=0, samples=batch, detail="prefill")
    t = ttft_s
    for i, seconds in enumerate(step_s, start=1):
        rec.add("accel0", "compute", t, t + seconds, step=i, device=0, samples=batch,
                detail="decode")
        t += seconds
    return rec.frame()
