"""SCALE-Sim's three per-layer reports, from the systolic SRAM model: COMPUTE_REPORT.csv,
BANDWIDTH_REPORT.csv and DETAILED_ACCESS_REPORT.csv, with SCALE-Sim v3's columns and format.

    tables = scalesim_tables(graph, profile)            # {"COMPUTE_REPORT": DataFrame, ...}
    write_scalesim_reports(Path("out"), graph, profile)  # accelsim simulate --scalesim-report

One row per forward GEMM of the graph (a layer of a topology CSV), LayerID from 0 in graph
order, as SCALE-Sim numbers its layers. Definitions (`scalesim/single_layer_sim.py`):
Total Cycles = compute + stall cycles; with prefetch: from the first DRAM read of the prefetch
to the last ofmap drain; Overall Util = MACs / (Total Cycles x R x C); Mapping Efficiency =
the mean share of PEs a fold maps; Compute Util = the mean per fold of MACs over R x C x
(fold cycles + C - 1) (os: fold cycles); SRAM bandwidths = reads (writes) / Total Cycles;
DRAM bandwidths = words / (stop - start + 1). SRAM reads count every operand element each
time a fold streams it (`systolic.reuse_factors`).
NB: on os folds narrower than the array SCALE-Sim counts more ofmap SRAM writes than outputs
(3048 for a 1 x 1000 GEMM on 256 x 256); not reproduced.
SRAM start and stop cycles: the first and last demand's no-stall cycle plus the stall by then
(reads one cycle later, the hit latency).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from accelsim.devices.systolic.model import (
    array_mapping,
    dataflow_of,
    fold_counts,
    reuse_factors,
)
from accelsim.devices.systolic.sram import (
    READ_PORT_LATENCY_CYCLES,
    fold_cycles,
    gemm_memory,
    ofmap_writes,
)
from accelsim.devices.systolic.streams import DiagonalLayout, Stream, read_streams
from accelsim.errors import AccelsimError
from accelsim.profiles.device_types import DeviceProfile
from accelsim.results.files import output_folder, write_atomic
from accelsim.workload.graph import Graph
from accelsim.workload.work import gemms_for

COMPUTE = ("Total Cycles (incl. prefetch)", "Total Cycles", "Stall Cycles", "Overall Util %",
           "Mapping Efficiency %", "Compute Util %")
BANDWIDTH = ("Avg IFMAP SRAM BW", "Avg FILTER SRAM BW", "Avg OFMAP SRAM BW",
             "Avg IFMAP DRAM BW", "Avg FILTER DRAM BW", "Avg OFMAP DRAM BW")
DETAILED = tuple(f"{level} {op} {what}" for level, ops in (
    ("SRAM", (("IFMAP", "Reads"), ("Filter", "Reads"), ("OFMAP", "Writes"))),
    ("DRAM", (("IFMAP", "Reads"), ("Filter", "Reads"), ("OFMAP", "Writes"))))
    for op, last in ops for what in ("Start Cycle", "Stop Cycle", last))


def _demand_span(stream: Stream, rows: int, per_fold: int) -> tuple[int, int]:
    """No-stall cycles of a read stream's first and last demand."""
    first_fold, last_fold = int(stream.fold[0]), int(stream.fold[-1])
    if isinstance(stream.layout, DiagonalLayout):
        layout = stream.layout
        width = layout.width_of(int(stream.block[-1]))
        return (first_fold * per_fold + stream.prefix_cycles,
                last_fold * per_fold + stream.prefix_cycles + layout.rows + width - 2)
    used = int(stream.row1[0] - stream.row0[0])  # row-major: bottom row first, R rows a fold
    return first_fold * per_fold + rows - used, last_fold * per_fold + rows - 1


def layer_report(m: int, n: int, k: int, rows: int, cols: int, dataflow: str,
                 profile: DeviceProfile, im2col: tuple[int, ...] = ()) -> dict[str, float]:
    """The three reports' figures of one GEMM (a conv's: `im2col`, `counts.Gemm.im2col`)
    (module docstring)."""
    srams = profile.operand_srams
    if srams is None:
        raise AccelsimError(f"{profile.name}: SCALE-Sim reports need a systolic array with "
                            "operand SRAMs (a SCALE-Sim .cfg)")
    if not math.isfinite(srams.ifmap_words_per_cycle + srams.filter_words_per_cycle
                         + srams.ofmap_words_per_cycle):
        raise AccelsimError(f"{profile.name}: SCALE-Sim reports need DRAM ports of a given "
                            "bandwidth (InterfaceBandwidth USER), not CALC (SCALE-Sim sizes "
                            "each CALC prefetch to the demand as it runs; not reproduced)")
    f = gemm_memory(m, n, k, rows, cols, dataflow, srams, tuple(im2col))
    sr, sc, t = array_mapping(m, n, k, dataflow)
    fr, fc = (int(x) for x in fold_counts(m, n, k, rows, cols, dataflow))
    per_fold = fold_cycles(rows, cols, t, dataflow)
    total, stall, timeline = f["total_cycles"], f["stall_cycles"], f["stall_timeline"]
    mapping = sr * sc / (fr * fc * rows * cols)
    passes = reuse_factors(m, n, k, rows, cols, dataflow)
    sram = [float(m * k * passes[0]), float(k * n * passes[1]), float(m * n * passes[2])]
    spans = [_demand_span(s, rows, per_fold) for s in read_streams(m, n, k, rows, cols,
                                                                   dataflow)]
    writes = ofmap_writes(m, n, k, rows, cols, dataflow, per_fold)
    out = {
        "Total Cycles (incl. prefetch)": int(f["total_cycles_with_prefetch"]),
        "Total Cycles": total, "Stall Cycles": stall,
        "Overall Util %": 100.0 * m * n * k / (total * rows * cols),
        "Mapping Efficiency %": 100.0 * mapping,
        "Compute Util %": 100.0 * mapping * t / (per_fold + (cols - 1 if dataflow != "os"
                                                             else 0)),
    }
    names = ("IFMAP", "Filter", "OFMAP")
    for i, (first, last) in enumerate(spans):
        lat = READ_PORT_LATENCY_CYCLES
        out[f"SRAM {names[i]} Start Cycle"] = float(first + lat + timeline.at(first))
        out[f"SRAM {names[i]} Stop Cycle"] = float(last + lat + timeline.at(last))
        out[f"SRAM {names[i]} Reads"] = sram[i]
    out["SRAM OFMAP Start Cycle"] = float(writes.first[0] + timeline.at(writes.first[0]))
    out["SRAM OFMAP Stop Cycle"] = float(writes.last[-1] + stall)
    out["SRAM OFMAP Writes"] = sram[2]
    for name, key in zip(names, ("dram_ifmap", "dram_filter", "dram_ofmap"), strict=True):
        words = f[f"{key}_{'writes' if name == 'OFMAP' else 'reads'}"]
        start, stop = f[f"{key}_first"], f[f"{key}_last"]
        out[f"DRAM {name} Start Cycle"] = float(start)
        out[f"DRAM {name} Stop Cycle"] = float(stop)
        out[f"DRAM {name} {'Writes' if name == 'OFMAP' else 'Reads'}"] = words
        out[f"Avg {name.upper()} DRAM BW"] = words / (stop - start + 1)
    for i, name in enumerate(("IFMAP", "FILTER", "OFMAP")):
        out[f"Avg {name} SRAM BW"] = sram[i] / total
    return out


def scalesim_tables(graph: Graph, profile: DeviceProfile, batch: int = 1,
                    dataflow: str | None = None) -> dict[str, pd.DataFrame]:
    """The three reports of `graph`'s forward GEMMs on `profile` (a SCALE-Sim array)."""
    c = profile.compute
    flow = dataflow or dataflow_of(profile)
    gemms = gemms_for(graph, batch)
    rows: list[dict[str, Any]] = []
    for m, n, k, count, shape in zip(gemms["m"], gemms["n"], gemms["k"], gemms["count"],
                                     gemms["im2col"], strict=True):
        for _ in range(int(count)):  # NB: each instance is a layer, as SCALE-Sim runs them
            rows.append(layer_report(int(m), int(n), int(k), int(c.mxu_rows),
                                     int(c.mxu_cols), flow, profile, shape))
    frame = pd.DataFrame(rows, columns=[*COMPUTE, *BANDWIDTH, *DETAILED])
    counts = [col for col in frame if col.endswith(("Reads", "Writes", "Total Cycles",
                                                    "prefetch)", "Stall Cycles"))]
    frame[counts] = frame[counts].astype(np.int64)
    frame.insert(0, "LayerID", np.arange(len(frame)))
    return {"COMPUTE_REPORT": frame[["LayerID", *COMPUTE]],
            "BANDWIDTH_REPORT": frame[["LayerID", *BANDWIDTH]],
            "DETAILED_ACCESS_REPORT": frame[["LayerID", *DETAILED]]}


def _csv(frame: pd.DataFrame) -> str:
    """SCALE-Sim's CSV dialect: ", " between fields and a trailing comma on every line."""
    lines = [", ".join(frame.columns) + ","]
    lines += [", ".join(str(v) for v in row) + "," for row in frame.itertuples(index=False)]
    return "\n".join(lines) + "\n"


def write_scalesim_reports(directory: Path, graph: Graph, profile: DeviceProfile,
                           batch: int = 1, dataflow: str | None = None) -> list[Path]:
    """Write the three reports into `directory` (created); returns their paths."""
    directory = output_folder(directory, "--scalesim-report")
    paths = []
    for name, frame in scalesim_tables(graph, profile, batch, dataflow).items():
        paths.append(write_atomic(directory / f"{name}.csv", _csv(frame)))
    return paths
