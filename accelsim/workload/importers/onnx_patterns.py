"""Folds of ONNX node chains into single ops, where the op vocabulary has them.

- MatMul by a constant + Add of a constant vector -> linear with bias.
- MatMul(Q, K^T) -> up to two of {Div by sqrt(d) or Mul by 1/sqrt(d), Add of a mask} ->
  Softmax -> MatMul(., V) -> attention (causal when the mask is a constant causal mask). K^T
  must come from a Transpose, whose making is deferred so that no transpose is counted twice.
- x * 0.5 * (1 + erf(x / sqrt(2))), as PyTorch exports GELU before opset 20 -> gelu.
- x * sigmoid(x) -> silu.

`find_folds` finds candidates by structure only: every inner node has a single consumer. Each
fold's `emit` checks the constants and shapes when the fold's last node is reached and emits
nothing when they do not fit (it raises `Unmapped` or returns False): the nodes are then
mapped one by one.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np
from onnx import NodeProto

from accelsim.workload.importers.onnx_layers import emit_linear
from accelsim.workload.importers.onnx_nodes import attrs, scalar
from accelsim.workload.ops import OpKind

if TYPE_CHECKING:
    from accelsim.workload.importers.onnx import Importer

_CLOSE = 1e-3  # relative tolerance of a folded pattern's constants (exported as float32)
_MASKED = -1e4  # a mask entry at or below this hides its key (HF uses -1e4 .. -inf)
Emit = Callable[["Importer"], bool]


@dataclass(frozen=True)
class Fold:
    pending: list[int]  # indices of the inner nodes, mapped one by one if the fold fails
    emit: Emit


def _close(a: float, b: float) -> bool:
    return abs(a - b) <= _CLOSE * abs(b)


def find_folds(nodes: list[NodeProto], im: Importer) -> tuple[dict[int, Fold], set[int]]:
    """Candidate folds keyed by the index of their last node, and the set of inner nodes."""
    f = _Finder(nodes, im)
    for j, n in enumerate(nodes):
        if n.op_type == "Add" and len(n.input) == 2:
            f.linear_bias(j)
        elif n.op_type == "MatMul":
            f.attention(j)
        elif n.op_type == "Erf":
            f.gelu(j)
        elif n.op_type == "Mul" and len(n.input) == 2:
            f.silu(j)
    return f.folds, f.taken - set(f.folds)


@dataclass
class _Finder:
    nodes: list[NodeProto]
    im: Importer
    folds: dict[int, Fold] = field(default_factory=dict)
    taken: set[int] = field(default_factory=set)

    def __post_init__(self) -> None:
        self.producer = {o: i for i, n in enumerate(self.nodes) for o in n.output if o}
        self.index = {id(n): i for i, n in enumerate(self.nodes)}
        self.static = set(self.im.consts)  # tensors computable from constants alone
        for n in self.nodes:
            if all(i in self.static for i in n.input if i):
                self.static.update(o for o in n.output if o)

    def made_by(self, name: str, *types: str) -> int | None:
        """The node of one of `types` that makes `name` for a single consumer, if free."""
        i = self.producer.get(name)
        ok = i is not None and self.nodes[i].op_type in types and self.im.single_use(name)
        return i if ok and i not in self.taken else None

    def only_user(self, name: str, *types: str) -> NodeProto | None:
        users = self.im.consumers.get(name, [])
        ok = self.im.single_use(name) and users[0].op_type in types
        return users[0] if ok and self.index[id(users[0])] not in self.taken else None

    def add(self, last: int, pending: list[int], emit: Emit) -> None:
        if last not in self.taken and not self.taken & set(pending):
            self.folds[last] = Fold(pending, emit)
            self.taken.update([last, *pending])

    # ---- patterns ----------------------------------------------------------------------

    def linear_bias(self, j: int) -> None:
        n = self.nodes[j]
        for k in (0, 1):
            i = self.made_by(n.input[k], "MatMul")
            if i is not None and self.nodes[i].input[1] in self.static \
                    and n.input[1 - k] in self.static:
                self.add(j, [i], _linear_bias(self.nodes[i], n, n.input[1 - k]))
                return

    def silu(self, j: int) -> None:
        n = self.nodes[j]
        for k in (0, 1):
            i = self.made_by(n.input[k], "Sigmoid")
            if i is not None and self.nodes[i].input[0] == n.input[1 - k]:
                self.add(j, [i], _silu(n, n.input[1 - k]))
                return

    def gelu(self, j: int) -> None:
        erf = self.nodes[j]
        d = self.made_by(erf.input[0], "Div", "Mul")
        plus = self.only_user(erf.output[0], "Add")
        if d is None or plus is None:
            return
        x = self.nodes[d].input[0]
        m1 = self.only_user(plus.output[0], "Mul")
        if m1 is None or x not in m1.input:
            return
        m2 = self.only_user(m1.output[0], "Mul")
        if m2 is None:
            return
        consts = (self.nodes[d], next(i for i in plus.input if i != erf.output[0]),
                  next(i for i in m2.input if i != m1.output[0]))
        inner = [d, j, self.index[id(plus)], self.index[id(m1)]]
        self.add(self.index[id(m2)], inner, _gelu(x, *consts, m2))

    def attention(self, i: int) -> None:
        m1 = self.nodes[i]
        if any(x in self.static for x in m1.input):
            return
        chain: list[NodeProto] = []
        node = m1
        while (nxt := self.only_user(node.output[0], "Softmax", "Div", "Mul", "Add")) is not None:
            if nxt.op_type == "Softmax":
                break
            if len(chain) == 2:
                return
            chain.append(nxt)
            node = nxt
        if nxt is None:
            return
        soft = nxt
        m2 = self.only_user(soft.output[0], "MatMul")
        if m2 is None or m2.input[0] != soft.output[0] or m2.input[1] in self.static:
            return
        if self.made_by(m1.input[1], "Transpose") is not None:
            self.im.deferrable.add(m1.input[1])
        inner = [i, *(self.index[id(n)] for n in chain), self.index[id(soft)]]
        self.add(self.index[id(m2)], inner, _attention(m1, chain, soft, m2))


# ---- emitters ------------------------------------------------------------------------------


def _linear_bias(mm: NodeProto, add_node: NodeProto, bias: str) -> Emit:
    def emit(im: Importer) -> bool:
        w, b = im.const(mm.input[1]), im.const(bias)
        if w.ndim != 2 or b.size != w.shape[1] or any(d != 1 for d in b.shape[:-1]):
            return False
        emit_linear(im, mm, mm.input[0], mm.input[1], w.T, b.reshape(-1), bias,
                    add_node.output[0])
        return True

    return emit


def _silu(mul: NodeProto, x: str) -> Emit:
    def emit(im: Importer) -> bool:
        im.bind(mul.output[0], im.emit(OpKind.SILU, [im.act(x)], mul.name or mul.output[0]))
        return True

    return emit


def _gelu(x: str, scale: NodeProto, one: str, half: str, last: NodeProto) -> Emit:
    def emit(im: Importer) -> bool:
        if scale.input[0] != x:
            return False
        r = scalar(im, scale.input[1])
        r = r if scale.op_type == "Div" else 1.0 / r
        if not (_close(r, math.sqrt(2.0)) and _close(scalar(im, one), 1.0)
                and _close(scalar(im, half), 0.5)):
            return False
        im.bind(last.output[0], im.emit(OpKind.GELU, [im.act(x)], last.name or last.output[0]))
        return True

    return emit


def _causal(mask: np.ndarray, s: int, s_kv: int) -> bool | None:
    """True for a causal mask, False for an all-zero one, None for anything else."""
    m = np.asarray(mask, dtype=np.float64)
    if not m.any():
        return False
    if m.ndim < 2 or m.shape[-2:] != (s, s_kv) or m.size != s * s_kv:
        return None
    m = m.reshape(s, s_kv)
    hidden = np.triu(np.ones((s, s_kv), dtype=bool), k=1)
    return True if np.all(m[hidden] <= _MASKED) and not m[~hidden].any() else None


def _attention(m1: NodeProto, chain: list[NodeProto], soft: NodeProto, m2: NodeProto) -> Emit:
    def emit(im: Importer) -> bool:
        q, kt, v = m1.input[0], m1.input[1], m2.input[1]
        axis = attrs(soft).get("axis", -1 if im.opset >= 13 else 1)
        if kt not in im.deferred or axis not in (-1, 3):
            return False
        src, perm, kt_name = im.deferred[kt]
        k_perm = (*perm[:-2], perm[-1], perm[-2])  # K from the transpose's source
        sq, sk = im.ps(q), tuple(im.g.shape(src)[p] for p in k_perm)
        if len(sq) != 3 or sk != im.ps(v) or sq[2] != sk[2] or sq[0] % sk[0]:
            return False
        scales, causal, masked = [], False, False
        prev = m1.output[0]
        for n in chain:
            other = next((x for x in n.input if x != prev), None)
            prev = n.output[0]
            if other is None:
                return False
            if n.op_type == "Add" and other not in im.consts:
                masked = True  # a mask computed from an input (padding)
            elif n.op_type == "Add":
                c = _causal(im.consts[other], sq[1], sk[1])
                if c is None:
                    return False
                causal = c
            elif n.op_type == "Div" and n.input[1] == other:
                scales.append(1.0 / scalar(im, other))
            elif n.op_type == "Mul":
                scales.append(scalar(im, other))
            else:
                return False
        if len(scales) != 1 or not _close(scales[0], 1.0 / math.sqrt(sq[2])):
            return False
        if masked:
            im.notes.append(f"{m2.name or m2.output[0]}: attention with a mask computed from an "
                            "input; the mask is not applied (NB: one add per score, left out)")
        del im.deferred[kt]
        k = src if k_perm == (0, 1, 2) else im.emit(OpKind.TRANSPOSE, [src], kt_name,
                                                    perm=k_perm)
        t = im.emit(OpKind.ATTENTION, [im.act(q), k, im.act(v)], m2.name or m2.output[0],
                    causal=causal)
        im.bind(m2.output[0], t)
        return True

    return emit
