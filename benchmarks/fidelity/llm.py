"""Every row of llm_calibration_measurements.csv predicted (issue 20 item 7): what accelsim says
beside what was measured, the rows it cannot express and why, the median |error| per metric
and per source.

Run: python benchmarks/fidelity/llm.py [--write] [--only ID_PREFIX] [--jobs N]
(--write updates results/llm_fidelity.md and .json). Rows are mapped by
`accelsim.calibrate.llm_rows` (its docstring states each assumption). Error = predicted /
measured - 1 (negative: accelsim too slow for throughput, too fast for a latency).
"""

from __future__ import annotations

import argparse
import json
import math
import re
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import replace
from itertools import product
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))  # the repo root: this checkout's accelsim
from accelsim.calibrate.llm_rows import LlmCase, llm_cases  # noqa: E402
from accelsim.errors import AccelsimError  # noqa: E402
from accelsim.run import run_simulation  # noqa: E402
from accelsim.sim.knobs import make_config  # noqa: E402

CSV = ROOT / "tests" / "reference" / "llm_calibration_measurements.csv"
RESULTS = ROOT / "benchmarks" / "results" / "llm_fidelity"
GROUPS = {"tokens_per_s": "throughput", "train_tokens_per_s_per_gpu": "training tokens/s",
          "ttft_mean_s": "TTFT", "tpot_mean_s": "TPOT", "e2e_latency_s": "batch latency"}
LATENCIES = ("ttft_mean_s", "tpot_mean_s", "e2e_latency_s")


def predict(case: LlmCase) -> dict[str, Any]:
    """The case run: its predicted metric, or the error that stopped it."""
    t0 = time.perf_counter()
    out: dict[str, Any] = {"id": case.id}
    try:
        rec = run_simulation(make_config(case.model, case.hardware, **case.knobs)).record
    except AccelsimError as err:
        return out | {"error": str(err), "seconds": time.perf_counter() - t0}
    if not rec.get("memory", {}).get("fits", True):
        return out | {"error": "does not fit in device memory",
                      "seconds": time.perf_counter() - t0}
    if case.metric == "train_tokens_per_s_per_gpu":
        value = rec.get("tokens_per_s")
        value = None if value is None else value / case.gpus
    else:
        value = rec.get(case.metric)
        if case.metric == "tokens_per_s" and value is not None:
            value *= case.engines
    return out | {"predicted": value, "seconds": time.perf_counter() - t0,
                  "mfu": rec.get("mfu"), "bottleneck": rec.get("bottleneck")}


def _median(xs: list[float]) -> float | None:
    if not xs:
        return None
    s = sorted(xs)
    n = len(s)
    return s[n // 2] if n % 2 else 0.5 * (s[n // 2 - 1] + s[n // 2])


def summarise(cases: list[LlmCase], got: dict[str, dict[str, Any]]) -> dict[str, Any]:
    rows = []
    for c in cases:
        g = got[c.id]
        err = (g["predicted"] / c.measured - 1.0
               if g.get("predicted") not in (None, 0) and c.measured else None)
        rows.append({"id": c.id, "source": c.source, "model": c.model, "hardware": c.hardware,
                     "knobs": c.knobs, "metric": c.metric, "measured": c.measured,
                     "predicted": g.get("predicted"), "error": err, "run_error": g.get("error"),
                     "seconds": g.get("seconds"), "notes": list(c.notes)})

    def med(sel: list[dict[str, Any]]) -> dict[str, Any]:
        errs = [abs(r["error"]) for r in sel if r["error"] is not None]
        signed = [r["error"] for r in sel if r["error"] is not None]
        return {"rows": len(sel), "predicted": len(errs), "median_abs_error": _median(errs),
                "median_error": _median(signed),
                "within_25pct": (sum(e <= 0.25 for e in errs) / len(errs)) if errs else None}

    by_metric = {GROUPS[m]: med([r for r in rows if r["metric"] == m]) for m in GROUPS}
    by_source = {s: med([r for r in rows if r["source"] == s])
                 for s in sorted({r["source"] for r in rows})}
    return {"rows": rows, "by_metric": by_metric, "by_source": by_source, "all": med(rows)}


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{x:+.1%}"


def _num(x: float | None, metric: str) -> str:
    if x is None or not math.isfinite(x):
        return "-"
    if metric in LATENCIES:
        return f"{x * 1e3:,.1f} ms"
    return f"{x:,.0f}"


def markdown(summary: dict[str, Any], skipped: list[Any], total: int) -> str:
    rows = summary["rows"]
    expressible = len(rows)
    lines = ["# LLM fidelity: the rows of llm_calibration_measurements.csv", "",
             "`python benchmarks/fidelity/llm.py --write`. Mapping and assumptions: "
             "`accelsim/calibrate/llm_rows.py`. Error = predicted / measured - 1 "
             "(throughput: negative is too slow; latency: negative is too fast).", "",
             f"Expressible: {expressible} of {total} rows ({expressible / total:.0%}); "
             f"predicted: {summary['all']['predicted']}.", "",
             "| metric | rows | predicted | median abs error | median error | within 25% |",
             "| --- | --- | --- | --- | --- | --- |"]
    for name, m in summary["by_metric"].items():
        lines.append(f"| {name} | {m['rows']} | {m['predicted']} | "
                     f"{_pct(m['median_abs_error'])} | {_pct(m['median_error'])} | "
                     + ("-" if m["within_25pct"] is None else f"{m['within_25pct']:.0%}")
                     + " |")
    lines += ["", "| source | rows | predicted | median abs error | median error |",
              "| --- | --- | --- | --- | --- |"]
    for name, m in summary["by_source"].items():
        lines.append(f"| {name} | {m['rows']} | {m['predicted']} | "
                     f"{_pct(m['median_abs_error'])} | {_pct(m['median_error'])} |")
    lines += ["", "## Rows", "", "| id | model | hardware | knobs | measured | predicted | "
              "error |", "| --- | --- | --- | --- | --- | --- | --- |"]
    for r in rows:
        k = r["knobs"]
        knobs = ", ".join(f"{key}={k[key]}" for key in ("precision", "kv_precision", "tp",
                                                         "pp", "cp", "vp", "devices", "nodes",
                                                         "batch", "accumulate", "lora_rank",
                                                         "prompt_tokens", "output_tokens",
                                                         "rate", "software") if key in k)
        pred = (_num(r["predicted"], r["metric"]) if r["run_error"] is None
                else f"error: {r['run_error']}")
        lines.append(f"| {r['id']} | {r['model']} | {r['hardware']} | {knobs} | "
                     f"{_num(r['measured'], r['metric'])} | {pred} | {_pct(r['error'])} |")
    fit_path = ROOT / "benchmarks" / "results" / "llm_fit.json"
    if fit_path.exists():
        lines += _fit_lines(json.loads(fit_path.read_text()),
                            {r["id"]: r["metric"] for r in rows})
    lines += ["", "## Rows not expressible", "", "| id | why |", "| --- | --- |"]
    lines += [f"| {s.id} | {s.why} |" for s in skipped]
    return "\n".join(lines) + "\n"


# What is fitted on the rows (issue 20 item 2), per stack, on a grid: the tensor-core and
# DRAM-bandwidth modifiers (each times the GPU class factor, the product capped at 1) and the
# host time per kernel on the GPU (the engines run without CUDA graphs), and for
# FasterTransformer the host time per step (it syncs with the host each step) and per
# tensor-parallel collective call.
FIT_GRID = {"tensorrt-llm": {"tensor_core": (1.0, 1.1, 1.2, 1.3),
                             "dram_bandwidth": (1.0, 1.15, 1.3),
                             "per_kernel_us": (1.0, 4.0, 8.0)},
            "megatron": {"tensor_core": (0.9, 1.0, 1.1, 1.2)},
            "fastertransformer": {"tensor_core": (1.0, 1.1),
                                  "per_kernel_us": (1.0, 5.0, 10.0, 20.0, 30.0),
                                  "per_step_us": (0.0, 1000.0, 3000.0),
                                  "per_collective_us": (0.0, 25.0, 50.0, 100.0, 150.0)}}
# What a fold leaves out: a source, or (a stack whose rows are all one source and one GPU) a
# model, so that the held-out error is of a model size the fit never saw.
FOLD_BY = {"fastertransformer": "model"}
STACKS = ROOT / "hw_profiles" / "software"
FIT_DIR = Path("/tmp/accelsim_llm_fit")
_KEYS = {"tensor_core": r"(?m)^tensor_core = .*$", "dram_bandwidth": r"(?m)^dram_bandwidth = .*$",
         "per_kernel_us": r"(?m)^gpu = .*$", "per_step_us": r"(?m)^per_step_us = .*$",
         "per_collective_us": r"(?m)^per_collective_us = .*$"}


def _stack_file(stack: str, point: dict[str, float]) -> str:
    """A copy of `stack`'s file with the grid point's figures set, in FIT_DIR; its path."""
    text = (STACKS / f"{stack}.toml").read_text()
    for key, value in point.items():
        name = "gpu" if key == "per_kernel_us" else key
        text = re.sub(_KEYS[key], f"{name} = {value}", text, count=1)
    FIT_DIR.mkdir(parents=True, exist_ok=True)
    path = FIT_DIR / (stack + "".join(f"-{k}{v}" for k, v in point.items()) + ".toml")
    path.write_text(text)
    return str(path)


def _log_err(pred: float | None, meas: float) -> float | None:
    return None if not pred or pred <= 0 else abs(math.log(pred / meas))


def fit(cases: list[LlmCase], jobs: int, stacks: tuple[str, ...] = tuple(FIT_GRID)
        ) -> dict[str, Any]:
    """Each stack's rows predicted at every grid point; the in-sample best point (least
    median |log error|) and, per source left out, the point fitted on the other sources with
    its errors on the one left out."""
    out: dict[str, Any] = {}
    for stack, grid in FIT_GRID.items():
        if stack not in stacks:
            continue
        rows = [c for c in cases if c.knobs.get("software") == stack]
        keys = list(grid)
        points = [dict(zip(keys, values, strict=True)) for values in product(*grid.values())]
        runs = [replace(c, knobs=c.knobs | {"software": _stack_file(stack, p)})
                for p in points for c in rows]
        with ProcessPoolExecutor(jobs) as pool:
            got = list(pool.map(predict, runs, chunksize=4))
        pred = [{c.id: got[i * len(rows) + j].get("predicted") for j, c in enumerate(rows)}
                for i in range(len(points))]

        def score(i: int, sel: list[LlmCase], pred: list[dict[str, Any]] = pred) -> float:
            errs = [_log_err(pred[i][c.id], c.measured) for c in sel]
            errs = [e for e in errs if e is not None]
            return _median(errs) if errs else math.inf

        def errors(i: int, sel: list[LlmCase], pred: list[dict[str, Any]] = pred
                   ) -> dict[str, float]:
            return {c.id: pred[i][c.id] / c.measured - 1 for c in sel if pred[i][c.id]}

        best = min(range(len(points)), key=lambda i: score(i, rows))
        folds = {}
        by = FOLD_BY.get(stack, "source")
        for source in sorted({getattr(c, by) for c in rows}):
            train = [c for c in rows if getattr(c, by) != source]
            held = [c for c in rows if getattr(c, by) == source]
            if not train:
                folds[source] = {"point": None, "fitted_on": 0, "errors": {},
                                 "median_abs_error": None}
                continue
            i = min(range(len(points)), key=lambda k: score(k, train))
            errs = errors(i, held)
            folds[source] = {"point": points[i], "fitted_on": len(train), "errors": errs,
                             "median_abs_error": _median([abs(e) for e in errs.values()])}
        out[stack] = {"rows": len(rows), "best": points[best], "folds_by": by,
                      "in_sample": errors(best, rows),
                      "grid": [{"point": p, "median_abs_log_error": score(i, rows)}
                               for i, p in enumerate(points)],
                      "folds": folds}
    return out


def _fit_lines(result: dict[str, Any], metric_of: dict[str, str]) -> list[str]:
    """The fit's in-sample point and leave-one-source-out folds (results/llm_fit.json, written
    by --fit at the grid in FIT_GRID; the shipped stack files hold the in-sample point)."""
    lines = ["", "## Fitted on these rows, and held out", "",
             "`python benchmarks/fidelity/llm.py --fit --jobs 2` (about 35 min on 2 cores): each "
             "stack's figures on a grid, the in-sample best (least median |log error|, shipped "
             "in its stack file) and, for each source left out (for fastertransformer, whose rows "
             "are one source on one GPU: each model left out), the point fitted on the others "
             "and its error on what was left out.", "",
             "| stack | rows | fitted point | in-sample median abs error | left out | "
             "point fitted on the others | held-out rows | held-out median abs error |",
             "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    for stack, r in result.items():
        ins = _median([abs(e) for e in r["in_sample"].values()])
        for source, f in r["folds"].items():
            point = "-" if f["point"] is None else ", ".join(
                f"{k} {v:g}" for k, v in f["point"].items())
            best = ", ".join(f"{k} {v:g}" for k, v in r["best"].items())
            what = source if r.get("folds_by", "source") == "source" else f"model {source}"
            lines.append(f"| {stack} | {r['rows']} | {best} | {_pct(ins)} | {what} | "
                         f"{point} | {len(f['errors'])} | {_pct(f['median_abs_error'])} |")
        pooled = [abs(e) for f in r["folds"].values() for e in f["errors"].values()]
        lines.append(f"| {stack} | | | | all held out, pooled | | {len(pooled)} | "
                     f"{_pct(_median(pooled))} |")
    held: dict[str, list[float]] = {}
    for r in result.values():
        for f in r["folds"].values():
            for rid, e in f["errors"].items():
                held.setdefault(GROUPS.get(metric_of.get(rid, ""), "other"), []).append(abs(e))
    lines += ["", "Held out, by metric (every fitted stack's folds pooled; rows of unfitted "
              "stacks, such as vllm's, are not in them):", "",
              "| metric | held-out rows | median abs error | within 25% |",
              "| --- | --- | --- | --- |"]
    for name, errs in held.items():
        lines.append(f"| {name} | {len(errs)} | {_pct(_median(errs))} | "
                     f"{sum(e <= 0.25 for e in errs) / len(errs):.0%} |")
    return lines


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--write", action="store_true")
    ap.add_argument("--only", default=None, help="run rows whose id starts with this")
    ap.add_argument("--jobs", type=int, default=1)
    ap.add_argument("--fit", action="store_true", help="fit the stacks' modifiers on a grid "
                    "(results/llm_fit.json), with leave-one-source-out folds")
    ap.add_argument("--stack", default=None, choices=sorted(FIT_GRID),
                    help="with --fit: refit this stack only, keeping the others' results")
    args = ap.parse_args()
    cases, skipped = llm_cases(CSV)
    total = len(cases) + len(skipped)
    if args.only:
        cases = [c for c in cases if c.id.startswith(args.only)]
    t0 = time.perf_counter()
    if args.fit:
        fit_path = ROOT / "benchmarks" / "results" / "llm_fit.json"
        stacks = tuple(FIT_GRID) if args.stack is None else (args.stack,)
        result = fit(cases, args.jobs, stacks)
        if args.stack is not None and fit_path.exists():
            result = json.loads(fit_path.read_text()) | result
        fit_path.write_text(json.dumps(result, indent=1) + "\n")
        for stack, r in result.items():
            print(stack, r["rows"], "rows; best", r["best"],
                  {s: (f["point"], f["median_abs_error"]) for s, f in r["folds"].items()})
        print(f"{time.perf_counter() - t0:.0f} s")
        return
    if args.jobs > 1:
        with ProcessPoolExecutor(args.jobs) as pool:
            got = {g["id"]: g for g in pool.map(predict, cases)}
    else:
        got = {}
        for c in cases:
            got[c.id] = predict(c)
            g = got[c.id]
            print(f"{c.id}: {g.get('predicted')} vs {c.measured} "
                  f"({g.get('error', '')}) {g['seconds']:.1f} s", flush=True)
    summary = summarise(cases, got)
    text = markdown(summary, skipped, total)
    print(text)
    print(f"{time.perf_counter() - t0:.0f} s")
    if args.write:
        RESULTS.with_suffix(".md").write_text(text)
        RESULTS.with_suffix(".json").write_text(json.dumps(
            {"summary": {k: v for k, v in summary.items() if k != "rows"},
             "rows": summary["rows"], "skipped": [s.__dict__ for s in skipped]},
            indent=1, default=str) + "\n")


if __name__ == "__main__":
    main()
