"""The work of one prefill or decode step of a decoder, as rows of the device cost models' work
table (`accelsim.workload.work`: name, op, phase, matmul, flops, read_bytes, write_bytes,
weight_bytes, op_index) and their GEMMs (op_index, m, n, k, count), for one layer shard and for
the embedding and LM head.

    step = Step(tokens=8, seqs=8, score_pairs=8 * 520, kv_read_tokens=8 * 520)  # a decode
    rows = Rows("forward", Tiles(256, 128))
    layer_rows(rows, cfg, Shard(tp=1), step, Formats(2.0, 2.0, 2.0), fused_attention=True)
    work, gemms, shape_ids = rows.frames()

A step: `tokens` rows pass the linears; attention computes `score_pairs` query-key pairs per
query head and reads the K and V of `kv_read_tokens` tokens (decode: the whole cache; prefill:
the prompt it has just written). Prefill is causal: a prompt of p tokens has p (p + 1) / 2
pairs, never p^2. Attention is FlashAttention-style fused where `fused_attention` is set (the
scores stay on chip), else the scores go through memory as an eager kernel chain does.

GEMMs with fewer rows than a CTA tile (decode: one token per sequence) are given to the cost
model as the kernels serving stacks run for them (swap-AB / GEMV-style small-M kernels): the
tokens padded to `SKINNY_ROW_MULTIPLE`, the output cut into tile-sized blocks. NB: with the
(256 x 128) tile as it is, a batch-8 decode GEMM would be charged 32x its MACs.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from accelsim.llm.models import DecoderConfig
from accelsim.workload.counts import elementwise_flops, softmax_flops
from accelsim.workload.ops import OpKind

# NB: tensor-core MMA fragments are 8 (n) x 16 (m) x 16 (k); small-M kernels pad tokens to 8.
SKINNY_ROW_MULTIPLE = 8
# NB: W8A8 quantises a GEMM's input in the kernel that produces it (TensorRT-LLM's fused
# RMSNorm / SwiGLU / attention-output quantisation): a multiply by the static per-tensor scale
# and a convert per element; calibrated static scales need no amax pass.
QUANT_FLOPS_PER_ELEMENT = 2.0
# NB: NVFP4 activations take a dynamic scale per block of 16: an abs-max compare per element,
# then the multiply by the block's reciprocal scale and the convert; the block scale's own
# e4m3 convert is 1/16 of an operation per element and left out.
BLOCK_QUANT_FLOPS_PER_ELEMENT = 3.0


@dataclass(frozen=True)
class Step:
    """One forward step of a batch: see the module docstring. Counts, not bytes."""

    tokens: int
    seqs: int
    score_pairs: float
    kv_read_tokens: float


@dataclass(frozen=True)
class Shard:
    """What one GPU holds of a layer under tensor parallelism `tp` (Megatron-LM split: heads
    and FFN columns/rows divided; NB: kv heads replicated when tp exceeds them). With
    `expert_parallel` a mixture of experts spreads whole experts over the tp GPUs instead of
    slicing each one (GShard, Lepikhin et al. 2020, arXiv:2006.16668)."""

    tp: int = 1
    expert_parallel: bool = False

    def experts(self, cfg: DecoderConfig) -> int:
        """Experts (or dense FFNs) this GPU holds."""
        return cfg.n_experts // self.tp if self.expert_parallel else cfg.n_experts

    def heads(self, cfg: DecoderConfig) -> int:
        return max(cfg.n_heads // self.tp, 1)

    def kv_heads(self, cfg: DecoderConfig) -> int:
        return max(cfg.n_kv_heads // self.tp, 1)

    def d_ff(self, cfg: DecoderConfig) -> int:
        """FFN width of each expert this GPU holds (whole under expert parallelism)."""
        return cfg.d_ff if self.expert_parallel else max(cfg.d_ff // self.tp, 1)

    def shared_d_ff(self, cfg: DecoderConfig) -> int:
        """Width of the shared experts this GPU holds, together (NB: split over TP as a dense
        FFN, expert parallelism or not)."""
        return cfg.n_shared_experts * max(cfg.d_ff // self.tp, 1)

    def vocab(self, cfg: DecoderConfig) -> int:
        return -(-cfg.vocab // self.tp)


@dataclass(frozen=True)
class Formats:
    """Bytes per element: weights (a storage format, possibly quantised) and activations / KV
    cache (the compute format). Under W8A8 or W4A4 (`gemm_in_bytes` set: fp8 or fp4 GEMMs)
    the layers' weight GEMMs read their input activation at `gemm_in_bytes`, written so by the
    kernel before them (norm, SwiGLU/GELU, attention) at `quant_flops` per element, and the
    embedding and LM head keep `head_weight_bytes`."""

    weight_bytes: float
    act_bytes: float
    kv_bytes: float
    gemm_in_bytes: float | None = None  # None: the GEMMs read activations at act_bytes
    head_weight_bytes: float | None = None  # None: weight_bytes
    quant_flops: float = QUANT_FLOPS_PER_ELEMENT  # per element a producer quantises

    @property
    def gemm_in(self) -> float:
        return self.act_bytes if self.gemm_in_bytes is None else self.gemm_in_bytes

    @property
    def head_weights(self) -> float:
        return self.weight_bytes if self.head_weight_bytes is None else self.head_weight_bytes

    @property
    def quantised_inputs(self) -> bool:
        return self.gemm_in_bytes is not None


@dataclass(frozen=True)
class Tiles:
    """The CTA tile the GPU class model assumes (m x n); other classes: a nominal block."""

    m: int
    n: int


class Rows:
    """Accumulates work rows and their GEMMs; `frames()` gives the two DataFrames."""

    def __init__(self, phase: str, tiles: Tiles) -> None:
        self.phase, self.tiles = phase, tiles
        self.rows: list[tuple] = []
        self.gemms: list[tuple[int, float, float, float, float]] = []
        self.shape_ids: list[int] = []
        self.shape_id = 0

    def add(self, name: str, op: OpKind, flops: float, read_b: float, write_b: float,
            weight_b: float = 0.0, gemms: tuple[tuple[float, float, float, float], ...] = ()
            ) -> None:
        index = len(self.rows)
        self.rows.append((name, op.value, self.phase, bool(gemms), float(flops), float(read_b),
                          float(write_b), float(weight_b), index))
        self.shape_ids.append(self.shape_id)
        for m, n, k, count in gemms:
            self.gemms.append((index, *self._as_run(m, n, k, count)))

    def _as_run(self, m: float, n: float, k: float, count: float
                ) -> tuple[float, float, float, float]:
        """A GEMM as the kernel that runs it: skinny ones as tile-sized blocks (docstring)."""
        if m >= self.tiles.m or m <= 0:
            return m, n, k, count
        padded = math.ceil(m / SKINNY_ROW_MULTIPLE) * SKINNY_ROW_MULTIPLE
        blocks = math.ceil(padded * n * count / (self.tiles.m * self.tiles.n))
        return self.tiles.m, self.tiles.n, k, blocks

    def frames(self) -> tuple[pd.DataFrame, pd.DataFrame, np.ndarray]:
        work = pd.DataFrame(self.rows, columns=["name", "op", "phase", "matmul", "flops",
                                                "read_bytes", "write_bytes", "weight_bytes",
                                                "op_index"])
        gemms = pd.DataFrame(self.gemms, columns=["op_index", "m", "n", "k", "count"])
        return work, gemms, np.array(self.shape_ids)


def linear_rows(r: Rows, name: str, tokens: float, n_out: int, k_in: int, fmt: Formats,
                bias: bool, experts: float = 1.0, expert_tokens: float | None = None,
                high_precision: bool = False) -> None:
    """A weight GEMM (or `experts` of them, each on `expert_tokens` rows). A layer GEMM reads
    its input at `fmt.gemm_in` and its weights at `fmt.weight_bytes`; a `high_precision` one
    (LM head, router: left unquantised under W8A8) at the activation and head widths."""
    rows = tokens if expert_tokens is None else expert_tokens
    w_bytes = fmt.head_weights if high_precision else fmt.weight_bytes
    in_bytes = fmt.act_bytes if high_precision else fmt.gemm_in
    weights = experts * (n_out * k_in + (n_out if bias else 0)) * w_bytes
    r.add(name, OpKind.LINEAR, 2.0 * rows * experts * n_out * k_in,
          rows * experts * k_in * in_bytes + weights, rows * experts * n_out * fmt.act_bytes,
          weights, ((rows, n_out, k_in, experts),))


def norm_kinds(cfg: DecoderConfig) -> tuple[OpKind, ...]:
    """A decoder's normalisation: RMSNorm (llama family) or LayerNorm (gpt2, GPT-J, ...)."""
    return (OpKind.RMSNORM,) if cfg.norm == "rms" else (OpKind.LAYERNORM,)


def act_kinds(cfg: DecoderConfig) -> tuple[OpKind, ...]:
    """A decoder's FFN activation: SwiGLU's SiLU times the up projection (llama family),
    squared ReLU (ReLU, then the product with itself: Nemotron) or tanh-GELU (gpt2)."""
    if cfg.mlp == "swiglu":
        return (OpKind.SILU, OpKind.MUL)
    return (OpKind.RELU, OpKind.MUL) if cfg.mlp == "relu2" else (OpKind.GELU,)


def elementwise_rows(r: Rows, name: str, kinds: tuple[OpKind, ...], elems: float, inputs: int,
                     fmt: Formats, weight_elems: float = 0.0, feeds_gemm: bool = False) -> None:
    """An elementwise or normalisation row over `elems` outputs read from `inputs` tensors
    (a norm's `weight_elems` scale read once), of the op kinds `kinds` fused into one kernel
    (named after the first), each at the FLOPs per element of `accelsim.workload.counts`.
    A row that `feeds_gemm` writes the GEMM's input format, quantising under W8A8."""
    w = weight_elems * fmt.act_bytes
    flops_per = sum(elementwise_flops(kind)[0] for kind in kinds)
    out_bytes = fmt.act_bytes
    if feeds_gemm and fmt.quantised_inputs:
        flops_per += fmt.quant_flops
        out_bytes = fmt.gemm_in
    r.add(name, kinds[0], flops_per * elems, inputs * elems * fmt.act_bytes + w,
          elems * out_bytes, w)


def experts_touched(cfg: DecoderConfig, tokens: float, local: int | None = None) -> float:
    """Expected experts, of the `local` ones a GPU holds (default all), that a step's tokens
    route to. NB: uniform independent routing: local (1 - (1 - k/E)^T)."""
    if not cfg.is_moe:
        return 1.0
    held = cfg.n_experts if local is None else local
    return held * (1.0 - (1.0 - cfg.experts_per_token / cfg.n_experts) ** tokens)


def layer_rows(r: Rows, cfg: DecoderConfig, shard: Shard, step: Step, fmt: Formats,
               fused_attention: bool | None) -> None:
    """Rows of one decoder layer's shard, starting at the QKV projection and ending with the
    next layer's input norm (so a fusing engine joins each norm to the add before it).
    `fused_attention` None leaves attention out (`attention_rows` costs it apart). With
    `parallel_attention` the FFN reads the layer input too (normed by its own norm where the
    layout has two) and one add joins both branches to the residual. NB: the leading dense
    layers of a mixture of experts (DeepSeek-MoE) are costed as its expert layers."""
    t, d, hd = step.tokens, cfg.d_model, cfg.head_dim
    heads, kv_heads, d_ff = shard.heads(cfg), shard.kv_heads(cfg), shard.d_ff(cfg)
    linear_rows(r, "qkv_proj", t, (heads + 2 * kv_heads) * hd, d, fmt, cfg.qkv_bias)
    if cfg.rope_dims:
        elementwise_rows(r, "rope", (OpKind.ROPE,), t * (heads + kv_heads) * cfg.rope_dims, 1,
                         fmt)
    if fused_attention is not None:
        attention_rows(r, cfg, shard, step, fmt, fused_attention)
    linear_rows(r, "o_proj", t, d, heads * hd, fmt, cfg.out_bias)
    if not cfg.parallel_attention:
        elementwise_rows(r, "attn_add", (OpKind.ADD,), t * d, 2, fmt)
    if cfg.norms_per_layer == 2:
        elementwise_rows(r, "mlp_norm", norm_kinds(cfg), t * d, 1, fmt, d, feeds_gemm=True)
    local = shard.experts(cfg)
    touched = experts_touched(cfg, t, local)
    # token-expert pairs this GPU computes (all of them unless its experts are a share)
    routed = t * cfg.experts_per_token * local / cfg.n_experts
    per_expert = routed / touched if cfg.is_moe else None
    if cfg.is_moe:
        linear_rows(r, "router", t, cfg.n_experts, d, fmt, False, high_precision=True)
    ffn_rows(r, cfg, "", t, d_ff, fmt, touched, per_expert, routed)
    if cfg.n_shared_experts:
        ffn_rows(r, cfg, "shared_", t, shard.shared_d_ff(cfg), fmt, 1.0, None, t)
    elementwise_rows(r, "mlp_add", (OpKind.ADD,), t * d, 3 if cfg.parallel_attention else 2,
                     fmt)
    elementwise_rows(r, "next_norm", norm_kinds(cfg), t * d, 1, fmt, d, feeds_gemm=True)


def ffn_rows(r: Rows, cfg: DecoderConfig, prefix: str, tokens: float, d_ff: int, fmt: Formats,
             experts: float, expert_tokens: float | None, act_tokens: float) -> None:
    """An FFN of width `d_ff` (or `experts` of them, each on `expert_tokens` rows): the up (and
    gate) projection, the activation over `act_tokens` rows, the down projection."""
    gated = cfg.gated
    linear_rows(r, prefix + ("gate_up_proj" if gated else "fc1"), tokens,
                2 * d_ff if gated else d_ff, cfg.d_model, fmt, cfg.mlp_bias, experts,
                expert_tokens)
    elementwise_rows(r, prefix + "act", act_kinds(cfg), act_tokens * d_ff, 2 if gated else 1,
                     fmt, feeds_gemm=True)
    linear_rows(r, prefix + ("down_proj" if gated else "fc2"), tokens, cfg.d_model, d_ff, fmt,
                cfg.mlp_bias, experts, expert_tokens)


def attention_rows(r: Rows, cfg: DecoderConfig, shard: Shard, step: Step, fmt: Formats,
                   fused: bool) -> None:
    """QK^T, softmax, PV for `score_pairs` pairs per query head; writes the step's K and V to
    the cache and reads `kv_read_tokens` tokens' K and V."""
    hd, t = cfg.head_dim, step.tokens
    heads, kv_heads = shard.heads(cfg), shard.kv_heads(cfg)
    pairs = step.score_pairs * heads
    flops = 4.0 * pairs * hd + softmax_flops() * pairs
    kv_elems = 2.0 * kv_heads * hd
    read_b = t * heads * hd * fmt.act_bytes + step.kv_read_tokens * kv_elems * fmt.kv_bytes
    # the output feeds o_proj: written at its input format (quantised in-kernel under W8A8)
    write_b = t * heads * hd * fmt.gemm_in + t * kv_elems * fmt.kv_bytes
    if fmt.quantised_inputs:
        flops += fmt.quant_flops * t * heads * hd
    if not fused:
        # NB: eager attention writes the scores, reads them for softmax, writes the
        # probabilities and reads them for PV (the causal mask skips no memory traffic here).
        read_b += 2.0 * pairs * fmt.act_bytes
        write_b += 2.0 * pairs * fmt.act_bytes
    # GEMM instances: decode (one query per sequence) takes each kv head's query group against
    # its sequence's keys; prefill each query head's prompt against the keys it may see.
    if step.seqs >= t:
        m, keys, count = heads / kv_heads, step.score_pairs / max(step.seqs, 1), kv_heads * t
    else:
        m, keys, count = t / step.seqs, step.score_pairs / t, heads * step.seqs
    r.add("attention", OpKind.ATTENTION, flops, read_b, write_b, 0.0,
          ((m, keys, hd, count), (m, hd, keys, count)))


def embed_rows(r: Rows, cfg: DecoderConfig, step: Step, fmt: Formats) -> None:
    """Token (and learned position) embedding gather, then the first layer's input norm."""
    d = cfg.d_model
    gathers = 2 if cfg.positions == "learned" else 1
    r.add("embed", OpKind.EMBEDDING, (gathers - 1) * step.tokens * d,
          step.tokens * (1 + gathers * d * fmt.head_weights / fmt.act_bytes) * fmt.act_bytes,
          step.tokens * d * fmt.act_bytes)
    elementwise_rows(r, "input_norm", norm_kinds(cfg), step.tokens * d, 1, fmt, d,
                     feeds_gemm=True)


def head_rows(r: Rows, cfg: DecoderConfig, shard: Shard, step: Step, fmt: Formats) -> None:
    """The LM head (vocabulary split over the TP group) on each sequence's last token.
    NB: the final norm is the last layer's `next_norm`; sampling is not costed."""
    linear_rows(r, "lm_head", step.seqs, shard.vocab(cfg), cfg.d_model, fmt, cfg.lm_head_bias,
                high_precision=True)
