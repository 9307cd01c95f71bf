"""Decoders by name: the Hugging Face configs shipped in `workloads/llm/*.json` (by file stem)
and the zoo's decoder names (gpt2, llama2_7b, ...: files there too, under the names and sources
they have always had), each read by `accelsim.workload.hf_config` into a `DecoderConfig`.

    decoder("llama3_8b").params         # 8,030,261,248 (HF Meta-Llama-3-8B)
    decoder("llama-3.1-405b")           # a shipped config, by its stem
    resolve_decoder("my/config.json")   # any config file

Sources and published counts of the shipped configs: `workloads/llm/README.md`. The token-level
engine (`accelsim.llm`) runs them; `accelsim.llm.models` is its face onto this catalog.
"""

from __future__ import annotations

from pathlib import Path

from accelsim.datafiles import builtin_files
from accelsim.errors import UnknownNameError
from accelsim.workload.decoder import DecoderConfig
from accelsim.workload.hf_config import read_hf_config

_HF = "https://huggingface.co/"
_CONFIG = "/blob/main/config.json"
# zoo name -> (file stem in workloads/llm/, the source the record has always named)
ZOO_FILES: dict[str, tuple[str, str]] = {
    "gpt2": ("gpt2", f"{_HF}openai-community/gpt2{_CONFIG} (n_layer 12, n_embd 768, n_head "
             "12, n_positions 1024, vocab 50257; FFN 4 x n_embd)"),
    "llama2_7b": ("llama-2-7b", f"{_HF}meta-llama/Llama-2-7b-hf{_CONFIG}"),
    "llama2_13b": ("llama-2-13b", f"{_HF}meta-llama/Llama-2-13b-hf{_CONFIG}"),
    "llama2_70b": ("llama-2-70b", f"{_HF}meta-llama/Llama-2-70b-hf{_CONFIG}"),
    "llama3_8b": ("llama-3-8b", f"{_HF}meta-llama/Meta-Llama-3-8B{_CONFIG}"),
    "llama3_70b": ("llama-3-70b", f"{_HF}meta-llama/Meta-Llama-3-70B{_CONFIG}"),
    "mixtral_8x7b": ("mixtral-8x7b", f"{_HF}mistralai/Mixtral-8x7B-v0.1{_CONFIG} "
                     "(num_local_experts 8, num_experts_per_tok 2)"),
}
# file stem -> where its values come from (the rest: workloads/llm/README.md)
_FT = ("github.com/NVIDIA/FasterTransformer docs/gpt_guide.md @df4a7534 (Performance: "
       "layers, head_num x size_per_head, vocab_size 51200; inter_size 4 x hidden)")
CONFIG_SOURCES: dict[str, str] = {
    "gpt2": f"{_HF}openai-community/gpt2{_CONFIG}",
    "llama-2-7b": f"{_HF}meta-llama/Llama-2-7b-hf{_CONFIG}",
    "llama-2-13b": f"{_HF}meta-llama/Llama-2-13b-hf{_CONFIG}",
    "llama-2-70b": f"{_HF}meta-llama/Llama-2-70b-hf{_CONFIG}",
    "llama-3-8b": f"{_HF}meta-llama/Meta-Llama-3-8B{_CONFIG}",
    "llama-3-70b": f"{_HF}meta-llama/Meta-Llama-3-70B{_CONFIG}",
    "llama-3.1-8b": f"{_HF}meta-llama/Llama-3.1-8B{_CONFIG}",
    "llama-3.1-70b": f"{_HF}meta-llama/Llama-3.1-70B{_CONFIG}",
    "llama-3.1-405b": f"{_HF}meta-llama/Llama-3.1-405B{_CONFIG}",
    "llama-3.3-70b": f"{_HF}meta-llama/Llama-3.3-70B-Instruct{_CONFIG}",
    "mistral-7b": f"{_HF}mistralai/Mistral-7B-v0.1{_CONFIG}",
    "mixtral-8x7b": f"{_HF}mistralai/Mixtral-8x7B-v0.1{_CONFIG}",
    "qwen2-7b": f"{_HF}Qwen/Qwen2-7B{_CONFIG}",
    "gpt-j-6b": f"{_HF}EleutherAI/gpt-j-6b{_CONFIG}",
    "gpt-neox-20b": f"{_HF}EleutherAI/gpt-neox-20b{_CONFIG}",
    "falcon-180b": f"{_HF}tiiuae/falcon-180B{_CONFIG}",
    "deepseek-moe-16b": f"{_HF}deepseek-ai/deepseek-moe-16b-base{_CONFIG}",
    "gpt3-175b": "Brown et al. 2020, arXiv:2005.14165, Table 2.1 (GPT-3 175B)",
    "nemotron-4-340b": "NVIDIA 2024, Nemotron-4 340B Technical Report, arXiv:2406.11704",
    "nemo-gpt3-5b": "github.com/NVIDIA/NeMo-Framework-Launcher launcher_scripts/conf/training/"
                    "gpt3/5b.yaml",
    "nemo-gpt3-20b": "github.com/NVIDIA/NeMo-Framework-Launcher launcher_scripts/conf/"
                     "training/gpt3/20b.yaml",
    **{f"ft-{m}": _FT for m in ("gpt-1.3b", "gpt-6.7b", "gpt-20b", "gpt-89b", "gpt-175b",
                                "megatron-530b")},
}

def config_files() -> dict[str, Path]:
    """The shipped config files (workloads/llm/*.json) by stem."""
    return builtin_files("workloads", "llm/*.json")


def decoder_names() -> list[str]:
    """Every decoder known by name: the zoo's and the shipped configs' stems."""
    return sorted(set(ZOO_FILES) | set(config_files()))


def is_decoder(name: str) -> bool:
    return name in ZOO_FILES or name in config_files()


def is_config_path(model: str) -> bool:
    """Whether `model` names a config file (by its .json suffix), not a decoder."""
    return model.lower().endswith(".json")


def decoder(name: str) -> DecoderConfig:
    """The decoder `name` (a zoo name or a shipped config's stem); UnknownNameError lists the
    choices."""
    files = config_files()
    if name in ZOO_FILES:
        stem, source = ZOO_FILES[name]
        return read_hf_config(files[stem], name, source)
    if name in files:
        return read_hf_config(files[name], name, CONFIG_SOURCES.get(name))
    raise UnknownNameError("decoder model", name, decoder_names())


def resolve_decoder(model: str) -> DecoderConfig:
    """The decoder of a config file path (.json) or of a decoder name."""
    return read_hf_config(model) if is_config_path(model) else decoder(model)
