"""MobileBERT (Sun et al. 2020, "MobileBERT: a Compact Task-Agnostic BERT for
Resource-Limited Devices", arXiv:2004.02984, Table 1), the question-answering model of
MLPerf Mobile (SQuAD v1.1 at sequence length 384), in the layout of Hugging Face's
`MobileBertForQuestionAnswering` with the `google/mobilebert-uncased` config (vocab 30522,
embedding 128, hidden 512, 24 layers, 4 heads, intra-bottleneck 128, intermediate 512, 4
feed-forward networks, key/query shared bottleneck, no_norm, trigram input, ReLU).

- embeddings: 128-wide word embeddings; the trigram input concatenates each token's vector
  with its neighbours' (384 wide) and a linear layer maps that to 512; learned position and
  token-type embeddings (512 wide) are added, then a NoNorm;
- each layer, on its 512-wide input h: two bottleneck linears 512 -> 128 (each + NoNorm), one
  the block's residual input, one shared by the query and key; the value projects h itself
  (512 -> 128); 4 heads of 32; the attention output (128 -> 128) is added to the
  bottleneck and normalised; then 4 feed-forward networks (128 -> 512 ReLU -> 128, residual,
  NoNorm), and a linear 128 -> 512 added to h and normalised;
- NoNorm is an elementwise affine x * gamma + beta (a learned scale and shift per feature):
  here a `const_binary` mul and add whose constants are its parameters;
- head: a linear 512 -> 2 (start and end logits), as the SQuAD model has; the config's
  pooler has no dense layer (`classifier_activation` false).

NB: `describe --execute` on this graph reports a NaN error: with the kernels' random He
initialisation and NoNorm's identity constants nothing holds the activations, which grow
about 30x a layer and overflow float32 by layer 14 (the trained NoNorm scales keep them in
range). Counts and costs do not depend on the values.

Published: 25.3 M params (the paper, Table 1, MobileBERT) and 5.7 G FLOPs at sequence
length 128 (same table); see tests/validation/test_zoo_phone.py for the comparison.
"""

from __future__ import annotations

from accelsim.workload.graph import Graph, GraphBuilder
from accelsim.workload.zoo import model
from accelsim.workload.zoo.transformer import check_seq_len, split_heads

VOCAB, EMBED, HIDDEN, BOTTLENECK, INTERMEDIATE = 30522, 128, 512, 128, 512
LAYERS, HEADS, FFNS, MAX_POSITIONS, TYPES = 24, 4, 4, 512, 2


def no_norm(g: GraphBuilder, x: str, name: str) -> str:
    """MobileBERT's NoNorm: x * gamma + beta, gamma and beta learned per feature."""
    d = g.shape(x)[-1]
    y = g.const_binary(x, fn="mul", const_shape=(d,), name=f"{name}.gamma")
    return g.const_binary(y, fn="add", const_shape=(d,), name=f"{name}.beta")


def _dense_norm(g: GraphBuilder, x: str, width: int, name: str) -> str:
    return no_norm(g, g.linear(x, out_features=width, name=name), f"{name}.norm")


def _ffn(g: GraphBuilder, x: str, name: str) -> str:
    with g.scope(name):
        h = g.relu(g.linear(x, out_features=INTERMEDIATE, name="intermediate"), name="relu")
        y = g.linear(h, out_features=g.shape(x)[-1], name="output")
        return no_norm(g, g.add(y, x, name="add"), "norm")


def _layer(g: GraphBuilder, h: str) -> str:
    hd = BOTTLENECK // HEADS
    layer_input = _dense_norm(g, h, BOTTLENECK, "bottleneck.input")
    shared = _dense_norm(g, h, BOTTLENECK, "bottleneck.attention")
    q = split_heads(g, g.linear(shared, out_features=BOTTLENECK, name="attention.query"),
                    HEADS, hd, "q")
    k = split_heads(g, g.linear(shared, out_features=BOTTLENECK, name="attention.key"),
                    HEADS, hd, "k")
    v = split_heads(g, g.linear(h, out_features=BOTTLENECK, name="attention.value"),
                    HEADS, hd, "v")
    a = g.attention(q, k, v, name="attention.attn")
    a = g.transpose(a, perm=(1, 0, 2), name="attention.transpose")
    a = g.reshape(a, shape=(-1, BOTTLENECK), name="attention.reshape")
    a = g.linear(a, out_features=BOTTLENECK, name="attention.output")
    x = no_norm(g, g.add(a, layer_input, name="attention.add"), "attention.norm")
    for i in range(FFNS - 1):
        x = _ffn(g, x, f"ffn.{i}")
    x = _ffn(g, x, "output")
    y = g.linear(x, out_features=HIDDEN, name="output.bottleneck")
    return no_norm(g, g.add(y, h, name="output.bottleneck.add"), "output.bottleneck.norm")


@model("mobilebert")
def mobilebert(seq_len: int = 384) -> Graph:
    """MobileBERT for SQuAD; default seq_len 384, MLPerf Mobile's (max 512)."""
    check_seq_len("mobilebert", seq_len, MAX_POSITIONS)
    g = GraphBuilder("mobilebert", family="transformer", arch="mobilebert", d_model=HIDDEN,
                     n_layers=LAYERS, n_heads=HEADS, d_ff=INTERMEDIATE, vocab=VOCAB,
                     seq_len=seq_len)
    ids = g.input("input_ids", (seq_len,), "index")
    pos = g.input("position_ids", (seq_len,), "index")
    types = g.input("token_type_ids", (seq_len,), "index")
    with g.scope("embeddings"):
        x = g.embedding(ids, num_embeddings=VOCAB, embedding_dim=EMBED, name="word")
        # NB: the trigram input is [x shifted left, x, x shifted right] with a zero row at
        # each end; the shifts are views, so the concat of three copies costs the same.
        x = g.concat(x, x, x, axis=-1, name="trigram")
        x = g.linear(x, out_features=HIDDEN, name="transformation")
        p = g.embedding(pos, num_embeddings=MAX_POSITIONS, embedding_dim=HIDDEN, name="pos")
        t = g.embedding(types, num_embeddings=TYPES, embedding_dim=HIDDEN, name="type")
        x = g.add(g.add(x, p, name="add_pos"), t, name="add_type")
        x = no_norm(g, x, "norm")
    for i in range(LAYERS):
        with g.scope(f"encoder.layer.{i}"):
            x = _layer(g, x)
    logits = g.linear(x, out_features=2, name="qa_outputs")
    return g.build(outputs=(logits,))
