"""A workload graph: ops in topological order over named tensors, and the builder that makes one.

    g = GraphBuilder("tiny")
    x = g.input("image", (3, 32, 32))
    y = g.conv2d(x, out_channels=8, kernel=3, padding=1)   # any OpKind value is a method
    y = g.relu(y)
    graph = g.build()

Shapes are per sample (see `accelsim.workload.ops`). A graph is immutable and picklable.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from accelsim.errors import ShapeError
from accelsim.workload.ops import Op, OpKind, Shape, make_op

INPUT_DTYPES = ("float", "index")


@dataclass(frozen=True, eq=False)
class Graph:
    """Ops in topological order. `inputs` maps input tensor name -> (shape, dtype) where dtype
    is "float" (activations) or "index" (token ids). Equality and hashing are by identity, so a
    graph can key caches."""

    name: str
    inputs: dict[str, tuple[Shape, str]]
    ops: tuple[Op, ...]
    outputs: tuple[str, ...]
    meta: dict[str, Any] = field(default_factory=dict)

    @cached_property
    def shapes(self) -> dict[str, Shape]:
        """Shape of every tensor (inputs and op outputs)."""
        out = {n: s for n, (s, _) in self.inputs.items()}
        out.update({op.name: op.output_shape for op in self.ops})
        return out

    @cached_property
    def params(self) -> int:
        """Trainable parameter count of the whole graph (computed once: a graph is immutable)."""
        return sum(op.params for op in self.ops)

    def op(self, name: str) -> Op:
        for op in self.ops:
            if op.name == name:
                return op
        raise KeyError(name)


class GraphBuilder:
    """Incrementally builds a `Graph`; every added op is shape-checked at once."""

    def __init__(self, name: str, **meta: Any) -> None:
        self.name = name
        self.meta = meta
        self._inputs: dict[str, tuple[Shape, str]] = {}
        self._ops: list[Op] = []
        self._shapes: dict[str, Shape] = {}
        self._prefix: list[str] = []
        self._counts: dict[str, int] = {}

    def input(self, name: str, shape: Shape, dtype: str = "float") -> str:
        if dtype not in INPUT_DTYPES:
            raise ShapeError(f"input '{name}': dtype {dtype!r} not in {INPUT_DTYPES}")
        if any(d <= 0 for d in shape):
            raise ShapeError(f"input '{name}': shape {tuple(shape)} has a non-positive dim")
        self._check_new(name)
        self._inputs[name] = (tuple(shape), dtype)
        self._shapes[name] = tuple(shape)
        return name

    def shape(self, tensor: str) -> Shape:
        return self._shapes[tensor]

    @contextlib.contextmanager
    def scope(self, prefix: str) -> Iterator[None]:
        """Names of ops added inside are prefixed with `prefix.` (nested scopes join)."""
        self._prefix.append(prefix)
        try:
            yield
        finally:
            self._prefix.pop()

    def node(self, kind: OpKind | str, *inputs: str, name: str | None = None, **attrs: Any) -> str:
        """Add one op of `kind` on tensors `inputs`; returns the name of its output tensor."""
        kind = OpKind(kind)
        if name is None:
            n = self._counts.get(kind.value, 0)
            self._counts[kind.value] = n + 1
            name = f"{kind.value}{n}"
        full = ".".join([*self._prefix, name])
        self._check_new(full)
        missing = [t for t in inputs if t not in self._shapes]
        if missing:
            raise ShapeError(f"op '{full}': unknown input tensor(s) {missing}")
        op = make_op(full, kind, inputs, tuple(self._shapes[t] for t in inputs), attrs)
        self._ops.append(op)
        self._shapes[full] = op.output_shape
        return full

    def __getattr__(self, attr: str) -> Callable[..., str]:
        try:
            kind = OpKind(attr)
        except ValueError:
            raise AttributeError(attr) from None
        return lambda *inputs, **kw: self.node(kind, *inputs, **kw)

    def build(self, outputs: tuple[str, ...] | None = None) -> Graph:
        """Freeze the graph; by default its output is the last op's output."""
        if not self._ops:
            raise ShapeError(f"graph '{self.name}' has no ops")
        outs = tuple(outputs) if outputs else (self._ops[-1].name,)
        return Graph(self.name, dict(self._inputs), tuple(self._ops), outs, dict(self.meta))

    def _check_new(self, name: str) -> None:
        if name in self._shapes:
            raise ShapeError(f"tensor name '{name}' is used twice in graph '{self.name}'")
