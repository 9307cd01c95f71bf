"""The calibration cases: one op of the workload vocabulary at one size, run by the project's own
numpy kernels (`accelsim.kernels.execute.run_op_in_format`) and timed.

    for case in kernel_cases("full"):
        seconds = time_case(case, "fp32", repeats=5)

Each case is a one-op graph (`GraphBuilder`) so that the simulator counts its FLOPs and bytes
exactly as it counts a network's, and `kernel` names the efficiency it calibrates (the keys of a
stack's `[cpu_efficiency]`): gemm (linear), conv (conv2d), attention, vector (transcendental /
normalisation ops, costed by their FLOPs) and stream (data movement, costed by their bytes).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from accelsim.devices.cpu.model import VECTOR_OPS
from accelsim.kernels.execute import make_inputs, op_params, run_op_in_format, time_graph
from accelsim.workload.graph import Graph, GraphBuilder

BUDGETS = ("full", "tiny")  # tiny: a few small sizes, for tests (seconds, not minutes)
MATMUL_CASES = ("gemm", "conv", "attention")  # the kernels of matmul cases
# forward passes a matmul case is timed over (least of), as the benchmark's rows
FORWARD_PASSES = 5
Clock = Callable[[], float]  # seconds: time.perf_counter (wall) or time.process_time (CPU)


@dataclass(frozen=True)
class Case:
    """One timed op: `graph` (its last op is timed) at `batch`; `kernel` is what it fits."""

    name: str
    kernel: str
    graph: Graph
    batch: int


def _linear(m: int, k: int, n: int) -> Case:
    g = GraphBuilder(f"gemm_{m}x{k}x{n}")
    g.linear(g.input("x", (k,)), out_features=n, bias=False, name="op")
    return Case(g.name, "gemm", g.build(), m)


def _conv(c: int, hw: int, k: int, o: int, stride: int, batch: int = 1) -> Case:
    g = GraphBuilder(f"conv_{c}x{hw}x{hw}_k{k}_o{o}_s{stride}_b{batch}")
    g.conv2d(g.input("x", (c, hw, hw)), out_channels=o, kernel=k, stride=stride,
             padding=k // 2, bias=False, name="op")
    return Case(g.name, "conv", g.build(), batch)


def _attention(heads: int, seq: int, dim: int, batch: int = 1) -> Case:
    g = GraphBuilder(f"attention_h{heads}_s{seq}_d{dim}_b{batch}")
    q, k, v = (g.input(t, (heads, seq, dim)) for t in ("q", "k", "v"))
    g.attention(q, k, v, causal=False, name="op")
    return Case(g.name, "attention", g.build(), batch)


def _unary(kind: str, shape: tuple[int, ...], **attrs: object) -> Case:
    g = GraphBuilder(f"{kind}_{'x'.join(map(str, shape))}")
    getattr(g, kind)(g.input("x", shape), name="op", **attrs)
    return Case(g.name, "vector" if kind in VECTOR_OPS else "stream", g.build(), 1)


def _add(shape: tuple[int, ...]) -> Case:
    g = GraphBuilder(f"add_{'x'.join(map(str, shape))}")
    g.add(g.input("a", shape), g.input("b", shape), name="op")
    return Case(g.name, "stream", g.build(), 1)


def _embedding(vocab: int, dim: int, seq: int) -> Case:
    g = GraphBuilder(f"embedding_v{vocab}_d{dim}_s{seq}")
    g.embedding(g.input("ids", (seq,), "index"), num_embeddings=vocab, embedding_dim=dim,
                name="op")
    return Case(g.name, "stream", g.build(), 1)


def kernel_cases(budget: str = "full") -> list[Case]:
    """The cases of a calibration run: GEMMs from 1 to 1024 rows, ResNet-like convolutions,
    BERT-like attention, normalisation and activation ops, embedding lookups, and streams of 0.25
    to 16 MB
    (`budget="tiny"`: one or two small sizes of each, for tests)."""
    if budget == "tiny":
        return [_linear(4, 128, 128), _linear(64, 256, 256), _conv(16, 16, 3, 16, 1),
                _attention(2, 32, 32), _unary("gelu", (16, 1024)),
                _unary("relu", (64, 1024)), _add((64, 1024))]
    gemms = [_linear(*s) for s in ((1, 1024, 4096), (4, 1536, 1536), (16, 512, 512),
                                   (32, 1024, 1024), (64, 768, 768), (128, 768, 3072),
                                   (256, 1024, 1024), (512, 2048, 512), (1024, 1024, 1024))]
    convs = [_conv(*s) for s in ((3, 224, 7, 64, 2), (64, 56, 3, 64, 1), (64, 56, 1, 256, 1),
                                 (128, 28, 3, 128, 1), (256, 14, 3, 256, 1), (512, 7, 3, 512, 1),
                                 (1024, 14, 1, 256, 1))]
    attention = [_attention(12, 128, 64), _attention(12, 256, 64), _attention(8, 64, 64, 2)]
    vector = [_unary("gelu", (128, 3072)), _unary("gelu", (512, 3072)),
              _unary("layernorm", (128, 768)), _unary("layernorm", (512, 768)),
              _unary("softmax", (12, 128, 128)), _unary("softmax", (12, 256, 256)),
              _unary("batchnorm", (64, 56, 56)), _unary("batchnorm", (512, 14, 14))]
    stream = [_unary("relu", (64, 56, 56)), _unary("relu", (256, 56, 56)),
              _unary("relu", (512, 7, 7)), _add((256, 56, 56)), _add((1024, 14, 14)),
              _add((128, 768)),
              _unary("maxpool2d", (64, 112, 112), kernel=3, stride=2, padding=1),
              _unary("maxpool2d", (32, 56, 56), kernel=3, stride=2, padding=1),
              _unary("global_avgpool", (2048, 7, 7)), _unary("global_avgpool", (512, 14, 14)),
              _unary("transpose", (128, 12, 64), perm=(1, 0, 2)),
              _unary("transpose", (512, 12, 64), perm=(1, 0, 2)),
              _embedding(20000, 512, 256), _embedding(50000, 1024, 64)]
    return [*gemms, *convs, *attention, *vector, *stream]


def dispatch_case() -> Case:
    """An op with next to no work (relu of 8 values): its time is the kernels' fixed cost."""
    return _unary("relu", (8,))


def least_time_s(run: Callable[[], object], repeats: int, clock: Clock = time.perf_counter,
                 max_s: float = 1.0, min_s: float = 0.05, max_runs: int = 200,
                 setup: Callable[[], object] | None = None) -> float:
    """The least time by `clock` (wall, or `time.process_time`: CPU) of `run()`, s: at least
    `repeats` runs and `min_s` of running (a small op runs many times), at most `max_runs`
    runs or `max_s` of timed running (at least one run); `setup()`, where given, runs untimed
    before each run. NB: the least filters out other processes on a shared host; one warm-up
    run first (allocation, BLAS thread start) is not counted."""
    run()
    best_s, spent_s = float("inf"), 0.0
    for i in range(max_runs):
        if setup is not None:
            setup()
        start_s = clock()
        run()
        took_s = clock() - start_s
        best_s, spent_s = min(best_s, took_s), spent_s + took_s
        if spent_s > max_s or (i + 1 >= repeats and spent_s >= min_s):
            break
    return best_s


def time_case(case: Case, precision: str, repeats: int,
              clock: Clock = time.perf_counter) -> float:
    """The least time of the case's op through the numpy kernels in `precision`, s. A matmul
    case is timed as a forward pass times it (`kernels.execute.time_graph`, the function of
    `describe --execute --time` and `benchmarks/fidelity/calibrate_host.py`): inputs and parameters
    made anew (untimed) before every pass, the least of `FORWARD_PASSES` passes, so that the
    weights' cache state and the allocator's history are those of the user's run. NB: a GEMM
    that re-reads the weights it just used finds them clean in cache, which a forward pass
    never does (measured here: skinny GEMMs, 4 to 16 MB of weights, 10-40% faster that
    way). Other ops (`least_time_s`) keep their inputs (an embedding table made anew would
    cost more than the op)."""
    op = case.graph.ops[-1]
    if case.kernel in MATMUL_CASES:
        return time_graph(case.graph, case.batch, precision, repeats=max(repeats, FORWARD_PASSES),
                          clock=clock)[op.name]
    xs = list(make_inputs(case.graph, case.batch).values())
    params = op_params(op, 0, 0)
    return least_time_s(lambda: run_op_in_format(op, xs, params, precision), repeats, clock)


def stream_bandwidth_bytes_per_s(n_bytes: int, repeats: int) -> float:
    """Sustained copy bandwidth of this host's memory as numpy sees it: bytes read plus bytes
    written by `np.copyto` of an `n_bytes` float32 array, over the least time of `repeats`.
    NB: one thread (numpy copies are single-threaded), so a lower bound of the socket's."""
    src = np.ones(max(1, n_bytes // 4), dtype=np.float32)
    dst = np.empty_like(src)
    np.copyto(dst, src)
    best_s = float("inf")
    for _ in range(max(1, repeats)):
        start_s = time.perf_counter()
        np.copyto(dst, src)
        best_s = min(best_s, time.perf_counter() - start_s)
    return 2 * src.nbytes / best_s
