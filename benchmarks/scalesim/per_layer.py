"""The arrays where SCALE-Sim is run one layer at a time (32x32) in the SCALE-Sim parity report:
per-layer comparison, network totals where every layer is in, what is missing and why, and
the evidence that the patched (fast) SCALE-Sim runner gives SCALE-Sim's own reports.
See parity.py (the report), layers.py (the one-layer runs and their cache), fast.py (the
patch) and equivalence.py (its checks).
"""

from __future__ import annotations

import statistics

import pandas as pd

from benchmarks.scalesim import layers
from benchmarks.scalesim.common import (
    DATAFLOWS,
    NETS,
    PER_LAYER_SIZES,
    accelsim_layers,
    cached,
    cfg_for,
    markdown,
)
from benchmarks.scalesim.equivalence import EQUIVALENCE, summary


def per_layer(net: str, size: int, flow: str) -> list[dict]:
    """Each layer's accelsim record beside SCALE-Sim's one-layer run (None where not run)
    and the layer whose run stands for it (itself, or one with the same topology row)."""
    out = []
    for la in accelsim_layers(net, size, flow):
        found = layers.cached_layer(net, size, flow, la["name"])
        out.append({"layer": la["name"], "accelsim": float(la["cycles"]),
                    "accelsim_wall_s": la["wall_s"],
                    "scalesim": None if found is None else float(found[0]["Total Cycles"]),
                    "stalls": None if found is None else float(found[0]["Stall Cycles"]),
                    "run": None if found is None else found[1]})
    return out


def compare_per_layer(net: str, size: int, flow: str) -> dict | None:
    """A configuration's row from one-layer SCALE-Sim runs: the median and worst per-layer
    error over the layers compared, network totals only if every layer was compared."""
    rows = per_layer(net, size, flow)
    done = [r for r in rows if r["scalesim"] is not None]
    if not done:
        return None
    errors = [abs(r["accelsim"] - r["scalesim"]) / r["scalesim"] for r in done]
    complete = len(done) == len(rows)
    tried = layers.attempts().set_index("key")
    runs = {layers.layer_key(net, size, flow, r["run"]) for r in done}
    fast = sum(tried.loc[k, "runner"] == "fast" for k in runs if k in tried.index)
    # SCALE-Sim's own time only where every run was the original SCALE-Sim
    ss_wall = float(sum(tried["wall_s"].get(k, float("nan")) for k in runs)) \
        if complete and not fast else None
    ours_s = rows[0]["accelsim_wall_s"]
    ss, ours = sum(r["scalesim"] for r in done), sum(r["accelsim"] for r in done)
    return {
        "network": net, "array": f"{size}x{size}", "dataflow": flow,
        "layers compared": f"{len(done)}/{len(rows)}",
        "SCALE-Sim cycles": ss if complete else None,
        "accelsim cycles": ours if complete else None,
        "network error": (ours - ss) / ss if complete else None,
        "layer median error": statistics.median(errors), "layer max error": max(errors),
        "worst layer": done[errors.index(max(errors))]["layer"] if max(errors) else "-",
        "stall share": sum(r["stalls"] for r in done) / ss,
        "SCALE-Sim runs": f"{len(runs)} one-layer ({fast} patched)",
        "SCALE-Sim s": ss_wall, "accelsim s": ours_s,
        "speed ratio": None if ss_wall is None else ss_wall / ours_s,
    }


def layer_queue(sizes: tuple[int, ...] = PER_LAYER_SIZES) -> list[tuple]:
    """Every (net, size, dataflow, layer) to run alone, with SCALE-Sim's demand lines
    (= its compute cycles, which accelsim matches exactly) as the size to order them by."""
    queue = []
    for net, gemm in NETS.items():
        _, rows = layers.topology_rows(net)
        for size in sizes:
            for flow in DATAFLOWS:
                ours = accelsim_layers(net, size, flow)
                for (layer, _), la in zip(rows, ours, strict=True):
                    queue.append((int(la["cycles"] - la["stall_cycles"]), net, size, flow,
                                  layer, cfg_for(size, flow), gemm))
    return queue


def stateless_cases() -> list[dict]:
    """Cheap checks that SCALE-Sim keeps no state between layers: a layer alone vs the same
    layer first and third in [A, B, A] (GEMM and conv form, 32x32), and alone vs its row of
    a cached whole-network run (128x128)."""
    bert, resnet = layers.topology_rows("bert_base"), layers.topology_rows("resnet50")
    b, r = dict(bert[1]), dict(resnet[1])
    whole = cached("resnet50", 128, "ws")
    expected = whole.drop(columns="LayerID").iloc[[n for n, _ in resnet[1]].index(
        "res2a_branch2a")]
    return [
        {"name": "bert_base 32x32 ws [attention_scores, attention_context, attention_scores]",
         "cfg": cfg_for(32, "ws"), "gemm": True, "header": bert[0],
         "a": b["attention_scores"], "b": b["attention_context"]},
        {"name": "resnet50 32x32 is [res2a_branch2a, res2a_branch2c, res2a_branch2a]",
         "cfg": cfg_for(32, "is"), "gemm": False, "header": resnet[0],
         "a": r["res2a_branch2a"], "b": r["res2a_branch2c"]},
        {"name": "resnet50 128x128 ws res2a_branch2a alone vs its whole-network row",
         "cfg": cfg_for(128, "ws"), "gemm": False, "header": resnet[0],
         "a": r["res2a_branch2a"], "expected": expected.astype(float)},
    ]


OFF_BY = 0.05  # per-layer error worth a line of explanation


def per_layer_section(sizes: tuple[int, ...] = PER_LAYER_SIZES) -> list[str]:
    """The arrays compared one layer at a time: what was compared, per-layer errors, what
    was not and why."""
    checks = pd.read_csv(layers.STATELESS) if layers.STATELESS.exists() else None
    tried = layers.attempts().set_index("key")
    caps = " or ".join(f"{c:g}" for c in sorted(set(tried["mem_cap_gb"].astype(float))))
    out = ["", f"## {', '.join(f'{s}x{s}' for s in sizes)}: SCALE-Sim one layer at a time", "",
           "A whole-network SCALE-Sim run on these arrays did not finish in the time given "
           "(BERT-base ws: over 96 minutes and 9 GB resident, stopped), so SCALE-Sim was run "
           "on one-layer topologies, smallest first, niced, one at a time, each under a "
           f"wall-clock cap and a {caps} GB address-space cap (`--layers CAP_S "
           "[--mem-cap-gb GB]`; `results/scalesim_cache/layers/`, caps per run in "
           "`attempts.csv`). SCALE-Sim builds a fresh "
           "memory system and operand matrices per layer (`simulator.run`, "
           "`single_layer_sim.run`), so a layer run alone gives its row of a whole-network "
           "run, and a layer with the same topology row as one run stands for it.",
           "",
           "The first runs used SCALE-Sim as installed; the layers it could not finish were "
           "then run with the same SCALE-Sim under a runtime patch "
           "(`benchmarks/scalesim/fast.py`, `--layers CAP_S --fast`) that replaces its memory "
           "model's Python loops and quadratic array growth with equivalent faster code: same "
           "simulation, byte-identical reports (evidence below). `layers/attempts.csv` says "
           "which runner made each cached row (`runner`)."]
    if checks is not None:
        whole = checks["case"].str.contains("whole-network run (patched", regex=False)
        out += ["", f"Checked (`--check-stateless`, `layers/stateless.csv`): {len(checks)} "
                f"checks, identical rows in {int(checks['identical'].sum())}: a layer alone vs "
                "first and third in [A, B, A] (GEMM and conv form, 32x32), alone vs its row "
                "of the cached 128x128 ResNet-50 ws run, and every repeated topology row within "
                "the 12 cached whole-network runs"
                + ("; and whole-network runs of the patched SCALE-Sim on 32x32 "
                   "(`--check-whole`), every row against the one-layer runs cached for it: "
                   + "; ".join(f"{c}: {'identical' if ok else 'DIFFERENT'}" for c, ok in
                               zip(checks["case"][whole], checks["identical"][whole],
                                   strict=True)) if whole.any() else "") + "."]
    table: list[dict] = []
    gaps: list[str] = []
    off: list[str] = []
    for size in sizes:
        for net in NETS:
            byflow = {flow: per_layer(net, size, flow) for flow in DATAFLOWS}
            names = [r["layer"] for r in byflow[DATAFLOWS[0]]]
            for i, name in enumerate(names):
                row = {"network": net, "layer": name}
                for flow in DATAFLOWS:
                    r = byflow[flow][i]
                    row[flow] = "-" if r["scalesim"] is None else (
                        f"{(r['accelsim'] - r['scalesim']) / r['scalesim']:+.1%} "
                        f"({r['scalesim']:,.0f})")
                if any(row[f] != "-" for f in DATAFLOWS):
                    table.append(row)
            for flow in DATAFLOWS:
                off += [f"- {net} {size}x{size} {flow} {r['layer']}: "
                        f"{(r['accelsim'] - r['scalesim']) / r['scalesim']:+.1%}"
                        f"{layers.approximation(net, r['layer'], NETS[net])}" for r in byflow[flow]
                        if r["scalesim"] is not None and r["layer"] == r["run"]
                        and abs(r["accelsim"] - r["scalesim"]) > OFF_BY * r["scalesim"]]
                lost: dict[str, list[str]] = {}
                for r in byflow[flow]:
                    if r["scalesim"] is not None:
                        continue
                    keys = [layers.layer_key(net, size, flow, name) for name in
                            layers.same_shape(net, r["layer"])]  # its run may be a twin's
                    k = next((k for k in keys if k in tried.index), None)
                    why = (f"SCALE-Sim {tried.loc[k, 'outcome']} at the "
                           f"{tried.loc[k, 'cap_s']:.0f} s cap" if k is not None
                           else "not run (smallest first: time ran out)")
                    lost.setdefault(why, []).append(r["layer"])
                done = len(byflow[flow]) - sum(map(len, lost.values()))
                runs = {layers.layer_key(net, size, flow, r["run"])
                        for r in byflow[flow] if r["run"] is not None}
                fast = sum(tried.loc[k, "runner"] == "fast" for k in runs if k in tried.index)
                wall_s = sum(float(tried.loc[k, "wall_s"]) for k in runs if k in tried.index)
                gaps.append(f"- {net} {size}x{size} {flow}: {done} of {len(byflow[flow])} "
                            f"layers compared ({len(runs)} SCALE-Sim runs, {fast} of them "
                            f"patched; {wall_s:,.0f} s of SCALE-Sim wall time in all)"
                            + "".join(f"; {why}: {', '.join(names)}"
                                      for why, names in lost.items()))
    if table:
        out += ["", "Per layer, (accelsim - SCALE-Sim) / SCALE-Sim total cycles (SCALE-Sim's "
                "cycles in brackets; `-` not compared):", "", markdown(pd.DataFrame(table))]
    if off:
        out += ["", f"Layers off by more than {OFF_BY:.0%} (and where they meet the model's "
                "documented approximations, NBs in `accelsim/devices/systolic/streams.py` and "
                "`systolic/im2col.py`):", "", *off]
    return out + ["", "In the first table, for these arrays: median and worst error over the "
                  "layers compared; stall share over them; network totals only where every "
                  "layer was compared; SCALE-Sim's wall time (the sum of its one-layer runs, "
                  "each distinct row once) only where, in addition, every run was the original "
                  "SCALE-Sim (a patched run's time is not SCALE-Sim's). Where a configuration "
                  "misses layers, those compared are the cheapest for SCALE-Sim, not a sample: "
                  "the medians say nothing about the others.", "", *gaps,
                  *equivalence_section()]


def equivalence_section() -> list[str]:
    """The checks that the patched SCALE-Sim gives the original's reports (equivalence.csv)."""
    rows = summary()
    if not rows:
        return []
    checks = sum(r["checks"] for r in rows)
    same = sum(r["identical"] for r in rows)
    return ["", "### The patched SCALE-Sim runner gives SCALE-Sim's own reports", "",
            f"`python benchmarks/scalesim/run.py equivalence --random --small N --cached "
            f"--whole KEY` (`results/scalesim_cache/{EQUIVALENCE.name}`, one row per check): "
            f"{checks} checks, reports byte-identical in {same}. Each patched run is compared "
            "with the original SCALE-Sim, run beside it now (all three reports), or with the "
            "original's COMPUTE_REPORT cached earlier (every one-layer 32x32 run the original "
            "finished; a whole-network run). Speed-up = original wall time / patched wall time "
            "(niced, on the shared 2-core machine; cached originals often ran beside other "
            "SCALE-Sim runs, which inflates their speed-up). "
            "`tests/validation/test_scalesim.py` repeats "
            "the comparison on its small layers (traces kept whole or only what the reports "
            "read), checks that the patch falls back to the original where it does not apply "
            "(estimated DRAM bandwidth), and checks the patched hit test against a scan of "
            "SCALE-Sim's sets for every address and window.",
            "",
            markdown(pd.DataFrame(rows))]


