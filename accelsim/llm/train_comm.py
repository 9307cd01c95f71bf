"""The communication and energy of a decoder's training step (`accelsim.llm.train`): the
data-parallel exchange through the SimPy events of `accelsim.llm.dp_events`, ZeRO-3's weight
gathers, the links' energy of the TP and DP collectives, and the parts of the node the
pipeline charges (`accelsim.sim.part_energy`: NVSwitch chips, NICs and switch ports).

    dp = dp_step(plat, lay, split, system, backward_rows, segments_s, grad_bytes, opt_s, params)
    dp["end_s"], dp["records"]
    energy = step_energy_j(plat, lay, split, system, dp, tp_link, accel_j, step_s)
    energy["parts"]   # accelerators, links, switches, nics: J per step, None where unknown

Energy of the links: bytes on the wire x the link's published energy per bit (`link_j`), every
group's: each TP x PP position of a replica runs its own data-parallel group at once, each
replica and stage its own TP group. NB: host CPU, DRAM and storage are not in an LLM step's
energy (nor in LLM inference's); the pipeline's image training charges them.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import numpy as np
import pandas as pd

from accelsim.errors import AccelsimError
from accelsim.interconnect.collectives import wire_bytes
from accelsim.interconnect.multinode import multinode_time_s, multinode_wire_bytes
from accelsim.interconnect.nccl import AUTO, collective_time_s, contention_share
from accelsim.llm.costs import Platform
from accelsim.llm.dp_events import (
    D2D,
    NETWORK,
    DpPlan,
    algorithm_summary,
    dp_exchange,
    dp_fabric,
)
from accelsim.llm.parallel import Layout
from accelsim.results.records import Recorder
from accelsim.sim.allreduce_stage import link_j
from accelsim.sim.part_energy import part_energy_j

WEIGHT_BYTES = 2.0  # per parameter: 16-bit weights, as `accelsim.llm.train`


def _frame(rows: list[tuple]) -> pd.DataFrame:
    rec = Recorder()
    for row in rows:
        rec.add(*row)
    return rec.frame()


def dp_step(plat: Platform, lay: Layout, split: Any, system: Any, backward: pd.DataFrame,
            segments_s: np.ndarray, grad_bytes: np.ndarray, optimizer_s: float,
            params: float) -> dict[str, Any]:
    """The replicas' exchange of one step from the start of the last micro-batch's backward
    (`segments_s`, `grad_bytes`: its pieces in backward order, `dp_events.dp_exchange`):
    end_s (the step's end, s), records, collectives (every one timed: buckets, the
    post-optimizer gather, ZeRO-3's 2 x micro-batches weight gathers), algorithm (of every
    collective: `dp_events.algorithm_summary`), share (backward speed a running collective
    takes), network (Link or None), intra (Link or None) and notes."""
    window_s = float(np.sum(segments_s))
    if split.dp == 1:
        return {"end_s": window_s + optimizer_s, "records": _frame([]), "collectives": 0,
                "algorithm": None, "share": 0.0, "intra": None, "network": None, "notes": []}
    if lay.replica_nodes > 1:
        # each data-parallel group holds one GPU of each replica, every one on its own node,
        # beside the node's other GPUs' groups
        fab = dp_fabric(system, 1, split.dp, system.device_count)
    elif split.dp % split.nodes:
        raise AccelsimError(f"nodes = {split.nodes}: {split.dp} replicas do not split evenly "
                            "over the nodes")
    else:
        fab = dp_fabric(system, split.dp // split.nodes, split.nodes, lay.gpus)
    link = fab.intra if fab.intra is not None else fab.network
    share, notes = 0.0, []
    if split.overlap_dp and link is not None:
        share, notes = contention_share(plat.profile, link, backward)
    gather = params * WEIGHT_BYTES if split.zero in (1, 2) else 0.0
    ex = dp_exchange(fab, DpPlan(split.zero, split.overlap_dp, split.bucket_bytes,
                                 split.allreduce),
                     segments_s, grad_bytes, share, optimizer_s, gather)
    records, end_s = ex.records, ex.end_s
    run, count = list(ex.algorithms), ex.collectives
    if split.zero == 3:
        # NB: ZeRO-3 gathers each stage's weights before every micro-batch's forward and
        # backward; taken as exposed, one message each (DeepSpeed prefetches layer by layer).
        t_s, net_s, used = multinode_time_s("allgather", AUTO, fab, params * WEIGHT_BYTES)
        intra_b, net_b = multinode_wire_bytes("allgather", used, fab, params * WEIGHT_BYTES)
        k = 2 * split.microbatches
        rows = [(D2D, "allgather", end_s, end_s + k * t_s, -1, -1, 0, k * intra_b,
                 link_j(fab.intra, k * intra_b), f"ZeRO-3 weight gathers x {k}, {used}")]
        if net_s > 0:
            rows.append((NETWORK, "allgather", end_s, end_s + k * net_s, -1, -1, 0, k * net_b,
                         link_j(fab.network, k * net_b), f"ZeRO-3 weight gathers x {k}"))
        records = pd.concat([records, _frame(rows)], ignore_index=True)
        end_s += k * t_s
        run += [("allgather", used)] * k
        count += k
    return {"end_s": end_s, "records": records, "collectives": count,
            "algorithm": algorithm_summary(run), "share": share, "intra": fab.intra,
            "network": fab.network if split.nodes > 1 else None, "notes": notes}


def shards_busy(plat: Platform, split: Any, part: Any, opt_s: float, opt_j: float,
                gpus: int) -> dict[str, float]:
    """Busy seconds and joules of every GPU of every replica in one step: the rows' energies
    (dynamic plus static power over each row's time, within the TDP by the cost model) for
    each layer's shard on its TP ranks and each micro-batch, and the optimizer on every GPU."""
    passes = 2 if split.recompute else 1  # forward again before the backward
    layer = {col: passes * part(0, "forward", col) + part(0, "backward", col)
             for col in ("time_s", "energy_j")}
    ends = {col: part(1, "forward", col) + part(1, "backward", col)
            for col in ("time_s", "energy_j")}
    shards = plat.tp * split.dp * split.microbatches  # shard-runs of the model per step
    return {col: shards * (plat.cfg.n_layers * layer[col] + ends[col])
            + gpus * (opt_j if col == "energy_j" else opt_s) for col in ("time_s", "energy_j")}


def tp_link_energy(plat: Platform, lay: Layout, split: Any, tokens: float,
                   busy_s_per_micro: float) -> dict[str, float]:
    """Joules on the wire of every TP collective of the step (all groups), and the seconds one
    stage's TP group keeps the link busy (for the switches' active time)."""
    if plat.tp == 1 or lay.link is None:
        return {"energy_j": 0.0, "busy_s": 0.0}
    msg = tokens * plat.cfg.d_model * plat.formats.act_bytes
    ops = [("allreduce", msg)] if plat.expert_parallel else [("allreduce", msg)] * 2
    if plat.expert_parallel:
        ops += [("alltoall", msg * plat.cfg.experts_per_token)] * 2
    per_layer = sum(wire_bytes(op, collective_time_s(op, AUTO, plat.tp, b, lay.link)[1],
                               plat.tp, b) for op, b in ops)
    passes = 3 if split.recompute else 2  # forward, backward (and forward again)
    total = per_layer * plat.cfg.n_layers * passes * split.microbatches * split.dp
    return {"energy_j": link_j(lay.link, total), "busy_s": split.microbatches * busy_s_per_micro}


def step_energy_j(plat: Platform, lay: Layout, split: Any, system: Any, dp: dict[str, Any],
                  tp_link: dict[str, float], accel_j: float, step_s: float) -> dict[str, Any]:
    """Parts of one step's energy (module docstring), their total over the known parts, and
    notes naming the unknown ones."""
    records = dp["records"]
    groups = lay.gpus  # data-parallel groups, one per TP x PP position
    links_j: float | None = groups * float(records["energy_j"].sum()) + tp_link["energy_j"]
    notes: list[str] = list(dp["notes"])
    used = [lk for lk in (lay.link if lay.gpus > 1 else None, dp["intra"], dp["network"])
            if lk is not None]
    for lk in dict.fromkeys(used):
        if lk.energy_j_per_bit is None:
            links_j = None
            notes.append(f"link '{lk.name}' has no energy figure: the links' energy is "
                         "unknown (null)")
    busy = records
    if tp_link["busy_s"] > 0:  # the TP collectives, before the exchange's window (t = 0)
        busy = pd.concat([records, _frame([(D2D, "tp_collectives", -tp_link["busy_s"], 0.0)])],
                         ignore_index=True)
    devices = lay.gpus * split.dp // split.nodes
    shim = SimpleNamespace(system=system, nodes=split.nodes, devices=devices,
                           decode=SimpleNamespace(power_w=None))
    parts, part_notes = part_energy_j(shim, busy, step_s, {"network": NETWORK, "d2d": D2D})
    notes += [n for n in part_notes if not n.startswith("storage")]
    out: dict[str, float | None] = {"accelerators": accel_j, "links": links_j}
    for key in ("switches", "nics"):
        v = parts[key]
        out[key] = None if v is None else v * split.nodes  # every node like the first
    known = sum(v for v in out.values() if v is not None)
    if any(v is None for v in out.values()):
        notes.append("energy total, per token and average power leave out "
                     f"{', '.join(k for k, v in out.items() if v is None)} (unknown): lower "
                     "bounds")
    return {"parts": out, "total_j": known, "notes": notes}
