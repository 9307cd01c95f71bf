"""Where a model comes from: the zoo (by name) or a model file read by an importer (by its
suffix), one interface for both, so scenarios, knobs and the CLI need not care.

    model_graph("resnet50", image_size=128)      # a zoo model
    model_graph("net.onnx", batch=1)             # accelsim.workload.importers.onnx
    model_knob_defaults("net.onnx")              # the importer's knobs
    model_decoder("llama-3.1-8b.json")           # a decoder config: shapes, no graph

A decoder without a layer graph (a Hugging Face config file, `.json`, or a decoder name the
zoo has not, `accelsim.llm.models`) is a model too: it runs on the token-level LLM path, takes
the one input knob `seq_len` (default: its context) and has no graph.

An importer is a module in `IMPORTERS` with `KNOBS: dict[str, int]` (its input knobs and their
defaults) and `read_graph(path: Path, **knobs) -> Graph` (a per-sample graph; a symbolic batch
dimension is the caller's `--batch`), raising `AccelsimError` for a file it cannot read. An
importer whose files hold weights also has `read_weights(path, **knobs) -> {op name: {param
name: array}}`, and its graphs carry `meta["source_file"]` and `meta["knobs"]`, so that
`file_weights` finds them. Graphs read from files are cached by path, modification time and
knobs.
"""

from __future__ import annotations

import importlib
import stat
from functools import lru_cache
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np

from accelsim.errors import AccelsimError
from accelsim.workload.decoder import DecoderConfig
from accelsim.workload.graph import Graph
from accelsim.workload.llm_configs import is_config_path, is_decoder, resolve_decoder
from accelsim.workload.zoo import build_model, model_knobs, model_names

# Model-file suffix -> importer module (optional extras: say how to install them).
IMPORTERS: dict[str, tuple[str, str]] = {
    ".onnx": ("accelsim.workload.importers.onnx", 'pip install "accelsim[onnx]"'),
    ".csv": ("accelsim.workload.importers.topology", ""),
}


def is_model_file(model: str) -> bool:
    """True when `model` names a file an importer reads (by suffix), not a zoo model."""
    return Path(model).suffix.lower() in IMPORTERS


def is_decoder_only(model: str) -> bool:
    """True when `model` is a decoder without a layer graph: a config file (.json) or a
    decoder name the zoo has not."""
    return is_config_path(model) or (model not in model_names() and is_decoder(model))


def model_decoder(model: str) -> DecoderConfig | None:
    """The decoder of a decoder-only model (its file read now; a bad file is one ConfigError
    naming it), else None."""
    return resolve_decoder(model) if is_decoder_only(model) else None


def _importer(model: str) -> ModuleType:
    module, install = IMPORTERS[Path(model).suffix.lower()]
    try:
        return importlib.import_module(module)
    except ImportError as err:
        hint = f" ({install})" if install else ""
        raise AccelsimError(f"{model}: reading {Path(model).suffix} models needs "
                            f"{err.name or 'a missing package'}{hint}") from None


def model_knob_defaults(model: str) -> dict[str, Any]:
    """The input knobs `model` takes and their defaults."""
    if is_model_file(model):
        return dict(_importer(model).KNOBS)
    if is_decoder_only(model):
        return {"seq_len": resolve_decoder(model).context}
    return model_knobs(model)


def known_model(model: str) -> bool:
    """A zoo model's name, a decoder's, or a path with an importer's or a decoder config's
    suffix (the file is read later)."""
    return is_model_file(model) or model in model_names() or is_decoder_only(model)


def model_graph(model: str, **knobs: Any) -> Graph:
    """The per-sample graph of a zoo model or a model file, with input `knobs`."""
    if is_decoder_only(model):
        raise AccelsimError(f"'{model}' is a decoder config without a layer graph: it runs "
                            "token by token (simulate, compare, sweep, report), not as a graph")
    if not is_model_file(model):
        return build_model(model, **knobs)
    path = Path(model)
    try:
        info = path.stat()
    except (OSError, ValueError) as err:
        raise AccelsimError(f"{model}: cannot read the model file: "
                            f"{getattr(err, 'strerror', None) or err}") from None
    if stat.S_ISDIR(info.st_mode):
        raise AccelsimError(f"{model}: is a directory, not a model file")
    if not stat.S_ISREG(info.st_mode):  # a FIFO, a device (a symlink to /dev/zero)
        raise AccelsimError(f"{model}: is not a regular file (a pipe, socket or device)")
    # NB: the importer is the given name's (a symlink's target may have another suffix)
    return _file_graph(str(path.resolve()), Path(model).suffix.lower(), info.st_mtime_ns,
                       tuple(sorted(knobs.items())))


@lru_cache(maxsize=16)
def _file_graph(path: str, suffix: str, mtime_ns: int,
                knobs: tuple[tuple[str, Any], ...]) -> Graph:
    del mtime_ns  # part of the cache key only: an edited file is read again
    return _importer(f"model{suffix}").read_graph(Path(path), **dict(knobs))


def file_weights(graph: Graph) -> dict[str, dict[str, np.ndarray]] | None:
    """The real parameters of a graph read from a model file that holds them ({op name:
    {param name: float32 array}}), or None (a zoo model, or a format without weights)."""
    source = graph.meta.get("source_file")
    if not source:
        return None
    read = getattr(_importer(source), "read_weights", None)
    return read(Path(source), **graph.meta.get("knobs", {})) if read else None
