"""Per work row figures of a systolic array whose operand SRAMs are given (a SCALE-Sim .cfg):
each GEMM of the row through `systolic.sram.gemm_memory`, summed over its instances.

    rows = sram_rows(row_gemms(work, gemms), 32, 32, "ws", profile.operand_srams, len(work))
    rows["stall_cycles"], rows["dram_words"]

Which profiles use it: only those with `operand_srams` (read from a SCALE-Sim .cfg). The
built-in TPU profiles publish a unified buffer, not three operand SRAMs and their DRAM ports,
so they keep the unified-buffer model of `systolic.buffer_dram_bytes` (their fidelity
benchmarks are unchanged).

NB: `count` instances of a GEMM (the groups of a grouped conv, the heads of a batched matmul,
the samples of a conv batch) run one after another, each as SCALE-Sim runs a layer: count x its
cycles (`systolic.gemm_cycles` chains them with one "- 1"; they differ by count - 1 cycles).
NB: unbounded ports (SCALE-Sim's CALC mode) never stall and read each operand once.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from accelsim.devices.mapping import per_row
from accelsim.devices.systolic.im2col import MAX_ELEMS, Im2col
from accelsim.devices.systolic.model import gemm_cycles
from accelsim.devices.systolic.sram import gemm_memory
from accelsim.profiles.device_types import SramSpec
from accelsim.workload.columns import Table

DRAM_KEYS = ("dram_ifmap_reads", "dram_filter_reads", "dram_ofmap_writes")


def bounded_ports(srams: SramSpec) -> bool:
    """Whether every DRAM port has a finite rate (SCALE-Sim's USER mode: stalls modelled);
    False under CALC (unbounded ports, no stalls)."""
    return all(map(math.isfinite, (srams.ifmap_words_per_cycle, srams.filter_words_per_cycle,
                                   srams.ofmap_words_per_cycle)))


def gemm_figures(m: int, n: int, k: int, rows: int, cols: int, dataflow: str,
                 srams: SramSpec, im2col: tuple[int, ...] = ()) -> dict[str, float]:
    """`gemm_memory`'s figures of one GEMM (a conv's: `im2col`, `counts.Gemm.im2col`); with
    unbounded ports (CALC), the no-stall ones."""
    if bounded_ports(srams):
        return gemm_memory(m, n, k, rows, cols, dataflow, srams, tuple(im2col))
    compute = float(gemm_cycles(m, n, k, rows, cols, dataflow))
    return {"compute_cycles": compute, "stall_cycles": 0, "total_cycles": compute,
            "dram_ifmap_reads": m * k, "dram_filter_reads": k * n, "dram_ofmap_writes": m * n}


def sram_rows(g: Table, rows: int, cols: int, dataflow: str, srams: SramSpec,
              n_rows: int) -> pd.DataFrame:
    """Per work row (positions 0 .. n_rows - 1) of the GEMMs `g` (`mapping.row_gemms`):
    compute_cycles, stall_cycles and dram_words (all three operands), summed over the row's
    GEMMs and their `count` instances; 0 for rows without a GEMM."""
    shapes = g["im2col"] if "im2col" in g else [()] * len(g)
    figs = [gemm_figures(int(m), int(n), int(k), rows, cols, dataflow, srams, shape)
            for m, n, k, shape in zip(g["m"], g["n"], g["k"], shapes, strict=True)]
    count = np.asarray(g["count"], dtype=float)

    def column(fn) -> np.ndarray:  # noqa: ANN001 - a figure of one GEMM
        return per_row(np.array([fn(f) for f in figs], dtype=float) * count, g["row"], n_rows)

    return pd.DataFrame({
        "compute_cycles": column(lambda f: f["compute_cycles"]),
        "stall_cycles": column(lambda f: f["stall_cycles"]),
        "dram_words": column(lambda f: sum(f[key] for key in DRAM_KEYS)),
    })


def address_free_layers(work: Table, g: Table) -> list[str]:
    """Layers of `work` with a conv GEMM (`g`: `mapping.row_gemms`) too large to read address
    by address (over `MAX_ELEMS` im2col words): SCALE-Sim's window rule is approximated there."""
    if "im2col" not in g:
        return []
    big = [int(r) for r, m, k, shape in zip(g["row"], g["m"], g["k"], g["im2col"], strict=True)
           if Im2col.too_large(tuple(shape), int(m), int(k))]
    return list(dict.fromkeys(np.asarray(work["name"])[big])) if big else []


def address_free_note(work: Table, g: Table, srams: SramSpec) -> str | None:
    """The estimate's note naming `address_free_layers` (None when there are none, or no
    stall is modelled: `bounded_ports`)."""
    names = address_free_layers(work, g) if bounded_ports(srams) else []
    if not names:
        return None
    shown = ", ".join(names[:6]) + (f" and {len(names) - 6} more" if len(names) > 6 else "")
    return (f"{len(names)} conv layers have over {MAX_ELEMS:,} im2col words: their ifmap SRAM "
            f"stalls use the address-free model (repeated addresses found only at their own "
            f"position), not SCALE-Sim's window rule: {shown}")
