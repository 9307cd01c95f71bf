"""SCALE-Sim v3 vs accelsim on small seeded random layers and arrays, where every layer
overflows its SRAMs (the second table of results/scalesim_parity.md).

Used by `parity.py` (`run.py parity --run` fills the cache, the report reads it), and its jobs
by `equivalence.py`; the SCALE-Sim runs go through `run.py jobs` in the Python named by
$SCALESIM_PYTHON.
"""

from __future__ import annotations

import json
import random
import subprocess
import tempfile
from pathlib import Path

import pandas as pd

from accelsim.devices.systolic.scalesim.config import cfg_text
from accelsim.run import run_simulation
from accelsim.sim.knobs import make_config
from benchmarks.scalesim.common import (
    CACHE,
    CONV_HEADER,
    DATAFLOWS,
    report_frame,
    scalesim_command,
)

# Small seeded random layers and arrays (1-4 kB SRAMs, 2 to 16 words per cycle): where the
# SRAMs overflow on every layer, so the memory model is exercised hardest.
RANDOM_SEED, RANDOM_CASES = 7, 20
RANDOM_CACHE = CACHE / f"random_{RANDOM_SEED}.csv"


def random_jobs(seed: int = RANDOM_SEED, n: int = RANDOM_CASES) -> list[dict]:
    """`n` seeded configurations of three random layers each (GEMM or conv form)."""
    rng = random.Random(seed)
    jobs = []
    for _ in range(n):
        a = rng.choice([4, 8, 16])
        b = rng.choice([a, 4, 8, 16])
        kib = [rng.choice([1, 2, 4]) for _ in range(3)]
        bw, flow, gemm = rng.choice([2, 4, 10, 16]), rng.choice(DATAFLOWS), rng.random() < 0.5
        rows = []
        for i in range(3):
            if gemm:
                rows.append(f"g{i}, {rng.randint(8, 96)}, {rng.randint(4, 80)}, "
                            f"{rng.randint(4, 96)},")
            else:
                r, stride = rng.choice([1, 3, 3, 5]), rng.choice([1, 1, 2])
                h, c, f = rng.randint(r + 1, 16), rng.randint(1, 24), rng.randint(2, 48)
                rows.append(f"c{i}, {h}, {h}, {r}, {r}, {c}, {f}, {stride},")
        jobs.append({"cfg": cfg_text(a, b, *kib, bw, flow),
                     "topology": ("Layer, M, N, K," if gemm else CONV_HEADER) + "\n"
                     + "\n".join(rows) + "\n", "gemm": gemm})
    return jobs


def run_random(python: str) -> None:
    """SCALE-Sim on the random cases (one process), per-layer cycles into the cache."""
    done = subprocess.run(scalesim_command(python, 10), input=json.dumps(random_jobs()),
                          capture_output=True, text=True, check=True)
    rows = []
    for case, result in enumerate(json.loads(done.stdout)):
        report = report_frame(result["COMPUTE_REPORT"])
        rows += [{"case": case, "layer": i, "total_cycles": int(t), "stall_cycles": int(st)}
                 for i, (t, st) in enumerate(zip(report["Total Cycles"],
                                                 report["Stall Cycles"], strict=True))]
    pd.DataFrame(rows).to_csv(RANDOM_CACHE, index=False)


def compare_random() -> pd.DataFrame | None:
    """Per kind of layer (GEMM, 1 x 1 conv, wider conv): model vs SCALE-Sim total cycles."""
    if not RANDOM_CACHE.exists():
        return None
    theirs = pd.read_csv(RANDOM_CACHE)
    rows = []
    with tempfile.TemporaryDirectory() as folder:
        for case, job in enumerate(random_jobs()):
            cfg, topo = Path(folder) / f"c{case}.cfg", Path(folder) / f"t{case}.csv"
            cfg.write_text(job["cfg"])
            topo.write_text(job["topology"])
            record = run_simulation(make_config(str(topo), str(cfg), precision="int8")).record
            lines = job["topology"].strip().splitlines()[1:]
            ss = theirs[theirs["case"] == case].sort_values("layer")["total_cycles"].tolist()
            for layer, line, ref in zip(record["layers"], lines, ss, strict=True):
                size = int(line.split(",")[3]) if not job["gemm"] else 0
                kind = "GEMM" if job["gemm"] else ("conv 1x1" if size == 1 else
                                                   "conv 3x3, 5x5")
                rows.append({"kind": kind, "error": abs(layer["cycles"] - ref) / ref})
    frame = pd.DataFrame(rows)
    return frame.groupby("kind")["error"].agg(
        layers="count", within_1pct=lambda e: int((e <= 0.01).sum()), median="median",
        max="max").reset_index()
