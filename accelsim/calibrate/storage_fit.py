"""Fit the file-system classes' costs on the MLPerf Storage rows of the calibration file.

Each row is a storage system (`hw_profiles/storage_systems/<system>.toml`, described from its
parts), a workload, an emulated accelerator, the client hosts, and what was measured: the
most accelerators that passed (n) and the throughput (DLIO's "MB/s", which is MiB/s). The
closed form (`accelsim.sim.storage_system.sizing.closed_form`) puts the AU threshold at a
continuous count; a row fits when that count lies inside [n, n + 1), so the fit minimises
mean |log(count / (n + 1/2))| over the rows, by coordinate descent over each class's factors
in log steps. Factors are per class (the client's CPU costs, `SHARED`, one for all classes),
never per system; a class with no row left in the fit set takes the pooled factors of the
classes that have (`fit(rows, classes)`).

    rows = mlperf_storage_rows(REFERENCE / "calibration_measurements.csv")
    fitted = fit(rows, {n: load_fs_class(n) for n in available_fs_classes()})  # {class: FsClass}
"""

from __future__ import annotations

import csv
import functools
import io
import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from accelsim.profiles.emulation import load_emulation
from accelsim.profiles.storage_systems import FsClass, StorageSystem, load_storage_system
from accelsim.sim.storage_system.sizing import closed_form
from accelsim.tomlfiles import MAX_TABLE_BYTES, read_text_file

MIB = 2 ** 20  # DLIO's train_io_mean_MB_per_second is samples/s x record bytes / 1024 / 1024
_HARDWARE = re.compile(r"storage system '([^/']+)/(unet3d|resnet50|cosmoflow)[-_/](a100|h100)'"
                       r".*?(\d+) simulated .*? on (\d+) client host")

# The fitted factors of each class and their bounds (SI: fraction, s, core-s/B).
FACTORS = {
    "drive_read_efficiency": (0.05, 1.0),
    "request_latency_s": (1e-6, 0.1),
    "client_core_s_per_byte": (1e-13, 1e-7),
    "client_core_s_per_sample": (1e-7, 1e-1),
    "client_core_s_per_file": (1e-6, 1.0),
    "server_core_s_per_byte": (1e-13, 1e-7),
    "offload_client_core_s_per_byte": (1e-13, 1e-7),
}
LOCAL_UNUSED = ("server_core_s_per_byte", "offload_client_core_s_per_byte")
# Fitted as one value for every class: what DLIO's reader costs a client's cores per byte and
# per sample is the reader's, whatever file system is under it; the share of a drive's
# datasheet read it sustains is the drive's.
SHARED = ("client_core_s_per_byte", "client_core_s_per_sample", "client_core_s_per_file",
          "drive_read_efficiency")
# The fit's starting point and prior, whatever the files hold (so a refit does not drift):
# the datasheet's read, a 0.5 ms request ([SPEC_A900] an NFS filer's low-load response), a
# core moving 10 GB/s, 0.1 ms per sample, 1 ms per file, servers and DPUs at 50 GB/s per
# core.
PRIORS = {"drive_read_efficiency": 1.0, "request_latency_s": 5e-4,
          "client_core_s_per_byte": 1e-10, "client_core_s_per_sample": 1e-4,
          "client_core_s_per_file": 1e-3,
          "server_core_s_per_byte": 2e-11, "offload_client_core_s_per_byte": 2e-11}
# NB: a factor the rows do not identify (its part never binds) should stay at its prior, not
# wander to a bound: each factor's |log(value / prior)| costs this much of the objective.
PRIOR_WEIGHT = 0.002
GRID = 33  # log-spaced values per factor and pass
PASSES = 3
STEPS = (1.15, 1.05, 1.02)  # the polish's multiplicative steps


@dataclass(frozen=True)
class StorageRow:
    """One MLPerf Storage result."""

    id: str
    system: str
    submitter: str
    workload: str
    accelerator: str
    accelerators: int
    hosts: int
    throughput_bytes_per_s: float


def mlperf_storage_rows(path: str | Path) -> list[StorageRow]:
    """The MLPerf Storage rows of a calibration CSV (ids MLPERF-STORAGE-*)."""
    rows = []
    with io.StringIO(read_text_file(path, MAX_TABLE_BYTES), newline="") as f:
        for r in csv.DictReader(f):
            if not r["id"].startswith("MLPERF-STORAGE"):
                continue
            m = _HARDWARE.search(r["hardware"])
            if m is None:
                raise ValueError(f"{path}: row {r['id']}: hardware {r['hardware']!r} does not "
                                 "name a system, workload, accelerator and client hosts")
            system, workload, acc, n, hosts = m.groups()
            sub = re.search(r"\(([^)]+)\);", r["hardware"])
            submitter = sub.group(1) if sub else "unknown"
            rows.append(StorageRow(r["id"], system, submitter, workload, acc, int(n),
                                   int(hosts), float(r["value"]) * MIB))
    return rows


@functools.cache
def _system(name: str) -> StorageSystem:
    return load_storage_system(name)


def class_of(row: StorageRow) -> str:
    return _system(row.system).fs.name


def system_of(row: StorageRow, fs: FsClass | None = None) -> StorageSystem:
    """The row's system at its client hosts, with `fs` in place of its class if given."""
    system = _system(row.system).with_clients(row.hosts)
    return system if fs is None else replace(system, fs=fs)


def with_factors(fs: FsClass, factors: dict[str, float]) -> FsClass:
    return replace(fs, **{k: v for k, v in factors.items() if hasattr(fs, k)})


def row_error(row: StorageRow, fs: FsClass) -> float:
    """log(closed-form count / (n + 1/2)) for `row` under class costs `fs`."""
    emu = load_emulation(row.accelerator, row.workload)
    n = closed_form(emu, system_of(row, fs))["accelerators"]
    return math.log(max(n, 0.05) / (row.accelerators + 0.5))


def objective(rows: Sequence[StorageRow], classes: dict[str, FsClass]) -> float:
    """Mean |log error| of `rows`, each under its class in `classes`, plus the prior's pull
    on the factors of the classes they use."""
    errs = [abs(row_error(r, classes[class_of(r)])) for r in rows]
    used = {class_of(r) for r in rows}
    pull = sum(abs(math.log(getattr(classes[n], k) / PRIORS[k]))
               for n in used for k in fitted_names(classes[n]))
    return (float(np.mean(errs)) if errs else 0.0) + PRIOR_WEIGHT * pull


def from_priors(classes: dict[str, FsClass]) -> dict[str, FsClass]:
    """`classes` with every fitted factor at its prior (`PRIORS`)."""
    return {n: replace(fs, **{k: PRIORS[k] for k in fitted_names(fs)}) for n, fs in classes.items()}


def fitted_names(fs: FsClass) -> list[str]:
    """The factors of `fs` the fit sets (class local has no server to cost)."""
    return [k for k in FACTORS if not (fs.name == "local" and k in LOCAL_UNUSED)
            and getattr(fs, k) is not None]


def _grid(key: str) -> np.ndarray:
    low, high = FACTORS[key]
    return np.geomspace(low, high, GRID)


Param = tuple[tuple[str, ...], str]  # (the classes sharing one value, the factor)


def descend(rows: Sequence[StorageRow], classes: dict[str, FsClass],
            params: Sequence[Param]) -> dict[str, FsClass]:
    """Coordinate descent on `params`: each in turn set to the best of a log grid over its
    whole range (so a factor whose part does not bind yet can reach where it does), `PASSES`
    times, then polished in small steps. A parameter naming several classes sets them all."""
    classes = dict(classes)
    best = objective(rows, classes)

    def trials(names: tuple[str, ...], key: str, values: Iterable[float]) -> None:
        nonlocal best, classes
        for value in values:
            trial = {**classes, **{n: replace(classes[n], **{key: float(value)})
                                   for n in names}}
            score = objective(rows, trial)
            if score < best - 1e-9:
                best, classes = score, trial

    for _ in range(PASSES):
        for names, key in params:
            trials(names, key, _grid(key))
    for step in STEPS:
        for names, key in params:
            low, high = FACTORS[key]
            now = getattr(classes[names[0]], key)
            trials(names, key, np.clip([now * step, now / step], low, high))
    return classes


def fit(rows: Sequence[StorageRow], classes: dict[str, FsClass]) -> dict[str, FsClass]:
    """The factors fitted on `rows`: the client's costs (`SHARED`: what the DLIO reader costs
    a host's cores) one value for every class, the rest per class on its own rows; a class
    with no row takes the shared values and, for the rest, one set pooled over all rows."""
    by_class: dict[str, list[StorageRow]] = {}
    for r in rows:
        by_class.setdefault(class_of(r), []).append(r)
    classes = from_priors(classes)
    names = tuple(by_class)
    params: list[Param] = [(names, k) for k in SHARED]
    params += [((n,), k) for n in names for k in fitted_names(classes[n]) if k not in SHARED]
    out = descend(rows, classes, params)  # every class starts at the same priors
    missing = [n for n in classes if n not in by_class]
    if missing:
        pooled = _pooled(rows, out, by_class)
        for name in missing:
            own = {k: getattr(pooled, k) for k in fitted_names(classes[name])
                   if getattr(pooled, k) is not None and k not in SHARED}
            shared = {k: getattr(out[names[0]], k) for k in SHARED}
            out[name] = replace(classes[name], **own, **shared)
    return out


def _pooled(rows: Sequence[StorageRow], classes: dict[str, FsClass],
            by_class: dict[str, list[StorageRow]]) -> FsClass:
    """One set of factors for every class with rows, fitted on all of them together: the rows
    are scored with each class's own description and fixed figures but the shared factors."""
    names = list(by_class)
    keys = [k for k in FACTORS if k not in SHARED
            and all(getattr(classes[n], k) is not None for n in names)]
    shared = classes[names[0]]

    def spread(cand: FsClass) -> dict[str, FsClass]:
        return {**classes, **{n: with_factors(classes[n], {
            k: getattr(cand, k) for k in keys if k in fitted_names(classes[n])}) for n in names}}

    best = objective(rows, spread(shared))
    for _ in range(PASSES):
        for key in keys:
            for value in _grid(key):
                cand = replace(shared, **{key: float(value)})
                score = objective(rows, spread(cand))
                if score < best - 1e-9:
                    best, shared = score, cand
    return shared
