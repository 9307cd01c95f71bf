"""Decoder-only language models for the token-level engine: the shapes that size prefill,
decode and the KV cache (`DecoderConfig`, `accelsim.workload.decoder`), by name or config file
(`accelsim.workload.llm_configs`, read by `accelsim.workload.hf_config`).

    cfg = decoder("llama3_8b")          # a zoo name
    cfg.params                          # 8,030,261,248 (HF Meta-Llama-3-8B)
    cfg.kv_bytes_per_token(2)           # 131,072 B: 2 (K, V) x 32 layers x 8 kv heads x 128 x 2 B
    decoder("llama-3.1-405b")           # a config shipped in workloads/llm/, by its stem
    resolve_decoder("my/config.json")   # any config file

The zoo's decoders (`BUILTINS`: gpt2, llama2_7b, ...) are files in `workloads/llm/` too.
Parameter counts are built from the shapes, never copied; `PUBLISHED_PARAMS` holds the
published counts of the zoo's decoders, the independent check (tests; the shipped configs'
published counts: `workloads/llm/README.md` and `tests/unit/test_hf_config.py`).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping

from accelsim.workload.decoder import ARCHS, DecoderConfig
from accelsim.workload.llm_configs import (
    ZOO_FILES,
    config_files,
    decoder,
    decoder_names,
    is_config_path,
    is_decoder,
    resolve_decoder,
)

__all__ = ["ARCHS", "BUILTINS", "DecoderConfig", "PUBLISHED_PARAMS", "config_files", "decoder",
           "decoder_names", "is_config_path", "is_decoder", "resolve_decoder"]

# Parameter counts published for the zoo's checkpoints (HF model cards / safetensors metadata),
# the independent reference the tests hold the counts built from the shapes against.
PUBLISHED_PARAMS = {
    "gpt2": 124_439_808,  # HF gpt2 (tied LM head counted once)
    "llama2_7b": 6_738_415_616,
    "llama2_13b": 13_015_864_320,
    "llama2_70b": 68_976_648_192,
    "llama3_8b": 8_030_261_248,
    "llama3_70b": 70_553_706_496,
    "mixtral_8x7b": 46_702_792_704,
}


class _Zoo(Mapping[str, DecoderConfig]):
    """The zoo's decoders by name, each read from its file when asked for."""

    def __getitem__(self, name: str) -> DecoderConfig:
        if name not in ZOO_FILES:
            raise KeyError(name)
        return decoder(name)

    def __iter__(self) -> Iterator[str]:
        return iter(ZOO_FILES)

    def __len__(self) -> int:
        return len(ZOO_FILES)


BUILTINS: Mapping[str, DecoderConfig] = _Zoo()
