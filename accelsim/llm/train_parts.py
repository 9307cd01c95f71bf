"""What context parallelism and LoRA change in a decoder's training step
(`accelsim.llm.train`): the parameters a GPU holds and trains, the gradient bytes its backward
makes, and the context-parallel K/V exchange beside the attention.

    trained_per_gpu(plat, lay, split)   # all of the shard, or under LoRA its adapters
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from accelsim.interconnect.links import transfer_time_s
from accelsim.llm.costs import Platform
from accelsim.llm.memory import shard_embedding_params, shard_layer_params
from accelsim.llm.parallel import Layout
from accelsim.workload.ops import OpKind

GRAD_BYTES = 2.0  # per parameter, 16-bit gradients (as `accelsim.llm.train`)
LORA_ROWS = ("lora_a", "lora_b")  # the adapter GEMMs' row names


def qkv_out(plat: Platform) -> int:
    """The QKV projection's output width on one TP rank."""
    cfg, shard = plat.cfg, plat.shard
    return (shard.heads(cfg) + 2 * shard.kv_heads(cfg)) * cfg.head_dim


def lora_params_per_layer(plat: Platform, rank: int) -> float:
    """One layer's adapter parameters on one TP rank: A (d x r) and B (r x its QKV width)."""
    return rank * (plat.cfg.d_model + qkv_out(plat))


def params_per_gpu(plat: Platform, lay: Layout) -> float:
    return lay.layers_per_stage * shard_layer_params(plat) + shard_embedding_params(plat, lay)


def trained_per_gpu(plat: Platform, lay: Layout, split: Any) -> float:
    """The parameters one GPU trains (gradients, Adam state, the exchange): all of its
    shard, or under LoRA its layers' adapters only."""
    if split.lora_rank:
        return lay.layers_per_stage * lora_params_per_layer(plat, split.lora_rank)
    return params_per_gpu(plat, lay)


def grad_bytes(plat: Platform, lay: Layout, split: Any) -> np.ndarray:
    """Gradient bytes the backward makes, in its order: the ends (none), each layer's, the
    embedding's; under LoRA each layer's adapters' only."""
    layer = (lora_params_per_layer(plat, split.lora_rank) if split.lora_rank
             else shard_layer_params(plat))
    embed = 0.0 if split.lora_rank else shard_embedding_params(plat, lay)
    return np.array([0.0, *[layer * GRAD_BYTES] * lay.layers_per_stage, embed * GRAD_BYTES])


def cp_exposed_s(plat: Platform, lay: Layout, split: Any, done: pd.DataFrame
                  ) -> tuple[float, float]:
    """(forward, backward) seconds a layer's context-parallel K/V exchange adds beyond its
    attention: the rank's K and V chunk passed ring-wise to the cp - 1 others (backward: the
    K/V again and their gradients), each transfer beside the attention on the chunk before it
    (Megatron-LM's ring of P2P sends overlapped with the attention blocks). NB: the CP ranks
    share a node (Megatron places TP, then CP, innermost): the transfers run over its GPU link
    at its achieved bandwidth, one at a time."""
    if split.cp == 1:
        return 0.0, 0.0
    cfg = plat.cfg
    chunk = (split.micro_batch * split.seq * 2 * plat.shard.kv_heads(cfg) * cfg.head_dim
             * plat.formats.act_bytes)
    assert lay.link is not None
    hop_s = transfer_time_s(chunk, lay.link, achieved=True)
    att = done[(done["shape"] == 0) & (done["op"] == OpKind.ATTENTION.value)]
    steps = split.cp - 1
    hidden = {ph: float(att.loc[att["phase"] == ph, "time_s"].sum()) * steps / split.cp
              for ph in ("forward", "backward")}
    return (max(steps * hop_s - hidden["forward"], 0.0),
            max(2 * steps * hop_s - hidden["backward"], 0.0))
