"""Speed of the workload layer (issue: describe well under a second; a functional fp32
resnet50 forward at batch 1 in at most a few seconds on 2 cores).

Run: python benchmarks/speed/workload_speed.py [--write]
(--write updates results/workload_speed.md).
Measures, per zoo model: building the graph and its per-layer table in a fresh process
(`accelsim describe MODEL --json`, wall time incl. interpreter start), and in-process after
imports; then the functional fp32 forward of resnet50 at batch 1 (median of 3 warm runs).
"""

from __future__ import annotations

import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))  # the repo root: benchmarks.* and this checkout's accelsim
from accelsim.kernels.execute import run_graph  # noqa: E402
from accelsim.workload import tables  # noqa: E402
from accelsim.workload.tables import layer_table  # noqa: E402
from accelsim.workload.zoo import _build, build_model, model_names  # noqa: E402

RESULTS = ROOT / "benchmarks" / "results" / "workload_speed.md"


def describe_in_process_s(name: str) -> float:
    _build.cache_clear()
    tables._tables.cache_clear()
    t0 = time.perf_counter()
    layer_table(build_model(name), 1, "fp32")
    return time.perf_counter() - t0


def describe_cli_s(name: str) -> float:
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-m", "accelsim.cli", "describe", name, "--json"],
                   check=True, capture_output=True)
    return time.perf_counter() - t0


def main() -> None:
    lines = ["| model | ops | describe in-process (s) | `accelsim describe --json` (s) |",
             "| --- | --- | --- | --- |"]
    for name in model_names():
        ops = len(build_model(name).ops)
        lines.append(f"| {name} | {ops} | {describe_in_process_s(name):.4f} | "
                     f"{describe_cli_s(name):.3f} |")
    graph = build_model("resnet50")
    run_graph(graph, 1, "fp32")  # warm up
    runs = []
    for _ in range(3):
        t0 = time.perf_counter()
        run_graph(graph, 1, "fp32")
        runs.append(time.perf_counter() - t0)
    lines.append("")
    lines.append(f"Functional fp32 forward of resnet50 at batch 1: median "
                 f"{statistics.median(runs):.3f} s over 3 warm runs.")
    report = "\n".join(lines)
    print(report)
    if "--write" in sys.argv:
        RESULTS.write_text(
            "# Workload layer speed\n\n"
            f"Measured {time.strftime('%Y-%m-%d')} on {platform.processor() or platform.machine()}"
            f", Python {platform.python_version()}, with `python "
            f"benchmarks/speed/workload_speed.py "
            f"--write`.\nThe CLI column includes interpreter start-up and imports.\n\n"
            + report + "\n")


if __name__ == "__main__":
    main()
