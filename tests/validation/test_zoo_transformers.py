"""Transformer zoo (BERT, GPT-2, LLaMA-2): parameter counts against the published (HF) totals,
forward FLOPs against closed forms computed here from the configuration alone, and scaling
with sequence length."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from accelsim.errors import AccelsimError
from accelsim.workload.ops import MATMUL_KINDS
from accelsim.workload.tables import counts_table, totals, unsupported_ops
from accelsim.workload.zoo import build_model, model_knobs

# Parameter counts of the Hugging Face checkpoints (sum of numel over model.parameters(),
# tied weights once): bert-base-uncased and bert-large-uncased with the pooler, without the
# pretraining heads; gpt2; meta-llama/Llama-2-7b-hf and Llama-2-70b-hf.
HF_PARAMS = {
    "bert_base": 109_482_240,
    "bert_large": 335_141_888,
    "gpt2": 124_439_808,
    "llama2_7b": 6_738_415_616,
    "llama2_70b": 68_976_648_192,
}


@dataclass(frozen=True)
class Cfg:
    """The published hyper-parameters, restated independently of the zoo code."""

    arch: str  # "bert", "gpt2", "llama"
    vocab: int
    d: int
    layers: int
    heads: int
    d_ff: int
    kv_heads: int
    positions: int = 0  # learned position-table rows (0: RoPE)
    types: int = 0  # token-type rows (BERT)

    @property
    def tied(self) -> bool:
        return self.arch == "gpt2"

    @property
    def embedding_params(self) -> int:
        """Token, position and token-type tables (Kaplan et al. 2020 leave these out of N)."""
        return (self.vocab + self.positions + self.types) * self.d

    @property
    def matmul_weights(self) -> int:
        """Weight elements (no biases) of every linear layer, incl. an untied LM head."""
        kv = self.kv_heads * (self.d // self.heads)
        attn = 2 * self.d * self.d + 2 * self.d * kv  # q, o; k, v
        ffn = (3 if self.arch == "llama" else 2) * self.d * self.d_ff
        extra = {"bert": self.d * self.d, "gpt2": 0, "llama": self.vocab * self.d}[self.arch]
        return self.layers * (attn + ffn) + extra  # extra: BERT pooler / LLaMA lm_head

    @property
    def non_embedding_params(self) -> int:
        """N of Kaplan et al.: all parameters but the embedding tables."""
        d, L = self.d, self.layers
        if self.arch == "llama":  # no biases; two RMSNorm gains per layer + final norm
            return self.matmul_weights + 2 * L * d + d
        kv = self.kv_heads * (d // self.heads)
        biases = L * (d + 2 * kv + d + self.d_ff + d)  # q, k, v, o, fc1, fc2
        norms = L * 2 * 2 * d  # two LayerNorms (gamma, beta) per layer
        if self.arch == "bert":
            return self.matmul_weights + biases + norms + 2 * d + d  # embedding LN, pooler b
        return self.matmul_weights + biases + norms + 2 * d  # final ln_f

    @property
    def params(self) -> int:
        return self.embedding_params + self.non_embedding_params


CFGS = {
    "bert_base": Cfg("bert", 30522, 768, 12, 12, 3072, 12, positions=512, types=2),
    "bert_large": Cfg("bert", 30522, 1024, 24, 16, 4096, 16, positions=512, types=2),
    "gpt2": Cfg("gpt2", 50257, 768, 12, 12, 3072, 12, positions=1024),
    "llama2_7b": Cfg("llama", 32000, 4096, 32, 32, 11008, 32),
    "llama2_70b": Cfg("llama", 32000, 8192, 80, 64, 28672, 8),
}
DEFAULT_SEQ = {"bert_base": 128, "bert_large": 128, "gpt2": 1024, "llama2_7b": 4096,
               "llama2_70b": 4096}
NAMES = sorted(CFGS)
MATMUL_OPS = [k.value for k in MATMUL_KINDS]


def _fwd_per_token(name: str, seq_len: int) -> tuple[float, float]:
    """(all ops, matmul-like ops) forward FLOPs per token."""
    g = build_model(name, seq_len=seq_len)
    c = counts_table(g)
    mm = float(c.loc[c["op"].isin(MATMUL_OPS), "fwd_flops"].sum())
    return totals(g)["flops_per_sample"] / seq_len, mm / seq_len


@pytest.mark.parametrize("name", NAMES)
def test_params_match_published_counts(name: str) -> None:
    assert CFGS[name].params == HF_PARAMS[name]  # the closed form restates the HF total
    assert build_model(name).params == HF_PARAMS[name]


@pytest.mark.parametrize("name", NAMES)
def test_default_seq_len_and_support(name: str) -> None:
    assert model_knobs(name) == {"seq_len": DEFAULT_SEQ[name]}
    assert unsupported_ops(build_model(name, seq_len=64)) == []


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("seq_len", [128, 512])
def test_matmul_flops_exact(name: str, seq_len: int) -> None:
    """Matmul-like FLOPs per token = 2 x weights (each weight one MAC per token), plus
    QK^T and PV: 2 x 2 x S x d_attn per layer (counted dense: `counts` does not skip the
    causally masked half; BERT's pooler: 2 x d^2 once a sequence), plus the tied LM head's
    2 x d x V (Kaplan's "de-embed" row), plus
    the softmax the attention op carries: 5 FLOPs per score, H x S scores per token."""
    cfg = CFGS[name]
    expected = 2 * cfg.matmul_weights + 4 * cfg.layers * seq_len * cfg.d
    expected += 5 * cfg.layers * cfg.heads * seq_len  # softmax: max, sub, exp, sum, divide
    if cfg.tied:
        expected += 2 * cfg.d * cfg.vocab
    if cfg.arch == "bert":  # the pooler's dense runs on the [CLS] token only: once a sequence
        expected += 2 * cfg.d * cfg.d * (1 / seq_len - 1)
    assert _fwd_per_token(name, seq_len)[1] == pytest.approx(expected, rel=1e-12)


@pytest.mark.parametrize("name", NAMES)
def test_forward_flops_vs_kaplan(name: str) -> None:
    """Kaplan et al. 2020 (eq. 2.2, Table 1): C_fwd per token = 2 N + 2 n_layer n_ctx d_attn,
    N the non-embedding params; plus 2 d_model n_vocab for a tied LM head (the "de-embed"
    row, whose weights sit in the embedding). Kaplan's attention term counts one of the two
    score matmuls, i.e. the causal half; our dense attention costs both, so the graph is
    expected at closed form + 2 n_layer n_ctx d_attn, and above it only by what Kaplan
    neglects (norms, activations, softmax, residual adds; below 0.5% for these models)."""
    cfg, s = CFGS[name], DEFAULT_SEQ[name]
    kaplan = 2 * cfg.non_embedding_params + 2 * cfg.layers * s * cfg.d
    if cfg.tied:
        kaplan += 2 * cfg.d * cfg.vocab
    dense = kaplan + 2 * cfg.layers * s * cfg.d
    if cfg.arch == "bert":  # Kaplan's 2N counts the pooler per token; it runs once a sequence
        dense += 2 * cfg.d * cfg.d * (1 / s - 1)
    ours = _fwd_per_token(name, s)[0]
    assert dense <= ours <= dense * 1.005
    assert ours / kaplan - 1 < 0.08  # the whole gap to the plain closed form, at default S


@pytest.mark.parametrize("name", NAMES)
def test_seq_len_scaling(name: str) -> None:
    """Doubling S: attention FLOPs per sample x4 (quadratic), linear-layer FLOPs x2 (but
    BERT's pooler, 2 d^2 a sequence whatever S)."""

    def by_kind(seq_len: int) -> tuple[float, float]:
        c = counts_table(build_model(name, seq_len=seq_len))
        attn = float(c.loc[c["op"] == "attention", "fwd_flops"].sum())
        lin = float(c.loc[c["op"].isin(["linear", "matmul"]), "fwd_flops"].sum())
        return attn, lin

    (a1, l1), (a2, l2) = by_kind(128), by_kind(256)
    pooler = 2 * CFGS[name].d ** 2 if CFGS[name].arch == "bert" else 0
    assert a2 == 4 * a1
    assert l2 - pooler == 2 * (l1 - pooler)


@pytest.mark.parametrize("name, vocab", [("gpt2", 50257), ("llama2_7b", 32000),
                                         ("llama2_70b", 32000)])
def test_lm_head_output_shape(name: str, vocab: int) -> None:
    g = build_model(name, seq_len=100)
    assert [g.shapes[o] for o in g.outputs] == [(100, vocab)]
    assert g.inputs["input_ids"] == ((100,), "index")


@pytest.mark.parametrize("name, d", [("bert_base", 768), ("bert_large", 1024)])
def test_bert_outputs_and_inputs(name: str, d: int) -> None:
    g = build_model(name, seq_len=64)
    assert [g.shapes[o] for o in g.outputs] == [(64, d), (1, d)]  # sequence, pooled [CLS]
    assert {n: dt for n, (_, dt) in g.inputs.items()} == {
        "input_ids": "index", "position_ids": "index", "token_type_ids": "index"}


def test_gpt2_tied_head_counted_once() -> None:
    g = build_model("gpt2", seq_len=32)
    assert g.op("wte").param_shapes["weight"] == (50257, 768)
    head = g.op("lm_head")
    assert head.params == 0 and head.attrs["tied_to"] == "wte"
    c = counts_table(g).set_index("name")
    assert c.loc["lm_head", "fwd_flops"] == 2 * 32 * 768 * 50257
    # The tied weight is read once per batch (weight elements), not per sample.
    assert c.loc["lm_head", "weight_elems"] == 768 * 50257
    assert c.loc["lm_head", "read_elems"] == 32 * 768


def test_llama2_70b_grouped_query() -> None:
    g = build_model("llama2_70b", seq_len=16)
    attn = g.op("layers.0.attn")
    assert attn.input_shapes == ((64, 16, 128), (8, 16, 128), (8, 16, 128))
    assert attn.attrs["causal"] is True
    assert g.op("layers.0.k.rope").output_shape == (8, 16, 128)


def test_causal_flags() -> None:
    assert build_model("gpt2", seq_len=8).op("h.0.attn").attrs["causal"] is True
    assert build_model("bert_base", seq_len=8).op("encoder.layer.0.attn").attrs["causal"] is False


@pytest.mark.parametrize("name, bad", [("bert_base", 513), ("gpt2", 1025), ("gpt2", 0),
                                       ("llama2_7b", 0)])
def test_seq_len_out_of_range(name: str, bad: int) -> None:
    with pytest.raises(AccelsimError, match="seq_len"):
        build_model(name, seq_len=bad)
