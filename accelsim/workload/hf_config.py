"""A Hugging Face decoder `config.json` read into a `DecoderConfig`.

    cfg = read_hf_config("workloads/llm/llama-3.1-8b.json")   # name: the file stem
    cfg.params                                                 # 8,030,261,248

model_types read: llama, mistral (sliding_window), qwen2 (q/k/v biases), mixtral (experts),
deepseek (DeepSeek-MoE: shared experts, leading dense layers; the MLA attention of deepseek_v2
and deepseek_v3 is refused), gptj, gpt_neox, falcon, gpt2 and nemotron. Every key of the file is
either read (a shape or a layout switch, checked), one of the known non-architectural keys
(`IGNORED`: token ids, dtypes, dropouts, initialisation, norm epsilons, RoPE base and scaling,
which size no weight), or refused: an unknown key, a missing or non-integer size, an activation
or attention the token-level model does not run are each one `ConfigError` naming the file and
the field. The file is read as every data file is (`accelsim.tomlfiles.read_text_file`: a
regular file of at most 1 MiB, so a FIFO or a device cannot hang it).
"""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path
from typing import Any

from accelsim.errors import AccelsimError, ConfigError, DataFileError
from accelsim.tomlfiles import read_text_file
from accelsim.workload.decoder import DecoderConfig

# Keys that size no weight and change no step's work: accepted and not read.
IGNORED = frozenset({
    "_name_or_path", "architectures", "auto_map", "torch_dtype", "dtype", "transformers_version",
    "bos_token_id", "eos_token_id", "pad_token_id", "sep_token_id", "decoder_start_token_id",
    "initializer_range", "init_std", "use_cache", "rope_theta", "rope_scaling", "rope_parameters",
    "rotary_emb_base", "rms_norm_eps", "layer_norm_eps", "layer_norm_epsilon", "norm_eps",
    "attention_dropout", "hidden_dropout", "attn_pdrop", "embd_pdrop", "resid_pdrop",
    "classifier_dropout", "summary_type", "summary_use_proj", "summary_activation",
    "summary_proj_to_labels", "summary_first_dropout", "task_specific_params", "tokenizer_class",
    "gradient_checkpointing", "pretraining_tp", "scale_attn_weights",
    "scale_attn_by_inverse_layer_idx", "reorder_and_upcast_attn", "output_router_logits",
    "router_aux_loss_coef", "router_jitter_noise", "aux_loss_alpha", "seq_aux", "scoring_func",
    "norm_topk_prob", "topk_method", "n_group", "topk_group", "routed_scaling_factor", "ep_size",
    "quantization_config", "id2label", "label2id", "return_dict", "output_hidden_states",
    "output_attentions", "torchscript", "use_bfloat16", "problem_type", "max_window_layers",
})
MLA_KEYS = ("kv_lora_rank", "q_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim",
            "v_head_dim")
LLAMA_LIKE = ("llama", "mistral", "qwen2", "mixtral", "deepseek", "deepseek_v2", "deepseek_v3")
MODEL_TYPES = (*LLAMA_LIKE, "gptj", "gpt_neox", "falcon", "gpt2", "nemotron")
_MISSING = object()


class _Fields:
    """The file's keys as they are read: each read or ignored key is marked, so that what is
    left is what this reader does not know."""

    def __init__(self, raw: dict[str, Any], src: str, model_type: str) -> None:
        self.raw, self.src, self.model_type = raw, src, model_type
        self.used: set[str] = {"model_type"}

    def bad(self, key: str, why: str) -> ConfigError:
        return ConfigError(self.src, key, self.raw.get(key), why)

    def get(self, key: str, default: Any = _MISSING) -> Any:
        self.used.add(key)
        if key in self.raw and self.raw[key] is not None:
            return self.raw[key]
        if default is _MISSING:
            raise ConfigError(self.src, key, None, f"missing: a {self.model_type} config "
                              "gives it")
        return default

    def count(self, key: str, default: Any = _MISSING, low: int = 1) -> Any:
        given = self.raw.get(key) is not None
        value = self.get(key, default)
        if not given:
            return value
        if isinstance(value, bool) or not isinstance(value, int) or value < low:
            raise self.bad(key, f"expected a whole number >= {low}")
        return value

    def flag(self, key: str, default: bool) -> bool:
        value = self.get(key, default)
        if not isinstance(value, bool):  # (a null is the default)
            raise self.bad(key, "expected true or false")
        return value

    def choice(self, key: str, choices: tuple[str, ...], default: Any = _MISSING) -> Any:
        value = self.get(key, default)
        if value not in choices:
            raise self.bad(key, f"this reader runs {self.model_type} with "
                           f"{' or '.join(map(repr, choices))} only")
        return value

    def refuse_unknown(self) -> None:
        for key in self.raw:
            if key not in self.used and key not in IGNORED:
                raise self.bad(key, f"not an architecture field known for model_type "
                               f"{self.model_type}: refused rather than guessed (the keys "
                               "skipped as non-architectural: accelsim.workload.hf_config.IGNORED)")


def read_hf_config(path: str | Path, name: str | None = None,
                   source: str | None = None) -> DecoderConfig:
    """The decoder of the config file `path`, named `name` (default: the file stem); its
    `source` the path unless given. Any problem is one `ConfigError` naming the file."""
    text = read_text_file(path)
    src = str(path)
    return _parsed(src, text, name or Path(src).stem, source or src)


@lru_cache(maxsize=64)
def _parsed(src: str, text: str, name: str, source: str) -> DecoderConfig:
    # NB: keyed by the whole text (as `accelsim.tomlfiles` is): an edited file is read anew.
    try:
        raw = json.loads(text)
    except json.JSONDecodeError as err:
        raise DataFileError(src, f"not valid JSON: {err.msg} (line {err.lineno}, column "
                            f"{err.colno})") from None
    except (ValueError, RecursionError) as err:  # huge integers, nesting
        raise DataFileError(src, f"not valid JSON: {err}") from None
    if not isinstance(raw, dict):
        raise DataFileError(src, "not a config: expected a JSON object of fields")
    return parse_hf_config(raw, src, name, source)


def parse_hf_config(raw: dict[str, Any], src: str, name: str, source: str) -> DecoderConfig:
    """The decoder of an already-parsed config object `raw` read from `src`."""
    model_type = raw.get("model_type")
    if model_type not in MODEL_TYPES:
        raise ConfigError(src, "model_type", model_type,
                          f"choose one of {', '.join(MODEL_TYPES)}")
    f = _Fields(raw, src, model_type)
    if raw.get("is_encoder_decoder"):
        raise f.bad("is_encoder_decoder", "an encoder-decoder is not a decoder-only model")
    f.get("is_encoder_decoder", False)
    reader = _READERS.get(model_type, _llama_like)
    shape = reader(f)
    f.refuse_unknown()
    try:
        return DecoderConfig(name=name, source=source, **shape)
    except AccelsimError as err:  # shapes that do not fit together (heads, experts)
        raise AccelsimError(f"{src}: {err}") from None


def _head_dim(f: _Fields, d: int, heads: int) -> None:
    """A `head_dim` key is accepted where it is hidden_size / num_attention_heads."""
    value = f.get("head_dim", None)
    if value is not None and value * heads != d:
        raise f.bad("head_dim", f"a head size other than hidden_size / num_attention_heads "
                    f"({d} / {heads}) is not modelled")


def _rotary(f: _Fields, d: int, heads: int, key: str, default: float) -> int | None:
    """Rotated dimensions per head from a fraction key (rotary_pct, partial_rotary_factor;
    `default`: the transformers config class's)."""
    frac = f.get(key, default)
    if isinstance(frac, bool) or not isinstance(frac, int | float) or not 0 < frac <= 1:
        raise f.bad(key, "expected a fraction in (0, 1]")
    dims = int(d // heads * frac)
    return None if dims == d // heads else dims


def _llama_like(f: _Fields) -> dict[str, Any]:
    """llama, mistral, qwen2, mixtral and DeepSeek-MoE: RMSNorm, RoPE, SwiGLU."""
    mt = f.model_type
    for key in MLA_KEYS:
        if f.raw.get(key) is not None:
            raise f.bad(key, "multi-head latent attention (MLA, DeepSeek-V2/V3) is not "
                        "modelled: only the deepseek (multi-head attention) MoE variant")
        f.get(key, None)
    d, heads = f.count("hidden_size"), f.count("num_attention_heads")
    _head_dim(f, d, heads)
    f.choice("hidden_act", ("silu",), "silu")
    bias = f.flag("attention_bias", False)
    out = {"n_layers": f.count("num_hidden_layers"), "d_model": d, "n_heads": heads,
           "n_kv_heads": f.count("num_key_value_heads", heads),
           "d_ff": f.count("intermediate_size"), "vocab": f.count("vocab_size"),
           "context": f.count("max_position_embeddings"), "arch": "llama",
           "tied_embeddings": f.flag("tie_word_embeddings", False),
           "qkv_bias": bias or mt == "qwen2", "out_bias": bias,
           "mlp_bias": f.flag("mlp_bias", False)}
    if mt == "qwen2":
        windowed = f.flag("use_sliding_window", False)
        window = f.count("sliding_window", None)
        out["sliding_window"] = window if windowed else None
    elif mt in ("mistral", "mixtral"):
        out["sliding_window"] = f.count("sliding_window", None)
    if mt == "mixtral":
        out["n_experts"] = f.count("num_local_experts")
        out["experts_per_token"] = f.count("num_experts_per_tok")
    if mt.startswith("deepseek"):
        out.update(_deepseek_moe(f, out["d_ff"]))
    return out


def _deepseek_moe(f: _Fields, dense_d_ff: int) -> dict[str, Any]:
    """DeepSeek-MoE (Dai et al. 2024, arXiv:2401.06066): routed and shared experts of
    moe_intermediate_size, the first first_k_dense_replace layers dense."""
    routed = f.count("n_routed_experts", None)
    if routed is None:  # a dense deepseek model
        return {}
    dense = f.count("first_k_dense_replace", 0, low=0)
    freq = f.count("moe_layer_freq", 1)
    if freq != 1:
        raise f.bad("moe_layer_freq", "an MoE layer every layer (1) only")
    return {"n_experts": routed, "experts_per_token": f.count("num_experts_per_tok"),
            "n_shared_experts": f.count("n_shared_experts", 0, low=0),
            "d_ff": f.count("moe_intermediate_size"),
            "dense_layers": dense, "dense_d_ff": dense_d_ff if dense else None}


def _gptj(f: _Fields) -> dict[str, Any]:
    """GPT-J (Wang and Komatsuzaki 2021): attention and MLP in parallel off one LayerNorm,
    partial RoPE, no attention biases, an untied LM head with a bias."""
    d, heads = f.count("n_embd"), f.count("n_head")
    f.choice("activation_function", ("gelu_new", "gelu"), "gelu_new")
    if not f.flag("rotary", True):
        raise f.bad("rotary", "GPT-J without rotary embeddings is not modelled")
    rotary = f.count("rotary_dim", 64)  # (GPTJConfig's default)
    return {"n_layers": f.count("n_layer"), "d_model": d, "n_heads": heads,
            "n_kv_heads": heads, "d_ff": f.count("n_inner", 4 * d),
            "vocab": f.count("vocab_size"), "context": f.count("n_positions"), "arch": "gptj",
            "tied_embeddings": f.flag("tie_word_embeddings", False),
            "rotary_dim": None if rotary == d // heads else rotary}


def _gpt_neox(f: _Fields) -> dict[str, Any]:
    """GPT-NeoX (Black et al. 2022, arXiv:2204.06745): parallel residual (switchable),
    partial RoPE, biases on every projection, an untied LM head."""
    d, heads = f.count("hidden_size"), f.count("num_attention_heads")
    _head_dim(f, d, heads)
    f.choice("hidden_act", ("gelu", "gelu_fast", "gelu_new"), "gelu")
    bias = f.flag("attention_bias", True)
    return {"n_layers": f.count("num_hidden_layers"), "d_model": d, "n_heads": heads,
            "n_kv_heads": heads, "d_ff": f.count("intermediate_size"),
            "vocab": f.count("vocab_size"), "context": f.count("max_position_embeddings"),
            "arch": "gpt_neox", "tied_embeddings": f.flag("tie_word_embeddings", False),
            "qkv_bias": bias, "out_bias": bias,
            "parallel_attention": f.flag("use_parallel_residual", True),
            "rotary_dim": _rotary(f, d, heads, "rotary_pct", 0.25)}


def _falcon(f: _Fields) -> dict[str, Any]:
    """Falcon (Almazrouei et al. 2023, arXiv:2311.16867): parallel attention and MLP,
    multi-query attention (new_decoder_architecture: grouped, num_kv_heads, a norm per
    branch), 4 x GELU FFN, no biases, the LM head tied to the embedding."""
    d = f.count("hidden_size")
    heads = f.count("num_attention_heads") if "num_attention_heads" in f.raw else f.count(
        "n_head")
    f.get("n_head", None)
    layers = f.count("num_hidden_layers") if "num_hidden_layers" in f.raw else f.count(
        "n_layer")
    f.get("n_layer", None)
    f.choice("activation", ("gelu",), "gelu")
    new = f.flag("new_decoder_architecture", False)
    mqa = f.flag("multi_query", True)
    if new:
        kv = f.count("num_kv_heads", heads)
        norms = f.count("num_ln_in_parallel_attn", 2)
    else:  # one norm shared by parallel branches, else one before each
        kv = 1 if mqa else heads
        f.get("num_kv_heads", None)
        norms = f.count("num_ln_in_parallel_attn", 1 if f.flag("parallel_attn", True) else 2)
    if norms not in (1, 2):
        raise f.bad("num_ln_in_parallel_attn", "expected 1 or 2")
    if f.flag("alibi", False):
        positions = "alibi"
    else:
        positions = "rope"
    if not f.flag("parallel_attn", True) and new:
        raise f.bad("parallel_attn", "the new decoder architecture runs its branches in "
                    "parallel")
    parallel = new or f.flag("parallel_attn", True)
    bias = f.flag("bias", False)
    # NB: FalconConfig's default context (2048) where the file gives none
    return {"n_layers": layers, "d_model": d, "n_heads": heads, "n_kv_heads": kv,
            "d_ff": f.count("ffn_hidden_size", 4 * d), "vocab": f.count("vocab_size"),
            "context": f.count("max_position_embeddings", 2048), "arch": "falcon",
            "tied_embeddings": f.flag("tie_word_embeddings", True), "qkv_bias": bias,
            "out_bias": bias, "mlp_bias": bias, "parallel_attention": parallel,
            "norms_per_layer": norms, "positions": positions}


def _gpt2(f: _Fields) -> dict[str, Any]:
    """GPT-2 (Radford et al. 2019) and GPT-2-style Megatron configs: learned positions,
    LayerNorm, GELU FFN (n_inner, default 4 x n_embd), biases, the LM head tied."""
    d, heads = f.count("n_embd"), f.count("n_head")
    f.choice("activation_function", ("gelu_new", "gelu"), "gelu_new")
    context = f.count("n_positions")
    ctx = f.count("n_ctx", context)
    if ctx != context:
        raise f.bad("n_ctx", f"differs from n_positions {context}")
    return {"n_layers": f.count("n_layer"), "d_model": d, "n_heads": heads,
            "n_kv_heads": heads, "d_ff": f.count("n_inner", 4 * d),
            "vocab": f.count("vocab_size"), "context": context, "arch": "gpt2",
            "tied_embeddings": f.flag("tie_word_embeddings", True)}


def _nemotron(f: _Fields) -> dict[str, Any]:
    """Nemotron (NVIDIA Nemotron-4, arXiv:2406.11704): squared-ReLU FFN (up, down), LayerNorm
    (weight and bias), partial RoPE, GQA, no biases, untied embeddings."""
    d, heads = f.count("hidden_size"), f.count("num_attention_heads")
    _head_dim(f, d, heads)
    f.choice("hidden_act", ("relu2",), "relu2")
    bias = f.flag("attention_bias", False)
    return {"n_layers": f.count("num_hidden_layers"), "d_model": d, "n_heads": heads,
            "n_kv_heads": f.count("num_key_value_heads", heads),
            "d_ff": f.count("intermediate_size"), "vocab": f.count("vocab_size"),
            "context": f.count("max_position_embeddings"), "arch": "nemotron",
            "tied_embeddings": f.flag("tie_word_embeddings", False), "qkv_bias": bias,
            "out_bias": bias, "mlp_bias": f.flag("mlp_bias", False),
            "rotary_dim": _rotary(f, d, heads, "partial_rotary_factor", 0.5)}


_READERS = {"gptj": _gptj, "gpt_neox": _gpt_neox, "falcon": _falcon, "gpt2": _gpt2,
            "nemotron": _nemotron}
