"""Transfer learning: which layers of a graph train (`--trainable`, `--freeze`), and what the
backward pass of a partly frozen graph must still compute.

    g = frozen_graph(build_model("resnet50"), trainable="last:1")   # only the classifier
    mask = train_mask(g)        # per counts row: trains its weights? needs its input grad?

A frozen layer keeps its weights fixed: no weight gradient, no optimizer state, no gradient
exchange. The backward pass still computes an op's input gradient where some op upstream of
it (one it reads from, transitively) trains; before the first trainable layer nothing runs
backward and no activation is kept (Yosinski et al. 2014's "frozen" base; the usual
fine-tuning of a pretrained network's head).

Specs: `trainable` = "all" (default), "last:N" (the last N layers with weights, in graph
order), "from:LAYER" (the layer named LAYER, or the first whose name starts with "LAYER.",
and every layer with weights after it); `freeze` = layer names or name prefixes joined by
"+" (frozen whatever `trainable` says).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import lru_cache

import numpy as np

from accelsim.errors import AccelsimError, did_you_mean
from accelsim.workload.graph import Graph

FROZEN = "frozen"  # graph.meta key: the names of the ops whose weights do not train


def _matches(name: str, prefix: str) -> bool:
    return name == prefix or name.startswith(prefix + ".")


def frozen_graph(graph: Graph, trainable: str = "all", freeze: str = "") -> Graph:
    """`graph` with `meta["frozen"]` naming the ops whose weights stay fixed; `graph` itself
    when every weight trains. Bad specs raise `AccelsimError` naming the knob and value."""
    return _frozen(graph, trainable, freeze)


@lru_cache(maxsize=64)
def _frozen(graph: Graph, trainable: str, freeze: str) -> Graph:
    weighted = [op.name for op in graph.ops if op.params > 0]
    frozen: set[str] = set()
    if trainable.startswith("last:"):
        n = trainable.removeprefix("last:")
        if not n.isdigit() or int(n) < 1:
            raise AccelsimError(f"knob 'trainable' = {trainable!r}: last:N, N a whole number "
                                "from 1")
        frozen |= set(weighted[:max(0, len(weighted) - int(n))])
    elif trainable.startswith("from:"):
        layer = trainable.removeprefix("from:")
        names = [op.name for op in graph.ops]
        first = next((i for i, nm in enumerate(names) if _matches(nm, layer)), None)
        if first is None:
            raise AccelsimError(f"knob 'trainable' = {trainable!r}: no layer {layer!r} in "
                                f"{graph.name}; {did_you_mean(layer, names)}".rstrip("; "))
        frozen |= {op.name for op in graph.ops[:first] if op.params > 0}
    elif trainable != "all":
        raise AccelsimError(f"knob 'trainable' = {trainable!r}: choose all, last:N or "
                            "from:LAYER")
    for prefix in (p.strip() for p in freeze.split("+") if p.strip()):
        hit = {nm for nm in weighted if _matches(nm, prefix)}
        if not hit:
            raise AccelsimError(f"knob 'freeze': no layer with weights named {prefix!r} (or "
                                f"under it) in {graph.name}; {did_you_mean(prefix, weighted)}"
                                .rstrip("; "))
        frozen |= hit
    if not frozen:
        return graph
    if len(frozen) == len(weighted):
        raise AccelsimError(f"knobs 'trainable'/'freeze' freeze every layer of {graph.name}: "
                            "nothing would train")
    return replace(graph, meta={**graph.meta, FROZEN: tuple(sorted(frozen))})


@dataclass(frozen=True)
class TrainMask:
    """Per row of `counts_table(graph)`: `trains` its weights; `needs_input_grad` (some op
    upstream trains); `keeps_saved` (its saved activations are read by its backward)."""

    trains: np.ndarray
    needs_input_grad: np.ndarray
    keeps_saved: np.ndarray

    @property
    def runs_backward(self) -> np.ndarray:
        return self.trains | self.needs_input_grad


def is_frozen(graph: Graph) -> bool:
    return bool(graph.meta.get(FROZEN))


def train_mask(graph: Graph, op_index: np.ndarray, params: np.ndarray,
               input_ops: list[tuple[int, ...]]) -> TrainMask:
    """The mask of the counts rows (`op_index`, `params`, `input_ops` their columns). With no
    frozen op every row trains and needs its input gradient (the unfrozen model as before).
    NB: a frozen weighted op's input gradient reads its weights, not its saved input; an op
    without weights reads its saved tensors for its input gradient."""
    n = len(op_index)
    has_w = np.asarray(params, dtype=float) > 0
    if not is_frozen(graph):
        ones = np.ones(n, dtype=bool)
        return TrainMask(has_w.copy(), ones, ones)
    frozen = set(graph.meta[FROZEN])
    names = [op.name for op in graph.ops]
    trains = np.array([has_w[i] and names[op_index[i]] not in frozen for i in range(n)])
    row_of = {int(k): i for i, k in enumerate(op_index)}
    upstream = np.zeros(n, dtype=bool)  # some op it reads from (transitively) trains
    for i in range(n):  # rows come in topological order
        upstream[i] = any(trains[row_of[j]] or upstream[row_of[j]]
                          for j in input_ops[i] if j in row_of)
    keeps = trains | (upstream & ~has_w)
    return TrainMask(trains, upstream, keeps)
