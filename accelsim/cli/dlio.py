"""`accelsim simulate WORKLOAD.yaml --hw SYSTEM [--dlio-summary summary.json]`: a DLIO workload
configuration (`accelsim.profiles.dlio`) run by the MLPerf Storage emulation
(`accelsim.sim.mlperf_storage.emulate`), its dataset read as the file gives it, and DLIO's
summary.json written (`accelsim.results.dlio`).

    run_dlio("unet3d_a100.yaml", "dgx-a100", {"devices": 4}, "summary.json", as_json=False)
"""

from __future__ import annotations

import json
from typing import Any

import click

from accelsim.cli.common import echo_json
from accelsim.cli.storage_sizing import _KNOBS, _system, check_knobs
from accelsim.profiles.dlio import load_dlio
from accelsim.results.dlio import GIB, dlio_summary
from accelsim.sim.mlperf_storage import emulate


def run_dlio(path: str, hardware: str, knobs: dict[str, Any], summary_path: str | None,
             as_json: bool) -> None:
    """Print the emulated run of the DLIO configuration at `path` (text or JSON) and write
    DLIO's summary.json to `summary_path` (if given)."""
    cfg = load_dlio(path)
    check_knobs(knobs, _KNOBS, "a DLIO configuration")
    system = _system(hardware, knobs)
    run_kw = {k: knobs[k] for k in ("steps", "seed") if k in knobs}
    devices = knobs.get("devices", system.device_count)
    rec = emulate(cfg.emulation, system, devices, prefetch=knobs.get("prefetch", cfg.prefetch),
                  dataset=cfg.dataset, **run_kw)
    summary = dlio_summary(cfg, rec, system)
    if summary_path:
        from pathlib import Path

        from accelsim.results.files import write_atomic

        Path(summary_path).parent.mkdir(parents=True, exist_ok=True)
        write_atomic(summary_path, json.dumps(summary, indent=4) + "\n")
    notes = [*cfg.notes]
    if summary["potential_caching"][0]:
        notes.append(f"the dataset ({summary['data_size_per_host_GB']:.1f} GiB) fits in the "
                     f"host's {summary['host_memory_GB'][0]:.0f} GiB: the page cache serves it "
                     "after the first epoch (DLIO warns alike; MLPerf Storage sizes it to 5 x "
                     "DRAM)")
    if cfg.ignored:
        sections = sorted({k.split(".")[0] for k in cfg.ignored})
        notes.append(f"not modelled (DLIO keys read but unused): {', '.join(sections)}")
    if as_json:
        echo_json({"workload": cfg.model, "config": str(cfg.path), "system": system.name,
                   **rec, "au_target": cfg.emulation.au_target, "summary": summary,
                   "ignored": cfg.ignored, "notes": notes})
        return
    emu, ds, m = cfg.emulation, cfg.dataset, summary["metric"]
    lines = [
        f"{cfg.model} from {cfg.path.name} on {system.name} (DLIO emulation, AU >= "
        f"{emu.au_target:.0%})",
        f"  accelerators {rec['devices']}: AU {m['train_au_mean_percentage']:.1f}% "
        f"({'meets' if m['train_au_meet_expectation'] == 'success' else 'misses'} the target),"
        f" {m['train_throughput_mean_samples_per_second']:,.1f} samples/s, "
        f"{m['train_io_mean_MB_per_second']:,.1f} MiB/s read",
        f"  dataset {ds.file_count:,} files x {ds.samples_per_file} samples of "
        f"{cfg.record_length_bytes / GIB * 1024:,.1f} MiB ({ds.file_size_distribution}); batch "
        f"{emu.batch_size}, {emu.computation_time_s:g} s compute per batch, "
        f"{emu.read_threads} read threads",
        *(f"  note: {n}" for n in notes),
    ]
    if summary_path:
        lines.append(f"  summary.json: {summary_path}")
    click.echo("\n".join(lines))
