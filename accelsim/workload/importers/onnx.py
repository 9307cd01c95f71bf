"""Read an ONNX model (the `onnx` package, an extra) into a per-sample `Graph`.

    graph = read_graph(Path("net.onnx"))                 # the batch is the caller's --batch
    graph = read_graph(Path("bert.onnx"), seq_len=256)   # a symbolic sequence dimension
    weights = read_weights(Path("net.onnx"))             # {op name: {param: array}}

The file is loaded, checked (`onnx.checker`) and its input dimensions resolved (`onnx_inputs`):
dimension 0 of every input is the batch (symbolic or fixed, it is stripped: the graph is per
sample), other symbolic dimensions are a sequence length (`seq_len`) or an image size
(`image_size`), from the knobs or their defaults in `KNOBS`; any other symbolic dimension is an
error. Shapes are inferred (`onnx.shape_inference`, with data propagation) and each node is
mapped onto the op vocabulary (`onnx_nodes`, after the folds of `onnx_patterns`); nodes whose
inputs are all constants are evaluated (`onnx.reference`) and vanish. A node that cannot be
mapped becomes an `unmapped` op with the shape ONNX infers for it: it is listed by
`unsupported_ops`, never costed at zero and never dropped. Parameters are the initialisers that
ops use as weights (conv and linear weights and biases, norm scales and shifts, embedding
tables, tensor operands of elementwise ops), each counted once: a linear layer that reuses
another op's weight is tied to it. Batchnorm running statistics are not parameters; they come
with the weights.

NB: ONNX cannot tell a tied weight from two equal ones that an exporter merged (PyTorch merges
equal initialisers): an initialiser that two linear or embedding ops use as their weight is
counted once (tied, as GPT-2's LM head); any other shared initialiser is counted for each op
that uses it, as PyTorch counts the parameters it merged, and `meta["notes"]` says so.

NB: dimension 0 of every activation is taken to be the batch; a node that reshapes or
transposes across it is refused with an error, since the graph could not be per sample.
"""

from __future__ import annotations

import collections
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np
import onnx
from onnx import NodeProto, numpy_helper
from onnx.reference import ReferenceEvaluator

from accelsim.errors import AccelsimError, ShapeError
from accelsim.workload.graph import Graph, GraphBuilder
from accelsim.workload.importers.onnx_inputs import KNOBS, first_line, resolve_inputs
from accelsim.workload.importers.onnx_inputs import load_model as _load
from accelsim.workload.importers.onnx_nodes import MAPPERS, Unmapped
from accelsim.workload.importers.onnx_patterns import Fold, find_folds
from accelsim.workload.ops import OpKind, Shape


@dataclass(frozen=True)
class Imported:
    graph: Graph
    weights: dict[str, dict[str, np.ndarray]]


def read_graph(path: Path, **knobs: int) -> Graph:
    """The per-sample graph of the ONNX model at `path`; raises AccelsimError (one line)."""
    return import_model(path, knobs).graph


def read_weights(path: Path, **knobs: int) -> dict[str, dict[str, np.ndarray]]:
    """The model's initialisers as the parameters of the ops of `read_graph` (float32)."""
    return import_model(path, knobs).weights


def import_model(path: Path, knobs: dict[str, int]) -> Imported:
    """The graph and weights of the ONNX model at `path` with input `knobs`, imported once per
    path, modification time and knobs (`read_graph` and `read_weights`, and every forward pass
    of `--execute`, share one import). NB: the cached weights are read-only arrays shared by
    every caller. Raises AccelsimError (one line)."""
    bad = sorted(set(knobs) - set(KNOBS))
    if bad:
        raise AccelsimError(f"{path}: ONNX models take knobs {sorted(KNOBS)}, not {bad}")
    try:
        mtime_ns = path.stat().st_mtime_ns
    except OSError:
        mtime_ns = -1  # _load names the file and why it cannot be read
    return _cached_import(str(path), mtime_ns, tuple(sorted(knobs.items())))


@lru_cache(maxsize=2)
def _cached_import(path_text: str, mtime_ns: int, knob_items: tuple[tuple[str, int], ...]
                   ) -> Imported:
    del mtime_ns  # part of the cache key only: an edited file is imported again
    path, knobs = Path(path_text), dict(knob_items)
    model = _load(path)
    batch, inputs = resolve_inputs(path, model, knobs)
    try:
        inferred = onnx.shape_inference.infer_shapes(model, strict_mode=False, data_prop=True)
    except Exception as err:  # noqa: BLE001 - onnx raises several types; all are bad input
        raise AccelsimError(f"{path}: ONNX shape inference failed: {first_line(err)}") from None
    im = Importer(path, inferred, batch, inputs, knobs)
    im.run()
    for params in im.weights.values():
        for array in params.values():
            if isinstance(array, np.ndarray):
                array.flags.writeable = False
    return Imported(im.build(), im.weights)


def _onnx_shape(v: onnx.ValueInfoProto) -> tuple[int | None, ...] | None:
    if not v.type.HasField("tensor_type") or not v.type.tensor_type.HasField("shape"):
        return None
    return tuple(d.dim_value if d.HasField("dim_value") else None
                 for d in v.type.tensor_type.shape.dim)


class Importer:
    """The state of one import: ONNX tensor names -> graph tensors or constants."""

    def __init__(self, path: Path, model: onnx.ModelProto, batch: int,
                 inputs: list[tuple[str, Shape, str]], knobs: dict[str, int]) -> None:
        self.path, self.model, self.batch = path, model, batch
        g = model.graph
        self.opset = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")),
                          1)
        self.g = GraphBuilder(path.stem, family="onnx", source_file=str(path),
                              knobs=dict(knobs), opset=self.opset,
                              producer=f"{model.producer_name} {model.producer_version}".strip())
        self.full_shapes = {v.name: _onnx_shape(v) for v in (*g.value_info, *g.output, *g.input)}
        self.consts: dict[str, np.ndarray] = {}
        self.origin: dict[str, str] = {}  # constant -> the initialiser it is (for sharing)
        for t in g.initializer:
            self.consts[t.name] = numpy_helper.to_array(t)
            self.origin[t.name] = t.name
            value = self.consts[t.name]
            # NB: NaN only: -inf is a real constant (an attention mask's fill).
            if value.dtype.kind == "f" and np.isnan(value).any():
                raise AccelsimError(f"{path}: initialiser '{t.name}' holds NaN: damaged "
                                    "weights (--execute would report a NaN error)")
        self.initialisers = set(self.consts)
        self.tensors: dict[str, str] = {}
        self.deferred: dict[str, tuple[str, tuple[int, ...], str]] = {}  # made on first use
        self.deferrable: set[str] = set()  # K^T of attention candidates (`onnx_patterns`)
        self.n_ops = 0
        self.weights: dict[str, dict[str, np.ndarray]] = {}
        self.owner: dict[str, str] = {}  # initialiser -> op whose parameter it is
        self.uncertain: set[str] = set()  # tensors whose shape is a placeholder
        self.unmapped: collections.Counter[str] = collections.Counter()
        self.notes: list[str] = []
        self.names: set[str] = set()
        self.consumers: dict[str, list[NodeProto]] = collections.defaultdict(list)
        for n in g.node:
            for i in n.input:
                self.consumers[i].append(n)
        self.outputs = [o.name for o in g.output]
        for name, full, dtype in inputs:
            self.tensors[name] = self.g.input(name, full[1:], dtype)
            self.names.add(name)

    # ---- tensors ---------------------------------------------------------------------

    def is_const(self, name: str) -> bool:
        return name in self.consts

    def const(self, name: str, what: str = "operand") -> np.ndarray:
        if name not in self.consts:
            raise Unmapped(f"its {what} is computed, not a constant")
        return self.consts[name]

    def act(self, name: str) -> str:
        """The graph tensor of ONNX activation `name` (a deferred transpose is made now)."""
        if name in self.deferred:
            src, perm, op_name = self.deferred.pop(name)
            self.tensors[name] = self.emit(OpKind.TRANSPOSE, [src], op_name, perm=perm)
        if name not in self.tensors:
            raise Unmapped(f"its input '{name}' is a constant where an activation is expected")
        return self.tensors[name]

    def ps(self, name: str) -> Shape:
        """Per-sample shape of an activation."""
        return self.g.shape(self.act(name))

    def bind(self, onnx_name: str, tensor: str) -> None:
        self.tensors[onnx_name] = tensor

    def single_use(self, name: str) -> bool:
        return len(self.consumers.get(name, ())) == 1 and name not in self.outputs

    # ---- ops -------------------------------------------------------------------------

    def unique(self, base: str) -> str:
        name = base.strip("/").replace("/", ".") or "op"
        k, out = 1, name
        while out in self.names:
            k, out = k + 1, f"{name}_{k}"
        self.names.add(out)
        return out

    def emit(self, kind: OpKind, inputs: list[str], name: str, **attrs: Any) -> str:
        """Add an op (name made unique) and return its output tensor."""
        return self.add_op(kind, inputs, self.unique(name), **attrs)

    def add_op(self, kind: OpKind, inputs: list[str], unique_name: str, **attrs: Any) -> str:
        """Add an op under a name from `unique`."""
        self.n_ops += 1
        return self.g.node(kind, *inputs, name=unique_name, **attrs)

    def claim(self, const_name: str, op_name: str) -> str | None:
        """Record that `op_name` uses constant `const_name` as a weight; returns the op that
        used it first (a shared initialiser), else None."""
        src = self.origin.get(const_name)
        if src is None:
            return None  # NB: a computed constant used as a weight counts where it is used
        first = self.owner.setdefault(src, op_name)
        return None if first == op_name else first

    def claim_all(self, op_name: str, names: list[str | None]) -> None:
        """Claim each weight of an op whose kind cannot be tied: a shared one is counted
        again, with a note (see the module docstring)."""
        for name in names:
            first = self.claim(name, op_name) if name else None
            if first is not None:
                self.notes.append(f"{op_name}: initialiser '{self.origin[name]}' is also used "
                                  f"by {first}; counted for each")

    def set_weights(self, op_name: str, params: dict[str, np.ndarray | None]) -> None:
        self.weights[op_name] = {k: np.asarray(v, dtype=np.float32)
                                 for k, v in params.items() if v is not None}

    # ---- nodes -----------------------------------------------------------------------

    def run(self) -> None:
        nodes = list(self.model.graph.node)
        folds, pending = find_folds(nodes, self)
        for i, node in enumerate(nodes):
            if i in pending:
                continue
            fold = folds.get(i)
            if fold is not None and self._try_fold(fold, node):
                continue
            for j in fold.pending if fold is not None else ():
                self.map_node(nodes[j])
            self.map_node(node)

    def _try_fold(self, fold: Fold, node: NodeProto) -> bool:
        try:
            return fold.emit(self)
        except (Unmapped, ShapeError):  # checked before anything is emitted
            return False

    def map_node(self, node: NodeProto) -> None:
        ins = [i for i in node.input if i]
        if node.domain in ("", "ai.onnx") and all(self.is_const(i) for i in ins):
            self._evaluate(node)
            return
        mapper = MAPPERS.get(node.op_type) if node.domain in ("", "ai.onnx") else None
        try:
            if mapper is None:
                raise Unmapped("not in accelsim's op vocabulary")
            mapper(self, node)
        except Unmapped as why:
            self.emit_unmapped(node, str(why))
        except ShapeError as err:
            if any(self.tensors.get(i) in self.uncertain for i in ins):
                self.emit_unmapped(node, "an input's shape is unknown")
                return
            raise AccelsimError(f"{self.path}: {self.where(node)}: {err}") from None
        self._check_shapes(node)

    def where(self, node: NodeProto) -> str:
        return f"node '{node.name or node.output[0]}' ({node.op_type})"

    def _evaluate(self, node: NodeProto) -> None:
        """A node whose inputs are all constants: computed now, its outputs constants."""
        try:
            ev = ReferenceEvaluator(node, opsets={"": self.opset})
            outs = ev.run(None, {i: self.consts[i] for i in node.input if i})
        except Exception as err:  # noqa: BLE001 - any failure of the reference kernels
            raise AccelsimError(f"{self.path}: {self.where(node)} has constant inputs but could "
                                f"not be evaluated: {first_line(err)}") from None
        alias = node.op_type in ("Identity", "Transpose", "Cast", "Reshape", "Squeeze",
                                 "Unsqueeze", "Flatten")
        for name, value in zip(node.output, outs, strict=False):
            if name:
                self.consts[name] = np.asarray(value)
                if alias and node.input[0] in self.origin:
                    self.origin[name] = self.origin[node.input[0]]

    def emit_unmapped(self, node: NodeProto, reason: str) -> None:
        """Stand-in op(s) for a node the vocabulary does not cover, shaped as ONNX infers."""
        acts = [self.act(i) for i in node.input if i and not self.is_const(i)]
        if not acts:
            raise AccelsimError(f"{self.path}: {self.where(node)} has no activation input and "
                                f"cannot be mapped: {reason}")
        base = node.name or f"{node.op_type}_{len(self.names)}"
        if not base.endswith(node.op_type):
            base = f"{base}[{node.op_type}]"
        name = self.unique(base)
        # NB: float initialisers (not scalars) it reads are its parameters, once each.
        weights = {f"input{k}": self.consts[i] for k, i in enumerate(node.input)
                   if i in self.initialisers and self.consts[i].size > 1
                   and self.consts[i].dtype.kind == "f" and self.claim(i, name) is None}
        for k, out in enumerate(o for o in node.output if o):
            full = self.full_shapes.get(out)
            known = bool(full) and all(d is not None and d > 0 for d in full)
            shape = tuple(full[1:]) if known and full else (1,)  # NB: a placeholder shape
            w = weights if k == 0 else {}
            t = self.add_op(OpKind.UNMAPPED, acts, name if k == 0 else self.unique(f"{name}:{k}"),
                          source_op=f"onnx:{node.op_type}", shape=shape,
                          weights=tuple((n, tuple(v.shape)) for n, v in w.items()))
            self.set_weights(t, dict(w))
            if not known:
                self.uncertain.add(t)
            self.bind(out, t)
        self.unmapped[node.op_type] += 1
        self.notes.append(f"{name}: not mapped, {reason}")

    def _check_shapes(self, node: NodeProto) -> None:
        """Our per-sample shapes against ONNX's inferred (batch-first) ones, where known."""
        for out in node.output:
            full = self.full_shapes.get(out)
            if out not in self.tensors or not full or any(d is None for d in full):
                continue
            ours = self.g.shape(self.tensors[out])
            if self.tensors[out] not in self.uncertain and tuple(full[1:]) != ours:
                raise AccelsimError(f"{self.path}: {self.where(node)}: accelsim's per-sample "
                                    f"shape {ours} differs from ONNX's {tuple(full)} (batch "
                                    "first): the node's semantics are not mapped exactly")

    def build(self) -> Graph:
        outs = [self.act(o) for o in self.outputs if o in self.tensors or o in self.deferred]
        self.g.meta.update(unmapped=dict(self.unmapped), notes=list(self.notes))
        if not self.n_ops:
            raise AccelsimError(f"{self.path}: the model computes nothing from its inputs")
        return self.g.build(outputs=tuple(dict.fromkeys(outs)) or None)

