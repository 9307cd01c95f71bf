"""Evidence that `fast.patched()` leaves SCALE-Sim's results unchanged.

Run: python benchmarks/scalesim/run.py equivalence [--cached] [--random] [--small N]
     [--whole KEY]
  --cached   every one-layer 32x32 run cached by the original SCALE-Sim (layers/attempts.csv,
             runner "original"): run it patched; its COMPUTE_REPORT must equal the cached text
  --random   random_layers.py's 20 seeded configurations (60 layers): original and patched
             in the same process; COMPUTE, BANDWIDTH and DETAILED_ACCESS reports compared
  --small N  the N cheapest cached 32x32 layers, original and patched, all three reports
  --whole KEY  a cached whole-network run (e.g. bert_base_128_os): patched, its COMPUTE_REPORT
             against the cached one

Each check is a row of results/scalesim_cache/equivalence.csv (replacing an older row of the
same check, original source and reports): reports compared, identical (byte for byte), wall
seconds of the original (cached or measured now, `original_source`) and of the patched run,
and the speed-up. SCALE-Sim runs niced, one process at a time, under the address-space cap
of layers.py; wall times are on the shared 2-core machine (the cached originals often
beside other SCALE-Sim runs).
"""

from __future__ import annotations

import argparse

import pandas as pd

from benchmarks.scalesim import layers
from benchmarks.scalesim.common import (
    CACHE,
    NETS,
    WALL,
    cfg_for,
    scalesim_python,
    whole_network_job,
)
from benchmarks.scalesim.jobs import REPORTS
from benchmarks.scalesim.random_layers import random_jobs

EQUIVALENCE = CACHE / "equivalence.csv"
CAP_S = 1800.0


def _row(check: str, kind: str, reports: tuple[str, ...], identical: bool, original_s: float,
         fast_s: float, source: str) -> dict:
    return {"check": check, "kind": kind, "reports": "+".join(r.split("_")[0] for r in reports),
            "identical": identical, "original_s": round(original_s, 2),
            "fast_s": round(fast_s, 2), "speedup": round(original_s / fast_s, 1),
            "original_source": source}


def _layer_job(key: str) -> dict:
    """The one-layer job of a cached layer key (<net>_<R>x<C>_<flow>_<layer>)."""
    net = next(n for n in NETS if key.startswith(n + "_"))
    size, flow, layer = key[len(net) + 1:].split("_", 2)
    header, rows = layers.topology_rows(net)
    return {"cfg": cfg_for(int(size.split("x")[0]), flow),
            "topology": f"{header}\n{dict(rows)[layer]}\n", "gemm": NETS[net]}


def _original_layer_runs() -> pd.DataFrame:
    tried = layers.attempts()
    done = tried[(tried["outcome"] == "done") & (tried["runner"] == "original")]
    return done[[(layers.LAYER_CACHE / f"{k}.csv").exists() for k in done["key"]]]


def check_cached(python: str) -> list[dict]:
    """Patched one-layer runs against the COMPUTE_REPORTs cached by the original SCALE-Sim."""
    rows = []
    for run in _original_layer_runs().sort_values("wall_s").itertuples():
        job = dict(_layer_job(run.key), fast=True)
        outcome, _, results = layers.run_jobs(python, [job], CAP_S)
        if outcome != "done":
            raise RuntimeError(f"{run.key}: patched SCALE-Sim {outcome}")
        same = results[0]["COMPUTE_REPORT"] == (layers.LAYER_CACHE / f"{run.key}.csv").read_text()
        rows.append(_row(run.key, "32x32 layer", REPORTS[:1], same, float(run.wall_s),
                         results[0]["wall_s"], "cached"))
        print(rows[-1], flush=True)
    return rows


def _both(python: str, name: str, kind: str, job: dict) -> dict:
    """Original then patched, in one SCALE-Sim process; all three reports compared."""
    outcome, _, results = layers.run_jobs(python, [dict(job, fast=False), dict(job, fast=True)],
                                          CAP_S)
    if outcome != "done":
        raise RuntimeError(f"{name}: SCALE-Sim {outcome}")
    original, fast = results
    same = all(original[r] == fast[r] for r in REPORTS)
    return _row(name, kind, REPORTS, same, original["wall_s"], fast["wall_s"], "run now")


def check_random(python: str) -> list[dict]:
    rows = []
    for case, job in enumerate(random_jobs()):
        rows.append(_both(python, f"random_7 case {case}", "random small layers", job))
        print(rows[-1], flush=True)
    return rows


def check_small(python: str, n: int) -> list[dict]:
    rows = []
    for run in _original_layer_runs().sort_values("wall_s").head(n).itertuples():
        rows.append(_both(python, run.key, "32x32 layer", _layer_job(run.key)))
        print(rows[-1], flush=True)
    return rows


def check_whole(python: str, key: str) -> list[dict]:
    """A whole-network run, patched, against its cached COMPUTE_REPORT."""
    net, size, flow = key.rsplit("_", 2)
    job = whole_network_job(net, int(size), flow, fast=True)
    outcome, _, results = layers.run_jobs(python, [job], CAP_S)
    if outcome != "done":
        raise RuntimeError(f"{key}: patched SCALE-Sim {outcome}")
    same = results[0]["COMPUTE_REPORT"] == (CACHE / f"{key}.csv").read_text()
    walls = pd.read_csv(WALL).set_index("key")["wall_s"]
    row = _row(key, "whole network", REPORTS[:1], same, float(walls[key]), results[0]["wall_s"],
               "cached")
    print(row, flush=True)
    return [row]


def record(rows: list[dict]) -> pd.DataFrame:
    """Merge `rows` into equivalence.csv (a newer row of the same check replaces the old)."""
    new = pd.DataFrame(rows)
    if EQUIVALENCE.exists():
        old = pd.read_csv(EQUIVALENCE)
        ids = ["check", "original_source", "reports"]
        replaced = old[ids].apply(tuple, axis=1).isin(set(new[ids].apply(tuple, axis=1)))
        new = pd.concat([old[~replaced], new], ignore_index=True)
    new.to_csv(EQUIVALENCE, index=False)
    return new


def summary() -> list[dict]:
    """Per kind of check: count, identical count, speed-up range (for the parity report)."""
    if not EQUIVALENCE.exists():
        return []
    frame = pd.read_csv(EQUIVALENCE)
    groups = frame.groupby(["kind", "original_source", "reports"], sort=False)
    return [{"kind": kind, "original": source, "reports compared": reports, "checks": len(g),
             "identical": int(g["identical"].sum()),
             "patched s (sum)": f"{g['fast_s'].sum():,.1f}",
             "original s (sum)": f"{g['original_s'].sum():,.1f}",
             "speed-up min": f"{g['speedup'].min():.1f}x",
             "speed-up median": f"{g['speedup'].median():.1f}x",
             "speed-up max": f"{g['speedup'].max():.1f}x"}
            for (kind, source, reports), g in groups]


def main(argv: list[str]) -> None:
    ap = argparse.ArgumentParser(prog="run.py equivalence", description=__doc__.splitlines()[0])
    ap.add_argument("--cached", action="store_true")
    ap.add_argument("--random", action="store_true")
    ap.add_argument("--small", type=int, default=0, metavar="N")
    ap.add_argument("--whole", action="append", default=[], metavar="KEY")
    args = ap.parse_args(argv)
    EQUIVALENCE.parent.mkdir(parents=True, exist_ok=True)
    python = scalesim_python()
    if args.random:
        record(check_random(python))
    if args.small:
        record(check_small(python, args.small))
    if args.cached:
        record(check_cached(python))
    for key in args.whole:
        record(check_whole(python, key))
    print(pd.DataFrame(summary()).to_string(index=False))

