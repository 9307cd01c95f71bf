"""Tensor and pipeline parallelism of a decoder across a system's GPUs: the layout, its checks,
and the communication it adds.

    lay = layout(decoder("llama2_70b"), load_system("dgx-a100"), tp=4, pp=2)
    lay.allreduce_s(8 * 8192 * 2)      # one TP all-reduce of 8 tokens' hidden states, s

Tensor parallelism (Megatron-LM, Shoeybi et al. 2019, arXiv:1909.08053): attention heads and
FFN columns split over `tp` GPUs; each layer ends its attention and its FFN with an all-reduce
of the hidden states (two per layer), costed by the collective model of
`accelsim.interconnect.nccl` over the system's GPU-to-GPU link (the algorithm NCCL would pick).
By default the all-reduces sit on the critical path between layers (Megatron inference without
communication overlap); `overlap_tp` runs them beside the next layer's compute. Both are
simulated layer by layer as SimPy events on the link (`accelsim.llm.tp_events`).
Pipeline parallelism (GPipe, Huang et al. 2019, arXiv:1811.06965): layers split over `pp`
stages; a step's batch runs as min(batch, pp) microbatches, activations cross each stage
boundary point to point, and stages idle in the fill and drain (the bubble).
A replica larger than a node (`nodes`: Megatron's and NeMo's TP inside a node, PP across
nodes) fills whole nodes: tp divides the node's GPUs (or is a multiple of them, below), its
stages split evenly over `replica_nodes` nodes, and a stage boundary between nodes crosses the
system's NICs
(`accelsim.interconnect.multinode.fabric`: the node's NICs shared by its GPUs). TP larger
than a node (FasterTransformer's 530B at TP 16 and 32) spans tp / GPUs-per-node whole nodes:
its collectives run hierarchically (`accelsim.interconnect.multinode.multinode_time_s`: in the
node over NVLink, across the nodes over the NICs), and every stage boundary crosses nodes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from accelsim.errors import AccelsimError
from accelsim.interconnect.links import transfer_time_s
from accelsim.interconnect.multinode import Fabric, fabric, multinode_time_s
from accelsim.interconnect.nccl import AUTO, collective_time_s
from accelsim.llm.models import DecoderConfig
from accelsim.profiles.links import Link


@dataclass(frozen=True)
class Layout:
    """A TP x PP split of one model replica and the link between the system's GPUs (None:
    the system has none)."""

    tp: int
    pp: int
    n_layers: int
    link: Link | None
    overlap_tp: bool = False  # all-reduces beside the compute, not after it
    replica_nodes: int = 1  # nodes one replica fills (> 1: its stages cross the NICs)
    network_bytes_per_s: float = 0.0  # one GPU's share of its node's NICs (replica_nodes > 1)
    network_latency_s: float = 0.0
    tp_fabric: Fabric | None = None  # TP larger than a node: the nodes its group spans

    @property
    def gpus(self) -> int:
        return self.tp * self.pp

    @property
    def layers_per_stage(self) -> int:
        """Layers of the largest stage (NB: stages split as evenly as whole layers allow)."""
        return -(-self.n_layers // self.pp)

    def _tp_collective_s(self, kind: str, message_bytes: float) -> float:
        if self.tp == 1 or message_bytes <= 0:
            return 0.0
        if self.tp_fabric is not None:
            return multinode_time_s(kind, AUTO, self.tp_fabric, message_bytes)[0]
        assert self.link is not None
        return collective_time_s(kind, AUTO, self.tp, message_bytes, self.link)[0]

    def allreduce_s(self, message_bytes: float) -> float:
        """One TP all-reduce of `message_bytes` per GPU, s (0 without TP)."""
        return self._tp_collective_s("allreduce", message_bytes)

    def alltoall_s(self, message_bytes: float) -> float:
        """One all-to-all over the TP group of `message_bytes` per GPU (the whole buffer, as
        nccl-tests counts it), s (0 without TP)."""
        return self._tp_collective_s("alltoall", message_bytes)

    def p2p_s(self, message_bytes: float) -> float:
        """Activations across one stage boundary, s (0 without PP). NB: at the link's
        published achieved bandwidth, one transfer at a time; a replica over several nodes
        is paced by its slowest boundary, one between nodes: each of the stage's TP GPUs
        sends its copy over its share of the NICs at once."""
        if self.pp == 1:
            return 0.0
        assert self.link is not None
        in_node = transfer_time_s(message_bytes, self.link, achieved=True)
        if self.replica_nodes == 1:
            return in_node
        return max(in_node, self.network_latency_s + message_bytes / self.network_bytes_per_s)

    def microbatches(self, seqs: int) -> int:
        """Microbatches a step of `seqs` sequences runs as: as many as stages, at most one
        sequence each."""
        return max(min(seqs, self.pp), 1)


def replicas(devices: int | None, lay: Layout, system: Any, default: int = 1,
             nodes: int = 1) -> int:
    """Data-parallel model replicas: `devices` GPUs in splits of tp x pp (None: `default`);
    a replica over several nodes: `nodes` over the nodes it fills."""
    if lay.replica_nodes > 1:
        if devices is not None:
            raise AccelsimError(f"devices = {devices}: a tp x pp = {lay.gpus}-GPU replica "
                                "spans nodes; --nodes sets the replicas")
        return nodes // lay.replica_nodes
    if nodes > 1:
        raise AccelsimError(f"nodes = {nodes}: a decoder's tp x pp = {lay.gpus} replica fits "
                            f"one node of {system.device_count}; --nodes applies to replicas "
                            "larger than a node (replicas in one node: --devices)")
    if devices is None:
        return default
    if devices % lay.gpus or devices > system.device_count:
        raise AccelsimError(f"devices = {devices}: must be a multiple of tp x pp = {lay.gpus} "
                            f"and at most the {system.device_count} GPUs of '{system.name}'")
    return devices // lay.gpus


def _replica_nodes(system: Any, tp: int, pp: int, nodes: int) -> int:
    """Nodes one tp x pp replica fills (1: it fits one node); AccelsimError where it cannot
    span `nodes` nodes of `system` (module docstring)."""
    per_node = system.device_count
    if tp * pp <= per_node:
        return 1
    if nodes == 1:
        raise AccelsimError(f"tp x pp = {tp} x {pp} = {tp * pp} GPUs, but '{system.name}' has "
                            f"{per_node}: " + (
                                "a multi-GPU system (e.g. dgx-a100, dgx-h100) or a smaller "
                                "split (--nodes needs one)" if per_node == 1 else
                                f"a smaller split, a system with more GPUs a node, or the "
                                f"split over whole nodes (--nodes {-(-tp * pp // per_node)})"))
    if (tp % per_node if tp > per_node else per_node % tp) or (tp * pp) % per_node:
        raise AccelsimError(f"tp x pp = {tp} x {pp} over nodes of {per_node} GPUs: a replica "
                            f"fills whole nodes, with tp dividing {per_node} or a multiple "
                            "of it (tensor parallelism over whole nodes)")
    span = tp * pp // per_node
    if nodes % span:
        raise AccelsimError(f"nodes = {nodes}: a tp x pp = {tp * pp}-GPU replica fills {span} "
                            f"nodes of {per_node}; nodes must be a multiple of {span}")
    return span


def layout(cfg: DecoderConfig, system: Any, tp: int, pp: int,
           overlap_tp: bool = False, expert_parallel: bool = False, nodes: int = 1) -> Layout:
    """The split, checked against the model and the system (AccelsimError naming the knob);
    `nodes` (training): the nodes the run spans, which a replica may fill several of."""
    if expert_parallel and (not cfg.is_moe or cfg.n_experts % tp):
        raise AccelsimError(f"knob 'expert_parallel': needs a mixture-of-experts model whose "
                            f"experts the {tp} tensor-parallel GPUs share evenly; {cfg.name} "
                            f"has {cfg.n_experts} expert(s)")
    for name, value in (("tp", tp), ("pp", pp)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise AccelsimError(f"knob '{name}' = {value!r}: a whole number >= 1")
    dense_d_ff = cfg.d_ff if cfg.dense_d_ff is None else cfg.dense_d_ff
    if cfg.n_heads % tp or cfg.d_ff % tp or dense_d_ff % tp:
        raise AccelsimError(f"knob 'tp' = {tp}: must divide {cfg.name}'s {cfg.n_heads} "
                            f"attention heads and its FFN size {cfg.d_ff}"
                            + (f" and dense FFN size {dense_d_ff}" if dense_d_ff != cfg.d_ff
                               else ""))
    if pp > cfg.n_layers:
        raise AccelsimError(f"knob 'pp' = {pp}: {cfg.name} has only {cfg.n_layers} layers")
    span = _replica_nodes(system, tp, pp, nodes)
    link = system.device_to_device
    if tp * pp > 1 and link is None:
        raise AccelsimError(f"system '{system.name}' has no GPU-to-GPU link for tp/pp")
    # the link also carries data-parallel traffic between replicas of one GPU (training)
    if span == 1:
        return Layout(tp, pp, cfg.n_layers, link, bool(overlap_tp))
    fab = fabric(system, span)  # AccelsimError where the system has no NICs
    tp_fab = fabric(system, tp // system.device_count) if tp > system.device_count else None
    return Layout(tp, pp, cfg.n_layers, link, bool(overlap_tp), span,
                  fab.network_bandwidth_bytes_per_s, fab.network_latency_s, tp_fab)
