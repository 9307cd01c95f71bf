"""Device memory of a decoder on one GPU of its TP x PP split: weights + KV cache +
activations + framework reserve against the device's capacity, the largest batch and context
that fit, and the KV-cache budget (in paged blocks) a server has.

    mem = memory_plan(plat, lay, capacity_bytes=80e9)
    mem.need_bytes(batch=8, context=640, prefill_tokens=8 * 512)
    mem.largest_batch(context=640, prompt=512)
    block_tokens = plat.stack.figure("llm.kv_block_tokens", "gpu")  # the stack's, or the default's
    mem.kv_blocks(prefill_tokens=8192, seqs=8, block_tokens=block_tokens)

KV cache per token per GPU: K and V of the stage's layers and the shard's kv heads at the
activation width. Paged blocks: the software stack's `llm.kv_block_tokens` tokens each
(hw_profiles/software; vLLM's default block size, Kwon et al. 2023, "Efficient Memory
Management for Large Language Model Serving with PagedAttention", SOSP, arXiv:2309.06180).
"""

from __future__ import annotations

from dataclasses import dataclass

from accelsim.llm.costs import WEIGHT_FORMATS, Platform, weight_bytes_per_param
from accelsim.llm.parallel import Layout

LOGIT_BYTES = 4  # fp32 logits of each sequence's last token
LAYERS_LIVE = 2  # NB: hidden states alive at once: the residual stream and one layer's input


def shard_layer_params(plat: Platform) -> float:
    """Parameters of one layer held by one TP rank. NB: biases left out; a mixture of experts
    with leading dense layers (DeepSeek-MoE) gives the mean over its layers."""
    cfg, shard = plat.cfg, plat.shard
    d, hd = cfg.d_model, cfg.head_dim
    attn = d * hd * (2 * shard.heads(cfg) + 2 * shard.kv_heads(cfg))
    ffn = shard.experts(cfg) * cfg.ffn_matrices * d * shard.d_ff(cfg)
    if cfg.n_shared_experts:
        ffn += cfg.ffn_matrices * d * shard.shared_d_ff(cfg)
    ffn += cfg.router_params()
    if cfg.dense_layers:
        width = cfg.d_ff if cfg.dense_d_ff is None else cfg.dense_d_ff
        dense = cfg.ffn_matrices * d * max(width // plat.tp, 1)
        ffn = (cfg.dense_layers * dense + cfg.moe_layers * ffn) / cfg.n_layers
    return attn + ffn + cfg.norm_params()


def shard_embedding_params(plat: Platform, lay: Layout) -> float:
    """Embedding and LM head on the GPU that holds the most of them (vocabulary split by TP;
    with PP the first stage holds the embedding, the last the head: the first holds more)."""
    cfg = plat.cfg
    table = plat.shard.vocab(cfg) * cfg.d_model
    head = 0 if cfg.tied_embeddings else table  # gpt2 ties the head to the embedding
    positions = cfg.context * cfg.d_model if cfg.positions == "learned" else 0
    return table + positions + (head if lay.pp == 1 else 0)


@dataclass(frozen=True)
class MemoryPlan:
    """Per-GPU memory figures of one split, bytes."""

    capacity_bytes: float
    reserve_fraction: float  # of the capacity, left to the stack (`llm.memory_reserve_fraction`)
    weights_bytes: float
    kv_bytes_per_token: float
    act_bytes_per_token: float  # live during a prefill, per prompt token in the step
    logit_bytes_per_seq: float

    @property
    def reserve_bytes(self) -> float:
        return self.reserve_fraction * self.capacity_bytes

    @property
    def free_bytes(self) -> float:
        """Room left for KV cache and activations after weights and the reserve."""
        return self.capacity_bytes - self.reserve_bytes - self.weights_bytes

    def activations_bytes(self, prefill_tokens: float, seqs: int) -> float:
        return prefill_tokens * self.act_bytes_per_token + seqs * self.logit_bytes_per_seq

    def need_bytes(self, batch: int, context: int, prefill_tokens: float) -> float:
        """Weights + KV of `batch` sequences of `context` tokens + activations + reserve."""
        return (self.weights_bytes + batch * context * self.kv_bytes_per_token
                + self.activations_bytes(prefill_tokens, batch) + self.reserve_bytes)

    def largest_batch(self, context: int, prompt: int) -> int:
        """Most sequences of `context` tokens (prefilled `prompt` at once) that fit."""
        per_seq = (context * self.kv_bytes_per_token + prompt * self.act_bytes_per_token
                   + self.logit_bytes_per_seq)
        return max(int(self.free_bytes // per_seq), 0)

    def largest_context(self, batch: int) -> int:
        """Longest context `batch` sequences can hold, prefilled whole (no model limit)."""
        room = self.free_bytes - batch * self.logit_bytes_per_seq
        per_token = batch * (self.kv_bytes_per_token + self.act_bytes_per_token)
        return max(int(room // per_token), 0)

    def kv_blocks(self, prefill_tokens: float, seqs: int, block_tokens: int) -> int:
        """Paged KV blocks of `block_tokens` tokens that fit beside the weights, the reserve
        and the activations of a step of `prefill_tokens` (the server's budget)."""
        room = self.free_bytes - self.activations_bytes(prefill_tokens, seqs)
        return max(int(room // (block_tokens * self.kv_bytes_per_token)), 0)


def memory_plan(plat: Platform, lay: Layout, capacity_bytes: float) -> MemoryPlan:
    cfg, shard = plat.cfg, plat.shard
    act = WEIGHT_FORMATS[plat.precision]
    kv = 2.0 * lay.layers_per_stage * shard.kv_heads(cfg) * cfg.head_dim * plat.formats.kv_bytes
    # NB: the largest live set of one layer: hidden states, fused QKV output and the FFN's
    # intermediate (gate and up) of the step's tokens; FlashAttention keeps no scores.
    routed = cfg.experts_per_token * shard.experts(cfg) / cfg.n_experts  # per token, here
    inner = max(cfg.qkv_out // plat.tp, 2 * shard.d_ff(cfg) * routed)
    act_per_token = (LAYERS_LIVE * cfg.d_model + inner) * act
    logits = shard.vocab(cfg) * LOGIT_BYTES
    reserve = plat.stack.figure("llm.memory_reserve_fraction", plat.profile.device_class)
    return MemoryPlan(float(capacity_bytes), reserve, weights_bytes(plat, lay), kv,
                      act_per_token, float(logits))


def weights_bytes(plat: Platform, lay: Layout) -> float:
    """Weights one GPU holds, bytes: its layers at the weight format (scales included), the
    embedding and LM head at theirs (the compute format under W8A8)."""
    layers = lay.layers_per_stage * shard_layer_params(plat)
    ends = shard_embedding_params(plat, lay)
    fmt = plat.formats
    if fmt.head_weight_bytes is None:
        return (layers + ends) * weight_bytes_per_param(plat.weights)
    return layers * weight_bytes_per_param(plat.weights) + ends * fmt.head_weight_bytes

