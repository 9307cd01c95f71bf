"""LLaMA-2 decoders (Touvron et al. 2023, "Llama 2: Open Foundation and Fine-Tuned Chat
Models", arXiv:2307.09288; architecture of Touvron et al. 2023, "LLaMA: Open and Efficient
Foundation Language Models", arXiv:2302.13971).

Pre-norm decoder with RMSNorm, rotary position embeddings on q and k (no position table),
causal attention (grouped-query when `n_kv_heads` < `n_heads`, Ainslie et al. 2023, used by
the 70B model), SwiGLU FFN (Shazeer 2020): down(silu(gate(x)) * up(x)), no biases anywhere,
final RMSNorm and an untied LM head.

- llama2_7b: vocab 32000, 4096 hidden, 32 layers, 32 heads (full MHA), FFN 11008;
  HF `Llama-2-7b-hf` has 6,738,415,616 parameters.
- llama2_70b: 8192 hidden, 80 layers, 64 query heads sharing 8 kv heads, FFN 28672;
  HF `Llama-2-70b-hf` has 68,976,648,192 parameters.

Default seq_len 4096, LLaMA-2's training context. RoPE has no learned table, so longer
sequences build too (what the model does with them is not this graph's concern).
"""

from __future__ import annotations

from accelsim.workload.graph import Graph, GraphBuilder
from accelsim.workload.zoo import model
from accelsim.workload.zoo.transformer import attention_block, check_seq_len


def swiglu_mlp(g: GraphBuilder, x: str, d_ff: int) -> str:
    """down(silu(gate(x)) * up(x)), no biases (Shazeer 2020, as in LLaMA)."""
    d_model = g.shape(x)[-1]
    gate = g.silu(g.linear(x, out_features=d_ff, bias=False, name="gate_proj"), name="silu")
    up = g.linear(x, out_features=d_ff, bias=False, name="up_proj")
    return g.linear(g.mul(gate, up, name="mul"), out_features=d_model, bias=False,
                    name="down_proj")


def llama(name: str, n_layers: int, d_model: int, n_heads: int, d_ff: int, seq_len: int,
          n_kv_heads: int | None = None, vocab: int = 32000, eps: float = 1e-5,
          rope_base: float = 10000.0, n_experts: int = 1, experts_per_token: int = 1) -> Graph:
    """A LLaMA-style decoder; `n_kv_heads` None means full multi-head attention;
    `n_experts` > 1 replaces each FFN with a mixture of experts (`moe_swiglu`)."""
    check_seq_len(name, seq_len, None)
    n_kv = n_heads if n_kv_heads is None else n_kv_heads
    moe = ({"n_experts": n_experts, "experts_per_token": experts_per_token}
           if n_experts > 1 else {})
    g = GraphBuilder(name, family="transformer", arch="llama", d_model=d_model,
                     n_layers=n_layers, n_heads=n_heads, n_kv_heads=n_kv, d_ff=d_ff,
                     vocab=vocab, seq_len=seq_len, **moe, tied_weights={})
    ids = g.input("input_ids", (seq_len,), "index")
    x = g.embedding(ids, num_embeddings=vocab, embedding_dim=d_model, name="embed_tokens")
    for i in range(n_layers):
        with g.scope(f"layers.{i}"):
            h = g.rmsnorm(x, eps=eps, name="input_layernorm")
            a = attention_block(g, h, n_heads, n_kv, causal=True, bias=False, rope=True,
                                rope_base=rope_base)
            x = g.add(x, a, name="attn.add")
            h = g.rmsnorm(x, eps=eps, name="post_attention_layernorm")
            if moe:
                x = g.add(x, moe_swiglu(g, h, d_ff, n_experts, experts_per_token),
                          name="moe.add")
            else:
                x = g.add(x, swiglu_mlp(g, h, d_ff), name="mlp.add")
    x = g.rmsnorm(x, eps=eps, name="norm")
    logits = g.linear(x, out_features=vocab, bias=False, name="lm_head")
    return g.build(outputs=(logits,))


@model("llama2_7b")
def llama2_7b(seq_len: int = 4096) -> Graph:
    """LLaMA-2 7B: 32 layers, 4096 hidden, 32 heads (MHA), SwiGLU 11008; 6.74 B params."""
    return llama("llama2_7b", 32, 4096, 32, 11008, seq_len)


@model("llama2_70b")
def llama2_70b(seq_len: int = 4096) -> Graph:
    """LLaMA-2 70B: 80 layers, 8192 hidden, 64 heads over 8 kv heads (GQA), SwiGLU 28672;
    68.98 B params."""
    return llama("llama2_70b", 80, 8192, 64, 28672, seq_len, n_kv_heads=8)


def moe_swiglu(g: GraphBuilder, x: str, d_ff: int, n_experts: int, per_token: int) -> str:
    """A mixture of SwiGLU experts (Mixtral, Jiang et al. 2024, arXiv:2401.04088): a router
    (D -> experts) and `per_token` experts per token. NB: tokens are dealt to the experts in
    equal shares (perfect load balance) and the expert outputs are summed unweighted (the
    router's top-k softmax weights are not applied); each expert gets at least one row, so a
    sequence shorter than experts / per_token tokens over-counts expert FLOPs."""
    s = g.shape(x)[0]
    g.linear(x, out_features=n_experts, bias=False, name="router")
    copies = max(per_token, -(-n_experts // s))
    rows = copies * s
    dealt = g.concat(*([x] * copies), axis=0, name="dispatch") if copies > 1 else x
    outs = []
    for e in range(n_experts):
        lo, hi = e * rows // n_experts, (e + 1) * rows // n_experts
        with g.scope(f"experts.{e}"):
            part = g.slice(dealt, axes=(0,), starts=(lo,), ends=(hi,), name="rows")
            outs.append(swiglu_mlp(g, part, d_ff))
    merged = g.concat(*outs, axis=0, name="combine")
    y = g.slice(merged, axes=(0,), starts=(0,), ends=(s,), name="sum.0")
    for j in range(1, copies):
        part = g.slice(merged, axes=(0,), starts=(j * s,), ends=((j + 1) * s,), name=f"sum.{j}")
        y = g.add(y, part, name=f"sum.add{j}")
    return y


@model("llama2_13b")
def llama2_13b(seq_len: int = 4096) -> Graph:
    """LLaMA-2 13B (HF `Llama-2-13b-hf` config): 40 layers, 5120 hidden, 40 heads (MHA),
    SwiGLU 13824; 13.02 B params."""
    return llama("llama2_13b", 40, 5120, 40, 13824, seq_len)


@model("llama3_8b")
def llama3_8b(seq_len: int = 8192) -> Graph:
    """Llama 3 8B (Meta 2024, "The Llama 3 Herd of Models", arXiv:2407.21783; HF
    `Meta-Llama-3-8B` config): 32 layers, 4096 hidden, 32 heads over 8 kv heads, SwiGLU 14336,
    vocab 128256, RoPE base 500000; 8.03 B params."""
    return llama("llama3_8b", 32, 4096, 32, 14336, seq_len, n_kv_heads=8, vocab=128256,
                 rope_base=500000.0)


@model("llama3_70b")
def llama3_70b(seq_len: int = 8192) -> Graph:
    """Llama 3 70B (HF `Meta-Llama-3-70B` config): 80 layers, 8192 hidden, 64 heads over 8 kv
    heads, SwiGLU 28672, vocab 128256; 70.55 B params."""
    return llama("llama3_70b", 80, 8192, 64, 28672, seq_len, n_kv_heads=8, vocab=128256,
                 rope_base=500000.0)


@model("mixtral_8x7b")
def mixtral_8x7b(seq_len: int = 4096) -> Graph:
    """Mixtral 8x7B (HF `Mixtral-8x7B-v0.1` config): 32 layers, 4096 hidden, 32 heads over 8 kv
    heads, 8 SwiGLU experts of 14336, 2 per token, vocab 32000; 46.70 B params (12.9 B
    active). Default seq_len 4096 (its context is 32768)."""
    return llama("mixtral_8x7b", 32, 4096, 32, 14336, seq_len, n_kv_heads=8, rope_base=1e6,
                 n_experts=8, experts_per_token=2)
