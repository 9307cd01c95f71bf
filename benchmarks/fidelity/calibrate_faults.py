"""Trace the GEMM sweep rows of benchmarks/fidelity/calibrate_host.py that miss 15%: fresh-page
faults.

Run: python benchmarks/fidelity/calibrate_faults.py [--reps R]
Writes results/calibrate_faults.md.

For each GEMM (the sweep's misses and some rows that pass) and precision, in child processes
(BLAS on one thread, process CPU time, as the sweep): the least of 5 forward passes
(`kernels.execute.time_graph`'s protocol, the sweep's and calibration's) and the minor page
faults in the timed call (getrusage ru_minflt; the median of passes 2 to 5), under glibc's
default allocator and with its mmap and heap trimming turned off (mallopt M_MMAP_THRESHOLD =
1 GiB, M_TRIM_THRESHOLD = 1 TiB: no temporary is then fresh after the first pass). The
difference is what fresh pages cost the row; beside it, the model's fault term
(`devices.cpu.alloc`: temporaries at or above 32 MiB x the time per page measured as
`accelsim calibrate` measures it). The two allocator modes alternate per row, `--reps`
times, and each keeps its least, so that load from other processes spoils both alike.
This is a diagnostic: the sweep itself runs the default. Last, the cost per element of the
bf16 rounding (`formats.round_to_format`, the narrow-float kernels' weight cast) of fresh
fp32 arrays from 0.5 M to 8 M elements: the least of 5, process CPU time.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))  # the repo root: benchmarks.* and this checkout's accelsim

OUT = ROOT / "benchmarks" / "results" / "calibrate_faults.md"
ROWS = (("fp32", (1, 2048, 1024)), ("fp32", (2, 1024, 2048)), ("fp32", (8, 1024, 1024)),
        ("fp32", (32, 2048, 2048)), ("fp32", (768, 3072, 768)),
        ("bf16", (16, 3072, 768)), ("bf16", (32, 2048, 2048)), ("bf16", (768, 3072, 768)),
        ("bf16", (8, 1024, 1024)), ("bf16", (1, 1024, 4096)),
        ("int8", (8, 1024, 1024)), ("int8", (32, 2048, 2048)), ("int8", (16, 3072, 768)),
        ("int8", (1, 1024, 4096)))
CHILD = r"""
import ctypes, json, os, resource, sys, time
if sys.argv[1] == "off":
    libc = ctypes.CDLL("libc.so.6")
    assert libc.mallopt(-3, 1 << 30) == 1 and libc.mallopt(-1, 1 << 40) == 1
from accelsim.kernels.execute import _execute
from accelsim.formats import get_format
from accelsim.workload.graph import GraphBuilder
m, k, n = map(int, sys.argv[3].split("x"))
g = GraphBuilder("g")
g.linear(g.input("x", (k,)), out_features=n, bias=False, name="op")
graph = g.build()
calls, at = [], {}
def flt():
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt
def start(op, params):
    at["f"], at["t"] = flt(), time.process_time()
def stop(op, outs):
    calls.append((time.process_time() - at["t"], flt() - at["f"]))
for _ in range(5):
    _execute(graph, m, [get_format(sys.argv[2])], 0, on_op=stop, on_params=start)
later = sorted(f for _, f in calls[1:])
print(json.dumps({"s": min(t for t, _ in calls), "faults": later[len(later) // 2],
                  "load": os.getloadavg()[0]}))
"""


def child(mode: str, precision: str, mkn: tuple[int, int, int]) -> dict:
    env = {**os.environ, "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"}
    out = subprocess.run([sys.executable, "-c", CHILD, mode, precision, "x".join(map(str, mkn))],
                         capture_output=True, text=True, env=env, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def predicted_fault_s(precision: str, mkn: tuple[int, int, int], page_s: float) -> float:
    from accelsim.calibrate.alloc_bench import mmap_threshold_max_bytes
    from accelsim.devices.cpu.alloc import fresh_bytes, fresh_pages
    from accelsim.workload.graph import GraphBuilder
    from accelsim.workload.work import gemms_for, work_table

    m, k, n = mkn
    g = GraphBuilder("g")
    g.linear(g.input("x", (k,)), out_features=n, bias=False, name="op")
    graph = g.build()
    work = work_table(graph, m, precision)
    fresh = fresh_bytes(work, gemms_for(graph, m), precision,
                        (work["matmul"] & (precision == "int8")).to_numpy(),
                        precision in ("bf16", "fp16"), mmap_threshold_max_bytes() or 1 << 62,
                        4096)
    return float(fresh_pages(fresh, 4096).sum() * page_s)


CAST_SIZES_M = (0.5, 1, 2, 3, 4.2, 6, 8)  # M elements (2^20)


def cast_cost_lines(repeats: int = 5) -> list[str]:
    """Markdown rows: the bf16 rounding's least time per element of fresh fp32 arrays."""
    import time

    import numpy as np

    from accelsim.kernels.formats import round_to_format

    rng = np.random.default_rng(0)
    lines = ["| elements | fp32 MiB | ms | ns per element |", "| --- | --- | --- | --- |"]
    for size in CAST_SIZES_M:
        n = int(size * 2**20)
        best_s = float("inf")
        for _ in range(repeats):
            x = rng.standard_normal(n, dtype=np.float32)  # fresh, as a forward pass makes it
            start_s = time.process_time()
            round_to_format(x, "bf16")
            best_s = min(best_s, time.process_time() - start_s)
        lines.append(f"| {size} M | {n * 4 / 2**20:.0f} | {best_s * 1e3:.2f} | "
                     f"{best_s / n * 1e9:.2f} |")
    return lines


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=3)
    args = ap.parse_args()
    from accelsim.calibrate.alloc_bench import measure_allocator

    figures = measure_allocator(5)
    page_s = figures.fresh_page_s if figures else 0.0
    lines = ["# Fresh-page faults in the GEMM sweep (issue 10)", "", __doc__.split("\n\n")[2],
             "", f"Time per fresh 4 KiB page (as `accelsim calibrate` measures it): "
             f"{page_s * 1e6:.3f} us. 1-minute load average at the start "
             f"{os.getloadavg()[0]:.1f}.", "",
             "| GEMM | precision | default ms | faults / call | no mmap, no trim ms | "
             "faults / call | default - off ms | model's fault term ms | load |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for precision, mkn in ROWS:
        best = {"default": None, "off": None}
        for _ in range(max(1, args.reps)):
            for mode in best:
                r = child(mode, precision, mkn)
                if best[mode] is None or r["s"] < best[mode]["s"]:
                    best[mode] = r
        d, o = best["default"], best["off"]
        line = (f"| {'x'.join(map(str, mkn))} | {precision} | {d['s'] * 1e3:.2f} | "
                f"{d['faults']:.0f} | {o['s'] * 1e3:.2f} | {o['faults']:.0f} | "
                f"{(d['s'] - o['s']) * 1e3:+.2f} | "
                f"{predicted_fault_s(precision, mkn, page_s) * 1e3:.2f} | {d['load']:.1f} |")
        lines.append(line)
        print(line, flush=True)
    lines += ["", f"bf16 rounding per element by working set (load {os.getloadavg()[0]:.1f}):",
              "", *cast_cost_lines()]
    OUT.write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
