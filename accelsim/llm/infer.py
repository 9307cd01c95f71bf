"""One batch of requests through prefill and decode: time to first token, time per output
token, end-to-end latency, tokens per second, energy and model FLOPs utilisation.

    out = infer_batch(StepModel(plat, lay), batch=8, prompt=512, output=128)
    out["ttft_s"], out["tpot_s"], out["tokens_per_s"], out["mfu"]

TTFT is the prefill of the whole batch (it yields each sequence's first output token). Each of
the other output - 1 tokens is one decode step, the i-th reading a cache of prompt + i tokens
per sequence; TPOT is their mean. tokens_per_s counts output tokens of the batch over the
end-to-end latency. MFU: model FLOPs (the GEMM rows' useful FLOPs, every GPU) over latency x
dense matrix peak x GPUs, and the same per phase. The limits beside them: prefill cannot beat
its FLOPs at peak, and a decode step cannot beat streaming the weights and the KV cache each
GPU holds at peak bandwidth (from the memory plan, not from the cost model's own traffic).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from accelsim.llm.costs import weight_bytes_per_param
from accelsim.llm.memory import MemoryPlan, shard_layer_params
from accelsim.llm.steps import StepModel


def bandwidth_bytes_per_s(profile: Any) -> float | None:
    mem = getattr(profile, "offchip_memory", None)
    return None if mem is None else mem.bandwidth_bytes_per_s


def infer_batch(model: StepModel, mem: MemoryPlan, batch: int, prompt: int,
                output: int) -> tuple[dict[str, Any], list[float]]:
    """The figures of one batch (see the module docstring; SI units) and each decode step's
    seconds. `mem` gives the bandwidth limit's bytes: the weights and KV cache each GPU must
    stream per step."""
    plat, lay = model.plat, model.lay
    pre = model.prefill(batch, prompt)
    table = model.decode_table(batch, batch * (prompt + output))
    steps = [table.step(batch, batch * (prompt + i)) for i in range(1, output)]
    decode_s = float(sum(s.time_s for s in steps))
    latency_s = pre.time_s + decode_s
    energy_j = pre.energy_j + sum(s.energy_j for s in steps)
    gpus = lay.gpus
    peak = plat.profile.peak_flops_per_s(plat.gemm_precision)  # dense matrix peak
    bw = bandwidth_bytes_per_s(plat.profile)
    decode_flops = float(sum(s.flops for s in steps))

    def mfu(flops: float, time_s: float) -> float | None:
        return None if peak is None or time_s <= 0 else flops / (time_s * peak * gpus)

    tpot_s = decode_s / len(steps) if steps else None
    # Each stage streams its weights once per microbatch and its share of the cache; a step
    # is pp stage passes. The mean step's cache holds prompt + output / 2 tokens a sequence.
    # Weights read per step: the stage's layers and the LM head (the embedding table is only
    # gathered, a row per token).
    m = lay.microbatches(batch)
    layer_params = lay.layers_per_stage * shard_layer_params(plat)
    head_params = plat.shard.vocab(plat.cfg) * plat.cfg.d_model
    if plat.formats.head_weight_bytes is None:
        read_bytes = (layer_params + head_params) * weight_bytes_per_param(plat.weights)
    else:  # W8A8: the LM head at the compute format
        read_bytes = (layer_params * weight_bytes_per_param(plat.weights)
                      + head_params * plat.formats.head_weight_bytes)
    floor_bytes = lay.pp * (read_bytes
                            + batch * (prompt + output / 2) * mem.kv_bytes_per_token / m)
    limit_s = None if bw is None or not steps else floor_bytes / bw
    mean_dram = float(np.mean([s.dram_bytes_per_gpu for s in steps])) if steps else None
    return ({
        "ttft_s": pre.time_s,
        "tpot_s": tpot_s,
        "e2e_latency_s": latency_s,
        "tokens_per_s": batch * output / latency_s,
        "prefill_tokens_per_s": batch * prompt / pre.time_s,
        "mfu": mfu(pre.flops + decode_flops, latency_s),
        "mfu_prefill": mfu(pre.flops, pre.time_s),
        "mfu_decode": mfu(decode_flops, decode_s) if steps else None,
        "energy_j": energy_j,
        "energy_j_per_token": energy_j / (batch * output),
        "prefill_flops": pre.flops,
        "decode_flops_per_step": decode_flops / len(steps) if steps else None,
        "prefill_compute_limit_s": None if peak is None else pre.flops / (peak * gpus),
        "decode_dram_bytes_per_gpu": mean_dram,
        "decode_bandwidth_limit_s": limit_s,
        "decode_bandwidth_utilization": (None if limit_s is None or not steps
                                         else limit_s / tpot_s),
        "pipeline_bubble_prefill": pre.bubble,
        "pipeline_bubble_decode": steps[0].bubble if steps else None,
        "tp_comm_s": pre.comm_s + sum(s.comm_s for s in steps),
    }, [s.time_s for s in steps])
