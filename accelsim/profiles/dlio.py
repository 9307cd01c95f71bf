"""DLIO workload configurations (the YAML files of argonne-lcf/dlio_benchmark and of MLPerf
Storage, `configs/workload/unet3d_a100.yaml`) read into the MLPerf Storage emulation: the
`dataset`, `reader`, `train` and `metric` sections become an `Emulation` and its `Dataset`.

    cfg = load_dlio("unet3d_a100.yaml")
    cfg.emulation.batch_size, cfg.dataset.file_count, cfg.ignored

Read: dataset.num_files_train, num_samples_per_file, record_length_bytes (or the older
record_length), record_length_bytes_stdev (record_length_stdev), record_length_bytes_resize
(record_length_resize), format, num_files_eval; reader.batch_size, read_threads,
prefetch_size; train.computation_time, epochs; metric.au; model (a name or model.name).
Every other key is DLIO's and is listed in `ignored` (the emulation has no use for it); a
section that is not a mapping, a missing required key or a value of the wrong type or range
is a `ConfigError` naming the file and the key.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from accelsim.errors import AccelsimError, ConfigError
from accelsim.physical import MAX_BATCH, MAX_THREADS
from accelsim.profiles.datasets import Dataset
from accelsim.profiles.emulation import Emulation

DLIO_SUFFIXES = (".yaml", ".yml")
# DLIO's defaults (dlio_benchmark/utils/config.py) where a config leaves a key out.
# NB: recalled from DLIO's ConfigArguments, not re-read: au 0.90, one sample per file,
# prefetch 2, one epoch, no eval files, record length stdev 0, one read thread.
DEFAULTS = {"metric.au": 0.90, "dataset.num_samples_per_file": 1, "reader.prefetch_size": 2,
            "train.epochs": 1, "dataset.num_files_eval": 0, "dataset.record_length_bytes_stdev": 0,
            "reader.read_threads": 1}
_FORMATS = {"npz": "npz", "tfrecord": "tfrecord", "jpeg": "jpeg"}  # the rest: "raw"
_READ = {"dataset": ("num_files_train", "num_samples_per_file", "record_length_bytes",
                     "record_length", "record_length_bytes_stdev", "record_length_stdev",
                     "record_length_bytes_resize", "record_length_resize", "format",
                     "num_files_eval"),
         "reader": ("batch_size", "read_threads", "prefetch_size"),
         "train": ("computation_time", "epochs"),
         "metric": ("au",)}


@dataclass(frozen=True)
class DlioConfig:
    """One DLIO workload configuration, as the emulation runs it."""

    path: Path
    model: str
    emulation: Emulation
    dataset: Dataset
    record_length_bytes: float  # one sample's mean size (DLIO's record_length)
    num_files_eval: int
    epochs: int
    prefetch: int
    ignored: list[str] = field(default_factory=list)  # DLIO keys the emulation does not use
    notes: list[str] = field(default_factory=list)


def is_dlio_file(name: str) -> bool:
    return name.lower().endswith(DLIO_SUFFIXES)


def _read_yaml(path: Path) -> dict[str, Any]:
    try:
        import yaml
    except ImportError:
        raise AccelsimError("reading a DLIO .yaml needs PyYAML: pip install "
                            "'accelsim[dlio]'") from None
    try:
        data = yaml.safe_load(path.read_text())
    except OSError as err:
        raise AccelsimError(f"{path}: {err.strerror}") from None
    except yaml.YAMLError as err:
        raise AccelsimError(f"{path}: not YAML ({str(err).splitlines()[0]})") from None
    if not isinstance(data, dict):
        raise ConfigError(str(path), "(top level)", type(data).__name__,
                          "expected a DLIO workload configuration (a mapping)")
    return data


class _Sections:
    """The config's sections, with typed, range-checked reads naming the file and key."""

    def __init__(self, data: dict[str, Any], src: str) -> None:
        self.data, self.src = data, src
        for name in _READ:
            if not isinstance(data.get(name, {}), dict):
                raise ConfigError(src, name, data[name], "expected a mapping")

    def raw(self, key: str, default: bool = True) -> Any:
        section, name = key.split(".")
        value = self.data.get(section, {}).get(name)
        return DEFAULTS.get(key) if value is None and default else value

    def number(self, key: str, *, whole: bool = False, low: float = 0.0,
               high: float = math.inf, alias: str | None = None) -> float:
        """`key` (else its older name `alias`, else DLIO's default), checked."""
        value = self.raw(key, default=False)
        if value is None and alias is not None and self.raw(alias) is not None:
            key, value = alias, self.raw(alias)
        value = self.raw(key) if value is None else value
        if value is None:
            raise ConfigError(self.src, key, None, "required (DLIO's key)")
        ok = isinstance(value, int | float) and not isinstance(value, bool)
        if not ok or (whole and value != int(value)) or not low <= value <= high:
            kind = "a whole number" if whole else "a number"
            raise ConfigError(self.src, key, value, f"expected {kind} in [{low:g}, {high:g}]")
        return int(value) if whole else float(value)


def load_dlio(path: str | Path) -> DlioConfig:
    """The DLIO workload configuration at `path` (see the module docstring)."""
    p = Path(path)
    src = str(p)
    data = _read_yaml(p)
    s = _Sections(data, src)
    model_entry = data.get("model")
    model = (model_entry.get("name") if isinstance(model_entry, dict) else model_entry) or p.stem
    files = s.number("dataset.num_files_train", whole=True, low=1)
    per_file = s.number("dataset.num_samples_per_file", whole=True, low=1)
    record = s.number("dataset.record_length_bytes", low=1, alias="dataset.record_length")
    stdev = s.number("dataset.record_length_bytes_stdev", alias="dataset.record_length_stdev")
    resize = s.raw("dataset.record_length_bytes_resize") or s.raw("dataset.record_length_resize")
    decoded = (s.number("dataset.record_length_bytes_resize", low=1,
                        alias="dataset.record_length_resize") if resize else record)
    fmt = str(s.raw("dataset.format") or "raw")
    notes = []
    if fmt not in _FORMATS:
        notes.append(f"DLIO format '{fmt}' read as raw files (the emulation decodes nothing)")
    # NB: a file's size is its samples' sum; their spread adds as independent draws.
    dataset = Dataset(
        name=f"dlio:{p.stem}", description=f"DLIO dataset of {p.name}",
        format=_FORMATS.get(fmt, "raw"), sample_count=files * per_file, file_count=files,
        samples_per_file=per_file,
        file_size_distribution="lognormal" if stdev > 0 else "constant",
        file_size_mean_bytes=record * per_file, file_size_stdev_bytes=stdev * math.sqrt(per_file),
        decoded_sample_bytes=max(int(decoded), 1), prep_s_per_sample_per_core=0.0,
        sources={"*": f"DLIO configuration {src}"})
    emu = Emulation(
        accelerator=p.stem, workload=str(model), dataset=dataset.name,
        batch_size=s.number("reader.batch_size", whole=True, low=1, high=MAX_BATCH),
        computation_time_s=s.number("train.computation_time", low=1e-9),
        read_threads=s.number("reader.read_threads", whole=True, low=1, high=MAX_THREADS),
        au_target=s.number("metric.au", low=0.0, high=1.0),
        sources={"*": f"DLIO configuration {src}"})
    ignored = []
    for sec, value in data.items():
        if sec == "model":
            continue
        if not isinstance(value, dict):
            ignored.append(sec)
            continue
        ignored += [f"{sec}.{k}" for k in value if k not in _READ.get(sec, ())]
    return DlioConfig(
        path=p, model=str(model), emulation=emu, dataset=dataset, record_length_bytes=record,
        num_files_eval=s.number("dataset.num_files_eval", whole=True),
        epochs=s.number("train.epochs", whole=True, low=1),
        prefetch=s.number("reader.prefetch_size", whole=True, low=0, high=MAX_THREADS),
        ignored=sorted(ignored), notes=notes)
