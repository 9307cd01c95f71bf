"""The parts of an LLM run's record that every mode writes: the workload and hardware keys, the
per-GPU memory of the split, and the record of a split that does not fit (with the smallest
tensor-parallel split that would). Read by `accelsim.llm.run`, `accelsim.llm.serve` and
`accelsim.results.summary.flat_row`.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from accelsim.llm.costs import Platform
from accelsim.llm.memory import MemoryPlan, memory_plan
from accelsim.llm.parallel import Layout
from accelsim.profiles.software import DEFAULT
from accelsim.results.headline import Figures

DEFAULT_PROMPT_TOKENS = 512
DEFAULT_OUTPUT_TOKENS = 128


def base_record(cfg: Any, plat: Platform, lay: Layout, system: Any, batch: int,
                mode: str) -> dict[str, Any]:
    """The keys every record has (`accelsim.results.summary.flat_row` reads them)."""
    model = plat.cfg
    return {
        "workload": {"name": cfg.scenario.name, "mode": mode, "batch_size": batch,
                     "precision": plat.precision, "weight_precision": plat.weights,
                     "params": model.params, "active_params": model.active_params,
                     # NB: one request's GEMM FLOPs, 2 x active params per token (attention
                     # out); an infer run replaces it with its costed model FLOPs
                     "flops_per_sample": 2.0 * model.active_params * (
                         cfg.llm.get("prompt_tokens", DEFAULT_PROMPT_TOKENS)
                         + cfg.llm.get("output_tokens", DEFAULT_OUTPUT_TOKENS)),
                     "model_source": model.source,
                     "prompt_tokens": cfg.llm.get("prompt_tokens", DEFAULT_PROMPT_TOKENS),
                     "output_tokens": cfg.llm.get("output_tokens", DEFAULT_OUTPUT_TOKENS)},
        "hardware": {"name": plat.profile.name, "class": plat.profile.device_class,
                     "software": plat.stack.name,
                     "software_default": cfg.software == DEFAULT,
                     "compute_precision": plat.precision,
                     "system": system.name, "fused_attention": plat.fused_attention},
        "tp": lay.tp, "pp": lay.pp, "devices": lay.gpus, "layers": [], "unsupported_ops": [],
    }


def memory_record(mem: MemoryPlan, need: float, batch: int, prompt: int,
                  output: int) -> dict[str, Any]:
    """Per-GPU memory of the split (the GPU holding the most)."""
    context = prompt + output
    return {
        "fits": need <= mem.capacity_bytes, "required_bytes": need,
        "capacity_bytes": mem.capacity_bytes, "weights_bytes": mem.weights_bytes,
        "kv_cache_bytes": batch * context * mem.kv_bytes_per_token,
        "activations_bytes": mem.activations_bytes(batch * prompt, batch),
        "reserve_bytes": mem.reserve_bytes,
        "largest_batch_that_fits": mem.largest_batch(context, prompt),
        "largest_context_that_fits": mem.largest_context(batch),
        "kv_bytes_per_token": mem.kv_bytes_per_token, "per_gpu": True,
    }


def does_not_fit(record: dict[str, Any], mem: MemoryPlan, plat: Platform, lay: Layout,
                 system: Any, need: float) -> dict[str, Any]:
    """The record of a split that cannot run: why, and the smallest TP split that would."""
    hint = _smallest_fitting_tp(plat, lay, system, record, mem.capacity_bytes)
    record["notes"].insert(0, (
        f"does not fit: {plat.cfg.name} on {lay.gpus} device(s) (tp {lay.tp}, pp {lay.pp}) needs "
        f"{need / 1e9:,.1f} GB per device on {plat.profile.name}, which has "
        f"{mem.capacity_bytes / 1e9:,.1f} GB; {hint}"))
    Figures(None, None, None, None, "memory capacity", hint).place(record)
    figures = ("ttft_s", "tpot_s", "tokens_per_s", "mfu") if record["workload"]["mode"] == \
        "infer" else ("ttft_p50_s", "ttft_p99_s", "tpot_p50_s", "tpot_p99_s", "latency_p99_s",
                      "tokens_per_s", "goodput_requests_per_s")
    record.update(dict.fromkeys(figures))
    return record


def _smallest_fitting_tp(plat: Platform, lay: Layout, system: Any, record: dict[str, Any],
                         capacity: float) -> str:
    w = record["workload"]
    batch, prompt, output = w["batch_size"], w["prompt_tokens"], w["output_tokens"]
    for tp in range(lay.tp + 1, system.device_count // lay.pp + 1):
        if plat.cfg.n_heads % tp or plat.cfg.d_ff % tp:
            continue
        if plat.expert_parallel and plat.cfg.n_experts % tp:
            continue
        trial = dataclasses.replace(plat, tp=tp)
        trial_lay = Layout(tp, lay.pp, lay.n_layers, system.device_to_device)
        mem = memory_plan(trial, trial_lay, capacity)
        if mem.need_bytes(batch, prompt + output, batch * prompt) <= mem.capacity_bytes:
            return f"it fits split over {tp * lay.pp} devices: --tp {tp}" + (
                f" --pp {lay.pp}" if lay.pp > 1 else "")
    largest = record["memory"]["largest_batch_that_fits"]
    if largest:
        return f"the largest batch that fits is {largest}"
    return f"no tensor-parallel split of {system.name}'s {system.device_count} device(s) fits it"
