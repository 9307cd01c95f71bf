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
from typing import Any

from accelsim.results.headline import Headline

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
