"""The record of a federated run (`accelsim.sim.federated`): per-round and per-client rows
summarised into time per round, bytes per round, the clients that finished in time, client
energy and what bound the rounds."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pandas as pd

from accelsim.sim.spec import SimulationConfig, SimulationResult

if TYPE_CHECKING:
    from accelsim.profiles.networks import Network
    from accelsim.sim.federated import FederatedConfig

_PHASES = ("download_s", "compute_s", "upload_s")
_BOUND = {"download_s": "downlink", "compute_s": "client compute", "upload_s": "uplink"}
SHARED_BOUND = 0.99  # a transfer below 99% of the client's own link rate waited on the server


def _mean(x: pd.Series) -> float | None:
    x = x.dropna()
    return float(x.mean()) if len(x) else None


def _bottleneck(clients: pd.DataFrame, rounds: pd.DataFrame, net: Network,
                model_bytes: float, update_bytes: float) -> tuple[str, str]:
    """What bound the rounds: the deadline where clients were dropped, else the longest phase
    of the last client to finish (the server's NICs where its transfer ran below its link)."""
    dropped = int((rounds["selected"] - rounds["finished"]).sum())
    if dropped:
        share = dropped / int(rounds["selected"].sum())
        return "deadline", (f"{share:.0%} of the selected clients missed the deadline "
                            "(stragglers dropped, their work lost)")
    last = clients.loc[clients.groupby("round")["finish_s"].idxmax()]
    phase = last[list(_PHASES)].mean().idxmax()
    what = _BOUND[phase]
    if phase != "compute_s":
        n_bytes, link = ((model_bytes, net.downlink_bytes_per_s) if phase == "download_s"
                         else (update_bytes, net.uplink_bytes_per_s))
        if n_bytes / float(last[phase].mean()) < SHARED_BOUND * link:
            what = "server network"
    shares = last[list(_PHASES)].mean() / last["finish_s"].mean()
    detail = ", ".join(f"{_BOUND[p]} {shares[p]:.0%}" for p in _PHASES)
    return what, f"the last client's round: {detail} (the rest: round trips)"


def federated_result(cfg: SimulationConfig, fc: FederatedConfig, est: Any, profile: Any,
                     system: Any, net: Network, rounds_rows: list[dict[str, Any]],
                     client_rows: list[dict[str, Any]], params: int,
                     update_bytes: float) -> SimulationResult:
    """The record and the per-client event rows of a finished federated run."""
    sc = cfg.scenario
    rounds = pd.DataFrame(rounds_rows)
    clients = pd.DataFrame(client_rows)
    total_s = float(rounds["round_s"].sum())
    samples = float(rounds["client_steps"].sum()) * sc.batch_size
    model_bytes = params * 4.0
    bound, detail = _bottleneck(clients, rounds, net, model_bytes, update_bytes)
    finished = clients[clients["finished"]]
    energy = clients["compute_energy_j"] + clients["radio_energy_j"].fillna(0.0)
    radio_known = net.has_power_model
    per_round = clients.groupby("round")
    fed = {
        "clients": fc.clients, "clients_per_round": int(rounds["selected"].iloc[0]),
        "rounds": fc.rounds, "local_steps": fc.local_steps, "local_batch": sc.batch_size,
        "deadline_s": fc.deadline_s, "client_spread": fc.client_spread,
        "update_precision": fc.update_precision, "model_bytes": model_bytes,
        "update_bytes": update_bytes,
        "network": {"name": net.name, "downlink_mbps": net.downlink_bytes_per_s * 8 / 1e6,
                    "uplink_mbps": net.uplink_bytes_per_s * 8 / 1e6, "rtt_s": net.rtt_s},
        "server": fc.server,
        "round_s": {"mean": float(rounds["round_s"].mean()),
                    "p50": float(rounds["round_s"].median()),
                    "max": float(rounds["round_s"].max())},
        "total_s": total_s,
        "finished_per_round": float(rounds["finished"].mean()),
        "finished_share": float(rounds["finished"].sum() / rounds["selected"].sum()),
        "bytes_per_round": {"down": float(rounds["bytes_down"].mean()),
                            "up": float(rounds["bytes_up"].mean())},
        "client_phase_s": {p[:-2]: _mean(finished[p]) for p in _PHASES},
        "aggregate_s": float(rounds["aggregate_s"].mean()),
        "client_step_s": est.step_time_s, "client_step_energy_j": est.energy_j,
        "client_energy_j_per_round": {
            "compute": float(per_round["compute_energy_j"].mean().mean()),
            "radio": (float(per_round["radio_energy_j"].mean().mean()) if radio_known
                      else None),
            "total": float(energy.groupby(clients["round"]).mean().mean())},
        "per_round": rounds.to_dict(orient="records"),
    }
    notes = [f"FedAvg rounds: {fed['clients_per_round']} of {fc.clients} clients a round, "
             f"{fc.local_steps} local steps of batch {sc.batch_size} each; the model down in "
             f"fp32, updates up in {fc.update_precision}; clients differ only by a speed "
             f"factor (lognormal, sigma {fc.client_spread:g}); one network for all"]
    if not radio_known:
        notes.append(f"network {net.name} gives no radio power model: client energy is the "
                     "device's compute only")
    if net.flagged_fields:
        notes.append(f"network {net.name}: unverified figures {', '.join(net.flagged_fields)}")
    record = {
        "workload": {"name": sc.name, "mode": "federated", "batch_size": sc.batch_size,
                     "precision": sc.precision, "params": params},
        "hardware": {"name": profile.name, "class": profile.device_class,
                     "software": est.software_applied or est.software, "system": system.name},
        # the headline figures (compare and sweep rows): samples trained into the model per
        # second, a round as the latency, a client's mean draw over its round
        "throughput_samples_per_s": samples / total_s if total_s > 0 else None,
        "latency_s": fed["round_s"]["mean"],
        "energy_j_per_sample": (float(energy.sum()) / samples) if samples else None,
        "average_power_w": fed["client_energy_j_per_round"]["total"] / fed["round_s"]["mean"],
        "memory": {k: est.memory.get(k) for k in ("fits", "required_bytes", "capacity_bytes",
                                                  "largest_batch_that_fits")},
        "bottleneck": bound, "bottleneck_detail": detail,
        "federated": fed, "notes": [*est.notes, *notes]}
    return SimulationResult(record, clients)
