"""Speed of `accelsim sweep` (issue: a 1,000-point single-device inference sweep, no event
simulation, in at most 10 s on 2 cores; a 100-point training sweep with event simulation in
points per second, at 1 and 2 workers).

Run: python benchmarks/speed/sweep_speed.py [--write]   (--write updates results/sweep_speed.md)
Each sweep is the whole command in a fresh process (`accelsim sweep ... --quiet --csv`),
interpreter start-up and imports included, with the CPU time of all its processes; the
inference sweep is the median of 3 runs, the training sweep one run. Every point must
succeed. The load average is recorded with the result: on a shared machine, other work slows
the figures down.
"""

from __future__ import annotations

import os
import platform
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))  # the repo root: benchmarks.* and this checkout's accelsim
from benchmarks.report_io import cpu_name  # noqa: E402

RESULTS = ROOT / "benchmarks" / "results" / "sweep_speed.md"
INFER = ["resnet50", "--hw", "a100,h100,v100,t4,l4", "--precision", "fp16,fp32",
         "--batch", "1,2,...,100"]  # 5 x 2 x 100 = 1,000 points, one device each
TRAIN = ["resnet50-train", "--hw", "dgx-a100", "--devices", "1,2,4,8",
         "--prep-workers", "1,2,4,8,16", "--batch", "32,64,128,256,512",
         "--steps", "10"]  # 4 x 5 x 5 = 100 points, the pipeline simulated for 10 steps
LIMIT_S = 10.0


def run_s(args: list[str], workers: int, points: int) -> tuple[float, float]:
    """(wall time, CPU time of all its processes) of one `accelsim sweep` command, seconds;
    checks every point has a row and no error."""
    with tempfile.TemporaryDirectory() as tmp:
        csv = Path(tmp) / "sweep.csv"
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-m", "accelsim.cli", "sweep", *args, "--workers",
                        str(workers), "--quiet", "--csv", str(csv)], check=True,
                       stdout=subprocess.DEVNULL)
        wall_s = time.perf_counter() - t0
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        df = pd.read_csv(csv)
    if len(df) != points or df["error"].notna().any():
        raise SystemExit(f"sweep {' '.join(args)}: {len(df)} rows, "
                         f"{int(df['error'].notna().sum())} errors")
    return wall_s, (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)


def machine() -> str:
    cpu = cpu_name()
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    return (f"{cpu}, {os.cpu_count()} cores, {platform.system()} {platform.machine()}, "
            f"Python {platform.python_version()}; load average before the runs {load}")


def main() -> None:
    where = machine()
    lines = ["| sweep | points | workers | wall time (s) | CPU time (s) | points/s | limit |",
             "| --- | --- | --- | --- | --- | --- | --- |"]
    for workers in (1, 2):
        runs = sorted(run_s(INFER, workers, 1000) for _ in range(3))
        wall_s, cpu_s = runs[1]  # the median run by wall time
        verdict = "ok" if wall_s <= LIMIT_S else "OVER"
        lines.append(f"| inference, resnet50 | 1,000 | {workers} | {wall_s:.2f} | {cpu_s:.2f} "
                     f"| {1000 / wall_s:,.0f} | {LIMIT_S:.0f} s: {verdict} |")
    for workers in (1, 2):
        wall_s, cpu_s = run_s(TRAIN, workers, 100)
        lines.append(f"| training, resnet50 on dgx-a100, 10 steps | 100 | {workers} "
                     f"| {wall_s:.2f} | {cpu_s:.2f} | {100 / wall_s:.1f} | - |")
    report = "\n".join(lines)
    print(where)
    print(report)
    if "--write" in sys.argv:
        RESULTS.write_text(
            "# `accelsim sweep` speed\n\n"
            f"Measured {time.strftime('%Y-%m-%d')} on {where}, with "
            "`python benchmarks/speed/sweep_speed.py --write`.\nWall time of the whole command "
            "(interpreter start-up and imports included) and the CPU time of all its processes;\n"
            "inference: the median of 3 runs. CPU time near wall time with 2 workers means "
            "the second core was busy with other work.\n\n"
            f"- inference: `accelsim sweep {' '.join(INFER)}`\n"
            f"- training: `accelsim sweep {' '.join(TRAIN)}`\n\n" + report + "\n")


if __name__ == "__main__":
    main()
