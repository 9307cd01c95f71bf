"""SCALE-Sim v3 one layer at a time: where a whole-network run is too slow (32x32 arrays).

SCALE-Sim simulates each layer independently: `simulator.run` builds one `single_layer_sim`
per topology row, and each builds its own operand matrices (from that row and the .cfg's fixed
address offsets) and its own fresh `double_buffered_scratchpad` (new read/write buffers, cycle
count from 0); nothing is carried from one layer to the next. So a one-layer topology gives
that layer's row of the whole-network COMPUTE_REPORT, and layers with the same topology row give
the same row. `check_stateless` verifies both on cheap cases before the cache relies on them;
`check_whole_network` compares a whole-network run of the patched SCALE-Sim with the cache.

Each run is niced (15), one at a time, under a wall-clock cap and an address-space cap
(`ulimit -v`), so a layer that SCALE-Sim cannot finish is stopped and recorded as such.

Cache, under results/scalesim_cache/layers/:
  <net>_<R>x<C>_<dataflow>_<layer>.csv   SCALE-Sim's COMPUTE_REPORT of that layer run alone
  attempts.csv      key, outcome (done / timeout / memory / error), wall_s, cap_s, mem_cap_gb,
                    runner (original, or fast: SCALE-Sim with fast.patched(), whose
                    reports are byte-identical, see equivalence.py; empty = original)
  stateless.csv     the checks behind reusing a run for a layer of the same shape
  errors.log        the end of SCALE-Sim's stderr for runs that failed
"""

from __future__ import annotations

import json
import math
import resource
import subprocess
import time
from pathlib import Path

import pandas as pd

from accelsim.devices.systolic.im2col import MAX_ELEMS
from benchmarks.scalesim.common import (
    LAYER_CACHE,
    TOPOLOGIES,
    report_frame,
    scalesim_command,
    whole_network_job,
)

ATTEMPTS = LAYER_CACHE / "attempts.csv"
STATELESS = LAYER_CACHE / "stateless.csv"
NICE = 15
MEM_CAP_GB = 6.0


def topology_rows(net: str) -> tuple[str, list[tuple[str, str]]]:
    """The topology's header line and (layer name, its whole CSV line), in file order."""
    lines = [ln for ln in (TOPOLOGIES / f"{net}.csv").read_text().splitlines() if ln.strip()]
    return lines[0], [(ln.split(",")[0].strip(), ln) for ln in lines[1:]]


def shape_of(line: str) -> tuple[str, ...]:
    """A topology row without its name: what SCALE-Sim's simulation of the layer depends on."""
    return tuple(f.strip() for f in line.split(",")[1:] if f.strip())


def layer_key(net: str, size: int, flow: str, layer: str) -> str:
    return f"{net}_{size}x{size}_{flow}_{layer}"


def _limit_memory(mem_cap_gb: float = MEM_CAP_GB) -> None:
    cap = int(mem_cap_gb * 2**30)
    resource.setrlimit(resource.RLIMIT_AS, (cap, cap))


def run_jobs(python: str, jobs: list[dict], cap_s: float,
             mem_cap_gb: float = MEM_CAP_GB) -> tuple[str, float, list[dict]]:
    """SCALE-Sim on `jobs` in one niced, capped process: (outcome, wall s, results)."""
    start = time.perf_counter()
    try:
        done = subprocess.run(scalesim_command(python, NICE), input=json.dumps(jobs),
                              capture_output=True, text=True,
                              timeout=cap_s, preexec_fn=lambda: _limit_memory(mem_cap_gb))
    except subprocess.TimeoutExpired:
        return "timeout", time.perf_counter() - start, []
    wall_s = time.perf_counter() - start
    if done.returncode != 0:
        memory = "MemoryError" in done.stderr or "Unable to allocate" in done.stderr
        LAYER_CACHE.mkdir(parents=True, exist_ok=True)
        with (LAYER_CACHE / "errors.log").open("a") as log:  # why, for the next look
            log.write(f"--- rc {done.returncode} after {wall_s:.0f} s\n{done.stderr[-3000:]}\n")
        return ("memory" if memory else "error"), wall_s, []
    return "done", wall_s, json.loads(done.stdout)


def attempts() -> pd.DataFrame:
    columns = ["key", "outcome", "wall_s", "cap_s", "mem_cap_gb", "runner"]
    frame = pd.read_csv(ATTEMPTS) if ATTEMPTS.exists() else pd.DataFrame(columns=columns)
    if "runner" not in frame:
        frame["runner"] = "original"
    frame["runner"] = frame["runner"].fillna("original")
    return frame


def _record(key: str, outcome: str, wall_s: float, cap_s: float, mem_cap_gb: float,
            runner: str) -> None:
    old = attempts()
    row = pd.DataFrame([{"key": key, "outcome": outcome, "wall_s": round(wall_s, 1),
                         "cap_s": cap_s, "mem_cap_gb": mem_cap_gb, "runner": runner}])
    frame = row if old.empty else pd.concat([old[old["key"] != key], row])
    LAYER_CACHE.mkdir(parents=True, exist_ok=True)
    frame.to_csv(ATTEMPTS, index=False)


def run_layer(python: str, net: str, size: int, flow: str, layer: str, cfg: str,
              gemm: bool, cap_s: float, fast: bool = False,
              mem_cap_gb: float = MEM_CAP_GB) -> str:
    """One layer alone in SCALE-Sim (`fast`: with fast.py's patch); its COMPUTE_REPORT
    cached if it finished. The outcome."""
    header, rows = topology_rows(net)
    line = dict(rows)[layer]
    key = layer_key(net, size, flow, layer)
    job = {"cfg": cfg, "topology": f"{header}\n{line}\n", "gemm": gemm, "fast": fast}
    outcome, wall_s, results = run_jobs(python, [job], cap_s, mem_cap_gb)
    if outcome == "done":
        (LAYER_CACHE / f"{key}.csv").write_text(results[0]["COMPUTE_REPORT"])
    _record(key, outcome, wall_s, cap_s, mem_cap_gb, "fast" if fast else "original")
    return outcome


def _report(text: str) -> pd.DataFrame:
    return report_frame(text).drop(columns="LayerID")


def cached_layer(net: str, size: int, flow: str, layer: str) -> tuple[pd.Series, str] | None:
    """SCALE-Sim's COMPUTE_REPORT row for `layer` and the layer whose run it is: its own, or,
    once `check_stateless` has passed, a run of another layer with the same topology row."""
    candidates = same_shape(net, layer) if stateless_verified() else [layer]
    for name in candidates:
        path = LAYER_CACHE / f"{layer_key(net, size, flow, name)}.csv"
        if path.exists():
            return _report(path.read_text()).iloc[0], name
    return None


def same_shape(net: str, layer: str) -> list[str]:
    """`layer` and, after it, the layers of `net` with the same topology row."""
    _, rows = topology_rows(net)
    mine = shape_of(dict(rows)[layer])
    return [layer] + [name for name, line in rows if name != layer and shape_of(line) == mine]


def stateless_verified() -> bool:
    return STATELESS.exists() and bool(pd.read_csv(STATELESS)["identical"].all())


def check_stateless(python: str, cases: list[dict], cap_s: float) -> pd.DataFrame:
    """For each case (cfg, gemm, header, lines A, B): run [A, B, A] in one process and A
    alone; SCALE-Sim is stateless per layer where all three A rows are identical. A case may
    instead give `expected`, a row cached from a whole-network run, to match A alone."""
    rows = []
    for case in cases:
        header, a = case["header"], case["a"]
        jobs = [{"cfg": case["cfg"], "topology": f"{header}\n{a}\n", "gemm": case["gemm"]}]
        if "b" in case:
            jobs.append({"cfg": case["cfg"], "topology": f"{header}\n{a}\n{case['b']}\n{a}\n",
                         "gemm": case["gemm"]})
        outcome, _, results = run_jobs(python, jobs, cap_s)
        if outcome != "done":
            raise RuntimeError(f"stateless check {case['name']}: SCALE-Sim {outcome}")
        alone = _report(results[0]["COMPUTE_REPORT"])
        if "b" in case:
            group = _report(results[1]["COMPUTE_REPORT"])
            same = group.iloc[0].equals(alone.iloc[0]) and group.iloc[2].equals(alone.iloc[0])
        else:
            same = bool((alone.iloc[0].round(6) == case["expected"].round(6)).all())
        rows.append({"case": case["name"], "identical": same,
                     "total_cycles_alone": int(alone.iloc[0]["Total Cycles"])})
    frame = pd.DataFrame(rows)
    LAYER_CACHE.mkdir(parents=True, exist_ok=True)
    frame.to_csv(STATELESS, index=False)
    return frame


def check_whole_network(python: str, net: str, size: int, flow: str, cap_s: float,
                        mem_cap_gb: float) -> dict:
    """One whole-network run of the patched SCALE-Sim against the one-layer runs cached for
    the same configuration: does every row of its COMPUTE_REPORT equal the cached one of that
    layer (or of its same-shape twin)? Added to stateless.csv (replacing an older row)."""
    job = whole_network_job(net, size, flow, fast=True)
    outcome, wall_s, results = run_jobs(python, [job], cap_s, mem_cap_gb)
    if outcome != "done":
        raise RuntimeError(f"whole-network check {net} {size} {flow}: SCALE-Sim {outcome}")
    whole = _report(results[0]["COMPUTE_REPORT"])
    _, rows = topology_rows(net)
    found = [cached_layer(net, size, flow, name) for name, _ in rows]
    same = all(f is not None and whole.iloc[i].equals(f[0]) for i, f in enumerate(found))
    row = {"case": f"{net} {size}x{size} {flow}: whole-network run (patched, {wall_s:.0f} s) "
                   f"vs its {len(rows)} one-layer rows", "identical": same,
           "total_cycles_alone": int(whole["Total Cycles"].sum())}
    old = pd.read_csv(STATELESS) if STATELESS.exists() else pd.DataFrame(columns=list(row))
    old = old[~old["case"].str.startswith(f"{net} {size}x{size} {flow}: whole-network run")]
    pd.concat([old, pd.DataFrame([row])], ignore_index=True).to_csv(STATELESS, index=False)
    return row


def approximation(net: str, layer: str, gemm: bool) -> str:
    """Where a conv layer meets the model's approximations (none for GEMM form): overlapping
    or rounded-up windows are walked address by address as SCALE-Sim reads them
    (`systolic_im2col`) unless the im2col is over `MAX_ELEMS` words, where the address-free
    layouts (`systolic_streams`) keep their NBs."""
    if gemm:
        return ""
    _, rows = topology_rows(net)
    h, w, r, s_, c, f, stride = (int(x) for x in shape_of(dict(rows)[layer])[:7])
    out_rows, out_cols = math.ceil((h - r + stride) / stride), math.ceil((w - s_ + stride) / stride)
    repeats = r > stride or s_ > stride
    past_edge = (h - r) % stride or (w - s_) % stride
    if not (repeats or past_edge):
        return ""
    if out_rows * out_cols * r * s_ * c <= MAX_ELEMS:
        return " - its ifmap is walked address by address as SCALE-Sim reads it (systolic_im2col)"
    notes = []
    if repeats:
        notes.append(f"{r}x{s_} filter, stride {stride}: im2col repeats addresses, found by "
                     "SCALE-Sim at any copy in its SRAM window, by the model only at its own "
                     "position (im2col over MAX_ELEMS words)")
    if past_edge:
        notes.append(f"stride {stride} with rounded-up windows ({out_rows} a side, the last "
                     "past the ifmap): SCALE-Sim skips their -1 addresses, the model counts "
                     "them as words (im2col over MAX_ELEMS words)")
    return " - " + "; ".join(notes)


def whole_run_groups(cache: Path, nets: dict[str, bool]) -> list[dict]:
    """From the whole-network runs cached in `cache`: in each, do the layers that share a
    topology row get the same COMPUTE_REPORT row (as they must if nothing carries over)?"""
    rows = []
    for net in nets:
        _, layers = topology_rows(net)
        for path in sorted(cache.glob(f"{net}_*.csv")):
            report = _report(path.read_text())
            groups: dict[tuple[str, ...], list[int]] = {}
            for i, (_, line) in enumerate(layers):
                groups.setdefault(shape_of(line), []).append(i)
            repeated = [g for g in groups.values() if len(g) > 1]
            same = all(report.iloc[g].nunique().max() == 1 for g in repeated)
            rows.append({"case": f"{path.stem}: {len(repeated)} repeated shapes "
                         "(whole-network run, cached)", "identical": same,
                         "total_cycles_alone": None})
    return rows


def run_queue(python: str, queue: list[tuple[int, str, int, str, str, str, bool]],
              cap_s: float, budget_s: float, fast: bool = False,
              mem_cap_gb: float = MEM_CAP_GB) -> None:
    """Run the (estimated lines, net, size, flow, layer, cfg, gemm) jobs smallest first, one at
    a time, each capped at `cap_s` and `mem_cap_gb`; start none after `budget_s` of wall time.
    Skips layers done (or standing in through an identical row) and those that already failed
    with the same runner under caps at least as large."""
    start = time.perf_counter()
    runner = "fast" if fast else "original"
    for lines, net, size, flow, layer, cfg, gemm in sorted(queue):
        if cached_layer(net, size, flow, layer) is not None:
            continue
        tried = attempts().set_index("key")
        same = [layer_key(net, size, flow, name) for name in same_shape(net, layer)]
        if any(k in tried.index and tried.loc[k, "outcome"] != "done"
               and tried.loc[k, "runner"] == runner and float(tried.loc[k, "cap_s"]) >= cap_s
               and float(tried.loc[k, "mem_cap_gb"]) >= mem_cap_gb for k in same):
            continue
        key = layer_key(net, size, flow, layer)
        if time.perf_counter() - start > budget_s:
            print("budget spent; stopping", flush=True)
            return
        began = time.perf_counter()
        outcome = run_layer(python, net, size, flow, layer, cfg, gemm, cap_s, fast,
                            mem_cap_gb)
        print(f"{key}: ~{lines} lines, {outcome} in {time.perf_counter() - began:.0f} s",
              flush=True)
