"""Speed and answer of the training plan (`accelsim plan TRAINING-SCENARIO`, issue 25): the
plan's branch and bound against the full grid (every configuration simulated, the best kept by
a plain loop), on real simulations.

Run: python benchmarks/speed/train_plan_speed.py [--write]   (--write: results/train_plan_speed.md)
Grid: resnet50-train (90 epochs of ImageNet) on dgx-h100 and hgx-h200, bf16, batch 64/128/256
per GPU, 4 or 8 GPUs a node, 1-32 nodes: 72 configurations, 30 steps simulated each; objectives
time-to-train under a 2-hour deadline, and the run's cost under a 1-hour deadline. CPU time in
process after imports.
"""

from __future__ import annotations

import os
import platform
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))  # the repo root: benchmarks.* and this checkout's accelsim
from accelsim.explore import plan_train  # noqa: E402
from accelsim.explore.plan_train import TrainLimits, make_train_plan  # noqa: E402
from benchmarks.report_io import emit  # noqa: E402

RESULTS = ROOT / "benchmarks" / "results" / "train_plan_speed.md"
HW, BATCHES, DEVICES, NODES = ["dgx-h100", "hgx-h200"], [64, 128, 256], [4, 8], [
    1, 2, 4, 8, 16, 32]
CASES = (("time-to-train", 2.0), ("cost", 1.0))  # (objective, deadline in hours)
EPOCHS = 90


def plan_of(objective: str, deadline_h: float, exhaustive: bool, workers: int = 1,
            resume: Path | None = None) -> tuple[float, object, float]:
    """(CPU seconds of this process, the plan, wall seconds); `exhaustive`: no bound prunes
    (the full grid); `workers`, `resume`: as `make_train_plan`'s."""
    saved = plan_train._optimistic
    if exhaustive:
        plan_train._optimistic = lambda row, key: None
    try:
        t0, w0 = time.process_time(), time.perf_counter()
        p = make_train_plan("resnet50-train", HW, BATCHES, ["bf16"], DEVICES, NODES, objective,
                            EPOCHS, TrainLimits(deadline_s=deadline_h * 3600.0), top=1,
                            workers=workers, resume=resume)
        return time.process_time() - t0, p, time.perf_counter() - w0
    finally:
        plan_train._optimistic = saved


def machinery_rows() -> list[str]:
    """The full grid of the cost case in 1 and 2 worker processes (wall seconds: the workers'
    CPU is not this process's), then stored in a resume file and run again from it."""
    rows = ["| the full grid (cost, 1 h) | simulated | read back | wall s | best |",
            "| --- | ---: | ---: | ---: | --- |"]
    best = None
    with tempfile.TemporaryDirectory() as tmp:
        store = Path(tmp) / "plan.sqlite"
        for label, workers, resume in (("1 process", 1, None), ("2 worker processes", 2, None),
                                       ("1 process, stored in a resume file", 1, store),
                                       ("the same again, from the resume file", 1, store)):
            _, p, wall_s = plan_of("cost", 1.0, True, workers, resume)
            best = best or key(p.best[0])
            same = "same" if key(p.best[0]) == best else f"DIFFERENT: {key(p.best[0])}"
            rows.append(f"| {label} | {p.simulated - p.resumed} | {p.resumed} | {wall_s:.1f} "
                        f"| {key(p.best[0])} ({same}) |")
    return rows


def key(row: dict) -> str:
    return f"{row['hardware']} b{row['batch']} {row['devices']}x{row['nodes']}"


def main() -> None:
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    rows = ["| objective | deadline | configurations | plan: simulated | plan CPU s | "
            "grid CPU s | plan's best | grid's best | same |",
            "| --- | ---: | ---: | ---: | ---: | ---: | --- | --- | --- |"]
    for objective, deadline_h in CASES:
        plan_s, p, _ = plan_of(objective, deadline_h, False)
        grid_s, g, _ = plan_of(objective, deadline_h, True)
        mine, want = p.best[0], g.best[0]
        field = plan_train.TRAIN_OBJECTIVES[objective][0]
        shown = {"time_to_train_s": lambda v: f"{v / 3600:.3f} h",
                 "usd_per_run": lambda v: f"${v:,.2f}"}[field]
        rows.append(f"| {objective} | {deadline_h:g} h | {len(p.rows)} | {p.simulated} "
                    f"({p.simulated / len(p.rows):.0%}) | {plan_s:.1f} | {grid_s:.1f} | "
                    f"{key(mine)}: {shown(mine[field])} | {key(want)}: {shown(want[field])} | "
                    f"{'yes' if key(mine) == key(want) else 'no'} |")
    text = "\n".join([
        "# Training plan: branch and bound against the full grid", "",
        f"`python benchmarks/speed/train_plan_speed.py --write` on {platform.machine()}, "
        f"{os.cpu_count()} CPUs, Python {platform.python_version()}; load average before "
        f"{load}. resnet50-train, {EPOCHS} epochs, on {', '.join(HW)}; batch {BATCHES} per "
        f"GPU; {DEVICES} GPUs a node; {NODES} nodes; bf16; 30 steps simulated a "
        "configuration. The grid: every configuration simulated.", "", *rows, "",
        "## On the sweep's machinery (workers, resume)", "",
        "The same grid in worker processes (`--workers`) and kept in a resume file "
        "(`--resume`): each configuration stored as it finishes, a rerun reads them back.", "",
        *machinery_rows(), "",
        f"Load average after {', '.join(f'{x:.2f}' for x in os.getloadavg())}.", ""])
    emit(text, RESULTS, sys.argv[1:])


if __name__ == "__main__":
    main()
