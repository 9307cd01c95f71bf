"""Scenarios: a workload as data (`workloads/*.toml`), validated at the edge.

    name = "resnet50-train"            # optional; defaults to the file stem
    model = "resnet50"                 # a zoo model
    mode = "train"                     # train | infer
    batch_size = 256                   # per accelerator
    precision = "bf16"                 # fp32 | tf32 | fp16 | bf16 | fp8_e4m3 | fp8_e5m2 | int8
    optimizer = "sgd"                  # sgd | momentum | adam (training: state kept per param)
    [input]                            # the model's knobs, e.g. image_size, seq_len
    image_size = 224
    [data]
    dataset = "imagenet-raw"           # a dataset profile in hw_profiles/datasets/
    [pipeline]                         # knobs of the storage-to-accelerator simulation
    io_threads = 16
    prep_workers = 8
    prefetch_batches = 2
    gpudirect = false

Unknown keys, missing keys, wrong types and impossible values raise `ConfigError` naming the
file, the field and the value. A `Scenario` is a frozen, picklable dataclass.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from accelsim.datafiles import builtin_files
from accelsim.errors import AccelsimError, ConfigError, UnknownNameError
from accelsim.formats import FORMATS, get_format
from accelsim.physical import MAX_BATCH, MAX_THREADS, input_ceiling
from accelsim.schema import Field, count, flag, parse_fields, text
from accelsim.tomlfiles import read_toml
from accelsim.workload.freeze import frozen_graph
from accelsim.workload.graph import Graph
from accelsim.workload.llm_configs import decoder_names, is_config_path, is_decoder
from accelsim.workload.sources import (
    is_decoder_only,
    is_model_file,
    known_model,
    model_graph,
    model_knob_defaults,
)
from accelsim.workload.zoo import model_names

MODES = ("train", "infer")
OPTIMIZERS = ("sgd", "momentum", "adam")


@dataclass(frozen=True)
class Pipeline:
    """Knobs of the storage-to-accelerator pipeline (read by `accelsim.sim`)."""

    io_threads: int = 8
    prep_workers: int = 8
    prefetch_batches: int = 2
    gpudirect: bool = False


@dataclass(frozen=True)
class Scenario:
    name: str
    model: str
    mode: str = "infer"
    batch_size: int = 1
    precision: str = "fp32"
    optimizer: str = "sgd"
    input: dict[str, Any] = field(default_factory=dict)
    dataset: str | None = None
    pipeline: Pipeline = field(default_factory=Pipeline)
    trainable: str = "all"  # transfer learning (`accelsim.workload.freeze`): all, last:N, from:X
    freeze: str = ""  # layer names or prefixes joined by "+", frozen whatever `trainable` says

    def graph(self) -> Graph:
        """The model graph at this scenario's input knobs (cached by the zoo or the importer),
        its frozen layers marked (`frozen_graph`) when the scenario trains only some."""
        graph = model_graph(self.model, **self.input)
        if self.trainable == "all" and not self.freeze:
            return graph
        return frozen_graph(graph, self.trainable, self.freeze)

    def with_overrides(self, **changes: Any) -> Scenario:
        """A copy with the non-None `changes` applied and re-validated (CLI flags)."""
        changes = {k: v for k, v in changes.items() if v is not None}
        inputs = {**self.input, **changes.pop("input", {})}
        return _validated(replace(self, input=inputs, **changes), "command line")


_PIPELINE_FIELDS = (
    count("io_threads", required=False, high=MAX_THREADS),
    count("prep_workers", required=False, high=MAX_THREADS),
    Field("prefetch_batches", int, required=False, low=0, high=MAX_THREADS, si_type=int),
    flag("gpudirect", required=False, sourced=False),
)
_FIELDS = (
    text("name", required=False), text("model"), text("mode", choices=MODES),
    count("batch_size", high=MAX_BATCH), text("precision"),
    text("optimizer", choices=OPTIMIZERS, required=False),
    Field("data", dict, required=False, sub=(text("dataset", required=False),)),
    Field("pipeline", dict, required=False, sub=_PIPELINE_FIELDS),
)


def parse_scenario(raw: dict[str, Any], src: str, default_name: str) -> Scenario:
    """Validate a scenario table read from `src` and build the `Scenario`. The `[input]`
    table's keys depend on the model, so it is checked against the model's knobs."""
    body = {k: v for k, v in raw.items() if k != "input"}
    inputs = raw.get("input", {})
    if not isinstance(inputs, dict):
        raise ConfigError(src, "input", inputs, "expected a table of model knobs")
    v = parse_fields(body, _FIELDS, src)
    pipe = {k: x for k, x in (v["pipeline"] or {}).items() if x is not None}
    scenario = Scenario(
        name=v["name"] or default_name, model=v["model"], mode=v["mode"],
        batch_size=v["batch_size"], precision=v["precision"], optimizer=v["optimizer"] or "sgd",
        input=dict(inputs), dataset=(v["data"] or {}).get("dataset"), pipeline=Pipeline(**pipe))
    return _validated(scenario, src)


def _validated(s: Scenario, src: str) -> Scenario:
    """Cross-field checks of values (the types are already right)."""
    if not known_model(s.model):
        raise ConfigError(src, "model", s.model, f"not a zoo model ({', '.join(model_names())}) "
                          "nor a model file (.onnx, .csv) nor a decoder (a config .json, or "
                          f"{', '.join(n for n in decoder_names() if n not in model_names())})")
    if s.mode not in MODES:
        raise ConfigError(src, "mode", s.mode, f"expected one of {MODES}")
    if s.optimizer not in OPTIMIZERS:
        raise ConfigError(src, "optimizer", s.optimizer, f"expected one of {OPTIMIZERS}")
    if not 1 <= s.batch_size <= MAX_BATCH:
        raise ConfigError(src, "batch_size", s.batch_size, f"must be from 1 to {MAX_BATCH:,}")
    try:
        get_format(s.precision)
    except UnknownNameError:
        raise ConfigError(src, "precision", s.precision,
                          f"expected one of {', '.join(FORMATS)}") from None
    knobs = model_knob_defaults(s.model)
    for key, value in s.input.items():
        if key not in knobs:
            raise ConfigError(src, f"input.{key}", value,
                              f"model '{s.model}' takes {', '.join(knobs) or 'no knobs'}")
        high = input_ceiling(key)
        if not isinstance(value, int) or isinstance(value, bool) or not 1 <= value <= high:
            raise ConfigError(src, f"input.{key}", value, f"must be an integer from 1 to {high:,}")
    datasets = builtin_files("hw_profiles", "datasets/*.toml")
    if s.dataset is not None and s.dataset not in datasets and not s.dataset.endswith(".toml"):
        # checked even where the run reads no data (a device alone): never accepted unread
        raise ConfigError(src, "data.dataset", s.dataset, "not a built-in dataset "
                          f"({', '.join(sorted(datasets))}) nor a dataset file (.toml)")
    p = s.pipeline
    for key in ("io_threads", "prep_workers"):
        if getattr(p, key) < 1:
            raise ConfigError(src, f"pipeline.{key}", getattr(p, key), "must be at least 1")
    if p.prefetch_batches < 0:
        raise ConfigError(src, "pipeline.prefetch_batches", p.prefetch_batches,
                          "must be 0 or more")
    if is_decoder_only(s.model):  # no graph: its shapes were read by model_knob_defaults
        return s
    try:
        s.graph()
    except AccelsimError as err:
        if not s.input and str(err).startswith(f"{s.model}:"):
            raise  # a model file's own error, naming it: not wrapped in "field 'input' = {}"
        raise ConfigError(src, "input", s.input, f"the model cannot be built: {err}") from None
    return s


def load_scenario_file(path: str | Path) -> Scenario:
    """Load and validate one scenario TOML file."""
    path = Path(path)
    return parse_scenario(read_toml(path), str(path), path.stem)


def _is_file(spec: str) -> bool:
    try:
        return Path(spec).is_file()
    except (OSError, ValueError):  # a name too long for the file system, a NUL byte
        return False


def scenario_names() -> list[str]:
    """Built-in scenarios (files in `workloads/`)."""
    return sorted(builtin_files("workloads", "*.toml"))


def resolve_workload(spec: str) -> Scenario:
    """A workload argument: a path to a scenario file, a built-in scenario, a zoo model, a
    model file (.onnx, .csv topology), a decoder config (.json) or a decoder's name; a model
    becomes a default inference scenario at batch 1, fp32."""
    if is_model_file(spec) or is_config_path(spec):
        return _validated(Scenario(name=Path(spec).stem, model=spec), spec)
    if spec.endswith(".toml") or _is_file(spec):
        return load_scenario_file(spec)
    builtin = builtin_files("workloads", "*.toml")
    if spec in builtin:
        return load_scenario_file(builtin[spec])
    if spec in model_names() or is_decoder(spec):
        return _validated(Scenario(name=spec, model=spec), spec)
    raise UnknownNameError("workload (zoo model, decoder, scenario or .toml file)", spec,
                           sorted(set(model_names()) | set(decoder_names())) + list(builtin))
