"""Training datasets as the storage pipeline sees them: how many files, how big, how many
samples in each, what a prepared sample weighs and what it costs a CPU core to prepare.

Data: one TOML per dataset in `hw_profiles/datasets/`, name = file stem. Schema (a contract):

============================ ======== =======================================================
key                          required meaning
============================ ======== =======================================================
description                  yes      one line
format                       yes      "jpeg" | "tfrecord" | "npz" | "raw"
sample_count                 yes      >= 1; training samples in one epoch
file_count                   yes      >= 1; must equal ceil(sample_count / samples_per_file)
samples_per_file             yes      >= 1; samples in one (full) file
file_size_distribution       yes      "constant" | "lognormal"
file_size_mean_bytes         yes      > 0; mean size of one file on storage
file_size_stdev_bytes        yes      >= 0; 0 for "constant", > 0 for "lognormal"
decoded_sample_bytes         yes      >= 1; one sample as handed to the accelerator
prep_ms_per_sample_per_core  yes      >= 0; CPU time to decode + augment one sample on one core
prep_reference_clock_ghz     no       > 0; single-thread-equivalent clock of the CPU that figure
                                      was measured on (as CPU profiles' single_thread_equiv_clock)
prep_reference_simd_width_bits no     SIMD width of that CPU (`accelsim.sim.hostprep` rescales)
============================ ======== =======================================================

plus `[sources]`. A "lognormal" is fitted by moments to the mean and stdev (which are the
figures that get published): sigma^2 = ln(1 + (stdev/mean)^2), mu = ln(mean) - sigma^2/2,
so the sampled mean matches the published mean whatever the spread.

Example::

    >>> ds = load_dataset("imagenet-raw")
    >>> ds.file_count == ds.sample_count    # one JPEG per sample
    True

File sizes are drawn from it by `accelsim.sim.readplan.sample_file_sizes_bytes`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

from accelsim.datafiles import builtin_files
from accelsim.errors import ConfigError
from accelsim.physical import (
    BYTES,
    DURATION,
    FREQUENCY,
    MAX_DATASET_FILES,
    MAX_DATASET_SAMPLES,
    MAX_SIZE_CV,
)
from accelsim.schema import count, flagged_fields, non_negative, parse_profile, positive, text
from accelsim.tomlfiles import find_profile, read_toml

DATASET_FORMATS = ("jpeg", "tfrecord", "npz", "raw")
SIZE_DISTRIBUTIONS = ("constant", "lognormal")
MAX_SIMD_BITS = 4096  # NB: beyond any CPU's vector width (AVX-512, SVE's 2048-bit maximum)

FIELDS = (
    text("description"),
    text("format", choices=DATASET_FORMATS),
    count("sample_count", high=MAX_DATASET_SAMPLES),
    count("file_count", high=MAX_DATASET_FILES),
    count("samples_per_file", high=MAX_DATASET_SAMPLES),
    text("file_size_distribution", choices=SIZE_DISTRIBUTIONS),
    positive("file_size_mean_bytes", span=BYTES),
    non_negative("file_size_stdev_bytes", span=BYTES),
    count("decoded_sample_bytes", high=BYTES.high),
    non_negative("prep_ms_per_sample_per_core", 1e-3, "prep_s_per_sample_per_core",
                 span=DURATION),
    positive("prep_reference_clock_ghz", 1e9, "prep_reference_clock_hz", required=False,
             span=FREQUENCY),
    count("prep_reference_simd_width_bits", required=False, high=MAX_SIMD_BITS),
)


@dataclass(frozen=True)
class Dataset:
    """A dataset's storage layout and preparation cost, SI units."""

    name: str
    description: str
    format: str
    sample_count: int
    file_count: int
    samples_per_file: int
    file_size_distribution: str
    file_size_mean_bytes: float
    file_size_stdev_bytes: float
    decoded_sample_bytes: int
    prep_s_per_sample_per_core: float
    prep_reference_clock_hz: float | None = None  # the CPU the prep figure was measured on
    prep_reference_simd_width_bits: int | None = None
    sources: dict[str, str] = field(default_factory=dict, compare=False, repr=False)

    @property
    def total_bytes(self) -> float:
        """Expected bytes read from storage for one epoch."""
        return self.file_count * self.file_size_mean_bytes

    @property
    def stored_bytes_per_sample(self) -> float:
        """Mean bytes of storage per sample (what one sample costs to read)."""
        return self.total_bytes / self.sample_count

    @property
    def lognormal_params(self) -> tuple[float, float]:
        """(mu, sigma) of ln(size) fitted by moments; (ln(mean), 0) for a constant."""
        cv2 = (self.file_size_stdev_bytes / self.file_size_mean_bytes) ** 2
        sigma2 = math.log1p(cv2)
        return math.log(self.file_size_mean_bytes) - sigma2 / 2, math.sqrt(sigma2)

    @property
    def flagged_fields(self) -> tuple[str, ...]:
        return flagged_fields(self.sources)


def load_dataset(name_or_path: str | Path) -> Dataset:
    """A built-in dataset by name (`available_datasets()`) or a user TOML by path."""
    path = find_profile(name_or_path, "datasets/*.toml", "dataset")
    src = str(path)
    values, sources = parse_profile(read_toml(path), FIELDS, src)
    ds = Dataset(name=path.stem, sources=sources, **values)
    expected_files = math.ceil(ds.sample_count / ds.samples_per_file)
    if ds.file_count != expected_files:
        raise ConfigError(src, "file_count", ds.file_count,
                          f"must equal ceil(sample_count / samples_per_file) = {expected_files}")
    stdev = ds.file_size_stdev_bytes
    if ds.file_size_distribution == "constant" and stdev != 0:
        raise ConfigError(src, "file_size_stdev_bytes", stdev, "must be 0 for 'constant'")
    if ds.file_size_distribution == "lognormal" and stdev == 0:
        raise ConfigError(src, "file_size_stdev_bytes", stdev,
                          "must be > 0 for 'lognormal' (use 'constant')")
    if stdev > MAX_SIZE_CV * ds.file_size_mean_bytes:
        raise ConfigError(src, "file_size_stdev_bytes", stdev,
                          f"must be at most {MAX_SIZE_CV:g} x file_size_mean_bytes")
    return ds


def available_datasets() -> list[str]:
    return sorted(builtin_files("hw_profiles", "datasets/*.toml"))
