"""Speed of the training pipeline simulation (issues: a full ImageNet epoch of resnet50 training
on dgx-a100, 1.28 M samples, simulates in at most 1 s of CPU on a 2-core machine (issue 22
item 3; 5 s before it); a 64-node (512-GPU) run of 100 steps in at most 10 s).

Run: python benchmarks/speed/pipeline_speed.py [--write] [--repeat N] [--baseline DIR]
(--write updates results/pipeline_speed.md; --baseline times the two epochs of another
checkout, e.g. `git archive` of an older commit, in the same conditions, one run of each
before every run of this one's, and adds them as "before" rows). Simulates one full epoch
(every batch, not extrapolated) of the `resnet50-train` scenario (imagenet-raw: one JPEG per
sample) and of the same on imagenet-records (1024 shards) on dgx-a100, and 100 steps of it on
64 dgx-a100 nodes (`nodes` = 64: one node simulated, the hierarchical all-reduce across all),
with the real GPU cost model when it imports and runs, else the null device at a fixed 0.5 ms
per op (said in the output). Wall and CPU time (the process's) are in-process, after imports,
medians of N runs; the cost model's estimates are included.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import subprocess
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
from benchmarks.report_io import cpu_name  # noqa: E402
from benchmarks.speed.startup import load, simpy_reference  # noqa: E402

RESULTS = ROOT / "benchmarks" / "results" / "pipeline_speed.md"
NULL_OP_TIME_S = 5e-4
TARGET_S = 1.0  # CPU seconds, one epoch
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


# One epoch in a fresh interpreter of another checkout (`--baseline`): prints wall and CPU s.
BASELINE_RUN = """
import sys, time
sys.path.insert(0, ".")
from accelsim.profiles.systems import load_system
from accelsim.sim.config import TrainConfig
from accelsim.sim.run import simulate_training
from accelsim.workload.scenario import resolve_workload
sc, system = resolve_workload("resnet50-train"), load_system("dgx-a100")
simulate_training(TrainConfig(sc, system, steps=1))
ds = sys.argv[1] or None
w0, c0 = time.perf_counter(), time.process_time()
simulate_training(TrainConfig(sc, system, dataset=ds, epochs=1))
print(time.perf_counter() - w0, time.process_time() - c0)
"""


def baseline_epoch_s(checkout: Path, dataset: str | None) -> tuple[float, float]:
    """(wall s, CPU s) of one epoch simulated by the accelsim of `checkout` (the GPU model)."""
    out = subprocess.run([sys.executable, "-c", BASELINE_RUN, dataset or ""], cwd=checkout,
                         capture_output=True, text=True, check=True).stdout.split()
    return float(out[0]), float(out[1])


def reference_cpu_s() -> float:
    """CPU seconds of the fixed reference (100,000 bare SimPy timeouts, `startup.py`)."""
    c0 = time.process_time()
    simpy_reference()
    return time.process_time() - c0


def time_epoch(dataset: str | None, profile: Any, repeat: int, baseline: Path | None = None
               ) -> tuple[float, float, float, TrainResult, tuple[float, float] | None]:
    """Medians of (wall s, CPU s, CPU / the reference run just before it) of one epoch, its
    result, and the baseline's medians (None without one), their runs interleaved."""
    sc, system = resolve_workload("resnet50-train"), load_system("dgx-a100")
    walls, cpus, ratios, before, res = [], [], [], [], None
    for _ in range(repeat):
        if baseline is not None:
            before.append(baseline_epoch_s(baseline, dataset))
        ref_s = reference_cpu_s()
        t0, c0 = time.perf_counter(), time.process_time()
        res = simulate_training(TrainConfig(sc, system, dataset=dataset, epochs=1,
                                            device_profile=profile))
        walls.append(time.perf_counter() - t0)
        cpus.append(time.process_time() - c0)
        ratios.append(cpus[-1] / ref_s)
    assert res is not None
    old = ((statistics.median(b[0] for b in before), statistics.median(b[1] for b in before))
           if before else None)
    return (statistics.median(walls), statistics.median(cpus), statistics.median(ratios), res,
            old)


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
    ap.add_argument("--baseline", type=Path, default=None,
                    help="another checkout whose epochs to time alongside (the 'before' rows)")
    ap.add_argument("--baseline-label", default="",
                    help="what the baseline is (a commit), said in the written file")
    args = ap.parse_args()
    profile, which = device_choice()
    lines = [f"Device model: {which}.", "",
             "| dataset | samples | steps | records | wall (s) | CPU (s) | x reference | "
             "simulated run (s) | samples/s | AU | bottleneck |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    worst, before, load_before = 0.0, [], load()
    for dataset in (None, "imagenet-records"):
        wall, cpu, ratio, res, old = time_epoch(dataset, profile, args.repeat, args.baseline)
        worst = max(worst, cpu)
        lines.append(f"| {res.dataset} | {res.samples} | {res.steps} | {len(res.records)} | "
                     f"{wall:.2f} | {cpu:.2f} | {ratio:.1f} | {res.run_time_s:.1f} | "
                     f"{res.throughput_samples_per_s:.0f} | {res.accelerator_utilization:.3f} | "
                     f"{res.bottleneck} |")
        if old is not None:
            before.append(f"| {res.dataset}, before | | | | {old[0]:.2f} | {old[1]:.2f} | | | | "
                          "| |")
    lines[4:4] = before
    wall_n, res = time_nodes(profile, args.repeat)
    lines.append(f"| {res.dataset}, {NODES} nodes x 8 GPUs | {res.samples} | {res.steps} | "
                 f"{len(res.records)} | {wall_n:.2f} | | | {res.run_time_s:.1f} | "
                 f"{res.throughput_samples_per_s:.0f} | {res.accelerator_utilization:.3f} | "
                 f"{res.bottleneck} |")
    lines += ["", f"Slowest epoch: {worst:.2f} s of CPU against a target of {TARGET_S:g} s "
              f"({'met' if worst <= TARGET_S else 'NOT met'}); {NODES} nodes, {NODE_STEPS} "
              f"steps: {wall_n:.2f} s against {NODES_TARGET_S:g} s "
              f"({'met' if wall_n <= NODES_TARGET_S else 'NOT met'}). 'x reference': the epoch's "
              "CPU over that of 100,000 bare SimPy timeouts run just before it (read it on a "
              f"loaded machine). Load average before {load_before}; after {load()}."]
    table = "\n".join(lines)
    print(table)
    if args.write:
        machine = (f"{cpu_name()}, {platform.python_implementation()} "
                   f"{platform.python_version()}, {os.cpu_count()} CPUs, {platform.machine()}")
        RESULTS.write_text(
            "# Training pipeline simulation speed\n\n"
            "`python benchmarks/speed/pipeline_speed.py --write`: one full epoch of "
            "`resnet50-train` "
            "on `dgx-a100` (8 accelerators, global batch 2048), every batch simulated, and "
            f"{NODE_STEPS} steps on {NODES} such nodes (512 GPUs: one node simulated, the "
            "all-reduce across all); wall and CPU "
            f"time in-process after imports, median of {args.repeat} runs."
            + (" Rows 'before': the same epochs simulated by "
               f"{args.baseline_label or 'the baseline'}, each in a fresh interpreter, its "
               "runs interleaved with these."
               if args.baseline is not None else "")
            + f"\n\nMachine: {machine}.\n\n{table}\n")


if __name__ == "__main__":
    main()
