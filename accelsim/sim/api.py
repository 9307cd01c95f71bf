"""The pipeline engine: one batch on a device (mode infer), the storage-to-accelerator pipeline
(mode train, `accelsim.sim.run.simulate_training`) and the inference server (mode serve,
`accelsim.sim.serve.simulate_serving`), from a `SimulationConfig` to a `SimulationResult`.
`accelsim.run.run_simulation` picks this engine or the token-level decoder engine
(`accelsim.llm.run`); call that.

The record always holds the device-level keys (workload, hardware, layers, memory, notes, ...);
train and serve add theirs and replace throughput, latency, energy and bottleneck with the
whole system's figures. A workload that does not fit in device memory is a result, in every
mode: `memory.fits` is false, the memory breakdown and the largest batch that fits are given,
and throughput, latency, energy and power are None. `records` is the event DataFrame of every
mode (infer: the layers one after another on the device), so a trace can always be written.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from accelsim.devices.core import explain_bound
from accelsim.devices.estimate import DeviceEstimate, estimate, figures, summary
from accelsim.errors import AccelsimError
from accelsim.profiles.devices import with_dataflow
from accelsim.profiles.hardware import host_cpu, resolve_hardware
from accelsim.results.headline import RATE_KEYS, Figures, PowerSplit
from accelsim.results.metrics import ROLES
from accelsim.results.records import Recorder
from accelsim.sim.spec import SimulationConfig, SimulationResult, max_events
from accelsim.workload.scenario import Scenario

# The system's figures, placed by `Figures.place` (not copied from the simulation's dict);
# one batch on the device goes under `device_only` in train and serve.
_PLACED = (*RATE_KEYS, "bottleneck", "bottleneck_detail")


def run_pipeline(cfg: SimulationConfig, detail: bool = True) -> SimulationResult:
    """Run `cfg` on the pipeline engine (its knobs already checked by `accelsim.run`); bad
    settings raise `AccelsimError`. With `detail` False the record's `layers` list is empty and
    an inference run has no event records (sweeps, which keep one flat row per point, skip that
    work); every figure is the same."""
    mode = cfg.mode or cfg.scenario.mode
    system, profile = resolve_hardware(cfg.hardware)
    if cfg.dataflow:
        profile = with_dataflow(profile, cfg.dataflow)
    sc = cfg.scenario
    graph = sc.graph()
    batch = (cfg.serve.get("max_batch") or sc.batch_size) if mode == "serve" else sc.batch_size
    device_mode = "train" if mode == "train" else "infer"
    est = estimate(graph, profile, batch, sc.precision, device_mode, cfg.software, sc.optimizer,
                   *host_cpu(system), tf32=cfg.tf32)
    executed = _executed(cfg, mode, graph, profile, batch, est, system) if cfg.execute else None
    if executed is not None:
        est = executed[0]
    record = summary(est, graph, layers=detail,
                     tail=None if executed is None else {"execution": executed[1]})
    if executed is not None:  # --execute
        record["notes"] += executed[2]
        for row in record["layers"]:  # the same keys when the kernels could not run
            for key in ("output_error", "input_sparsity", "weight_sparsity"):
                row.setdefault(key, None)
    record["workload"]["mode"] = mode
    record["hardware"]["system"] = system.name
    device = figures(est, explain_bound(est.rows))  # one batch on the device
    events = _layer_events(est) if detail else pd.DataFrame()
    if not est.memory["fits"]:
        return SimulationResult(_does_not_fit(record, est, profile.name), events)
    if mode == "infer":
        return SimulationResult(device.place(record), events)
    if mode == "train":
        return _train(cfg, sc, system, profile, record, device)
    return _serve(cfg, sc, system, profile, record, batch, device)


def _executed(cfg: SimulationConfig, mode: str, graph: Any, profile: Any, batch: int,
              dense: DeviceEstimate, system: Any) -> tuple[DeviceEstimate, dict | None, list]:
    """--execute (`accelsim.sim.execution`): the estimate with the measured kernels fed in, the
    record's `execution` summary and notes; (dense, None, [note]) where the kernels cannot run."""
    from accelsim.sim.execution import execute_for, execution_totals

    if mode != "infer":  # (token-level decoder runs refuse --execute in `accelsim.llm.run`)
        raise AccelsimError(f"--execute applies to mode infer (one batch on the device), not "
                            f"{mode}")
    ops, run, note = execute_for(graph, profile, cfg.scenario.precision, cfg.prune_2_4)
    if ops is None:
        return dense, None, [note]
    sc = cfg.scenario
    est = estimate(graph, profile, batch, sc.precision, "infer", cfg.software, sc.optimizer,
                   *host_cpu(system), measured=ops, tf32=cfg.tf32)
    return est, {**run, **execution_totals(est.layers, ops, dense, est)}, []


def _does_not_fit(record: dict[str, Any], est: DeviceEstimate, device: str) -> dict[str, Any]:
    """The record of a run that cannot happen: memory says why, the figures are None."""
    mem = est.memory
    largest = mem["largest_batch_that_fits"]
    hint = ("not even a batch of 1 fits" if largest == 0
            else f"the largest batch that fits is {largest}")
    record["notes"].insert(0, (
        f"does not fit: batch {est.batch_size} at {est.precision} ({est.mode}) needs "
        f"{_gb(mem['required_bytes'])} on {device}, which has {_gb(mem['capacity_bytes'])}; "
        f"{hint}"))
    return Figures(None, None, None, None, "memory capacity", hint,
                   PowerSplit(None, None, None, None)).place(record)


def _gb(n_bytes: float) -> str:
    return f"{n_bytes / 1e9:,.1f} GB" if n_bytes >= 1e8 else f"{n_bytes / 1e6:,.1f} MB"


def _layer_events(est: DeviceEstimate) -> pd.DataFrame:
    """One batch on one device as event records: each layer row after the one before."""
    rec = Recorder()
    t_s = 0.0
    layers = est.layers
    for name, phase, time_s, energy_j, n_bytes in zip(
            layers["name"], layers["phase"], layers["time_s"], layers["energy_j"],
            layers["bytes"], strict=True):
        rec.add("accel0", "compute", t_s, t_s + float(time_s), step=0, device=0,
                samples=est.batch_size, n_bytes=float(n_bytes), energy_j=float(energy_j),
                detail=f"{name} ({phase})")
        t_s += float(time_s)
    return rec.frame()


def _train(cfg: SimulationConfig, sc: Scenario, system: Any, profile: Any,
           record: dict[str, Any], device: Figures) -> SimulationResult:
    from accelsim.sim.config import TrainConfig
    from accelsim.sim.run import simulate_training

    res = simulate_training(TrainConfig(
        sc, system, devices=cfg.devices, seed=cfg.seed or 0, software=cfg.software, tf32=cfg.tf32,
        device_profile=profile, max_events=max_events(cfg), **cfg.train))
    pipe = {k: v for k, v in res.to_dict().items() if k not in _PLACED}
    total_j = res.energy_breakdown_j["total"]
    record["device_only"] = device.as_dict()
    notes = record["notes"] + pipe.pop("notes")
    record.update(pipe, notes=notes)
    Figures(res.throughput_samples_per_s, res.step_time_s, total_j / res.samples,
            total_j / res.run_time_s, res.bottleneck, res.bottleneck_detail).place(record)
    return SimulationResult(record, res.records)


def _serve(cfg: SimulationConfig, sc: Scenario, system: Any, profile: Any,
           record: dict[str, Any], batch: int, device: Figures) -> SimulationResult:
    from accelsim.sim.serve import ServeConfig, simulate_serving

    if cfg.serve.get("rate_per_s") is None and cfg.serve.get("concurrency") is None:
        raise AccelsimError("serving needs an arrival rate (rate, --rate) or a number of "
                            "closed-loop clients (concurrency, --concurrency)")
    if cfg.devices is not None and cfg.devices > system.device_count:
        raise AccelsimError(f"devices = {cfg.devices}: system '{system.name}' has only "
                            f"{system.device_count} accelerators")
    requests = cfg.serve.get("requests", ServeConfig.requests)
    if isinstance(requests, int) and requests > max_events(cfg):
        raise AccelsimError(f"serving {requests:,} requests schedules up to {requests:,} "
                            f"events, over the limit of {max_events(cfg):,}: raise "
                            "max_events (--max-events) to run it")
    knobs = {**cfg.serve, "max_batch": batch}
    res = simulate_serving(ServeConfig(
        sc, device=profile, system=system, devices=cfg.devices, seed=cfg.seed or 0,
        software=cfg.software, tf32=cfg.tf32, precision=sc.precision, **knobs))
    served = {k: v for k, v in res.to_dict().items() if k not in _PLACED}
    served.pop("workload")  # the name; the record's workload is the full description
    record["device_only"] = device.as_dict()
    per_device = served.pop("utilization")
    busy = sum(per_device) / len(per_device)
    # The same roles as training's; serving simulates the devices only, the rest is null.
    served["utilization"] = {**dict.fromkeys(ROLES), "accelerators": busy}
    served["utilization_per_device"] = per_device
    record.update(served)
    record["notes"] = [*record["notes"], "serving simulates the accelerators only: the "
                       "utilization of the other roles is unknown (null)"]
    load = res.offered_load
    if load is not None and load >= 1.0:
        bound = "queueing"
        detail = (f"arrivals offer {load:.2f}x what the devices can serve at the largest "
                  "batch: the queue grows without bound")
    else:
        where = (f"offered load {load:.2f}" if load is not None
                 else f"{cfg.serve['concurrency']} closed-loop clients")
        bound = device.bottleneck
        detail = f"{where}, devices busy {busy:.0%}; in a batch: {device.bottleneck_detail}"
    Figures(res.throughput_samples_per_s, res.latency_mean_s, res.energy_j_per_sample,
            res.average_power_w, bound, detail).place(record)
    return SimulationResult(record, res.records)
