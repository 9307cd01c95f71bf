"""A transformer's inference over batches of varied sequence lengths (`cfg.seq_lens`): each
batch padded to its longest sequence, or run packed where the stack removes padding.

    res = run_seq_mix(cfg, detail)   # cfg.seq_lens set; the record's headline is the mix's

The lengths form batches in their order (`accelsim.workload.seq_lens.batches`). The one-batch
estimate runs at a grid of lengths (`length_grid`) and each batch's step time and energy are
interpolated on it:
- padded ("batch-max"): a batch costs one batch at its longest length;
- packed ("removed", as TensorRT's variable-length BERT plugins): the token-wise layers see
  the batch's own tokens, i.e. a batch at the mean length m, and each attention layer, whose
  cost grows with the square of a sequence's length, is scaled by E[L^2] / m^2 (NB: the
  attention rows' time taken as proportional to their FLOPs; a packed batch's kernels assumed
  as efficient as a padded batch's at the mean length).
Throughput, mean latency, the latency percentiles over batches and energy are the mix's; the
layer table, memory, bottleneck and clock are those of the batches at the longest length (the
worst case the device must hold), said in a note.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from accelsim.errors import AccelsimError
from accelsim.profiles.hardware import resolve_hardware
from accelsim.profiles.stack_choice import resolve_software
from accelsim.sim.spec import SimulationConfig, SimulationResult
from accelsim.workload.seq_lens import batches, length_grid

PADDINGS = ("batch-max", "removed")
_ENERGY_KEYS = ("energy_j_per_sample", "device_energy_j_per_sample", "host_energy_j_per_sample")


def default_padding(cfg: SimulationConfig) -> tuple[str, str]:
    """The padding of `cfg`'s run and whose choice it is ("the run's" or the stack's name)."""
    if cfg.padding is not None:
        if cfg.padding not in PADDINGS:
            raise AccelsimError(f"knob 'padding' = {cfg.padding!r}: choose one of "
                                f"{', '.join(PADDINGS)}")
        return cfg.padding, "the run's"
    _, profile = resolve_hardware(cfg.hardware)
    stack = resolve_software(cfg.software, profile.device_class)[0]
    return ("removed" if stack.removes_padding else "batch-max"), f"{stack.name}'s default"


def _at(cfg: SimulationConfig, seq_len: int, detail: bool) -> dict[str, Any]:
    from accelsim.sim.api import run_pipeline

    sc = cfg.scenario.with_overrides(input={"seq_len": int(seq_len)})
    one = dataclasses.replace(cfg, scenario=sc, seq_lens=None, padding=None)
    return run_pipeline(one, detail).record


def _attention_s(record: dict[str, Any]) -> float:
    return float(sum(r["time_s"] for r in record["layers"] if r["op"] == "attention"))


def run_seq_mix(cfg: SimulationConfig, detail: bool = True) -> SimulationResult:
    """Run `cfg` (inference of a model with a `seq_len` input, `cfg.seq_lens` set) over its
    batches of lengths; see the module docstring."""
    assert cfg.seq_lens is not None
    padding, whose = default_padding(cfg)
    batch = cfg.scenario.batch_size
    groups = batches(cfg.seq_lens.lengths, batch)
    need = groups.max(axis=1) if padding == "batch-max" else groups.mean(axis=1)
    grid = length_grid(np.concatenate([need, groups.max(axis=1)]))
    # layers are needed for the attention share of a packed batch and for the detail table
    runs = {s: _at(cfg, s, detail or padding == "removed") for s in grid}
    if any(not r["memory"]["fits"] for r in runs.values()):
        worst = runs[grid[-1]]
        worst["notes"] = [*worst["notes"], f"sequence lengths from {cfg.seq_lens.source}: "
                          f"a batch of {batch} at the longest, {grid[-1]} tokens, does not fit"]
        return SimulationResult(worst)
    xs = np.asarray(grid, dtype=float)

    def interp(key: Any) -> np.ndarray:
        ys = np.asarray([key(runs[s]) for s in grid], dtype=float)
        return np.interp(need, xs, ys)

    step_s = interp(lambda r: r["latency_s"])
    scale = np.ones(len(groups))
    if padding == "removed":
        mean_len = groups.mean(axis=1)
        sq = (groups.astype(float) ** 2).mean(axis=1)
        attention_s = interp(_attention_s)
        packed_s = step_s + attention_s * (sq / mean_len**2 - 1.0)
        scale = packed_s / step_s
        step_s = packed_s
    # NB: a batch's energy scales with its time at the interpolated length's average power
    energy = {k: interp(lambda r, k=k: r[k] or 0.0) * scale for k in _ENERGY_KEYS}
    record = dict(runs[grid[-1]])
    total_s = float(step_s.sum())
    samples = batch * len(groups)
    tokens = int(groups.sum())
    computed = (int(groups.max(axis=1).sum()) * batch if padding == "batch-max" else tokens)
    record["throughput_samples_per_s"] = samples / total_s
    record["latency_s"] = float(step_s.mean())
    for key in _ENERGY_KEYS:
        record[key] = float(energy[key].mean())
    joules = record["energy_j_per_sample"] * samples
    record["average_power_w"] = joules / total_s
    for part in ("device", "host"):
        record[f"{part}_power_w"] = (record[f"{part}_energy_j_per_sample"] * samples / total_s)
    summary = cfg.seq_lens.summary()
    record["sequence_lengths"] = {
        **summary, "padding": padding, "padding_choice": whose, "batches": len(groups),
        "tokens": tokens, "tokens_computed": computed,
        "padding_share": 1.0 - tokens / computed,
        "latency_p50_s": float(np.percentile(step_s, 50)),
        "latency_p99_s": float(np.percentile(step_s, 99)),
        "lengths_estimated": list(grid)}
    how = ("padded to its longest sequence" if padding == "batch-max" else
           "packed (padding removed)")
    record["notes"] = [*record["notes"], (
        f"sequence lengths: {summary['sequences']:,} from {summary['source']} (mean "
        f"{summary['mean']:.0f}, p99 {summary['p99']:.0f}, longest {summary['max']} tokens), "
        f"{len(groups):,} batches of {batch}, each {how} ({whose}); "
        f"{record['sequence_lengths']['padding_share']:.0%} of the tokens computed are "
        f"padding; throughput, latency and energy over those batches, the layer table, "
        f"memory and bottleneck at {grid[-1]} tokens")]
    if not detail:
        record["layers"] = []
    return SimulationResult(record)
