"""The model zoo: published architectures built layer by layer (never a hard-coded total).

Each model is a function registered with `@model(name, **defaults)` that takes the input knobs
(`image_size`, `seq_len`, ...) and returns a `Graph`. `build_model(name, **knobs)` builds one.
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Callable
from functools import lru_cache
from typing import Any

from accelsim.errors import AccelsimError, UnknownNameError
from accelsim.workload.graph import Graph

ModelFn = Callable[..., Graph]
MODELS: dict[str, ModelFn] = {}
_FAMILIES = ("resnet", "mobilenet", "vgg", "inception", "transformer", "llama", "unet3d",
             "small", "squeezenet", "densenet", "efficientnet", "ssd", "yolo",
             "mobilenet_edgetpu", "mobilenet_v4", "mobilebert", "edsr", "deeplab", "mobiledet")


def model(name: str) -> Callable[[ModelFn], ModelFn]:
    """Register a model builder under `name`."""

    def register(fn: ModelFn) -> ModelFn:
        MODELS[name] = fn
        return fn

    return register


@lru_cache(maxsize=1)  # once per process (a sweep point asks a dozen times)
def _load_families() -> None:
    for fam in _FAMILIES:
        importlib.import_module(f"accelsim.workload.zoo.{fam}")


def model_names() -> list[str]:
    _load_families()
    return sorted(MODELS)


def model_knobs(name: str) -> dict[str, Any]:
    """The input knobs a model takes and their defaults (e.g. {"image_size": 224})."""
    _load_families()
    if name not in MODELS:
        raise UnknownNameError("model", name, list(MODELS))
    return dict(_knobs_of(MODELS[name]))


@lru_cache(maxsize=256)  # a builder's signature, read once (a sweep point asks six times)
def _knobs_of(builder: Any) -> tuple[tuple[str, Any], ...]:
    return tuple((p.name, p.default) for p in inspect.signature(builder).parameters.values())


@lru_cache(maxsize=64)
def _build(name: str, knobs: tuple[tuple[str, Any], ...]) -> Graph:
    return MODELS[name](**dict(knobs))


def build_model(name: str, **knobs: Any) -> Graph:
    """Build zoo model `name` with input knobs (unknown knobs are an error). Cached."""
    allowed = model_knobs(name)
    bad = sorted(set(knobs) - set(allowed))
    if bad:
        raise AccelsimError(f"model '{name}' takes knobs {sorted(allowed)}, not {bad}")
    knobs = {k: v for k, v in knobs.items() if v is not None}
    return _build(name, tuple(sorted(knobs.items())))
