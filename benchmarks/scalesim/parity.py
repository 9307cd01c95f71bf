"""accelsim's systolic SRAM model vs SCALE-Sim v3: ResNet-50 and BERT-base GEMMs on 32x32,
128x128 and 256x256 arrays in ws, os and is, at 10 words per cycle per DRAM port.

Run: python benchmarks/scalesim/run.py parity [--check-stateless] [--layers CAP_S] [--run]
     [--write]
  --run    runs SCALE-Sim on the configurations missing from the cache (minutes to hours each:
           its memory model steps every cycle in Python), in the Python named by
           $SCALESIM_PYTHON (default /tmp/ssenv/bin/python: SCALE-Sim 3.0.0 from the package
           index in its own virtualenv, with numpy<2 and pandas<2.3, see jobs.py),
           through `run.py jobs`; on the 32x32 arrays use --layers instead
  --check-stateless  verifies that SCALE-Sim keeps no state between layers (layers.py)
  --check-whole NET_SIZE_FLOW  a whole-network run of the patched SCALE-Sim vs the one-layer
           runs cached for it (e.g. bert_base_32_ws)
  --layers CAP_S     runs the 32x32 layers not yet cached, one layer per SCALE-Sim run,
           smallest first, each capped at CAP_S s and 6 GB (--budget S: start none after S s;
           --fast: SCALE-Sim patched by fast.py; --mem-cap-gb GB)
  --write  updates results/scalesim_parity.md

SCALE-Sim's per-layer COMPUTE_REPORT of each configuration is cached in
results/scalesim_cache/<net>_<array>_<dataflow>.csv (its wall time in wall_s.csv), so the
comparison reruns in seconds. accelsim runs the product path: `accelsim simulate
<topology>.csv --hw <array>.cfg` (the topology importer, the .cfg reader, the systolic class
model with the SRAM model), at int8 (SCALE-Sim's one-byte words; every precision gives the
same cycles). Targets (issue 10): whole-network total cycles within 10% of SCALE-Sim's, and
the median per-layer error within 15%. Nothing is fitted.

Inputs: benchmarks/scalesim_topologies/resnet50.csv is SCALE-Sim's own ResNet-50 topology
(its repository's topologies/conv_nets/Resnet50.csv: 54 conv layers, ifmaps already padded);
benchmarks/scalesim_topologies/bert_base.csv the GEMMs of one BERT-base encoder layer at
sequence 512 (Q, K, V, attention scores and context of one head, output projection, FFN), in
SCALE-Sim's GEMM form. SRAMs (ifmap, filter, ofmap kB): 32x32 64/64/64 (SCALE-Sim's scale.cfg),
128x128 1024/1024/512, 256x256 6144/6144/2048 (SCALE-Sim's google.cfg, TPU-like).

On 32x32 arrays a whole-network SCALE-Sim run takes hours, so SCALE-Sim is run there one
layer at a time (layers.py, per_layer.py; cache results/scalesim_cache/layers/): the
per-layer median error is over the layers compared, and the network total is given only where
every layer was. Layers the installed SCALE-Sim could not finish are run with `--fast`: the
same SCALE-Sim under a runtime patch (fast.py) whose reports are byte-identical to the
original's (`run.py equivalence`, equivalence.py).

A second table runs 20 seeded configurations of small random layers (arrays of 4 to 16 PEs a
side, 1-4 kB SRAMs, 2-16 words per cycle) where every layer overflows its SRAMs, by kind of
layer (random_layers.py; cached in results/scalesim_cache/random_7.csv).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys

import pandas as pd

from benchmarks.scalesim import layers
from benchmarks.scalesim.common import (
    CACHE,
    DATAFLOWS,
    LAYER_TARGET,
    NET_TARGET,
    NETS,
    PER_LAYER_SIZES,
    RESULTS,
    SRAM_KB,
    WALL,
    WORDS_PER_CYCLE,
    accelsim_cycles,
    cached,
    key,
    scalesim_command,
    scalesim_python,
    wall_times,
    whole_network_job,
)
from benchmarks.scalesim.common import markdown as _markdown
from benchmarks.scalesim.common import na as _na
from benchmarks.scalesim.per_layer import (
    compare_per_layer,
    layer_queue,
    per_layer_section,
    stateless_cases,
)
from benchmarks.scalesim.random_layers import (
    RANDOM_CACHE,
    RANDOM_CASES,
    compare_random,
    run_random,
)


def run_scalesim(python: str, net: str, size: int, flow: str) -> None:
    """One SCALE-Sim run (niced), its COMPUTE_REPORT and wall time into the cache."""
    job = [whole_network_job(net, size, flow)]
    done = subprocess.run(scalesim_command(python, 10), input=json.dumps(job),
                          capture_output=True, text=True, check=True)
    result = json.loads(done.stdout)[0]
    CACHE.mkdir(parents=True, exist_ok=True)
    (CACHE / f"{key(net, size, flow)}.csv").write_text(result["COMPUTE_REPORT"])
    walls = wall_times() | {key(net, size, flow): result["wall_s"]}
    pd.DataFrame({"key": list(walls), "wall_s": list(walls.values())}).to_csv(WALL, index=False)


def compare() -> tuple[pd.DataFrame, list[str]]:
    """One row per configuration with SCALE-Sim's results cached; the keys of those without."""
    rows, missing = [], []
    walls = wall_times()
    for net in NETS:
        for size in SRAM_KB:
            for flow in DATAFLOWS:
                theirs = cached(net, size, flow)
                if theirs is None:
                    row = compare_per_layer(net, size, flow) if size in PER_LAYER_SIZES \
                        else None
                    if row is None:
                        missing.append(key(net, size, flow))
                    else:
                        rows.append(row)
                    continue
                ours, names, wall_s = accelsim_cycles(net, size, flow)
                ss = theirs["Total Cycles"].astype(float).tolist()
                errors = [abs(a - b) / b for a, b in zip(ours, ss, strict=True)]
                stalls = float(theirs["Stall Cycles"].sum())
                ss_wall = walls.get(key(net, size, flow))
                rows.append({
                    "network": net, "array": f"{size}x{size}", "dataflow": flow,
                    "layers compared": f"{len(ss)}/{len(ss)}", "SCALE-Sim cycles": sum(ss),
                    "accelsim cycles": sum(ours),
                    "network error": (sum(ours) - sum(ss)) / sum(ss),
                    "layer median error": statistics.median(errors),
                    "layer max error": max(errors),
                    "worst layer": names[errors.index(max(errors))] if max(errors) else "-",
                    "stall share": stalls / sum(ss),
                    "SCALE-Sim runs": "1 whole-network",
                    "SCALE-Sim s": ss_wall, "accelsim s": wall_s,
                    "speed ratio": None if ss_wall is None else ss_wall / wall_s,
                })
    return pd.DataFrame(rows), missing


def report(frame: pd.DataFrame, missing: list[str]) -> str:
    total_ok = frame["network error"].map(lambda x: None if _na(x) else abs(x) <= NET_TARGET)
    median_ok = frame["layer median error"] <= LAYER_TARGET
    ok = total_ok.fillna(False).astype(bool) & median_ok
    full = total_ok.notna()
    shown = frame.assign(
        **{"network error": frame["network error"].map(
            lambda x: "n/a" if _na(x) else f"{x:+.2%}")},
        **{c: frame[c].map(lambda x: f"{x:.2%}")
           for c in ("layer median error", "layer max error", "stall share")},
        **{c: frame[c].map(lambda x: "n/a" if _na(x) else f"{x:,.0f}")
           for c in ("SCALE-Sim cycles", "accelsim cycles")},
        **{"SCALE-Sim s": frame["SCALE-Sim s"].map(lambda x: "n/a" if _na(x)
                                                   else f"{x:,.0f}"),
           "accelsim s": frame["accelsim s"].map(lambda x: f"{x:.3f}"),
           "speed ratio": frame["speed ratio"].map(lambda x: "n/a" if _na(x)
                                                   else f"{x:,.0f}x"),
           "targets": [_verdict(t, m) for t, m in zip(total_ok, median_ok, strict=True)]})
    lines = [
        "# accelsim vs SCALE-Sim v3: total cycles with memory stalls",
        "",
        "Generated by `python benchmarks/scalesim/run.py parity --write` (SCALE-Sim's results "
        "cached in `results/scalesim_cache/`; `--run` runs the missing ones). SCALE-Sim 3.0.0 "
        f"from the package index; {WORDS_PER_CYCLE} words per cycle per DRAM port; SRAM sizes, "
        "topologies and method in the docstring of `benchmarks/scalesim/parity.py`. Targets: "
        "network total within "
        f"{NET_TARGET:.0%}, median per-layer error within {LAYER_TARGET:.0%}. Nothing fitted.",
        "",
        _markdown(shown),
        "",
        f"Configurations compared on every layer: {int(full.sum())} of "
        f"{len(frame) + len(missing)}, both targets met on {int(ok.sum())}; on some layers "
        f"only: {int((~full).sum())}, per-layer median target met on "
        f"{int((median_ok & ~full).sum())} (network total not known).",
        "",
        "Wall times: SCALE-Sim's as cached (`wall_s.csv`: its run, niced, on the shared 2-core "
        "machine, mostly beside one to three other SCALE-Sim runs, so they overstate its time "
        "alone by up to about 2-3x); accelsim's the whole `simulate` call (topology read, "
        "graph, every layer's SRAM walk), one run each, in this process.",
    ]
    if missing:
        lines += ["", "Not compared at all (no SCALE-Sim run cached; `--run` / `--layers` run "
                  "them): " + ", ".join(missing) + "."]
    lines += per_layer_section()
    small = compare_random()
    if small is not None:
        shown = small.assign(median=small["median"].map(lambda x: f"{x:.2%}"),
                             max=small["max"].map(lambda x: f"{x:.2%}"))
        lines += ["", f"## Small random layers ({RANDOM_CASES} seeded arrays of 4 to 16 PEs a "
                  "side, 1-4 kB SRAMs, 2-16 words per cycle, three layers each)", "",
                  "Total cycles per layer, |accelsim - SCALE-Sim| / SCALE-Sim:", "",
                  _markdown(shown)]
    return "\n".join(lines) + "\n"


def _verdict(total_ok: bool | None, median_ok: bool) -> str:
    """Both targets where the total is known; the per-layer one alone where it is not."""
    if total_ok is None or _na(total_ok):
        return "median met, total n/a" if median_ok else "median MISSED, total n/a"
    return "met" if (total_ok and median_ok) else "MISSED"


def main(argv: list[str]) -> None:
    ap = argparse.ArgumentParser(prog="run.py parity", description=__doc__.splitlines()[0])
    ap.add_argument("--run", action="store_true", help="run SCALE-Sim where not cached")
    ap.add_argument("--write", action="store_true", help=f"update {RESULTS.name}")
    ap.add_argument("--check-stateless", action="store_true",
                    help="verify SCALE-Sim keeps no state between layers (a minute)")
    ap.add_argument("--layers", type=float, metavar="CAP_S",
                    help="run the 32x32 layers not cached, smallest first, each capped at "
                         "CAP_S seconds of wall time")
    ap.add_argument("--budget", type=float, default=3600.0, metavar="S",
                    help="with --layers: start no layer after S seconds (default 3600)")
    ap.add_argument("--fast", action="store_true",
                    help="with --layers: SCALE-Sim with fast.py's patch (same reports)")
    ap.add_argument("--check-whole", action="append", default=[], metavar="NET_SIZE_FLOW",
                    help="e.g. bert_base_32_ws: a whole-network patched SCALE-Sim run against "
                         "the cached one-layer runs (stateless.csv)")
    ap.add_argument("--mem-cap-gb", type=float, default=layers.MEM_CAP_GB,
                    help="with --layers: address-space cap per SCALE-Sim run")
    args = ap.parse_args(argv)
    python = scalesim_python()
    if args.check_stateless:
        checks = layers.check_stateless(python, stateless_cases(), cap_s=600)
        checks = pd.concat([checks, pd.DataFrame(layers.whole_run_groups(CACHE, NETS))])
        checks.to_csv(layers.STATELESS, index=False)
        print(checks.to_string(index=False))
    for whole in args.check_whole:
        net, size, flow = whole.rsplit("_", 2)
        print(layers.check_whole_network(python, net, int(size), flow, 3600, args.mem_cap_gb),
              flush=True)
    if args.layers:
        layers.run_queue(python, layer_queue(), args.layers, args.budget, args.fast,
                         args.mem_cap_gb)
    if args.run:
        if not RANDOM_CACHE.exists():
            run_random(python)
        for missing in compare()[1]:
            net, size, flow = missing.rsplit("_", 2)
            print(f"running SCALE-Sim on {missing} ...", file=sys.stderr, flush=True)
            run_scalesim(python, net, int(size), flow)
    frame, missing = compare()
    text = report(frame, missing)
    print(text)
    if args.write:
        RESULTS.write_text(text)

