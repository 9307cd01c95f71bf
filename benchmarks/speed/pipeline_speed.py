"""Speed of the training pipeline simulation (issues: a full ImageNet epoch of resnet50 training
on dgx-a100, 1.28 M samples, simulates in at most 5 s on a 2-core machine; a 64-node (512-GPU)
run of 100 steps in at most 10 s).

Run: python benchmarks/speed/pipeline_speed.py [--write] [--repeat N]
(--write updates results/pipeline_speed.md). Simulates one full epoch (every batch, not
extrapolated) of the `resnet50-train` scenario (imagenet-raw: one JPEG per sample) and of the
same on imagenet-records (1024 shards) on dgx-a100, and 100 steps of it on 64 dgx-a100 nodes
(`nodes` = 64: one node simulated, the hierarchical all-reduce across all), with the real GPU
cost model when it imports and runs, else the null device at a fixed 0.5 ms per op (said in
the output). Wall time is in-process, after imports, median of N runs; the cost model's
estimates are included.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))  # the repo root: benchmarks.* and this checkout's accelsim
from accelsim.devices.null import NullProfile  # noqa: E402
from accelsim.errors import AccelsimError  # noqa: E402
from accelsim.profiles.systems import load_system  # noqa: E402
from accelsim.sim.config import TrainConfig  # noqa: E402
from accelsim.sim.run import TrainResult, simulate_training  # noqa: E402
from accelsim.workload.scenario import resolve_workload  # noqa: E402

RESULTS = ROOT / "benchmarks" / "results" / "pipeline_speed.md"
NULL_OP_TIME_S = 5e-4
TARGET_S = 5.0  # one epoch
NODES, NODE_STEPS, NODES_TARGET_S = 64, 100, 10.0


def device_choice() -> tuple[Any, str]:
    """(device_profile override, description): None = the system's a100 via its cost model."""
    sc, system = resolve_workload("resnet50-train"), load_system("dgx-a100")
    try:
        simulate_training(TrainConfig(sc, system, steps=1))
        return None, "a100 (GPU cost model)"
    except (AccelsimError, ImportError, AttributeError, KeyError) as err:
        return (NullProfile(op_time_s=NULL_OP_TIME_S),
                f"null device, {NULL_OP_TIME_S * 1e3:g} ms per op (GPU model unusable: {err})")


def time_epoch(dataset: str | None, profile: Any, repeat: int) -> tuple[float, TrainResult]:
    sc, system = resolve_workload("resnet50-train"), load_system("dgx-a100")
    walls, res = [], None
    for _ in range(repeat):
        t0 = time.perf_counter()
        res = simulate_training(TrainConfig(sc, system, dataset=dataset, epochs=1,
                                            device_profile=profile))
        walls.append(time.perf_counter() - t0)
    assert res is not None
    return statistics.median(walls), res


def time_nodes(profile: Any, repeat: int) -> tuple[float, TrainResult]:
    sc, system = resolve_workload("resnet50-train"), load_system("dgx-a100")
    walls, res = [], None
    for _ in range(repeat):
        t0 = time.perf_counter()
        res = simulate_training(TrainConfig(sc, system, nodes=NODES, steps=NODE_STEPS,
                                            device_profile=profile))
        walls.append(time.perf_counter() - t0)
    assert res is not None
    return statistics.median(walls), res


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--write", action="store_true")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    profile, which = device_choice()
    lines = [f"Device model: {which}.", "",
             "| dataset | samples | steps | records | wall (s) | simulated run (s) | "
             "samples/s | AU | bottleneck |", "| --- | --- | --- | --- | --- | --- | --- | --- "
             "| --- |"]
    worst = 0.0
    for dataset in (None, "imagenet-records"):
        wall, res = time_epoch(dataset, profile, args.repeat)
        worst = max(worst, wall)
        lines.append(f"| {res.dataset} | {res.samples} | {res.steps} | {len(res.records)} | "
                     f"{wall:.2f} | {res.run_time_s:.1f} | {res.throughput_samples_per_s:.0f} "
                     f"| {res.accelerator_utilization:.3f} | {res.bottleneck} |")
    wall_n, res = time_nodes(profile, args.repeat)
    lines.append(f"| {res.dataset}, {NODES} nodes x 8 GPUs | {res.samples} | {res.steps} | "
                 f"{len(res.records)} | {wall_n:.2f} | {res.run_time_s:.1f} | "
                 f"{res.throughput_samples_per_s:.0f} | {res.accelerator_utilization:.3f} | "
                 f"{res.bottleneck} |")
    lines += ["", f"Slowest epoch: {worst:.2f} s against a target of {TARGET_S:g} s "
              f"({'met' if worst <= TARGET_S else 'NOT met'}); {NODES} nodes, {NODE_STEPS} "
              f"steps: {wall_n:.2f} s against {NODES_TARGET_S:g} s "
              f"({'met' if wall_n <= NODES_TARGET_S else 'NOT met'})."]
    table = "\n".join(lines)
    print(table)
    if args.write:
        machine = (f"{platform.python_implementation()} {platform.python_version()}, "
                   f"{os.cpu_count()} CPUs, {platform.machine()}")
        RESULTS.write_text(
            "# Training pipeline simulation speed\n\n"
            "`python benchmarks/speed/pipeline_speed.py --write`: one full epoch of "
            "`resnet50-train` "
            "on `dgx-a100` (8 accelerators, global batch 2048), every batch simulated, and "
            f"{NODE_STEPS} steps on {NODES} such nodes (512 GPUs: one node simulated, the "
            "all-reduce across all); wall "
            f"time in-process after imports, median of {args.repeat} runs.\n\n"
            f"Machine: {machine}.\n\n{table}\n")


if __name__ == "__main__":
    main()
