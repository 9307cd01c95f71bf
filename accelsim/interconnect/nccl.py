"""The collective model the training pipeline and `accelsim collective` share: the closed forms
of `accelsim.interconnect.collectives` at the achievable bandwidth of the link class, NCCL-like
algorithm choice, and the share of a device's compute a running collective takes.

    link = load_system("dgx-a100").device_to_device
    time_s, algorithm = collective_time_s("allreduce", "auto", 8, 100e6, link)
    collective_table("allreduce", 8, parse_sizes("8B:8GB"), link, "auto")   # nccl-tests-like

Achievable bandwidth: the theoretical per-device bandwidth times the achievable fraction of the
link's class (`hw_profiles/efficiency/collectives.toml`: NVLink and NVSwitch one class, PCIe
another, fitted on the NCCL rows of the calibration file). A link of another class (Ethernet,
InfiniBand, ICI) uses its published achieved efficiency, else its theoretical bandwidth, and
says so. "auto" picks the fastest algorithm the link offers for the message (NCCL's tuner
does the same from its own model): ring, tree, and nvls where the switch reduces in-network.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pandas as pd

from accelsim.errors import AccelsimError, ConfigError
from accelsim.interconnect.collectives import bus_factor, op_algorithms
from accelsim.interconnect.collectives import collective_time_s as closed_form_s
from accelsim.numbers import is_float_text, shown
from accelsim.profiles.efficiency import load_efficiency
from accelsim.profiles.links import Link

AUTO = "auto"
LINK_CLASSES = {"nvlink": "nvlink", "nvswitch": "nvlink", "pcie": "pcie"}
CLASS_NAMES = {"nvlink": "NVLink/NVSwitch", "pcie": "PCIe"}
# NB: a bound of the contention model, not a hardware or software figure (no source could
# give it): a running collective never stalls compute outright. It binds only where the model
# leaves its range: 3 x the link's achievable bandwidth over the memory bandwidth is 1.33 on
# tpu-v3-8 (ICI), capped here; every shipped GPU's SM share is at most 0.4 (t4).
_MAX_SHARE = 0.9
_SIZE_UNITS = {"": 1, "B": 1, "K": 2**10, "KB": 2**10, "KIB": 2**10, "M": 2**20, "MB": 2**20,
               "MIB": 2**20, "G": 2**30, "GB": 2**30, "GIB": 2**30, "T": 2**40, "TB": 2**40,
               "TIB": 2**40}
MAX_MESSAGE_BYTES = 2**40  # 1 TiB: beyond any device's memory


@dataclass(frozen=True)
class Achievable:
    """The bandwidth a collective reaches on a link, and what that figure rests on."""

    fraction: float  # of the theoretical per-device bandwidth
    bandwidth_bytes_per_s: float
    basis: str  # one line: fitted for the class, published, or theoretical (unknown)
    known: bool = True  # False: no achievable figure, the theoretical bandwidth stands in


def achievable(link: Link) -> Achievable:
    """Achievable per-device bandwidth of collectives over `link` (see the module docstring)."""
    cls = LINK_CLASSES.get(link.kind)
    if cls is not None:
        frac = float(load_efficiency("collectives")[f"fitted.achievable_fraction.{cls}"])
        basis = (f"{CLASS_NAMES[cls]} class fraction {frac:.3g} fitted on NCCL rows "
                 "(hw_profiles/efficiency/collectives.toml)")
    elif link.achieved_efficiency is not None:
        frac = link.achieved_efficiency
        basis = (f"no NCCL rows for {link.kind}: the link's published achieved efficiency "
                 f"{frac:.3g}")
    else:
        frac = 1.0
        basis = (f"no NCCL rows and no achieved figure for {link.kind} ('{link.name}'): "
                 "theoretical bandwidth, achievable unknown")
    return Achievable(frac, link.bandwidth_bytes_per_s * frac, basis, cls is not None
                      or link.achieved_efficiency is not None)


def proxy_cores_per_rank() -> int:
    """Host cores each rank's NCCL proxy thread keeps busy when collectives cross nodes
    (`assumed.nccl_proxy_cores_per_rank` of hw_profiles/efficiency/collectives.toml)."""
    value = load_efficiency("collectives")["assumed.nccl_proxy_cores_per_rank"]
    if not isinstance(value, int):
        raise ConfigError("hw_profiles/efficiency/collectives.toml",
                          "assumed.nccl_proxy_cores_per_rank", value, "expected a whole number")
    return value


def algorithms(op: str, link: Link) -> tuple[str, ...]:
    """The algorithms `op` can run over `link` (nvls only where the switch reduces)."""
    return tuple(a for a in op_algorithms(op) if a != "nvls" or link.in_switch_reduction)


def check_algorithm(op: str, algorithm: str, link: Link) -> None:
    """AccelsimError (one line) when `op` cannot run `algorithm` over `link`."""
    have = op_algorithms(op)
    if algorithm == AUTO:
        return
    if algorithm == "nvls" and "nvls" in have and not link.in_switch_reduction:
        raise AccelsimError(f"nvls needs a switch that reduces in-network (NVLink SHARP, e.g. "
                            f"nvswitch-gen3); '{link.name}' does not")
    if algorithm not in have:
        offered = algorithms(op, link)
        raise AccelsimError(f"{op} over '{link.name}' runs as {' or '.join(offered)} (no "
                            f"{algorithm} {op}); choose {', '.join((*offered, AUTO))}")


def collective_time_s(op: str, algorithm: str, n_devices: int, message_bytes: float,
                      link: Link) -> tuple[float, str]:
    """(seconds, algorithm used) of `op` on `message_bytes` among `n_devices` over `link` at
    its achievable bandwidth; "auto" takes the fastest algorithm the link offers."""
    check_algorithm(op, algorithm, link)
    bw = achievable(link).bandwidth_bytes_per_s
    # NB: every device reaches the per-device bandwidth at once (no switch or ring congestion),
    # and one achievable fraction stands for every message size; latency is the link's.
    options = algorithms(op, link) if algorithm == AUTO else (algorithm,)
    times = {a: closed_form_s(op, a, n_devices, message_bytes, bw, link.latency_s)
             for a in options}
    best = min(times, key=lambda a: (times[a], options.index(a)))
    return times[best], best


def parse_sizes(text: str) -> list[int]:
    """'8B:8GB' -> [8, 16, ..., 8 GiB]: powers of two from the first size to the second; one
    size alone is one row. K, M, G, T are powers of 1024, as in nccl-tests."""
    parts = text.split(":")
    if len(parts) not in (1, 2):
        raise AccelsimError(f"--sizes {shown(text)}: give SIZE or FIRST:LAST, e.g. 8B:8GB")
    low, high = (parse_size(p, text) for p in (parts[0], parts[-1]))
    if low > high:
        raise AccelsimError(f"--sizes {shown(text)}: the first size is larger than the last")
    out, size = [], low
    while size <= high:
        out.append(size)
        size *= 2
    return out


def parse_size(part: str, text: str, flag: str = "--sizes") -> int:
    """One size ('128M', '8GB', '64') in bytes; `flag` and `text` name it in errors."""
    s = part.strip().upper().replace(" ", "")
    digits = s.rstrip("KMGTIB")
    unit = s[len(digits):]
    # NB: the one number rule (`accelsim.numbers`): ASCII digits, no '_', no e notation.
    value = float(digits) if is_float_text(digits) and "E" not in digits else float("nan")
    if unit not in _SIZE_UNITS or not value >= 1 or value != value:
        raise AccelsimError(f"{flag} {shown(text)}: {shown(part)} is not a size such as 8B, "
                            "64KB, 128MB or 8GB")
    n_bytes = value * _SIZE_UNITS[unit]
    if n_bytes > MAX_MESSAGE_BYTES:
        raise AccelsimError(f"{flag} {shown(text)}: {shown(part)} is over the 1 TiB limit")
    if n_bytes != int(n_bytes):
        raise AccelsimError(f"{flag} {shown(text)}: {shown(part)} is not a whole number of "
                            "bytes")
    return int(n_bytes)


def collective_table(op: str, n_devices: int, sizes: list[int], link: Link,
                     algorithm: str = AUTO) -> pd.DataFrame:
    """nccl-tests-like rows, one per size: size_bytes, time_s, algorithm_bandwidth_gb_s
    (size / time), bus_bandwidth_gb_s (times `bus_factor`), algorithm (GB = 1e9 B)."""
    if n_devices < 2:
        raise AccelsimError(f"a collective needs at least 2 devices, not {n_devices}")
    rows: list[dict[str, Any]] = []
    factor = bus_factor(op, n_devices)
    for size in sizes:
        t, used = collective_time_s(op, algorithm, n_devices, float(size), link)
        algbw = size / t / 1e9 if t > 0 else float("inf")
        rows.append({"size_bytes": int(size), "time_s": t, "algorithm_bandwidth_gb_s": algbw,
                     "bus_bandwidth_gb_s": algbw * factor, "algorithm": used})
    return pd.DataFrame(rows, columns=["size_bytes", "time_s", "algorithm_bandwidth_gb_s",
                                       "bus_bandwidth_gb_s", "algorithm"])


def contention_share(profile: Any, link: Link, backward: pd.DataFrame
                     ) -> tuple[float, list[str]]:
    """Share of the device's backward speed a running collective takes, and notes on what is
    unknown. Compute-bound rows lose the SMs NCCL's channels hold (GPUs); memory-bound rows
    lose the device-memory bandwidth the collective moves; host-overhead rows lose nothing.
    The share is the time-weighted mean over `backward` (the estimate's backward rows)."""
    eff = load_efficiency("collectives")
    notes: list[str] = []
    sm_count = getattr(getattr(profile, "compute", None), "sm_count", None)
    if profile.device_class == "gpu" and sm_count:
        sm_share = min(eff["assumed.nccl_channels"] / sm_count, _MAX_SHARE)
    else:
        sm_share = 0.0  # NB: outside GPUs, collectives run on DMA / ICI engines, not on compute.
        if profile.device_class == "gpu":
            notes.append(f"'{profile.name}' has no SM count: the SMs a collective takes are "
                         "not costed")
    memory = getattr(profile, "offchip_memory", None)
    if memory is not None and memory.bandwidth_bytes_per_s:
        moved = eff["assumed.memory_bytes_per_wire_byte"] * achievable(link).bandwidth_bytes_per_s
        mem_share = min(moved / memory.bandwidth_bytes_per_s, _MAX_SHARE)
    else:
        mem_share = 0.0
        if profile.device_class != "null":
            notes.append(f"'{profile.name}' has no memory bandwidth: the memory bandwidth a "
                         "collective takes is not costed")
    total_s = float(backward["time_s"].sum())
    if total_s <= 0:
        return 0.0, notes
    share_of = backward["bound"].map({"memory": mem_share, "overhead": 0.0}).fillna(sm_share)
    # NB: one share for the whole backward (time-weighted), not one per layer.
    return float((backward["time_s"] * share_of).sum() / total_s), notes


def collective_record(system: Any, op: str, sizes: list[int], algorithm: str = AUTO,
                      devices: int | None = None) -> dict[str, Any]:
    """The JSON record of `accelsim collective`: what ran over which link, the achievable
    bandwidth and its basis, and `rows` (`collective_table`, one per size)."""
    n = system.device_count if devices is None else devices
    link = system.device_to_device
    if link is None or system.device_count < 2:
        raise AccelsimError(f"'{system.name}' has {system.device_count} accelerator and no "
                            "device-to-device link: give a system with several (e.g. dgx-a100)")
    if not 2 <= n <= system.device_count:
        raise AccelsimError(f"--devices {n}: '{system.name}' has {system.device_count} "
                            "accelerators; a collective needs 2 to that many")
    ach = achievable(link)
    table = collective_table(op, n, sizes, link, algorithm)
    return {"system": system.name, "device": system.device, "devices": n, "op": op,
            "algorithm": algorithm, "link": link.name, "link_kind": link.kind,
            "link_bandwidth_gb_s": link.bandwidth_bytes_per_s / 1e9,
            "achievable_bandwidth_gb_s": ach.bandwidth_bytes_per_s / 1e9,
            "achievable_basis": ach.basis, "latency_s": link.latency_s,
            "latency_source": link.sources.get("latency_us", ""),
            "rows": table.to_dict(orient="records")}
