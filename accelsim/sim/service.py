"""Service time of one served batch: inputs host -> device, the device's batch, outputs back.

    table = service_table(graph, NullProfile(), link=None, max_batch=8, precision="fp32")
    table.loc[4, "service_s"]      # seconds to serve a batch of 4 (index = batch size)

Computed once per (graph, device, link, max_batch, precision, software) and cached, so the
serving simulation only looks numbers up.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd

from accelsim.devices.estimate import estimate, power_limits_w
from accelsim.errors import AccelsimError
from accelsim.interconnect.links import transfer_energy_j, transfer_time_s
from accelsim.profiles.links import Link, available_links, load_link
from accelsim.profiles.stack_choice import resolve_software
from accelsim.workload.graph import Graph
from accelsim.workload.memory import io_bytes_per_sample

EXACT_UP_TO = 64  # batch sizes costed one by one; above, a geometric grid (see `_grid`)
GRID_RATIO = 1.125
TABLE_COLUMNS = ("h2d_s", "compute_s", "d2h_s", "service_s", "energy_j", "io_bytes",
                 "required_bytes")
_CACHE: dict[tuple, pd.DataFrame] = {}
_CACHE_SIZE = 32


def device_host_link(profile: Any) -> Link | None:
    """The link inputs and outputs cross, from a device profile's `host_link` (None where the
    device shares the host's memory or is the host)."""
    spec = getattr(profile, "host_link", None)
    if spec is None or spec.kind == "integrated":
        return None  # NB: shared memory (SoC) or a CPU device: no copy is costed.
    if spec.kind in available_links():
        return load_link(spec.kind)
    # NB: a link without a profile of its own: the device's bandwidth, no latency.
    return Link(name=spec.kind, kind=spec.kind.split("-")[0], description="device host_link",
                bandwidth_bytes_per_s=spec.bandwidth_bytes_per_s, latency_s=0.0)


def _grid(max_batch: int) -> np.ndarray:
    """Batch sizes to cost: every one up to EXACT_UP_TO, then a geometric grid to max_batch."""
    exact = np.arange(1, min(max_batch, EXACT_UP_TO) + 1)
    if max_batch <= EXACT_UP_TO:
        return exact
    n = math.ceil(math.log(max_batch / EXACT_UP_TO) / math.log(GRID_RATIO)) + 1
    geo = np.unique(np.round(np.geomspace(EXACT_UP_TO, max_batch, n)).astype(int))
    return np.union1d(exact, geo)


def _transfer(n_bytes: np.ndarray, link: Link | None) -> tuple[np.ndarray, np.ndarray]:
    """(time, energy) of each transfer; achieved bandwidth where the link publishes it."""
    if link is None:
        return np.zeros_like(n_bytes), np.zeros_like(n_bytes)
    time_s = np.array([transfer_time_s(float(b), link, achieved=True) for b in n_bytes])
    per_byte_j = transfer_energy_j(1.0, link) or 0.0  # NB: links without a figure cost no energy.
    return time_s, n_bytes * per_byte_j


def _compute_table(graph: Graph, profile: Any, link: Link | None, max_batch: int,
                   precision: str, software: str, host_hz: float | None,
                   host_cpu: Any = None, tf32: bool | None = None) -> pd.DataFrame:
    grid = _grid(max_batch)
    stack = resolve_software(software, profile.device_class, host_hz)[0].with_tf32(tf32)
    ests = [estimate(graph, profile, int(b), precision, "infer", stack,
                     host_single_thread_hz=host_hz, host_cpu=host_cpu) for b in grid]
    batch = np.arange(1, max_batch + 1)
    # NB: between grid points (batches above EXACT_UP_TO) time, energy and memory are
    # interpolated linearly.
    compute_s = np.interp(batch, grid, [e.step_time_s for e in ests])
    # A server stack (triton) handles every request: the estimate charged one per batch, a
    # served batch holds one request per sample. NB: handling is serial with the batch.
    compute_s = compute_s + (batch - 1) * stack.host_per_request_s
    compute_j = np.interp(batch, grid, [e.energy_j for e in ests])
    need_b = np.interp(batch, grid, [e.memory["required_bytes"] for e in ests])
    in_b, out_b = io_bytes_per_sample(graph, precision)
    h2d_s, h2d_j = _transfer(batch * in_b, link)
    d2h_s, d2h_j = _transfer(batch * out_b, link)
    table = pd.DataFrame({"h2d_s": h2d_s, "compute_s": compute_s, "d2h_s": d2h_s,
                          "service_s": h2d_s + compute_s + d2h_s,
                          "energy_j": compute_j + h2d_j + d2h_j,
                          "io_bytes": batch * (in_b + out_b), "required_bytes": need_b},
                         index=pd.Index(batch, name="batch"))
    if not (table["service_s"] > 0).all():
        raise AccelsimError(f"device '{profile.name}' costs a batch of '{graph.name}' at zero "
                            "time; serving needs a positive service time")
    cap = ests[-1].memory["capacity_bytes"]
    if cap is not None and need_b[-1] > cap:
        fits = batch[need_b <= cap]
        hint = (f"the largest batch that fits is {fits[-1]}" if len(fits)
                else "not even a batch of 1 fits")
        raise AccelsimError(f"max_batch {max_batch}: '{graph.name}' at {precision} needs "
                            f"{need_b[-1] / 1e9:.3g} GB on '{profile.name}', which has "
                            f"{cap / 1e9:.3g} GB; {hint}")
    return table


def service_table(graph: Graph, profile: Any, link: Link | None, max_batch: int,
                  precision: str, software: str = "default", host_hz: float | None = None,
                  host_cpu: Any = None, tf32: bool | None = None) -> pd.DataFrame:
    """Per batch size b = 1..max_batch (the index): h2d_s, compute_s, d2h_s, service_s (their
    sum), energy_j (device batch energy plus link energy), io_bytes (inputs plus outputs moved)
    and required_bytes (device memory). `host_cpu`: the CPU profile an NPU falls back on; `tf32`:
    fp32 GEMMs as TF32 (None: the stack's default)."""
    # Profiles and links hold dicts (unhashable), so the key uses their reprs; graphs hash by
    # identity and zoo graphs are cached, so a rebuilt graph is a new key.
    key = (graph, repr(profile), repr(link), max_batch, precision, software, host_hz,
           getattr(host_cpu, "name", None), tf32)
    if key not in _CACHE:
        if len(_CACHE) >= _CACHE_SIZE:
            _CACHE.pop(next(iter(_CACHE)))
        _CACHE[key] = _compute_table(graph, profile, link, max_batch, precision, software,
                                     host_hz, host_cpu, tf32)
    return _CACHE[key]


def static_power_w(profile: Any) -> float:
    """Power a device draws while idle between batches, W."""
    # NB: an idle device draws its static power (no deeper sleep state between batches).
    return power_limits_w(profile)[1]
