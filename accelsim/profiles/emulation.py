"""Emulated accelerators of MLPerf Storage v1.0: per workload, the batch, the measured compute
time per batch, the readers and the AU threshold (DLIO's configs), read by the storage sizing
(`accelsim.sim.mlperf_storage`).

Data: `hw_profiles/emulation/<accelerator>.toml`, one table per workload: dataset, batch_size,
computation_time_s, read_threads, au_target (all from the DLIO configs of MLPerf Storage
v1.0), plus `[sources]`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from accelsim.datafiles import builtin_files
from accelsim.errors import AccelsimError
from accelsim.physical import DURATION, MAX_BATCH, MAX_THREADS
from accelsim.schema import Field, count, fraction, parse_profile, positive, text
from accelsim.tomlfiles import find_profile, read_toml

WORKLOADS = ("unet3d", "resnet50", "cosmoflow")
_ENTRY = (text("dataset"), count("batch_size", high=MAX_BATCH),
          positive("computation_time_s", span=DURATION), count("read_threads", high=MAX_THREADS),
          fraction("au_target"))
FIELDS = (text("description"),
          *(Field(w, dict, required=False, sub=_ENTRY) for w in WORKLOADS))

@dataclass(frozen=True)
class Emulation:
    """One workload on one emulated accelerator."""

    accelerator: str
    workload: str
    dataset: str
    batch_size: int
    computation_time_s: float
    read_threads: int
    au_target: float
    sources: dict[str, str] = field(default_factory=dict, compare=False, repr=False)


def load_emulation(accelerator: str | Path, workload: str) -> Emulation:
    """The emulated `accelerator` (`available_emulations()`, or a TOML path) for `workload`."""
    path = find_profile(accelerator, "emulation/*.toml", "emulated accelerator")
    values, sources = parse_profile(read_toml(path), FIELDS, str(path))
    if workload not in WORKLOADS or values.get(workload) is None:
        have = [w for w in WORKLOADS if values.get(w)]
        raise AccelsimError(f"emulated accelerator '{path.stem}': MLPerf Storage emulates "
                            f"{', '.join(have)}, not '{workload}'")
    return Emulation(path.stem, workload, sources=sources, **values[workload])


def available_emulations() -> list[str]:
    return sorted(builtin_files("hw_profiles", "emulation/*.toml"))
