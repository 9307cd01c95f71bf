"""Single-node NCCL rows of calibration_measurements.csv, for `collective_fidelity.py` (which
writes one report): nccl-tests all_reduce_perf bus bandwidth. Each row is predicted by
`collective_time_s` at the largest message of the row's sweep (-e, stepping by -f from -b) on
the row's GPU count and link class; bus bandwidth by the nccl-tests convention. The link-class
achievable fractions in hw_profiles/efficiency/collectives.toml are fitted here (`nccl_lines`:
the fraction that reproduces the fit row exactly) and every other row is held out.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parents[2]
CSV = ROOT / "tests" / "reference" / "calibration_measurements.csv"


@dataclass(frozen=True)
class NcclCase:
    """What one nccl-tests row (or note) measured, and where it falls in the fit."""

    row: str
    what: str
    link: str  # link profile the GPUs talked over
    gpus: int
    size_bytes: int  # the largest message of the row's sweep
    measured_gb_s: float
    fit: str  # "nvlink" / "pcie": the class it fits; "" held out


def nccl_cases() -> list[NcclCase]:
    """The single-node NCCL rows of the calibration file, by hand from their text."""
    csv = pd.read_csv(CSV, dtype=str).set_index("id")
    value = {i: float(str(csv.loc[i, "value"]).lstrip("~")) for i in ("NCCL-015", "NCCL-016")}
    # NB: "~20 GB/s" is in NCCL-016's notes, not its value; the ring's slowest hop is PCIe.
    return [
        NcclCase("NCCL-016", "2x A100, NV12 NVLink pair (-e 12G -f 2)", "nvlink3", 2, 2**33,
                 value["NCCL-016"], "nvlink"),
        NcclCase("NCCL-016 (note)", "3x A100, ring crossing PCIe Gen4 / NODE", "pcie-gen4-x16",
                 3, 2**33, 20.0, "pcie"),
        NcclCase("NCCL-015", "8x A100 on NVSwitch (-e 1G -f 4)", "nvswitch-gen2", 8, 2**29,
                 value["NCCL-015"], ""),
    ]


def predicted_busbw_gb_s(case: NcclCase) -> float:
    """nccl-tests bus bandwidth the model gives for `case` (ring all-reduce)."""
    from accelsim.interconnect.collectives import bus_factor
    from accelsim.interconnect.nccl import collective_time_s
    from accelsim.profiles.links import load_link

    t, _ = collective_time_s("allreduce", "ring", case.gpus, case.size_bytes,
                             load_link(case.link))
    return case.size_bytes / t * bus_factor("allreduce", case.gpus) / 1e9


def fitted_fraction(case: NcclCase) -> float:
    """The achievable fraction that reproduces `case` exactly (ring closed form solved)."""
    from accelsim.interconnect.collectives import bus_factor, ring_allreduce_time_s
    from accelsim.profiles.links import load_link

    link, n, m = load_link(case.link), case.gpus, float(case.size_bytes)
    target_s = m * bus_factor("allreduce", n) / (case.measured_gb_s * 1e9)
    latency_s = ring_allreduce_time_s(n, 0.0, 1.0, link.latency_s)
    at_full_s = ring_allreduce_time_s(n, m, link.bandwidth_bytes_per_s, 0.0)
    return at_full_s / (target_s - latency_s)


def nccl_lines() -> list[str]:
    from accelsim.profiles.efficiency import load_efficiency

    eff = load_efficiency("collectives")
    out = ["| row | what | link | GPUs | message | measured busbw (GB/s) | predicted (GB/s) "
           "| error | set |", "|---|---|---|---|---|---|---|---|---|"]
    fits = []
    for c in nccl_cases():
        pred = predicted_busbw_gb_s(c)
        out.append(f"| {c.row} | {c.what} | {c.link} | {c.gpus} | {c.size_bytes / 2**20:g} MiB "
                   f"| {c.measured_gb_s:g} | {pred:.1f} | {pred / c.measured_gb_s - 1:+.1%} "
                   f"| {'fit (' + c.fit + ')' if c.fit else 'held out'} |")
        if c.fit:
            in_file = eff[f"fitted.achievable_fraction.{c.fit}"]
            fits.append(f"- `{c.fit}`: fitted {fitted_fraction(c):.4f} on {c.row}; "
                        f"hw_profiles/efficiency/collectives.toml has {in_file}")
    out += ["", "Fitted fractions (the fraction that reproduces the fit row exactly):", "",
            *fits]
    return out
