"""The headline of a simulation: its summary figures as typed records.

Two halves. `Figures` is what an engine writes: throughput, latency, energy, power and the
bottleneck of one run, computed once and put into the JSON record by `Figures.place`, the only
writer of those keys. `Headline` is what every reader gets: those figures with the memory fit
and, where the run has them, the serving, token-level (LLM) and training-pipeline figures, read
back from a record (`Headline.of`), so that `--json`, the terminal summary, the HTML report and
the flat sweep row all show the same numbers.

    h = Headline.of(run_simulation(cfg).record)
    h.figures.latency_s, h.memory.fits, h.tokens.ttft_s if h.tokens else None

Figures that do not apply are None (a run that does not fit has no throughput); a group a run
does not have (serving percentiles of a training run) is None as a whole.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from typing import Any

# The engines' JSON layouts reserve these keys where the figures belong (`reserve`).
RATE_KEYS = ("throughput_samples_per_s", "latency_s", "energy_j_per_sample", "average_power_w")
SPLIT_KEYS = ("device_power_w", "host_power_w", "device_energy_j_per_sample",
              "host_energy_j_per_sample")


@dataclass(frozen=True)
class PowerSplit:
    """Device and host CPU apart (an NPU that falls back to its host for some ops), W and
    J per sample; one batch on one device only (a pipeline run reports its parts instead)."""

    device_power_w: float | None
    host_power_w: float | None
    device_energy_j_per_sample: float | None
    host_energy_j_per_sample: float | None


@dataclass(frozen=True)
class Figures:
    """One run's headline figures, SI units; None where the run cannot happen."""

    throughput_samples_per_s: float | None
    latency_s: float | None  # per batch (infer), per step (train), mean per request (serve)
    energy_j_per_sample: float | None
    average_power_w: float | None
    bottleneck: str
    bottleneck_detail: str | None
    split: PowerSplit | None = None

    @property
    def samples_per_j(self) -> float | None:
        """Performance per watt: (samples/s) / W."""
        tput, power = self.throughput_samples_per_s, self.average_power_w
        return tput / power if tput is not None and power else None

    def place(self, record: dict[str, Any]) -> dict[str, Any]:
        """`record` with these figures at their keys: a key the record's layout already holds
        keeps its place, the others follow in field order. Without a split, the split keys
        (reserved by a device-level layout) are dropped."""
        for key in RATE_KEYS:
            record[key] = getattr(self, key)
        if self.split is None:
            for key in SPLIT_KEYS:
                record.pop(key, None)
        else:
            record.update(asdict(self.split))
        record["bottleneck"] = self.bottleneck
        record["bottleneck_detail"] = self.bottleneck_detail
        return record

    def as_dict(self) -> dict[str, Any]:
        """The figures as one flat dict in the record's order (the device-only block)."""
        out = {k: getattr(self, k) for k in RATE_KEYS} | {"bottleneck": self.bottleneck}
        return out | (asdict(self.split) if self.split is not None else {})


def reserve(with_split: bool = False) -> dict[str, None]:
    """The figures' keys, empty, for a record's layout to hold their places before
    `Figures.place` fills them (the JSON's key order is part of its contract)."""
    return dict.fromkeys(RATE_KEYS + (SPLIT_KEYS if with_split else ()))


@dataclass(frozen=True)
class MemoryFit:
    """Whether the run fits in device memory (per device), bytes."""

    fits: bool
    required_bytes: float
    capacity_bytes: float | None
    largest_batch_that_fits: int | None


@dataclass(frozen=True)
class ServingFigures:
    """Request latency percentiles of a server, s, and the load offered (None: closed loop
    or a decoder server)."""

    latency_p50_s: float | None
    latency_p95_s: float | None
    latency_p99_s: float | None
    offered_load: float | None


@dataclass(frozen=True)
class TokenFigures:
    """A decoder at the token level (`accelsim.llm`): one batch (ttft_s, tpot_s), a server
    (the percentiles, goodput) or a training step (tokens_per_s, mfu); None where not given."""

    ttft_s: float | None = None
    tpot_s: float | None = None
    tokens_per_s: float | None = None
    kv_cache_bytes: float | None = None
    mfu: float | None = None
    ttft_p50_s: float | None = None
    ttft_p99_s: float | None = None
    tpot_p50_s: float | None = None
    tpot_p99_s: float | None = None
    goodput_requests_per_s: float | None = None
    energy_j_per_token: float | None = None


@dataclass(frozen=True)
class TrainingFigures:
    """The storage-to-accelerator training pipeline: AU, the stall shares by cause, the
    simulated run time and one all-reduce, s."""

    accelerator_utilization: float
    stalls: dict[str, float]  # cause -> share of the run's step time
    run_time_s: float
    allreduce_time_s: float


@dataclass(frozen=True)
class Headline:
    """The typed summary of one simulation record (what every renderer reads)."""

    figures: Figures
    memory: MemoryFit
    serving: ServingFigures | None = None
    tokens: TokenFigures | None = None
    training: TrainingFigures | None = None

    @classmethod
    def of(cls, record: dict[str, Any]) -> Headline:
        """The headline of a record (`accelsim.sim.spec.SimulationResult.record`, or its JSON
        read back)."""
        split = (PowerSplit(*(record[k] for k in SPLIT_KEYS))
                 if all(k in record for k in SPLIT_KEYS) else None)
        figures = Figures(*(record[k] for k in RATE_KEYS), record["bottleneck"],
                          record.get("bottleneck_detail"), split)
        mem = record["memory"]
        memory = MemoryFit(bool(mem["fits"]), mem["required_bytes"], mem["capacity_bytes"],
                           mem.get("largest_batch_that_fits"))
        serving = (ServingFigures(*(record[f.name] for f in fields(ServingFigures)))
                   if all(f.name in record for f in fields(ServingFigures)) else None)
        token_keys = [f.name for f in fields(TokenFigures)
                      if f.name in record and f.name != "energy_j_per_token"]
        tokens = (TokenFigures(**{k: record[k] for k in token_keys},
                               energy_j_per_token=record.get("energy_j_per_token"))
                  if token_keys else None)
        training = (TrainingFigures(record["accelerator_utilization"],
                                    {k: v["fraction"] for k, v in record["stalls"].items()},
                                    record["run_time_s"], record["allreduce_time_s"])
                    if "stalls" in record else None)
        return cls(figures, memory, serving, tokens, training)
