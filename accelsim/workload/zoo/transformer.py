"""Transformer encoders and decoders: BERT-base/large and GPT-2 (124 M); shared blocks.

- BERT: Devlin et al. 2019, "BERT: Pre-training of Deep Bidirectional Transformers for
  Language Understanding" (NAACL). Post-LN encoder, GELU FFN, with the pooler (dense + tanh
  on the [CLS] token) so that parameters match HF `bert-base-uncased` (109,482,240) and
  `bert-large-uncased` (335,141,888); the masked-LM and next-sentence heads are not
  included, as in those counts.
- GPT-2: Radford et al. 2019, "Language Models are Unsupervised Multitask Learners". Pre-LN
  decoder, causal attention, final LayerNorm, LM head tied to the token embedding
  (HF `gpt2`: 124,439,808 parameters, the tied matrix counted once).

The LLaMA family (Touvron et al. 2023) lives in `accelsim.workload.zoo.llama` and reuses
`attention_block` from here.

Graph inputs are token ids, positions (and BERT's token types) as "index" tensors of shape
(S,); hidden states are (S, D) per sample. Attention follows the brief of the op vocabulary:
project to (S, H*d), reshape to (S, H, d), transpose to (H, S, d), attend, transpose back,
reshape to (S, H*d), output projection. Dropout is left out (inference graph; it costs no
FLOPs worth counting).

Tied LM head (GPT-2): a `linear` with `tied_to="wte"`. Its (V, D) weight is read once per
batch and gets a gradient (dX + dW, 2x forward), but its parameters are counted once, by the
`wte` embedding op.
"""

from __future__ import annotations

from accelsim.errors import ShapeError
from accelsim.workload.graph import Graph, GraphBuilder
from accelsim.workload.ops import OpKind
from accelsim.workload.zoo import model


def check_seq_len(name: str, seq_len: int, max_positions: int | None) -> None:
    """Reject a sequence length the model cannot take (learned position tables are finite)."""
    if seq_len < 1 or (max_positions is not None and seq_len > max_positions):
        limit = f"1..{max_positions}" if max_positions is not None else ">= 1"
        raise ShapeError(f"model '{name}': seq_len {seq_len} out of range ({limit})")


def split_heads(g: GraphBuilder, x: str, heads: int, head_dim: int, name: str) -> str:
    """(S, H*d) -> (S, H, d) -> (H, S, d)."""
    y = g.reshape(x, shape=(-1, heads, head_dim), name=f"{name}.reshape")
    return g.transpose(y, perm=(1, 0, 2), name=f"{name}.transpose")


def attention_block(g: GraphBuilder, x: str, n_heads: int, n_kv_heads: int | None = None, *,
                    causal: bool = False, bias: bool = True, rope: bool = False,
                    rope_base: float = 10000.0) -> str:
    """Multi-head (or grouped-query, `n_kv_heads` < `n_heads`) self-attention on (S, D),
    ending with the output projection. Op names follow the HF checkpoints (q/k/v/o_proj).

    NB: GPT-2 and BERT checkpoints fuse or separate Q, K, V differently; separate q/k/v
    linears have the same parameters and FLOPs as a fused (D, 3D) one.
    """
    d_model = g.shape(x)[-1]
    n_kv = n_heads if n_kv_heads is None else n_kv_heads
    if d_model % n_heads or n_heads % n_kv:
        raise ShapeError(f"d_model {d_model}, {n_heads} heads, {n_kv} kv heads do not divide")
    hd = d_model // n_heads
    q = split_heads(g, g.linear(x, out_features=n_heads * hd, bias=bias, name="q_proj"),
                    n_heads, hd, "q")
    k = split_heads(g, g.linear(x, out_features=n_kv * hd, bias=bias, name="k_proj"),
                    n_kv, hd, "k")
    v = split_heads(g, g.linear(x, out_features=n_kv * hd, bias=bias, name="v_proj"),
                    n_kv, hd, "v")
    if rope:
        q = g.rope(q, base=rope_base, name="q.rope")
        k = g.rope(k, base=rope_base, name="k.rope")
    a = g.attention(q, k, v, causal=causal, name="attn")
    a = g.transpose(a, perm=(1, 0, 2), name="attn.transpose")
    a = g.reshape(a, shape=(-1, n_heads * hd), name="attn.reshape")
    return g.linear(a, out_features=d_model, bias=bias, name="o_proj")


def gelu_mlp(g: GraphBuilder, x: str, d_ff: int) -> str:
    """Position-wise FFN: linear (D -> d_ff), GELU, linear (d_ff -> D), with biases.

    NB: BERT uses exact (erf) GELU and GPT-2 the tanh approximation; `counts` costs both
    with one per-element convention.
    """
    d_model = g.shape(x)[-1]
    h = g.gelu(g.linear(x, out_features=d_ff, name="fc1"), name="gelu")
    return g.linear(h, out_features=d_model, name="fc2")


# ---- BERT --------------------------------------------------------------------------------


def _bert(name: str, n_layers: int, d_model: int, n_heads: int, seq_len: int,
          vocab: int = 30522, max_positions: int = 512, type_vocab: int = 2,
          eps: float = 1e-12) -> Graph:
    check_seq_len(name, seq_len, max_positions)
    g = GraphBuilder(name, family="transformer", arch="bert", d_model=d_model,
                     n_layers=n_layers, n_heads=n_heads, d_ff=4 * d_model, vocab=vocab,
                     seq_len=seq_len)
    ids = g.input("input_ids", (seq_len,), "index")
    pos = g.input("position_ids", (seq_len,), "index")
    types = g.input("token_type_ids", (seq_len,), "index")
    with g.scope("embeddings"):
        x = g.embedding(ids, num_embeddings=vocab, embedding_dim=d_model, name="word")
        p = g.embedding(pos, num_embeddings=max_positions, embedding_dim=d_model, name="pos")
        t = g.embedding(types, num_embeddings=type_vocab, embedding_dim=d_model, name="type")
        x = g.add(g.add(x, p, name="add_pos"), t, name="add_type")
        x = g.layernorm(x, eps=eps, name="ln")
    for i in range(n_layers):
        with g.scope(f"encoder.layer.{i}"):  # post-LN: x = LN(x + f(x))
            a = attention_block(g, x, n_heads)
            x = g.layernorm(g.add(x, a, name="attn.add"), eps=eps, name="attn.ln")
            f = gelu_mlp(g, x, 4 * d_model)
            x = g.layernorm(g.add(x, f, name="mlp.add"), eps=eps, name="mlp.ln")
    seq_out = x
    with g.scope("pooler"):  # dense + tanh on the [CLS] token (row 0) only, as HF BertPooler
        cls = g.node(OpKind.SLICE, x, axes=(0,), starts=(0,), ends=(1,), name="cls")
        pooled = g.tanh(g.linear(cls, out_features=d_model, name="dense"), name="tanh")
    return g.build(outputs=(seq_out, pooled))


@model("bert_base")
def bert_base(seq_len: int = 128) -> Graph:
    """BERT-base (Devlin et al. 2019): 12 layers, 768 hidden, 12 heads; 109.5 M params.

    Default seq_len 128: the length of BERT's pretraining phase 1 (90% of steps) and of the
    MLPerf BERT inference task's common setting; the position table allows up to 512.
    """
    return _bert("bert_base", 12, 768, 12, seq_len)


@model("bert_large")
def bert_large(seq_len: int = 128) -> Graph:
    """BERT-large (Devlin et al. 2019): 24 layers, 1024 hidden, 16 heads; 335.1 M params.
    Default seq_len 128 as for `bert_base` (max 512)."""
    return _bert("bert_large", 24, 1024, 16, seq_len)


# ---- GPT-2 -------------------------------------------------------------------------------


def _gpt2(name: str, n_layers: int, d_model: int, n_heads: int, seq_len: int,
          vocab: int = 50257, max_positions: int = 1024, eps: float = 1e-5) -> Graph:
    check_seq_len(name, seq_len, max_positions)
    g = GraphBuilder(name, family="transformer", arch="gpt2", d_model=d_model,
                     n_layers=n_layers, n_heads=n_heads, d_ff=4 * d_model, vocab=vocab,
                     seq_len=seq_len)
    ids = g.input("input_ids", (seq_len,), "index")
    pos = g.input("position_ids", (seq_len,), "index")
    x = g.embedding(ids, num_embeddings=vocab, embedding_dim=d_model, name="wte")
    p = g.embedding(pos, num_embeddings=max_positions, embedding_dim=d_model, name="wpe")
    x = g.add(x, p, name="embed.add")
    for i in range(n_layers):
        with g.scope(f"h.{i}"):  # pre-LN: x = x + f(LN(x))
            a = attention_block(g, g.layernorm(x, eps=eps, name="ln_1"), n_heads, causal=True)
            x = g.add(x, a, name="attn.add")
            f = gelu_mlp(g, g.layernorm(x, eps=eps, name="ln_2"), 4 * d_model)
            x = g.add(x, f, name="mlp.add")
    x = g.layernorm(x, eps=eps, name="ln_f")
    logits = g.linear(x, out_features=vocab, bias=False, tied_to="wte", name="lm_head")
    return g.build(outputs=(logits,))


@model("gpt2")
def gpt2(seq_len: int = 1024) -> Graph:
    """GPT-2 small (Radford et al. 2019): 12 layers, 768 hidden, 12 heads, tied LM head;
    124.4 M params. Default seq_len 1024, its full context."""
    return _gpt2("gpt2", 12, 768, 12, seq_len)
