"""Physical ranges and ceilings, in one place: what a data file or a knob may say.

A `Span` is the range of one family of quantities in SI units (bytes, bytes/s, Hz, W, s,
FLOP/s, J, ...). A schema `Field` names its span; the loader refuses a value outside it with
an error naming the file, the field, the value and the range in the unit it was written in:

    >>> BANDWIDTH.contains(5e-324 * 1e6)
    False
    >>> BYTES.describe(1e9, "gb")
    '1e-09 to 1e+09 gb (1 B to 1e+18 B)'
    >>> DURATION.describe(1e-6)
    '1e-06 to 3.6e+09 as written (1e-12 s to 3600 s)'

NB: every range is far outside any real part (the smallest and largest figures in hw_profiles/
sit several orders of magnitude inside it); the floors and ceilings exist to keep the model's
arithmetic finite and non-zero in float64 (products of a few ceilings stay below 1e300,
quotients of a ceiling by a floor too) and byte counts inside int64, not to judge hardware.

Counts that size work or arrays (batch, devices, threads, steps, requests, model inputs, dataset
files) have ceilings here too; `accelsim.sim.knobs` and the loaders read them from this module.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Span:
    """The accepted magnitudes of one family of quantities, in SI `unit`: [low, high]. A field
    that may be 0 (a latency, an energy) accepts 0 besides the span."""

    low: float
    high: float
    unit: str

    def contains(self, si_value: float) -> bool:
        return self.low <= si_value <= self.high

    def describe(self, factor: float = 1.0, written_unit: str = "") -> str:
        """The range as written (SI divided by the unit's `factor`) and in SI."""
        si = f"{self.low:g} {self.unit} to {self.high:g} {self.unit}"
        if factor == 1.0 and not written_unit:
            return si
        written = f"{self.low / factor:g} to {self.high / factor:g}"
        return f"{written} {written_unit or 'as written'} ({si})"


# NB: 1 B to 1 EB. A byte count times the largest count it multiplies stays in float64, and
# the largest size fits int64 (9.2e18).
BYTES = Span(1.0, 1e18, "B")
# NB: 1 kB/s (a modem) to 1 PB/s (200x the fastest HBM stack set); bytes / bandwidth stays
# finite and a transfer of a few bytes takes longer than 0.
BANDWIDTH = Span(1e3, 1e15, "B/s")
# NB: 1 kHz to 1 THz (clocks and PCIe transfer rates, T/s per lane).
FREQUENCY = Span(1e3, 1e12, "Hz")
# NB: 1 mW (a microcontroller) to 1 MW (a rack row); averages and energies stay plausible.
POWER = Span(1e-3, 1e6, "W")
# NB: 1 kFLOP/s to 1 EFLOP/s per device (an H100's sparse fp8 peak is ~4e15).
FLOP_RATE = Span(1e3, 1e18, "FLOP/s")
# NB: latencies and per-sample CPU times: from 1 ps (a non-zero latency must be resolvable
# beside seconds of run time) to an hour (a tape robot mounts a cartridge in about a minute).
DURATION = Span(1e-12, 3600.0, "s")
# NB: energy per op, per bit or per byte: from 1e-21 J (below the Landauer limit of
# ~2.9e-21 J per bit at room temperature) to 1 uJ (1e6x a DRAM access per bit).
ENERGY = Span(1e-21, 1e-6, "J")
# NB: energy per byte per metre of on-chip wire (0.17 pJ/bit/mm is ~1.4e-9 J/(B m)).
ENERGY_PER_BYTE_M = Span(1e-18, 1e-3, "J/(B m)")
# NB: operations per second of a storage medium (4 KiB IOPS): a tape to 1e12.
OPS_RATE = Span(1e-3, 1e12, "1/s")
# NB: a fraction that divides (an achieved efficiency): a bandwidth times it stays finite and
# non-zero.
FRACTION = Span(1e-6, 1.0, "")
VOLTAGE = Span(1e-3, 1e3, "V")
LENGTH = Span(1e-11, 1e-3, "m")  # process nodes: 0.01 nm to 1 mm

# Ceilings on counts that size work or arrays. NB: chosen far beyond any real system while
# keeping every byte count inside int64 and every run bounded (`max_events` bounds the event
# simulation itself).
MAX_COUNT = 1 << 24  # any count in a data file without a ceiling of its own (cores, LUTs, ...)
MAX_BATCH = 1 << 20
MAX_DEVICES = 1 << 16
MAX_NODES = 1 << 14  # nodes of a multi-node run (the largest clusters have ~10^4)
MAX_THREADS = 1 << 14  # threads, workers, cores, storage devices, NICs, prefetch depth
MAX_STEPS = 10_000_000
MAX_EPOCHS = 10_000
MAX_REQUESTS = 100_000_000
MAX_INPUT = 1 << 20  # image side, sequence length, or any other model input knob
# NB: a model input that repeats layers builds one op (or a few) per layer: 10,000 layers build
# in under a second (the deepest published networks have ~1,000: ResNet-1001); a million took
# minutes and GBs.
MAX_LAYERS = 10_000
# NB: an image side of 65,536 pixels (4 gigapixels a channel): beyond the largest images
# networks take whole (gigapixel slides are tiled); at 10^6 an activation is petabytes.
MAX_IMAGE_SIDE = 1 << 16
_INPUT_CEILINGS = {"layers": MAX_LAYERS, "image_size": MAX_IMAGE_SIDE}
# NB: a dataset's files are shuffled and sized as arrays once per epoch: 16.8 M files (more
# than ImageNet-21k's 14 M images; larger sets are sharded into fewer files) keeps that under
# a second and a few hundred MB.
MAX_DATASET_FILES = 1 << 24
MAX_DATASET_SAMPLES = 1 << 40  # 1.1e12 samples (LAION-5B has 5.9e9)
MAX_SIZE_CV = 100.0  # NB: a file-size spread above 100x its mean is not a size distribution
MAX_WAIT_MS = 3_600_000.0  # an hour
MAX_RATE_PER_S = 1e9
MIN_RATE_PER_S = 1e-6  # NB: slower than one request in 11 days is not a serving load


def input_ceiling(knob: str) -> int:
    """The largest value of the model input knob `knob` (MAX_INPUT unless it repeats layers)."""
    return _INPUT_CEILINGS.get(knob, MAX_INPUT)
