"""MLPerf Storage v1.0 predicted from the storage systems' parts.

Run: python benchmarks/fidelity/mlperf_storage.py [--write] [--closed-form]
(--write refits the classes in hw_profiles/fs_classes/ and updates
results/mlperf_storage.md and .json; --closed-form skips the simulations; deterministic).

Each MLPerf Storage row of tests/reference/calibration_measurements.csv names a storage
system; `hw_profiles/storage_systems/<system>.toml` describes it from datasheets (servers,
drives, ports, client hosts, NICs, class), never from the row. The file-system classes' costs
(`hw_profiles/fs_classes/`) are fitted on the rows (`accelsim.calibrate.storage_fit`), per
class. Each row is then predicted by the simulated search
(`accelsim.sim.storage_system.sizing.max_accelerators_system`): the most emulated
accelerators at the AU threshold and the storage throughput at that count, against the
submitted count and throughput. Four views: the fit's priors (its starting values, nothing
fitted), the factors as shipped before this refit, in-sample (fitted on every row), and
leave-one-submitter-out (each
submitter's rows predicted with factors fitted on the other submitters' rows only; a class
that only that submitter ran then takes the factors pooled over the other classes).
"""

from __future__ import annotations

import json
import statistics
import sys
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))  # the repo root: benchmarks.* and this checkout's accelsim
from accelsim.calibrate.storage_fit import (  # noqa: E402
    SHARED,
    StorageRow,
    class_of,
    fit,
    fitted_names,
    from_priors,
    mlperf_storage_rows,
    system_of,
)
from accelsim.profiles.emulation import load_emulation  # noqa: E402
from accelsim.profiles.storage_systems import (  # noqa: E402
    FsClass,
    available_fs_classes,
    load_fs_class,
)
from accelsim.sim.storage_system.sizing import (  # noqa: E402
    closed_form,
    max_accelerators_system,
)

CSV = ROOT / "tests" / "reference" / "calibration_measurements.csv"
RESULTS = ROOT / "benchmarks" / "results" / "mlperf_storage.md"
RESULTS_JSON = RESULTS.with_suffix(".json")
FS_DIR = ROOT / "hw_profiles" / "fs_classes"


def predict(row: StorageRow, fs: FsClass, simulate: bool) -> dict[str, Any]:
    """The row predicted under class costs `fs`: accelerators and throughput (bytes/s)."""
    emu = load_emulation(row.accelerator, row.workload)
    system = system_of(row, fs)
    if not simulate:
        cf = closed_form(emu, system)
        n = int(cf["accelerators"])
        # NB: at the count that passes, AU sits between the threshold and 1; take the threshold.
        tp = n * cf["demand_bytes_per_s"] * emu.au_target
        return {"accelerators": n, "throughput_bytes_per_s": tp, "limit": cf["limit"]}
    rec = max_accelerators_system(emu, system)
    parts = rec["next_parts"] or rec["parts"]
    sat = [p["part"] for p in parts if p["saturated"]]
    return {"accelerators": rec["max_accelerators"],
            "throughput_bytes_per_s": (rec["storage_throughput_gb_s"] or 0.0) * 1e9,
            "limit": ", ".join(sat) or f"none saturated ({parts[0]['part']} busiest)"
            if parts else "none"}


def scored(row: StorageRow, pred: dict[str, Any]) -> dict[str, Any]:
    return {"id": row.id, "system": row.system, "submitter": row.submitter,
            "workload": row.workload, "accelerator": row.accelerator, "hosts": row.hosts,
            "n_submitted": row.accelerators, "n_predicted": pred["accelerators"],
            "throughput_mib_s": row.throughput_bytes_per_s / 2**20,
            "predicted_mib_s": pred["throughput_bytes_per_s"] / 2**20,
            "error": pred["throughput_bytes_per_s"] / row.throughput_bytes_per_s - 1,
            "limit": pred["limit"]}


def summary(results: list[dict[str, Any]]) -> dict[str, Any]:
    errs = [abs(r["error"]) for r in results]
    # One step: one more (or fewer) accelerator on every client host, as submitters scale.
    steps = [abs(r["n_predicted"] - r["n_submitted"]) <= r["hosts"] for r in results]
    return {"rows": len(results), "median_abs_error": statistics.median(errs),
            "within_25pct": sum(e <= 0.25 for e in errs) / len(errs),
            "count_within_one": sum(steps) / len(steps)}


def evaluate(rows: list[StorageRow], base: dict[str, FsClass], simulate: bool
             ) -> dict[str, Any]:
    fitted = fit(rows, base)
    priors = from_priors(base)
    views: dict[str, list[dict[str, Any]]] = {
        "priors": [scored(r, predict(r, priors[class_of(r)], simulate)) for r in rows],
        "shipped": [scored(r, predict(r, base[class_of(r)], simulate)) for r in rows],
        "in_sample": [scored(r, predict(r, fitted[class_of(r)], simulate)) for r in rows]}
    loso: list[dict[str, Any]] = []
    for sub in sorted({r.submitter for r in rows}):
        held = [r for r in rows if r.submitter == sub]
        others = fit([r for r in rows if r.submitter != sub], base)
        loso += [scored(r, predict(r, others[class_of(r)], simulate)) for r in held]
    views["leave_one_submitter_out"] = sorted(loso, key=lambda r: r["id"])
    return {"fitted": fitted, "views": views,
            "summary": {k: summary(v) for k, v in views.items()}}


FIELD_UNITS = {  # FsClass attribute -> (TOML key, factor from SI)
    "drive_read_efficiency": ("drive_read_efficiency", 1.0),
    "request_latency_s": ("request_latency_us", 1e6),
    "client_core_s_per_byte": ("client_core_us_per_mb", 1e12),
    "client_core_s_per_sample": ("client_core_us_per_sample", 1e6),
    "client_core_s_per_file": ("client_core_us_per_file", 1e6),
    "server_core_s_per_byte": ("server_core_us_per_mb", 1e12),
    "offload_client_core_s_per_byte": ("offload_client_core_us_per_mb", 1e12),
}


def write_classes(fitted: dict[str, FsClass], rows: list[StorageRow]) -> None:
    """Rewrite each fitted class's factors (and their sources) in its TOML, in place."""
    import re

    for name, fs in fitted.items():
        ids = sorted(r.id for r in rows if class_of(r) == name)
        own = (f"{len(ids)} MLPerf Storage v1.0 rows of class {name} ({ids[0]}..{ids[-1]})"
               if ids else "no row of its own: pooled over the other classes' rows")
        every = (f"all {len(rows)} MLPerf Storage v1.0 rows of tests/reference/"
                 "calibration_measurements.csv, one value for every class (the client's reader "
                 "and the drives, not the file system)")
        path = FS_DIR / f"{name}.toml"
        body, srcs = path.read_text().split("\n[sources]\n")
        for attr, (key, scale) in FIELD_UNITS.items():
            value = getattr(fs, attr)
            if (value is None or attr not in fitted_names(fs)
                    or not re.search(rf"(?m)^{key} = ", body)):
                continue
            body = re.sub(rf"(?m)^{key} = .*$", f"{key} = {value * scale:.4g}", body)
            where = every if attr in SHARED else own
            srcs = re.sub(rf"(?m)^{key} = .*$", f'{key} = "fitted: benchmarks/fidelity/'
                          f'mlperf_storage.py --write on {where}"', srcs)
        text = body + "\n[sources]\n" + srcs
        path.write_text(text)


def report(ev: dict[str, Any]) -> str:
    s = ev["summary"]
    lines = ["# MLPerf Storage v1.0 predicted from the storage systems' parts", "",
             "Generated by `python benchmarks/fidelity/mlperf_storage.py --write` "
             "(deterministic). Systems: `hw_profiles/storage_systems/` (datasheets, never the "
             "rows); class costs: `hw_profiles/fs_classes/`, fitted per class on these rows. "
             "Throughput error = predicted / measured - 1 at the predicted count (DLIO's MB/s "
             "is MiB/s). Count within one step = |predicted - submitted accelerators| <= "
             "client hosts (a step: one accelerator more or fewer on every host).", "",
             "| view | rows | median abs error | within 25% | count within one step |",
             "| --- | ---: | ---: | ---: | ---: |"]
    for view, v in s.items():
        lines.append(f"| {view.replace('_', ' ')} | {v['rows']} | {v['median_abs_error']:.1%}"
                     f" | {v['within_25pct']:.0%} | {v['count_within_one']:.0%} |")
    lines += ["", "Fitted class costs:", "",
              "| class | drive read eff. | request latency us | client core-us/MB | "
              "client core-us/sample | client core-us/file | server core-us/MB | "
              "DPU client core-us/MB |",
              "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for name, fs in sorted(ev["fitted"].items()):
        def f(v: float | None, k: float) -> str:
            return "-" if v is None else f"{v * k:.4g}"
        lines.append(f"| {name} | {fs.drive_read_efficiency:.3f} | "
                     f"{f(fs.request_latency_s, 1e6)} | {f(fs.client_core_s_per_byte, 1e12)} | "
                     f"{f(fs.client_core_s_per_sample, 1e6)} | "
                     f"{f(fs.client_core_s_per_file, 1e6)} | "
                     f"{f(fs.server_core_s_per_byte, 1e12)} | "
                     f"{f(fs.offload_client_core_s_per_byte, 1e12)} |")
    for view in ("in_sample", "leave_one_submitter_out"):
        lines += ["", f"## {view.replace('_', ' ')}", "",
                  "| row | system | workload | acc. | hosts | N sub. | N pred. | MiB/s | "
                  "predicted | error | limit |",
                  "| --- | --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | --- |"]
        for r in ev["views"][view]:
            lines.append(f"| {r['id'][-3:]} | {r['system']} | {r['workload']} | "
                         f"{r['accelerator']} | {r['hosts']} | {r['n_submitted']} | "
                         f"{r['n_predicted']} | {r['throughput_mib_s']:,.0f} | "
                         f"{r['predicted_mib_s']:,.0f} | {r['error']:+.1%} | {r['limit']} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str]) -> None:
    rows = mlperf_storage_rows(CSV)
    base = {name: load_fs_class(name) for name in available_fs_classes()}
    ev = evaluate(rows, base, simulate="--closed-form" not in argv)
    text = report(ev)
    print(text)
    if "--write" in argv:
        write_classes(ev["fitted"], rows)
        RESULTS.write_text(text)
        out = {"summary": ev["summary"], "views": ev["views"],
               "fitted": {k: {a: v for a, v in asdict(replace(fs, sources={})).items()
                              if a != "sources"} for k, fs in ev["fitted"].items()}}
        RESULTS_JSON.write_text(json.dumps(out, indent=1, sort_keys=True) + "\n")


if __name__ == "__main__":
    main(sys.argv[1:])
