"""On-chip residency (`accelsim.devices.residency`): a kernel's input still in L2 from the kernel
that wrote it is not read from DRAM, by the LRU bound of the module docstring; closed forms on
a chain of elementwise ops and a skip connection, and the GPU model's DRAM time with an L2 that
holds the chain's tensors and one that does not."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from accelsim.devices.gpu.model import gpu_costs
from accelsim.devices.residency import resident_read_bytes
from accelsim.profiles.devices import load_profile
from accelsim.profiles.stack_choice import resolve_software
from accelsim.workload.graph import GraphBuilder
from accelsim.workload.work import gemms_for, work_table

C, H, W = 64, 32, 32
TENSOR_BYTES = C * H * W * 2  # one fp16 activation, batch 1


def chain_with_skip():
    """x -> relu a -> relu b -> relu c -> add(a, c): four kernels, each tensor one size."""
    g = GraphBuilder("chain")
    x = g.input("x", (C, H, W))
    a = g.relu(x, name="a")
    b = g.relu(a, name="b")
    c = g.relu(b, name="c")
    g.add(a, c, name="skip")
    return g.build()


def _hits(cache_bytes: float) -> np.ndarray:
    work = work_table(chain_with_skip(), 1, "fp16")
    dram = (work["read_bytes"] + work["write_bytes"]).to_numpy(dtype=float)
    return resident_read_bytes(work, dram, np.zeros(len(work), dtype=bool), cache_bytes)


def test_a_tensor_read_by_the_next_kernel_hits_while_it_fits() -> None:
    s = TENSOR_BYTES
    # b and c read the tensor written just before them: distance = its own size
    hits = _hits(1.5 * s)
    assert list(hits) == [0.0, s, s, s]  # a reads the graph input: never written here
    assert list(_hits(0.5 * s)) == [0.0, 0.0, 0.0, 0.0]  # no tensor fits


def test_a_skip_connection_hits_only_if_everything_in_between_fits() -> None:
    """The add reads c (just written: distance s) and a: a's distance is a itself plus what
    b and c moved through DRAM, 2s each (read and write): 5s in all."""
    s = TENSOR_BYTES
    assert _hits(4.9 * s)[3] == s  # c only
    assert _hits(5.0 * s)[3] == 2 * s  # c and a


def test_the_gpu_reads_a_resident_input_from_l2_not_dram() -> None:
    """A relu chain on an A100: with the profile's 40 MB L2 every tensor after the first kernel
    is read from L2 (DRAM: its write only); with a 1 kB L2 each kernel reads and writes."""
    a100 = load_profile("a100")
    tiny = dataclasses.replace(a100, onchip_memory=dataclasses.replace(
        a100.onchip_memory, l2_cache_bytes=1024))
    graph = chain_with_skip()
    work, gemms = work_table(graph, 1, "fp16"), gemms_for(graph, 1)
    eager = resolve_software("pytorch-eager", "gpu")[0]
    big = gpu_costs(a100, work, gemms, "fp16", eager).to_frame()["dram_bytes"].to_numpy()
    small = gpu_costs(tiny, work, gemms, "fp16", eager).to_frame()["dram_bytes"].to_numpy()
    s = TENSOR_BYTES
    assert small == pytest.approx([2 * s, 2 * s, 2 * s, 3 * s])
    assert big == pytest.approx([2 * s, s, s, s])  # the add reads both inputs from L2
