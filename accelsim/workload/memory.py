"""Device memory a workload needs: weights, activations, gradients and optimizer state.

Device-independent; a device compares `required_bytes` with its capacity. A workload that
does not fit is a result (`fits: false` with what was needed), never a crash.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from functools import lru_cache

from accelsim.formats import get_format
from accelsim.workload.freeze import is_frozen, train_mask
from accelsim.workload.graph import Graph
from accelsim.workload.tables import counts_table, totals
from accelsim.workload.work import (
    MASTER_WEIGHT_BYTES,
    OPTIMIZER_STATE_TENSORS,
    trained_params,
    work_table,
)


@lru_cache(maxsize=128)
def peak_live_elems(graph: Graph) -> int:
    """Peak elements of activations alive at once in a forward pass (per sample): a tensor
    lives from the op that makes it to its last consumer (graph outputs to the end)."""
    last_use: dict[str, int] = {}
    for i, op in enumerate(graph.ops):
        for t in op.inputs:
            last_use[t] = i
    end = len(graph.ops)
    for t in graph.outputs:
        last_use[t] = end
    size = {t: math.prod(s) for t, s in graph.shapes.items()}
    live = sum(size[t] for t in graph.inputs)
    peak = live
    for i, op in enumerate(graph.ops):
        # NB: reshape/transpose outputs are counted as new tensors (no aliasing of views).
        live += size[op.name]
        peak = max(peak, live)
        live -= sum(size[t] for t in set(op.inputs) if last_use.get(t) == i)
        if op.name not in last_use:
            live -= size[op.name]
    return peak


@dataclass(frozen=True)
class MemoryNeed:
    """Bytes a device must hold for one batch (inference) or one training step."""

    weights_bytes: float
    activations_bytes: float
    gradients_bytes: float
    optimizer_state_bytes: float

    @property
    def required_bytes(self) -> float:
        return (self.weights_bytes + self.activations_bytes + self.gradients_bytes
                + self.optimizer_state_bytes)

    def check(self, capacity_bytes: float) -> dict[str, float | bool]:
        """The record reported to users: required, capacity, fits, and the parts."""
        return {"required_bytes": self.required_bytes, "capacity_bytes": capacity_bytes,
                "fits": self.required_bytes <= capacity_bytes, **asdict(self)}


def memory_need(graph: Graph, batch: int, precision: str, mode: str = "infer",
                optimizer: str = "sgd") -> MemoryNeed:
    """Weights at the precision's width; training adds the activations saved for backward,
    gradients, fp32 master weights (when the precision is narrower) and optimizer state.
    NB: framework workspace, allocator fragmentation and the CUDA context are not counted."""
    width = get_format(precision).bytes_per_element
    params = float(graph.params)
    if mode == "infer":
        return MemoryNeed(params * width, peak_live_elems(graph) * batch * width, 0.0, 0.0)
    saved = _saved_elems_per_sample(graph) * batch * width
    # a frozen graph (`accelsim.workload.freeze`): gradients, master weights and optimizer
    # state for the parameters that train only
    trained = trained_params(graph)
    master = trained * MASTER_WEIGHT_BYTES if width < MASTER_WEIGHT_BYTES else 0.0
    state = trained * MASTER_WEIGHT_BYTES * OPTIMIZER_STATE_TENSORS[optimizer]
    # NB: mixed precision (PyTorch AMP) accumulates parameter gradients in fp32, the master
    # weights' type; they are also what data-parallel training all-reduces.
    grads = trained * max(width, MASTER_WEIGHT_BYTES)
    return MemoryNeed(params * width + master, saved, grads, state)


def _saved_elems_per_sample(graph: Graph) -> float:
    """Activations kept for backward, per sample: every op's, or on a frozen graph only those
    its backward reads (none before the first layer that trains)."""
    if not is_frozen(graph):
        return totals(graph)["saved_elems_per_sample"]
    work = work_table(graph, 1, "fp32", "train")  # (its mask, not its bytes)
    c = counts_table(graph)
    fwd = work[work["phase"] == "forward"]
    mask = train_mask(graph, c["op_index"].to_numpy(), c["params"].to_numpy(),
                      list(fwd["input_ops"]))
    return float((c["saved_elems"].to_numpy() * mask.keeps_saved).sum())


def largest_batch(graph: Graph, capacity_bytes: float | None, precision: str,
                  mode: str = "infer", optimizer: str = "sgd") -> int | None:
    """The largest batch whose `memory_need` fits `capacity_bytes`: 0 when not even one
    sample fits, None when nothing limits it (capacity unknown or no per-sample memory).
    The need is affine in the batch (fixed weights and state plus per-sample activations)."""
    if capacity_bytes is None or not math.isfinite(capacity_bytes):
        return None
    one = memory_need(graph, 1, precision, mode, optimizer).required_bytes
    per_sample = memory_need(graph, 2, precision, mode, optimizer).required_bytes - one
    if one > capacity_bytes:
        return 0
    if per_sample <= 0:
        return None
    batch = 1 + int((capacity_bytes - one) // per_sample)
    # Guard the float division at the edge: step until need(batch) fits and need(batch+1)
    # does not.
    while batch > 1 and memory_need(graph, batch, precision, mode,
                                    optimizer).required_bytes > capacity_bytes:
        batch -= 1
    while memory_need(graph, batch + 1, precision, mode, optimizer).required_bytes \
            <= capacity_bytes:
        batch += 1
    return batch


INDEX_BYTES = 4  # NB: token ids cross a link as int32.


def io_bytes_per_sample(graph: Graph, precision: str) -> tuple[float, float]:
    """(input bytes, output bytes) of one sample entering and leaving the model (a host link,
    a server's request). NB: float inputs and outputs at the compute precision (no host-side
    casts)."""
    width = get_format(precision).bytes_per_element
    in_bytes = sum(math.prod(shape) * (width if dtype == "float" else INDEX_BYTES)
                   for shape, dtype in graph.inputs.values())
    out_bytes = sum(math.prod(graph.shapes[t]) * width for t in graph.outputs)
    return float(in_bytes), float(out_bytes)
