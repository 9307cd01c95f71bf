"""Decoder-only language models by config: the shapes that size prefill, decode and the KV
cache, with the built-ins from the models' published configurations.

    cfg = decoder("llama3_8b")          # a built-in
    cfg.params                          # 8,030,261,248 (HF Meta-Llama-3-8B)
    cfg.kv_bytes_per_token(2)           # 131,072 B: 2 (K, V) x 32 layers x 8 kv heads x 128 x 2 B
    DecoderConfig("mine", n_layers=24, d_model=2048, n_heads=16, n_kv_heads=4, d_ff=5632,
                  vocab=32000, context=4096)

Architectures: "llama" (RMSNorm, RoPE, SwiGLU FFN, no biases, untied LM head; MoE replaces the
FFN with `n_experts` SwiGLU experts and a router, `experts_per_token` chosen per token) and
"gpt2" (LayerNorm, learned positions, GELU FFN, biases, LM head tied to the embedding).
Parameter counts are built from the shapes here, never copied; the published counts in
`PUBLISHED_PARAMS` are the independent check (tests).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from accelsim.errors import AccelsimError, UnknownNameError

ARCHS = ("llama", "gpt2")


@dataclass(frozen=True)
class DecoderConfig:
    """One decoder-only model. Sizes in elements; `context` is the longest sequence it takes."""

    name: str
    n_layers: int
    d_model: int
    n_heads: int
    n_kv_heads: int
    d_ff: int
    vocab: int
    context: int
    n_experts: int = 1  # 1: a dense FFN
    experts_per_token: int = 1
    arch: str = "llama"
    source: str = field(default="", compare=False)

    def __post_init__(self) -> None:
        where = f"decoder '{self.name}'"
        for name in ("n_layers", "d_model", "n_heads", "n_kv_heads", "d_ff", "vocab",
                     "context", "n_experts", "experts_per_token"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise AccelsimError(f"{where}: field '{name}' = {value!r}: expected a whole "
                                    "number >= 1")
        if self.arch not in ARCHS:
            raise AccelsimError(f"{where}: field 'arch' = {self.arch!r}: choose one of "
                                f"{', '.join(ARCHS)}")
        if self.d_model % self.n_heads or self.n_heads % self.n_kv_heads:
            raise AccelsimError(f"{where}: d_model {self.d_model}, n_heads {self.n_heads} and "
                                f"n_kv_heads {self.n_kv_heads} do not divide")
        if self.experts_per_token > self.n_experts:
            raise AccelsimError(f"{where}: field 'experts_per_token' = "
                                f"{self.experts_per_token}: more than n_experts "
                                f"{self.n_experts}")

    @property
    def head_dim(self) -> int:
        return self.d_model // self.n_heads

    @property
    def is_moe(self) -> bool:
        return self.n_experts > 1

    @property
    def has_bias(self) -> bool:
        return self.arch == "gpt2"

    @property
    def ffn_matrices(self) -> int:
        """Weight matrices of one FFN (expert): SwiGLU gate, up, down; GELU up, down."""
        return 3 if self.arch == "llama" else 2

    @property
    def qkv_out(self) -> int:
        """Output features of the fused Q, K, V projection."""
        return (self.n_heads + 2 * self.n_kv_heads) * self.head_dim

    def attention_params(self) -> int:
        """Q, K, V, O projections of one layer (with biases for gpt2)."""
        d = self.d_model
        w = d * self.qkv_out + self.n_heads * self.head_dim * d
        return w + (self.qkv_out + d if self.has_bias else 0)

    def expert_params(self) -> int:
        """One FFN (or one expert) of one layer."""
        w = self.ffn_matrices * self.d_model * self.d_ff
        return w + (self.d_ff + self.d_model if self.has_bias else 0)

    def norm_params(self) -> int:
        """The two norms of one layer (RMSNorm: a scale; LayerNorm: scale and shift)."""
        return 2 * self.d_model * (2 if self.arch == "gpt2" else 1)

    def router_params(self) -> int:
        return self.d_model * self.n_experts if self.is_moe else 0

    def layer_params(self) -> int:
        return (self.attention_params() + self.n_experts * self.expert_params()
                + self.router_params() + self.norm_params())

    def embedding_params(self) -> int:
        """Token embedding, learned positions (gpt2), final norm and an untied LM head."""
        final_norm = self.d_model * (2 if self.arch == "gpt2" else 1)
        if self.arch == "gpt2":
            return self.vocab * self.d_model + self.context * self.d_model + final_norm
        return 2 * self.vocab * self.d_model + final_norm

    @property
    def params(self) -> int:
        """Every parameter, a tied matrix once."""
        return self.n_layers * self.layer_params() + self.embedding_params()

    @property
    def active_params(self) -> int:
        """Parameters one token runs through: the routed experts only (MoE)."""
        idle = (self.n_experts - self.experts_per_token) * self.expert_params()
        return self.params - self.n_layers * idle

    def kv_bytes_per_token(self, width_bytes: float) -> float:
        """KV cache of one token, all layers: K and V, each n_kv_heads x head_dim."""
        return 2.0 * self.n_layers * self.n_kv_heads * self.head_dim * width_bytes


_HF = "https://huggingface.co/"
BUILTINS: dict[str, DecoderConfig] = {c.name: c for c in (
    DecoderConfig("gpt2", 12, 768, 12, 12, 3072, 50257, 1024, arch="gpt2",
                  source=f"{_HF}openai-community/gpt2/blob/main/config.json (n_layer 12, n_embd "
                  "768, n_head 12, n_positions 1024, vocab 50257; FFN 4 x n_embd)"),
    DecoderConfig("llama2_7b", 32, 4096, 32, 32, 11008, 32000, 4096,
                  source=f"{_HF}meta-llama/Llama-2-7b-hf/blob/main/config.json"),
    DecoderConfig("llama2_13b", 40, 5120, 40, 40, 13824, 32000, 4096,
                  source=f"{_HF}meta-llama/Llama-2-13b-hf/blob/main/config.json"),
    DecoderConfig("llama2_70b", 80, 8192, 64, 8, 28672, 32000, 4096,
                  source=f"{_HF}meta-llama/Llama-2-70b-hf/blob/main/config.json"),
    DecoderConfig("llama3_8b", 32, 4096, 32, 8, 14336, 128256, 8192,
                  source=f"{_HF}meta-llama/Meta-Llama-3-8B/blob/main/config.json"),
    DecoderConfig("llama3_70b", 80, 8192, 64, 8, 28672, 128256, 8192,
                  source=f"{_HF}meta-llama/Meta-Llama-3-70B/blob/main/config.json"),
    DecoderConfig("mixtral_8x7b", 32, 4096, 32, 8, 14336, 32000, 32768, n_experts=8,
                  experts_per_token=2,
                  source=f"{_HF}mistralai/Mixtral-8x7B-v0.1/blob/main/config.json "
                  "(num_local_experts 8, num_experts_per_tok 2)"),
)}

# Parameter counts published for the checkpoints (HF model cards / safetensors metadata), the
# independent reference the tests hold the counts above against.
PUBLISHED_PARAMS = {
    "gpt2": 124_439_808,  # HF gpt2 (tied LM head counted once)
    "llama2_7b": 6_738_415_616,
    "llama2_13b": 13_015_864_320,
    "llama2_70b": 68_976_648_192,
    "llama3_8b": 8_030_261_248,
    "llama3_70b": 70_553_706_496,
    "mixtral_8x7b": 46_702_792_704,
}


def decoder_names() -> list[str]:
    return sorted(BUILTINS)


def is_decoder(name: str) -> bool:
    return name in BUILTINS


def decoder(name: str) -> DecoderConfig:
    """The built-in decoder `name`; UnknownNameError lists the choices."""
    if name not in BUILTINS:
        raise UnknownNameError("decoder model", name, list(BUILTINS))
    return BUILTINS[name]
