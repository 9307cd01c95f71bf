"""Every knob of a simulation by one flat name, the same in the Python API, the command line
(`--io-threads` is knob `io_threads`) and a sweep (`--set io_threads=4,8`).

    cfg = make_config("resnet50-train", "dgx-a100", batch=128, prep_workers=4, steps=50)
    parse_knob_values("batch", "1,2,4")          # [1, 2, 4]

A knob names where it goes (the scenario, the config, the training or serving knobs, or the
model's own input knobs such as `image_size`) and the modes it applies to. A knob given for a
mode it does not apply to is an error naming it, never silently dropped.
"""

from __future__ import annotations

import math
import os
from typing import Any

from accelsim.arguments import plain_scalar
from accelsim.errors import AccelsimError, did_you_mean, quoted
from accelsim.numbers import is_float_text, is_int_text, shown
from accelsim.physical import input_ceiling
from accelsim.sim.knob_table import KNOBS
from accelsim.sim.spec import DEFAULT_MAX_EVENTS, SimulationConfig  # noqa: F401 - re-exported
from accelsim.workload.llm_configs import is_config_path, is_decoder
from accelsim.workload.scenario import Scenario, resolve_workload
from accelsim.workload.seq_lens import read_seq_lens
from accelsim.workload.sources import is_decoder_only, model_decoder
from accelsim.workload.sources import model_knob_defaults as model_knobs


def _is_decoder(model: str) -> bool:
    """A decoder run's model: a decoder config file or a decoder name."""
    return is_config_path(model) or is_decoder(model)


_TRUE, _FALSE = ("true", "yes", "on", "1"), ("false", "no", "off", "0")


def knob_names(model: str | None = None) -> list[str]:
    """The knobs a run takes: the fixed ones, plus the model's input knobs when given."""
    return list(KNOBS) + (sorted(model_knobs(model)) if model else [])


def _convert(name: str, kind: type, value: Any) -> Any:
    """`value` as `kind`; strings are parsed (command line, sweep grids), numpy scalars
    taken as the Python ones they hold."""
    value = plain_scalar(value)
    if kind is str and isinstance(value, os.PathLike):  # a file knob given as a Path
        value = os.fspath(value)
    if kind is str and isinstance(value, str) and not value.strip():
        # (it was taken as unset where a knob is read as `if cfg.x:`: --dataflow '' on a GPU)
        raise AccelsimError(f"knob '{name}': give a name, not {shown(value)}")
    if isinstance(value, str) and kind is not str:
        # NB: the one number rule (`accelsim.numbers`): ASCII digits, no '_', e notation for
        # float knobs only.
        text = value.strip().lower()
        if kind is bool and text in _TRUE + _FALSE:
            return text in _TRUE
        if kind is int and is_int_text(text):
            return int(text)
        if kind is float and is_float_text(text):
            return float(text)
        raise AccelsimError(f"knob '{name}': {shown(value)} is not {_KIND_WORD[kind]}")
    if kind is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    ok = isinstance(value, kind) and not (kind is int and isinstance(value, bool))
    if not ok:
        raise AccelsimError(f"knob '{name}': {shown(value)} is not {_KIND_WORD[kind]}")
    return value


_KIND_WORD = {int: "a whole number", float: "a number", bool: "true or false", str: "a name"}


def check_range(name: str, value: Any, low: float | None, high: float | None) -> Any:
    """`value` when it is finite and within [low, high]; else an error naming the knob."""
    if isinstance(value, float) and not math.isfinite(value):
        raise AccelsimError(f"knob '{name}' = {shown(value)}: must be a finite number")
    if low is not None and value < low:
        raise AccelsimError(f"knob '{name}' = {shown(value)}: must be at least {low:,}")
    if high is not None and value > high:
        raise AccelsimError(f"knob '{name}' = {shown(value)}: must be at most {high:,}")
    return value


def parse_knob_values(name: str, text: str, model: str | None = None) -> list[Any]:
    """A comma-separated list of values for knob `name`, each parsed to the knob's type."""
    kind = KNOBS[name].kind if name in KNOBS else _input_kind(name, model)
    return [_convert(name, kind, part) for part in text.split(",") if part.strip() != ""]


def _input_kind(name: str, model: str | None) -> type:
    if model is None or name not in model_knobs(model):
        names = knob_names(model)
        raise AccelsimError(f"unknown knob {quoted(name)}; {did_you_mean(name, names)}"
                            f"choose one of: {', '.join(names)}")
    return int


def make_config(workload: str | Scenario, hardware: str, /, **knobs: Any) -> SimulationConfig:
    """A `SimulationConfig` from a workload, a hardware name and flat knobs (None = unset).

    Unknown knobs, knobs of another mode and values of the wrong type raise `AccelsimError`
    naming the knob."""
    given = {k: v for k, v in knobs.items() if v is not None}
    sc = workload if isinstance(workload, Scenario) else resolve_workload(workload)
    mode = given.get("mode", sc.mode)
    scenario: dict[str, Any] = {}
    inputs: dict[str, Any] = {}
    config: dict[str, Any] = {}
    parts: dict[str, dict[str, Any]] = {"train": {}, "serve": {}, "llm": {}, "federated": {}}
    model_file = given.get("model_config")
    if model_file is not None:
        model_file = _convert("model_config", str, model_file)
        if not is_decoder_only(model_file):
            raise AccelsimError(f"knob 'model_config' = {model_file!r}: a decoder config file "
                                "(.json), or the name of one in workloads/llm/")
        scenario["model"] = model_file
    model_inputs = model_knobs(scenario.get("model", sc.model))
    unknown = [n for n, v in knobs.items() if v is None and n not in KNOBS
               and n not in model_inputs]  # None leaves a knob unset; a typo is still one
    given.update(dict.fromkeys(unknown))
    for name, value in given.items():
        if name in model_inputs and name not in KNOBS:
            inputs[name] = check_range(name, _convert(name, int, value), 1, input_ceiling(name))
            continue
        if name not in KNOBS:
            names = knob_names(sc.model)
            raise AccelsimError(f"unknown knob {quoted(name)}; {did_you_mean(name, names)}"
                                f"choose one of: {', '.join(names)}")
        knob = KNOBS[name]
        value = _convert(name, knob.kind, value)
        if knob.kind in (int, float):
            value = check_range(name, value, knob.low, knob.high)
        if mode not in knob.modes and not (mode in knob.decoder_modes
                                           and _is_decoder(scenario.get("model", sc.model))):
            also = (f" (and {' or '.join(knob.decoder_modes)} for a decoder)"
                    if knob.decoder_modes else "")
            raise AccelsimError(f"knob '{name}' applies to mode {' or '.join(knob.modes)}"
                                f"{also} only, and this run is mode {mode}: drop it or set the "
                                "mode")
        if knob.scale != 1.0:
            value = value * knob.scale
        if knob.target == "model":
            continue  # (set above: the inputs it takes depend on it)
        if mode not in knob.modes:  # a decoder's own use of the knob: an LLM knob
            parts["llm"][knob.field] = value
        elif knob.target == "scenario":
            scenario[knob.field] = value
        elif knob.target == "config":
            config[knob.field] = value
        else:
            parts[knob.target][knob.field] = value
    if parts["llm"].get("overlap_tp") and parts["llm"].get("tp") == 1:
        raise AccelsimError("knob 'overlap_tp' with tp 1: one GPU has no tensor-parallel "
                            "all-reduce to overlap; drop --overlap-tp or set --tp above 1")
    if "seq_lens" in config:
        if "seq_len" in inputs:
            raise AccelsimError("knobs 'seq_len' and 'seq_len_dist' both set the sequence "
                                "length: keep one")
        config["seq_lens"] = read_seq_lens(config["seq_lens"])
    elif "padding" in config:
        raise AccelsimError("knob 'padding' needs 'seq_len_dist' (the lengths to pad or pack)")
    scenario_mode = mode if mode in ("infer", "train") else None
    sc = sc.with_overrides(mode=scenario_mode, input=inputs, **scenario)
    config.pop("mode", None)
    # a decoder without a layer graph is read now, so that the run reads no model file
    return SimulationConfig(sc, hardware, mode=mode, train=parts["train"], serve=parts["serve"],
                            llm=parts["llm"], federated=parts["federated"],
                            decoder=model_decoder(sc.model), **config)
