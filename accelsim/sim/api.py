"""One entry point for every simulation: a picklable config in, a result record out.

    cfg = SimulationConfig(resolve_workload("resnet50-train"), "dgx-a100", steps=200)
    res = run_simulation(cfg)
    res.record["throughput_samples_per_s"], res.records   # JSON-ready dict, event DataFrame

Modes: "infer" costs one batch on the device (`accelsim.devices.estimate`); "train" runs the
storage-to-accelerator pipeline (`accelsim.sim.run.simulate_training`); "serve" runs the
inference server (`accelsim.sim.serve.simulate_serving`). The record always holds the
device-level keys (workload, hardware, layers, memory, ...); train and serve add theirs and
replace throughput, latency, energy and bottleneck with the whole system's figures.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from accelsim.devices.estimate import estimate, summary
from accelsim.devices.profile import with_dataflow
from accelsim.errors import AccelsimError
from accelsim.sim.hardware import resolve_hardware
from accelsim.workload.scenario import Scenario

MODES = ("infer", "train", "serve")


@dataclass(frozen=True)
class SimulationConfig:
    """Everything one simulation depends on. `train` holds `accelsim.sim.config.TrainConfig`
    fields (devices, dataset, storage, io_threads, prep_workers, prefetch_batches, gpudirect,
    pinned_memory, allreduce, overlap_allreduce, steps, epochs), `serve` holds
    `accelsim.sim.serve.ServeConfig` fields (rate_per_s, concurrency, max_batch, max_wait_s,
    requests); those classes validate them. Unset: the scenario's or the system's value."""

    scenario: Scenario
    hardware: str  # a system or device profile name, or a .toml path
    mode: str | None = None
    software: str = "eager"
    dataflow: str | None = None
    seed: int = 0
    devices: int | None = None
    train: dict[str, Any] = field(default_factory=dict)
    serve: dict[str, Any] = field(default_factory=dict)


@dataclass
class SimulationResult:
    record: dict[str, Any]  # JSON-ready
    records: pd.DataFrame = field(default_factory=pd.DataFrame)  # flat events (train, serve)


def run_simulation(cfg: SimulationConfig) -> SimulationResult:
    """Run the simulation `cfg` describes; bad settings raise `AccelsimError`."""
    mode = cfg.mode or cfg.scenario.mode
    if mode not in MODES:
        raise AccelsimError(f"mode '{mode}': choose one of {', '.join(MODES)}")
    system, profile = resolve_hardware(cfg.hardware)
    if cfg.dataflow:
        profile = with_dataflow(profile, cfg.dataflow)
    sc = cfg.scenario
    graph = sc.graph()
    batch = (cfg.serve.get("max_batch") or sc.batch_size) if mode == "serve" else sc.batch_size
    device_mode = "train" if mode == "train" else "infer"
    est = estimate(graph, profile, batch, sc.precision, device_mode, cfg.software, sc.optimizer)
    record = summary(est, graph)
    record["workload"]["mode"] = mode
    record["hardware"]["system"] = system.name
    if mode == "infer":
        return SimulationResult(record)
    if not est.memory["fits"]:
        raise AccelsimError(
            f"{graph.name} at batch {batch} ({sc.precision}, {device_mode}) needs "
            f"{est.memory['required_bytes'] / 1e9:.1f} GB but {profile.name} has "
            f"{est.memory['capacity_bytes'] / 1e9:.1f} GB: lower the batch or the precision")
    if mode == "train":
        return _train(cfg, sc, system, profile, record)
    return _serve(cfg, sc, system, profile, record, batch)


def _train(cfg: SimulationConfig, sc: Scenario, system: Any, profile: Any,
           record: dict[str, Any]) -> SimulationResult:
    from accelsim.sim.config import TrainConfig
    from accelsim.sim.run import simulate_training

    res = simulate_training(TrainConfig(
        sc, system, devices=cfg.devices, seed=cfg.seed, software=cfg.software,
        device_profile=profile, **cfg.train))
    pipe = res.to_dict()
    total_j = pipe["energy_breakdown_j"]["total"]
    record["device_only"] = _device_only(record)
    record.update(pipe)
    record.update(latency_s=res.step_time_s, energy_j_per_sample=total_j / res.samples,
                  average_power_w=total_j / res.run_time_s)
    return SimulationResult(record, res.records)


def _serve(cfg: SimulationConfig, sc: Scenario, system: Any, profile: Any,
           record: dict[str, Any], batch: int) -> SimulationResult:
    from accelsim.sim.serve import ServeConfig, simulate_serving

    if cfg.serve.get("rate_per_s") is None and cfg.serve.get("concurrency") is None:
        raise AccelsimError("serving needs an arrival rate (--rate) or a concurrency "
                            "(--concurrency)")
    knobs = {**cfg.serve, "max_batch": batch}
    res = simulate_serving(ServeConfig(
        sc, device=profile, system=system, devices=cfg.devices, seed=cfg.seed,
        software=cfg.software, precision=sc.precision, **knobs))
    served = res.to_dict()
    served.pop("workload")  # the name; the record's workload is the full description
    record["device_only"] = _device_only(record)
    record.update(served)
    record["latency_s"] = served["latency_mean_s"]
    record["bottleneck"] = ("queueing" if served["offered_load"] >= 1.0
                            else record["device_only"]["bottleneck"])
    return SimulationResult(record, res.records)


def _device_only(record: dict[str, Any]) -> dict[str, Any]:
    """The device-level figures that the system simulation replaces, kept for reference."""
    keys = ("throughput_samples_per_s", "latency_s", "energy_j_per_sample", "average_power_w",
            "bottleneck")
    return {k: record[k] for k in keys}
