"""One decoder-only language model as shapes (`DecoderConfig`): what sizes prefill, decode, the
KV cache and the weights, for every architecture family the token-level path runs.

    DecoderConfig("mine", n_layers=24, d_model=2048, n_heads=16, n_kv_heads=4, d_ff=5632,
                  vocab=32000, context=4096)                      # llama layout
    DecoderConfig("j", 28, 4096, 16, 16, 16384, 50400, 2048, arch="gptj", rotary_dim=64)

An architecture family (`arch`) is a layout preset; any layout field given explicitly wins:

    family    mlp     norm   positions  tied  biases (qkv, out, mlp, head)  parallel  norms
    llama     swiglu  rms    rope       no    none                          no        2
    gpt2      gelu    layer  learned    yes   qkv, out, mlp                 no        2
    gptj      gelu    layer  rope       no    mlp, head                     yes       1
    gpt_neox  gelu    layer  rope       no    qkv, out, mlp                 yes       2
    falcon    gelu    layer  rope       yes   none                          yes       2
    nemotron  relu2   layer  rope       no    none                          no        2

`mlp`: "swiglu" (gate, up, down: 3 matrices), "gelu" (up, down: 2) or "relu2" (squared ReLU,
up, down: 2). `parallel_attention`: attention and FFN read the same layer input and both add
into the residual (GPT-J, GPT-NeoX, Falcon). `norms_per_layer`: 1 where the two branches share
one norm (GPT-J, Falcon-7B). A mixture of experts (`n_experts` > 1) replaces each FFN by
`n_experts` routed experts of width `d_ff`, `experts_per_token` chosen per token, plus
`n_shared_experts` of width `d_ff` every token runs through (DeepSeek-MoE); its first
`dense_layers` layers keep a dense FFN of width `dense_d_ff` instead. Parameter counts are
built from these shapes, never copied.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from accelsim.errors import AccelsimError

MLPS = ("swiglu", "gelu", "relu2")
NORMS = ("rms", "layer")
POSITIONS = ("rope", "learned", "alibi")
_LAYOUT = ("mlp", "norm", "positions", "tied_embeddings", "qkv_bias", "out_bias", "mlp_bias",
           "lm_head_bias", "parallel_attention", "norms_per_layer")
ARCH_LAYOUTS: dict[str, tuple] = {  # values in `_LAYOUT` order
    "llama": ("swiglu", "rms", "rope", False, False, False, False, False, False, 2),
    "gpt2": ("gelu", "layer", "learned", True, True, True, True, False, False, 2),
    "gptj": ("gelu", "layer", "rope", False, False, False, True, True, True, 1),
    "gpt_neox": ("gelu", "layer", "rope", False, True, True, True, False, True, 2),
    "falcon": ("gelu", "layer", "rope", True, False, False, False, False, True, 2),
    "nemotron": ("relu2", "layer", "rope", False, False, False, False, False, False, 2),
}
ARCHS = tuple(ARCH_LAYOUTS)
_COUNTS = ("n_layers", "d_model", "n_heads", "n_kv_heads", "d_ff", "vocab", "context",
           "n_experts", "experts_per_token")


@dataclass(frozen=True)
class DecoderConfig:
    """One decoder-only model. Sizes in elements; `context` is the longest sequence it takes.
    Layout fields left None take the `arch` family's (module docstring). NB: a
    `dataclasses.replace` of `arch` alone keeps the resolved layout of the old family."""

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
    mlp: str | None = None
    norm: str | None = None
    positions: str | None = None
    tied_embeddings: bool | None = None
    qkv_bias: bool | None = None
    out_bias: bool | None = None
    mlp_bias: bool | None = None
    lm_head_bias: bool | None = None
    parallel_attention: bool | None = None
    norms_per_layer: int | None = None
    rotary_dim: int | None = None  # rotated dimensions of each head (None: all of them)
    sliding_window: int | None = None  # keys each query attends to at most (None: all)
    n_shared_experts: int = 0
    dense_layers: int = 0  # leading layers with a dense FFN in a mixture of experts
    dense_d_ff: int | None = None  # their FFN width (None: d_ff)

    def __post_init__(self) -> None:
        where = f"decoder '{self.name}'"
        if self.arch not in ARCH_LAYOUTS:
            raise AccelsimError(f"{where}: field 'arch' = {self.arch!r}: choose one of "
                                f"{', '.join(ARCHS)}")
        for name, default in zip(_LAYOUT, ARCH_LAYOUTS[self.arch], strict=True):
            if getattr(self, name) is None:
                object.__setattr__(self, name, default)
        for name in _COUNTS:
            _whole(where, name, getattr(self, name), 1)
        for name, choices in (("mlp", MLPS), ("norm", NORMS), ("positions", POSITIONS)):
            if getattr(self, name) not in choices:
                raise AccelsimError(f"{where}: field '{name}' = {getattr(self, name)!r}: "
                                    f"choose one of {', '.join(choices)}")
        for name in _LAYOUT[3:9]:
            if not isinstance(getattr(self, name), bool):
                raise AccelsimError(f"{where}: field '{name}' = {getattr(self, name)!r}: "
                                    "expected true or false")
        if self.norms_per_layer not in (1, 2) or isinstance(self.norms_per_layer, bool):
            raise AccelsimError(f"{where}: field 'norms_per_layer' = {self.norms_per_layer!r}: "
                                "expected 1 or 2")
        self._check_shapes(where)

    def _check_shapes(self, where: str) -> None:
        if self.d_model % self.n_heads or self.n_heads % self.n_kv_heads:
            raise AccelsimError(f"{where}: d_model {self.d_model}, n_heads {self.n_heads} and "
                                f"n_kv_heads {self.n_kv_heads} do not divide")
        if self.experts_per_token > self.n_experts:
            raise AccelsimError(f"{where}: field 'experts_per_token' = "
                                f"{self.experts_per_token}: more than n_experts "
                                f"{self.n_experts}")
        for name in ("rotary_dim", "sliding_window", "dense_d_ff"):
            if getattr(self, name) is not None:
                _whole(where, name, getattr(self, name), 1)
        if self.rotary_dim is not None and (self.rotary_dim > self.head_dim
                                            or self.rotary_dim % 2):
            raise AccelsimError(f"{where}: field 'rotary_dim' = {self.rotary_dim}: an even "
                                f"number at most the head size {self.head_dim}")
        _whole(where, "n_shared_experts", self.n_shared_experts, 0)
        _whole(where, "dense_layers", self.dense_layers, 0)
        if not self.is_moe and (self.n_shared_experts or self.dense_layers):
            raise AccelsimError(f"{where}: n_shared_experts and dense_layers apply to a "
                                "mixture of experts (n_experts > 1)")
        if self.dense_layers >= self.n_layers:
            raise AccelsimError(f"{where}: field 'dense_layers' = {self.dense_layers}: fewer "
                                f"than the {self.n_layers} layers")

    @property
    def head_dim(self) -> int:
        return self.d_model // self.n_heads

    @property
    def rope_dims(self) -> int:
        """Dimensions of each q and k head that RoPE rotates (0 without RoPE)."""
        if self.positions != "rope":
            return 0
        return self.head_dim if self.rotary_dim is None else self.rotary_dim

    @property
    def is_moe(self) -> bool:
        return self.n_experts > 1

    @property
    def has_bias(self) -> bool:
        """Whether any projection of a layer has a bias."""
        return bool(self.qkv_bias or self.out_bias or self.mlp_bias)

    @property
    def gated(self) -> bool:
        """Whether the FFN is gated (SwiGLU: silu(gate) x up)."""
        return self.mlp == "swiglu"

    @property
    def ffn_matrices(self) -> int:
        """Weight matrices of one FFN (expert): SwiGLU gate, up, down; GELU / ReLU^2 up, down."""
        return 3 if self.gated else 2

    @property
    def qkv_out(self) -> int:
        """Output features of the fused Q, K, V projection."""
        return (self.n_heads + 2 * self.n_kv_heads) * self.head_dim

    @property
    def moe_layers(self) -> int:
        """Layers whose FFN is a mixture of experts (all of them for a dense model's FFN)."""
        return self.n_layers - self.dense_layers

    def attention_params(self) -> int:
        """Q, K, V, O projections of one layer, with their biases where the layout has them."""
        d = self.d_model
        w = d * self.qkv_out + self.n_heads * self.head_dim * d
        return w + (self.qkv_out if self.qkv_bias else 0) + (d if self.out_bias else 0)

    def ffn_params(self, d_ff: int) -> int:
        """One FFN of width `d_ff`: its matrices and, with `mlp_bias`, its biases."""
        w = self.ffn_matrices * self.d_model * d_ff
        return w + ((self.ffn_matrices - 1) * d_ff + self.d_model if self.mlp_bias else 0)

    def expert_params(self) -> int:
        """One FFN (or one expert) of one layer."""
        return self.ffn_params(self.d_ff)

    def norm_params(self) -> int:
        """The norms of one layer (RMSNorm: a scale; LayerNorm: scale and shift)."""
        return self.norms_per_layer * self._norm_width()

    def _norm_width(self) -> int:
        return self.d_model * (2 if self.norm == "layer" else 1)

    def router_params(self) -> int:
        return self.d_model * self.n_experts if self.is_moe else 0

    def layer_params(self) -> int:
        """One layer (a mixture-of-experts layer where the model has them)."""
        experts = (self.n_experts + self.n_shared_experts) * self.expert_params()
        return self.attention_params() + experts + self.router_params() + self.norm_params()

    def dense_layer_params(self) -> int:
        """One of the leading dense layers of a mixture of experts."""
        width = self.d_ff if self.dense_d_ff is None else self.dense_d_ff
        return self.attention_params() + self.ffn_params(width) + self.norm_params()

    def embedding_params(self) -> int:
        """Token embedding, learned positions, final norm and an untied LM head (and bias)."""
        table = self.vocab * self.d_model
        positions = self.context * self.d_model if self.positions == "learned" else 0
        head = 0 if self.tied_embeddings else table
        head_bias = self.vocab if self.lm_head_bias else 0
        return table + positions + self._norm_width() + head + head_bias

    @property
    def params(self) -> int:
        """Every parameter, a tied matrix once."""
        layers = self.moe_layers * self.layer_params()
        if self.dense_layers:
            layers += self.dense_layers * self.dense_layer_params()
        return layers + self.embedding_params()

    @property
    def active_params(self) -> int:
        """Parameters one token runs through: the routed experts only (MoE)."""
        idle = (self.n_experts - self.experts_per_token) * self.expert_params()
        return self.params - self.moe_layers * idle

    def kv_bytes_per_token(self, width_bytes: float) -> float:
        """KV cache of one token, all layers: K and V, each n_kv_heads x head_dim.
        NB: a sliding window does not cap it here (the cache is charged for every token)."""
        return 2.0 * self.n_layers * self.n_kv_heads * self.head_dim * width_bytes


def _whole(where: str, name: str, value: object, low: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise AccelsimError(f"{where}: field '{name}' = {value!r}: expected a whole number "
                            f">= {low}")
