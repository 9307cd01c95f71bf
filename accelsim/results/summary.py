"""One flat row per simulation: the columns compare and sweep tables share.

    row = flat_row(run_simulation(cfg).record)    # {"device": "a100", "throughput_...": ...}
    frame = pd.DataFrame([row, ...], columns=ROW_COLUMNS)

Figures that do not apply (a run that does not fit, AU of an inference batch) are None, so a
table never mixes real numbers with placeholders. `samples_per_j` is performance per watt:
(samples/s) / W. `device_power_w` and `host_power_w` split `average_power_w` where an NPU falls
back to its host CPU (inference only: a pipeline run reports its parts in the record).
"""

from __future__ import annotations

from dataclasses import asdict
from typing import TYPE_CHECKING, Any

from accelsim.results.headline import Headline

if TYPE_CHECKING:
    import pandas as pd

IDENTITY = ("workload", "mode", "device", "device_class", "system", "software", "precision",
            "compute_precision", "batch_size", "devices")
METRICS = ("throughput_samples_per_s", "latency_s", "energy_j_per_sample", "average_power_w",
           "device_power_w", "host_power_w", "samples_per_j", "fits", "required_bytes",
           "capacity_bytes", "largest_batch_that_fits", "bottleneck", "bottleneck_detail")
TRAIN_METRICS = ("accelerator_utilization", "stall_fetch", "stall_prep", "stall_transfer",
                 "stall_slowest_device", "stall_communication", "run_time_s",
                 "allreduce_time_s")
SERVE_METRICS = ("latency_p50_s", "latency_p95_s", "latency_p99_s", "offered_load")
# Decoders at the token level (`accelsim.llm`): one batch (ttft_s ... mfu) or a server.
LLM_METRICS = ("ttft_s", "tpot_s", "tokens_per_s", "kv_cache_bytes", "mfu", "ttft_p50_s",
               "ttft_p99_s", "tpot_p50_s", "tpot_p99_s", "goodput_requests_per_s")
ROW_COLUMNS = (IDENTITY + METRICS + TRAIN_METRICS + SERVE_METRICS + LLM_METRICS
               + ("notes", "error"))
# The figures that are numbers whenever they apply (the rest: names, text and `fits`).
NUMBER_COLUMNS = tuple(c for c in METRICS + TRAIN_METRICS + SERVE_METRICS + LLM_METRICS
                       if c not in ("fits", "bottleneck", "bottleneck_detail"))


def flat_row(record: dict[str, Any]) -> dict[str, Any]:
    """The row of one simulation record (`accelsim.sim.spec.SimulationResult.record`): its
    identity and its `Headline`."""
    w, hw = record["workload"], record["hardware"]
    head = Headline.of(record)
    fig, mem, split = head.figures, head.memory, head.figures.split
    row: dict[str, Any] = dict.fromkeys(ROW_COLUMNS)
    row.update(
        workload=w["name"], mode=w["mode"], device=hw["name"], device_class=hw["class"],
        system=hw.get("system"), software=hw["software"], precision=w["precision"],
        compute_precision=hw.get("compute_precision", w["precision"]),
        batch_size=w["batch_size"], devices=record.get("devices", 1),
        throughput_samples_per_s=fig.throughput_samples_per_s, latency_s=fig.latency_s,
        energy_j_per_sample=fig.energy_j_per_sample, average_power_w=fig.average_power_w,
        device_power_w=None if split is None else split.device_power_w,
        host_power_w=None if split is None else split.host_power_w,
        samples_per_j=fig.samples_per_j, fits=mem.fits, required_bytes=mem.required_bytes,
        capacity_bytes=mem.capacity_bytes, largest_batch_that_fits=mem.largest_batch_that_fits,
        bottleneck=fig.bottleneck, bottleneck_detail=fig.bottleneck_detail,
        notes="; ".join(record.get("notes", [])) or None)
    if head.training is not None:
        t = head.training
        row.update({f"stall_{k}": v for k, v in t.stalls.items()})
        row.update(accelerator_utilization=t.accelerator_utilization, run_time_s=t.run_time_s,
                   allreduce_time_s=t.allreduce_time_s)
    if head.serving is not None:
        row.update(asdict(head.serving))
    if head.tokens is not None:
        row.update({k: v for k, v in asdict(head.tokens).items() if k in LLM_METRICS})
    return row


def error_row(message: str, **identity: Any) -> dict[str, Any]:
    """The row of a point that failed: what was asked for, and the error; figures None."""
    row: dict[str, Any] = dict.fromkeys(ROW_COLUMNS)
    row.update({k: v for k, v in identity.items() if k in row})
    row["error"] = message
    return row


def notebook_frame(frame: pd.DataFrame, all_columns: bool = False,
                   keep: tuple[str, ...] = ()) -> pd.DataFrame:
    """`frame` fit for a notebook: every column whose values are all numbers (None among
    them), and every figure of `NUMBER_COLUMNS` even where None in every row, numeric, None as
    NaN (ints with a None become floats); the columns that are None in every row dropped
    unless `all_columns` (or named in `keep`). `attrs` are kept."""
    import pandas as pd

    out = frame.copy()
    for name in out.columns:
        col = out[name]
        if col.dtype != object:
            continue
        values = col.dropna()
        if not len(values) and not all_columns and name not in keep:
            out = out.drop(columns=name)
        elif (len(values) or name in NUMBER_COLUMNS) and all(
                isinstance(v, int | float) and not isinstance(v, bool) for v in values):
            numbers = pd.to_numeric(col)
            out[name] = numbers if len(values) else numbers.astype("float64")
    return out
