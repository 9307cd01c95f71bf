"""Hugging Face decoder configs (accelsim.workload.hf_config): every shipped file's count built
from its shapes against the count its publisher gives, the zoo's decoders unchanged, and each
kind of bad file refused in one line naming the file and the field."""

from __future__ import annotations

import json
import os
import pickle
from pathlib import Path

import pytest

from accelsim.errors import AccelsimError, ConfigError, DataFileError
from accelsim.llm.models import BUILTINS, PUBLISHED_PARAMS, decoder
from accelsim.llm.work import Formats, Rows, Shard, Step, Tiles, act_kinds, layer_rows, norm_kinds
from accelsim.workload.decoder import DecoderConfig
from accelsim.workload.hf_config import read_hf_config
from accelsim.workload.llm_configs import CONFIG_SOURCES, ZOO_FILES, config_files
from accelsim.workload.ops import OpKind

LLM_DIR = Path(__file__).resolve().parents[2] / "workloads" / "llm"

# stem -> (published count, relative tolerance, why that tolerance); sources: workloads/llm/README
EXACT = 0.0
PUBLISHED = {
    "gpt2": (124_439_808, EXACT, "HF model"),
    "llama-3-8b": (8_030_261_248, EXACT, "HF safetensors"),
    "llama-3-70b": (70_553_706_496, EXACT, "HF safetensors"),
    "llama-3.1-8b": (8_030_261_248, EXACT, "HF API safetensors.total"),
    "llama-3.1-70b": (70_553_706_496, EXACT, "HF API safetensors.total"),
    "llama-3.1-405b": (405_853_388_800, EXACT, "HF API safetensors.total"),
    "llama-3.3-70b": (70e9, 0.01, "the model card's nominal 70B"),
    "mistral-7b": (7_241_732_096, EXACT, "HF safetensors"),
    "mixtral-8x7b": (46_702_792_704, EXACT, "HF safetensors"),
    "qwen2-7b": (7.62e9, 0.001, "the HF page's 7.62B, rounded to 0.01B"),
    "gpt-j-6b": (6_053_381_344, 0.001, "the card's Mesh Transformer JAX count, 0.04% apart"),
    "gpt-neox-20b": (20_554_567_680, EXACT, "the model card's n_parameters"),
    "deepseek-moe-16b": (16_375_728_128, EXACT, "HF safetensors total"),
    "gpt3-175b": (175.0e9, 0.005, "Brown et al. Table 2.1's 175.0B; the shapes give 174.6B"),
    "nemotron-4-340b": (341.0e9, 0.0005, "the report's 9.4B + 331.6B, rounded to 0.1B"),
    "nemo-gpt3-5b": (5e9, 0.01, "the config's rounded name"),
    "nemo-gpt3-20b": (20e9, 0.02, "the config's rounded name"),
    "ft-gpt-1.3b": (1.3e9, 0.02, "FasterTransformer's rounded name"),
    "ft-gpt-6.7b": (6.7e9, 0.01, "FasterTransformer's rounded name"),
    "ft-gpt-20b": (20e9, 0.02, "FasterTransformer's rounded name"),
    "ft-gpt-89b": (89e9, 0.02, "FasterTransformer's rounded name; the shapes give 87.6B"),
    "ft-gpt-175b": (175e9, 0.005, "FasterTransformer's rounded name"),
    "ft-megatron-530b": (530e9, 0.005, "FasterTransformer's rounded name"),
}
# The HF API's safetensors.total counts buffers and copies the model does not have:
# Llama 2 checkpoints store every layer's RoPE inv_freq (head_dim / 2 floats), and Falcon-180B
# stores its tied LM head a second time.
HF_TOTALS = {"llama-2-7b": 6_738_417_664, "llama-2-13b": 13_015_866_880,
             "llama-2-70b": 68_976_653_312, "falcon-180b": 179_522_565_120}


def _extra_in_checkpoint(cfg: DecoderConfig) -> int:
    if cfg.arch == "falcon":
        return cfg.vocab * cfg.d_model
    return cfg.n_layers * cfg.head_dim // 2


@pytest.mark.parametrize("stem", sorted(PUBLISHED))
def test_shipped_config_has_its_published_count(stem):
    published, rel, _why = PUBLISHED[stem]
    assert decoder(stem).params == pytest.approx(published, rel=rel, abs=0)


@pytest.mark.parametrize("stem", sorted(HF_TOTALS))
def test_checkpoint_totals_are_the_model_plus_what_the_checkpoint_also_stores(stem):
    cfg = decoder(stem)
    assert cfg.params + _extra_in_checkpoint(cfg) == HF_TOTALS[stem]


def test_every_shipped_config_is_checked_and_sourced():
    stems = set(config_files())
    assert stems == set(PUBLISHED) | set(HF_TOTALS)
    assert stems <= set(CONFIG_SOURCES)
    readme = (LLM_DIR / "README.md").read_text(encoding="utf-8")
    assert all(f"{stem}.json" in readme for stem in stems)


def test_the_mixtures_active_counts_are_the_published_ones():
    assert decoder("deepseek-moe-16b").active_params == 2_828_650_496  # HF / DeepSeekMoE 2.8B
    assert decoder("mixtral-8x7b").active_params == pytest.approx(12.9e9, rel=0.01)


def test_nemotron_parts_are_the_reports_embedding_and_non_embedding_counts():
    cfg = decoder("nemotron-4-340b")
    embedding = 2 * cfg.vocab * cfg.d_model  # untied: table and head
    assert embedding == pytest.approx(9.4e9, abs=0.05e9)
    assert cfg.params - embedding == pytest.approx(331.6e9, abs=0.05e9)


# --- the zoo's decoders are these files, unchanged ----------------------------------------

LEGACY = {
    "gpt2": DecoderConfig("gpt2", 12, 768, 12, 12, 3072, 50257, 1024, arch="gpt2"),
    "llama2_7b": DecoderConfig("llama2_7b", 32, 4096, 32, 32, 11008, 32000, 4096),
    "llama2_13b": DecoderConfig("llama2_13b", 40, 5120, 40, 40, 13824, 32000, 4096),
    "llama2_70b": DecoderConfig("llama2_70b", 80, 8192, 64, 8, 28672, 32000, 4096),
    "llama3_8b": DecoderConfig("llama3_8b", 32, 4096, 32, 8, 14336, 128256, 8192),
    "llama3_70b": DecoderConfig("llama3_70b", 80, 8192, 64, 8, 28672, 128256, 8192),
    "mixtral_8x7b": DecoderConfig("mixtral_8x7b", 32, 4096, 32, 8, 14336, 32000, 32768,
                                  n_experts=8, experts_per_token=2),
}


@pytest.mark.parametrize("name", sorted(LEGACY))
def test_zoo_decoder_read_from_its_file_equals_the_old_builtin(name):
    cfg = BUILTINS[name]
    assert cfg == LEGACY[name] and cfg.params == PUBLISHED_PARAMS[name]
    assert cfg.source == ZOO_FILES[name][1] and cfg.source.startswith("https://huggingface.co/")


def test_a_file_decoder_pickles_and_compares_by_shape():
    cfg = decoder("gpt-j-6b")
    assert pickle.loads(pickle.dumps(cfg)) == cfg
    assert cfg == read_hf_config(LLM_DIR / "gpt-j-6b.json", "gpt-j-6b", "elsewhere")


# --- layouts: what the work rows and memory read follows the fields -----------------------

def _linear_weights(cfg: DecoderConfig) -> float:
    rows = Rows("forward", Tiles(128, 128))
    layer_rows(rows, cfg, Shard(), Step(8, 8, 8.0, 8.0), Formats(1.0, 1.0, 1.0), None)
    work, _, _ = rows.frames()
    return float(work.loc[work["matmul"], "weight_bytes"].sum())


@pytest.mark.parametrize("stem", ["gpt2", "llama-3.1-8b", "qwen2-7b", "gpt-j-6b",
                                  "gpt-neox-20b", "falcon-180b", "nemotron-4-340b"])
def test_a_layers_weight_rows_hold_its_attention_and_ffn_parameters(stem):
    cfg = decoder(stem)
    assert _linear_weights(cfg) == cfg.attention_params() + cfg.expert_params()


def test_layouts_follow_the_fields_not_the_family_name():
    j, n, q = decoder("gpt-j-6b"), decoder("nemotron-4-340b"), decoder("qwen2-7b")
    assert (j.ffn_matrices, n.ffn_matrices, q.ffn_matrices) == (2, 2, 3)
    assert act_kinds(n) == (OpKind.RELU, OpKind.MUL) and act_kinds(j) == (OpKind.GELU,)
    assert norm_kinds(n) == (OpKind.LAYERNORM,) and norm_kinds(q) == (OpKind.RMSNORM,)
    assert (j.parallel_attention, j.norms_per_layer, j.lm_head_bias, j.rope_dims) == (
        True, 1, True, 64)
    assert (q.qkv_bias, q.out_bias, q.sliding_window) == (True, False, None)
    assert decoder("mistral-7b").sliding_window == 4096
    f = decoder("falcon-180b")
    assert (f.n_kv_heads, f.tied_embeddings, f.has_bias, f.norms_per_layer) == (8, True, False, 2)


def test_parallel_attention_joins_both_branches_in_one_add():
    rows = Rows("forward", Tiles(128, 128))
    layer_rows(rows, decoder("gpt-j-6b"), Shard(), Step(8, 8, 8.0, 8.0),
               Formats(2.0, 2.0, 2.0), None)
    names = list(rows.frames()[0]["name"])
    assert "attn_add" not in names and "mlp_norm" not in names and "mlp_add" in names


# --- refusals: one line naming the file and the field --------------------------------------

def _write(tmp_path: Path, obj: object, name: str = "cfg.json") -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(obj) if not isinstance(obj, str) else obj, encoding="utf-8")
    return path


def _llama(**changes: object) -> dict:
    raw = json.loads((LLM_DIR / "llama-3.1-8b.json").read_text(encoding="utf-8"))
    raw.update(changes)
    return {k: v for k, v in raw.items() if v != "<drop>"}


def _one_line(err: pytest.ExceptionInfo, *needles: str) -> None:
    text = str(err.value)
    assert len(text.splitlines()) == 1, text
    for needle in needles:
        assert needle in text, text


@pytest.mark.parametrize("changes,field,why", [
    ({"qk_layernorm": True}, "qk_layernorm", "not an architecture field"),
    ({"hidden_size": "<drop>"}, "hidden_size", "missing"),
    ({"num_hidden_layers": 32.5}, "num_hidden_layers", "whole number"),
    ({"intermediate_size": True}, "intermediate_size", "whole number"),
    ({"hidden_act": "gelu"}, "hidden_act", "silu"),
    ({"model_type": "t5"}, "model_type", "choose one of"),
    ({"head_dim": 256}, "head_dim", "not modelled"),
    ({"kv_lora_rank": 512, "model_type": "deepseek_v2"}, "kv_lora_rank", "latent attention"),
    ({"tie_word_embeddings": "no"}, "tie_word_embeddings", "true or false"),
])
def test_a_bad_field_is_one_error_naming_file_and_field(tmp_path, changes, field, why):
    path = _write(tmp_path, _llama(**changes))
    with pytest.raises(ConfigError) as err:
        read_hf_config(path)
    _one_line(err, str(path), f"'{field}'", why)


def test_shapes_that_do_not_divide_name_the_file(tmp_path):
    path = _write(tmp_path, _llama(num_key_value_heads=5))
    with pytest.raises(AccelsimError) as err:
        read_hf_config(path)
    _one_line(err, str(path), "do not divide")


@pytest.mark.parametrize("text,why", [
    ('{"model_type": "llama",', "not valid JSON"),
    ("[1, 2]", "expected a JSON object"),
    ("", "not valid JSON"),
])
def test_a_file_that_is_not_a_config_object_is_one_error(tmp_path, text, why):
    path = _write(tmp_path, text)
    with pytest.raises(DataFileError) as err:
        read_hf_config(path)
    _one_line(err, str(path), why)


def test_a_fifo_a_directory_or_a_huge_file_is_refused_before_it_is_read(tmp_path):
    fifo = tmp_path / "pipe.json"
    os.mkfifo(fifo)
    for path, why in ((fifo, "not a regular file"), (tmp_path, "directory"),
                      (tmp_path / "none.json", "no such file")):
        with pytest.raises(DataFileError) as err:
            read_hf_config(path)
        _one_line(err, why)
    big = _write(tmp_path, " " * (1 << 20) + "{}", "big.json")
    with pytest.raises(DataFileError, match="at most"):
        read_hf_config(big)


def test_an_edited_file_is_read_anew(tmp_path):
    path = _write(tmp_path, _llama())
    assert read_hf_config(path).n_layers == 32
    path.write_text(json.dumps(_llama(num_hidden_layers=16)), encoding="utf-8")
    assert read_hf_config(path).n_layers == 16
