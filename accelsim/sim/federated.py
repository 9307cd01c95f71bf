"""Federated learning (mode federated): synchronous FedAvg rounds (McMahan et al. 2017,
"Communication-Efficient Learning of Deep Networks from Decentralized Data") of clients that
train locally on their own device and a server that aggregates their updates.

    res = simulate_federated(cfg)   # cfg.mode "federated"; knobs in cfg.federated

Each round the server picks `clients_per_round` of `clients` (uniformly, seeded) and, as SimPy
processes per client per round:
1. sends the model (fp32) to each: half a round trip, then the bytes over the client's
   downlink, all downloads sharing the server's NICs (max-min fair flows,
   `accelsim.sim.storage_system.fluid.SharedReads`);
2. each client runs `local_steps` training steps of its batch on its device (the device cost
   model's step time, times the client's speed factor: lognormal with sigma `client_spread`,
   one draw per client for the run, seeded);
3. each sends its update (`update_precision`) back: half a round trip, then its uplink, the
   uploads sharing the server's NICs;
4. with a `deadline_s`, the clients whose update has not arrived that long after the round
   began are dropped (their work is lost), else the round waits for every client;
5. the server averages the updates that arrived: one streaming pass over them and the fp32
   model at its host DRAM bandwidth (NB: no compute term; FedAvg is a weighted sum).
Client energy: the device's training-step energy for the steps run before the deadline, and
the radio's draw (the network profile's power model) over the transfer times (NB: no idle or
tail power; a dropped client's radio and device time past the deadline are not counted).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import simpy

from accelsim.devices.estimate import estimate, summary
from accelsim.errors import AccelsimError
from accelsim.formats import get_format
from accelsim.profiles.devices import with_dataflow
from accelsim.profiles.hardware import host_cpu, resolve_hardware
from accelsim.profiles.networks import MBIT, Network, load_network
from accelsim.profiles.systems import load_system
from accelsim.sim.federated_result import federated_result
from accelsim.sim.spec import SimulationConfig, SimulationResult
from accelsim.sim.storage_system.fluid import SharedReads

FP32_BYTES = 4
MAX_CLIENTS = 1 << 16  # NB: one SimPy process per selected client per round
MAX_ROUNDS = 100_000


@dataclass(frozen=True)
class FederatedConfig:
    """The federated knobs (SI units); `check` validates them."""

    clients: int = 10
    clients_per_round: int | None = None  # None: every client, every round
    rounds: int = 5
    local_steps: int = 10
    network: str = "lte"
    uplink_mbps: float | None = None  # None: the network profile's
    downlink_mbps: float | None = None
    rtt_s: float | None = None
    deadline_s: float | None = None  # None: the round waits for every client
    client_spread: float = 0.0
    server: str = "workstation"
    update_precision: str = "fp32"

    def check(self) -> FederatedConfig:
        k = self.clients_per_round or self.clients
        if not 1 <= self.clients <= MAX_CLIENTS:
            raise AccelsimError(f"knob 'population' = {self.clients}: 1 to {MAX_CLIENTS:,}")
        if not 1 <= k <= self.clients:
            raise AccelsimError(f"knob 'clients_per_round' = {k}: 1 to the population "
                                f"({self.clients})")
        if not 1 <= self.rounds <= MAX_ROUNDS:
            raise AccelsimError(f"knob 'rounds' = {self.rounds}: 1 to {MAX_ROUNDS:,}")
        if self.local_steps < 1:
            raise AccelsimError(f"knob 'local_steps' = {self.local_steps}: at least 1")
        get_format(self.update_precision)  # an unknown format names itself
        return self


def _network(fc: FederatedConfig) -> Network:
    import dataclasses

    net = load_network(fc.network)
    changes = {k: v for k, v in (("uplink_bytes_per_s", fc.uplink_mbps),
                                 ("downlink_bytes_per_s", fc.downlink_mbps)) if v is not None}
    changes = {k: v * MBIT for k, v in changes.items()}
    if fc.rtt_s is not None:
        changes["rtt_s"] = fc.rtt_s
    return dataclasses.replace(net, **changes)


def _given(fc: FederatedConfig) -> list[str]:
    """The network figures the run set over its profile's."""
    return [f"{name} {v:g}{unit}" for name, v, unit in (
        ("uplink", fc.uplink_mbps, " Mbit/s"), ("downlink", fc.downlink_mbps, " Mbit/s"),
        ("RTT", None if fc.rtt_s is None else fc.rtt_s * 1e3, " ms")) if v is not None]


@dataclass
class _Client:
    """One selected client's round, filled in by its process (times from the round start)."""

    index: int
    downloaded_s: float = np.nan
    computed_s: float = np.nan
    uploaded_s: float = np.nan
    compute_began_s: float = np.nan


def _client(env: simpy.Environment, c: _Client, start_s: float, down: SharedReads,
            up: SharedReads, slot: int, model_bytes: float, update_bytes: float,
            compute_s: float, half_rtt_s: float) -> Any:
    try:
        yield env.timeout(half_rtt_s)
        yield down.read(slot, model_bytes, 1.0)
        c.downloaded_s = c.compute_began_s = env.now - start_s
        yield env.timeout(compute_s)
        c.computed_s = env.now - start_s
        yield env.timeout(half_rtt_s)
        yield up.read(slot, update_bytes, 1.0)
        c.uploaded_s = env.now - start_s
    except simpy.Interrupt:
        return  # dropped at the deadline


def simulate_federated(cfg: SimulationConfig) -> SimulationResult:
    """Run `cfg`'s FedAvg rounds (see the module docstring)."""
    fc = FederatedConfig(**cfg.federated).check()
    system, profile = resolve_hardware(cfg.hardware)
    if cfg.dataflow:  # a systolic client
        profile = with_dataflow(profile, cfg.dataflow)
    sc = cfg.scenario
    graph = sc.graph()
    est = estimate(graph, profile, sc.batch_size, sc.precision, "train", cfg.software,
                   sc.optimizer, *host_cpu(system), tf32=cfg.tf32)
    if not est.memory["fits"]:
        raise AccelsimError(f"a local batch of {sc.batch_size} does not fit on a client "
                            f"{profile.name} (largest that fits: "
                            f"{est.memory.get('largest_batch_that_fits')})")
    net, measured = _network(fc), load_network(fc.network)
    server = load_system(fc.server)
    server_bw = server.network_bandwidth_bytes_per_s
    if server_bw <= 0:
        raise AccelsimError(f"knob 'server' = {fc.server!r}: the system has no network")
    params = graph.params
    model_bytes = params * FP32_BYTES
    update_bytes = params * get_format(fc.update_precision).element_bits / 8
    rng = np.random.default_rng(cfg.seed or 0)
    speed = (rng.lognormal(0.0, fc.client_spread, fc.clients) if fc.client_spread > 0
             else np.ones(fc.clients))
    k = fc.clients_per_round or fc.clients
    env = simpy.Environment()
    rows: list[dict[str, Any]] = []
    rounds: list[dict[str, Any]] = []

    def run() -> Any:
        for r in range(fc.rounds):
            chosen = (np.arange(k) if k == fc.clients
                      else np.sort(rng.choice(fc.clients, k, replace=False)))
            start = env.now
            down = SharedReads(env, np.full(k, net.downlink_bytes_per_s), server_bw)
            up = SharedReads(env, np.full(k, net.uplink_bytes_per_s), server_bw)
            clients = [_Client(int(i)) for i in chosen]
            procs = [env.process(_client(env, c, start, down, up, j, model_bytes, update_bytes,
                                         fc.local_steps * est.step_time_s * speed[c.index],
                                         net.rtt_s / 2))
                     for j, c in enumerate(clients)]
            every = simpy.AllOf(env, procs)
            if fc.deadline_s is None:
                yield every
            else:
                yield every | env.timeout(fc.deadline_s)
                for p in procs:
                    if p.is_alive:
                        p.interrupt()
            done = [c for c in clients if np.isfinite(c.uploaded_s)]
            arrived_s = env.now - start
            agg_bytes = len(done) * update_bytes + 2 * model_bytes
            agg_s = agg_bytes / server.host.dram_bandwidth_bytes_per_s if done else 0.0
            yield env.timeout(agg_s)
            rounds.append(_round_row(r, clients, done, arrived_s, agg_s, model_bytes,
                                     update_bytes, fc))
            rows.extend(_client_rows(r, clients, est, net, fc, model_bytes, update_bytes,
                                     arrived_s, measured))

    env.process(run())
    env.run()
    res = federated_result(cfg, fc, est, profile, system, net, rounds, rows, params,
                           update_bytes)
    device = summary(est, graph, layers=True)  # one client's training step on its device
    res.record["layers"] = device["layers"]
    res.record["hardware"]["compute_precision"] = device["hardware"]["compute_precision"]
    if _given(fc):
        res.record["notes"].append(f"network {net.name} with {', '.join(_given(fc))} given; "
                                   "the radio power model at most at the profile's rates")
    return res


def _round_row(r: int, clients: list[_Client], done: list[_Client], arrived_s: float,
               agg_s: float, model_bytes: float, update_bytes: float,
               fc: FederatedConfig) -> dict[str, Any]:
    return {"round": r, "selected": len(clients), "finished": len(done),
            "round_s": arrived_s + agg_s, "updates_arrived_s": arrived_s,
            "aggregate_s": agg_s, "bytes_down": model_bytes * len(clients),
            "bytes_up": update_bytes * len(done),
            "client_steps": len(done) * fc.local_steps}


def _client_rows(r: int, clients: list[_Client], est: Any, net: Network, fc: FederatedConfig,
                 model_bytes: float, update_bytes: float, arrived_s: float, measured: Network
                 ) -> list[dict[str, Any]]:
    """One row per selected client: its phases (s; NaN where the deadline cut it off), its
    finish, and its energy (compute for the share of its steps run before the cut)."""
    half = net.rtt_s / 2
    out = []
    for c in clients:
        compute_s = c.computed_s - c.compute_began_s
        if np.isfinite(c.computed_s):
            share = 1.0
        elif np.isfinite(c.compute_began_s):  # cut off by the deadline while computing
            nominal_s = fc.local_steps * est.step_time_s
            share = min(1.0, (arrived_s - c.compute_began_s) / nominal_s)
        else:
            share = 0.0
        dl_s = c.downloaded_s - half
        ul_s = c.uploaded_s - c.computed_s - half
        out.append({"round": r, "client": c.index, "download_s": dl_s, "compute_s": compute_s,
                    "upload_s": ul_s, "finished": bool(np.isfinite(c.uploaded_s)),
                    "finish_s": c.uploaded_s,
                    "compute_energy_j": share * fc.local_steps * est.energy_j,
                    "radio_energy_j": _radio_j(net, model_bytes, dl_s, update_bytes, ul_s,
                                               measured)})
    return out


def _radio_j(net: Network, down_bytes: float, down_s: float, up_bytes: float,
             up_s: float, measured: Network) -> float:
    """The radio's energy over the transfers that completed, J (NaN: no power model).
    NB: the power model's rate is capped at the profile's own (`measured`) rates: the linear
    model was fitted at those, not at rates a run sets above them."""
    if not net.has_power_model:
        return np.nan
    total = 0.0
    for n_bytes, secs, kind in ((down_bytes, down_s, "down"), (up_bytes, up_s, "up")):
        if np.isfinite(secs) and secs > 0:
            cap = (measured.downlink_bytes_per_s if kind == "down"
                   else measured.uplink_bytes_per_s)
            rate = min(n_bytes / secs, cap)
            power = (net.radio_power_w(downlink_bytes_per_s=rate) if kind == "down"
                     else net.radio_power_w(uplink_bytes_per_s=rate))
            total += power * secs
    return total
