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
          rope_base: float = 10000.0) -> Graph:
    """A LLaMA-style decoder; `n_kv_heads` None means full multi-head attention."""
    check_seq_len(name, seq_len, None)
    n_kv = n_heads if n_kv_heads is None else n_kv_heads
    g = GraphBuilder(name, family="transformer", arch="llama", d_model=d_model,
                     n_layers=n_layers, n_heads=n_heads, n_kv_heads=n_kv, d_ff=d_ff,
                     vocab=vocab, seq_len=seq_len, tied_weights={})
    ids = g.input("input_ids", (seq_len,), "index")
    x = g.embedding(ids, num_embeddings=vocab, embedding_dim=d_model, name="embed_tokens")
    for i in range(n_layers):
        with g.scope(f"layers.{i}"):
            h = g.rmsnorm(x, eps=eps, name="input_layernorm")
            a = attention_block(g, h, n_heads, n_kv, causal=True, bias=False, rope=True,
                                rope_base=rope_base)
            x = g.add(x, a, name="attn.add")
            h = g.rmsnorm(x, eps=eps, name="post_attention_layernorm")
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
