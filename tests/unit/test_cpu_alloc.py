"""Fresh-page fault time of numpy's per-call temporaries (accelsim/devices/cpu/alloc.py) and
where the CPU model puts BLAS packing traffic (accelsim/devices/cpu/model.py), against closed forms
derived here (issue 10)."""

from __future__ import annotations

import dataclasses
import math
import struct

import numpy as np
import pytest

from accelsim.calibrate.alloc_bench import AllocatorFigures, mmap_threshold_max_bytes
from accelsim.calibrate.write import measured_stack, toml_text, with_allocator
from accelsim.devices.cpu.alloc import fresh_bytes, gemm_temporaries_bytes
from accelsim.devices.energy import dynamic_energy_j
from accelsim.errors import ConfigError
from accelsim.profiles.devices import load_profile
from accelsim.profiles.efficiency import load_efficiency
from accelsim.profiles.software import builtin_stacks, load_stack
from accelsim.workload.graph import GraphBuilder
from accelsim.workload.work import gemms_for, work_table
from tests.helpers.cpu import row

MIB = 1 << 20
PAGE_S = 1e-6  # a made-up time per page: the tests check pages x this
DRAM_EFF = load_efficiency("cpu")["assumed.dram_bandwidth_efficiency"]


def numpy_like(threshold_bytes, weight_casts=False, allocator=True):
    """pytorch-eager with numpy's int8 path (`quantize_int8`) and, where asked, an allocator."""
    base = builtin_stacks()["pytorch-eager"]
    return dataclasses.replace(
        base, weight_casts=weight_casts,
        cpu_efficiency={"quantize_int8": 0.03, "gemm_int8": 0.015},
        allocator=(PAGE_S, 4096, threshold_bytes) if allocator else None)


def extra_s(m, k, n, precision, threshold_bytes, weight_casts=False):
    with_faults = row(m, k, n, precision, numpy_like(threshold_bytes, weight_casts))
    without = row(m, k, n, precision, numpy_like(threshold_bytes, weight_casts, False))
    return with_faults["compute_s"] - without["compute_s"], with_faults, without


def test_int8_weight_temporaries_above_the_threshold_fault_every_page():
    # 2048 x 2048 weights quantised in float64: astype, rint and clip are each 2048^2 x 8 B =
    # 32 MiB = 8192 pages of 4 KiB, at glibc's 32 MiB threshold; every other temporary (the
    # fp32 abs, int8 and int32 copies: 16 MiB at most; the 32-row activation's) is below it.
    added_s, with_faults, without = extra_s(32, 2048, 2048, "int8", 32 * MIB)
    assert added_s == pytest.approx(3 * 8192 * PAGE_S, rel=1e-12)
    # zero-filled through the caches: on-chip bytes
    assert with_faults["onchip_bytes"] - without["onchip_bytes"] == pytest.approx(3 * 32 * MIB)


def test_temporaries_below_the_threshold_cost_nothing():
    # 1024 x 1024 int8: the float64 copies are 8 MiB, below 32 MiB: no fresh pages.
    assert extra_s(8, 1024, 1024, "int8", 32 * MIB)[0] == 0.0
    # bf16 weight casts (2048^2: an 8 MiB bf16 copy then a 16 MiB fp32 one) below 32 MiB
    assert extra_s(32, 2048, 2048, "bf16", 32 * MIB, weight_casts=True)[0] == 0.0


def test_bf16_weight_casts_at_a_lower_threshold():
    # threshold 8 MiB: the 8 MiB bf16 copy (2048 pages) and the 16 MiB fp32 one (4096 pages)
    # are fresh; the 32 x 2048 activation's copies and the 256 KiB output are not.
    added_s = extra_s(32, 2048, 2048, "bf16", 8 * MIB, weight_casts=True)[0]
    assert added_s == pytest.approx((2048 + 4096) * PAGE_S, rel=1e-12)


def test_fp32_output_above_the_threshold():
    # fp32: the only per-call temporary is the output, 4096 x 4096 x 4 B = 64 MiB.
    assert extra_s(4096, 256, 4096, "fp32", 32 * MIB)[0] == pytest.approx(16384 * PAGE_S,
                                                                          rel=1e-12)


def test_temporaries_list_of_an_int8_gemm():
    # per operand element 4 + 8 + 8 + 8 + 1 + 4 B, per output element 4 + 4 + 8 + 8 + 4 B
    sizes = gemm_temporaries_bytes(2, 3, 5, "int8", quantized=True, weight_casts=False)
    assert sum(sizes) == (2 * 3 + 3 * 5) * 33 + 2 * 5 * 28


def test_temporaries_list_of_an_int8_conv():
    # the input's a elements pass abs, float64 x 3 and int8 (4 + 8 + 8 + 8 + 1 B); its int8
    # im2col copy and that copy's int32 widening are m x k (1 + 4 B); weights and output as
    # in a GEMM
    m, k, n, a = 6, 27, 5, 12
    sizes = gemm_temporaries_bytes(m, k, n, "int8", quantized=True, weight_casts=False,
                                   a_elements=a)
    assert sum(sizes) == a * 29 + m * k * 5 + k * n * 33 + m * n * 28


def test_glibc_threshold_is_32_mib_on_64_bit():
    expected = 4 * MIB * struct.calcsize("l") if struct.calcsize("P") == 8 else None
    got = mmap_threshold_max_bytes()
    assert got is None or got == expected == 32 * MIB


def test_allocator_figures_round_trip_through_a_stack_file(tmp_path):
    data = measured_stack("numpy here, measured", {"gemm_fp32": 0.5}, 2e-6, True, 2.6, "vm",
                          "today", "note")
    figures = AllocatorFigures(2.5e-7, 4096, 32 * MIB, "least of 5")
    path = tmp_path / "numpy-host.toml"
    path.write_text(toml_text(with_allocator(data, figures, "vm", "today", "CPU time"), "t"))
    assert load_stack(path).allocator == pytest.approx((2.5e-7, 4096, 32 * MIB))
    path.write_text(toml_text(with_allocator(data, None, "vm", "today", "CPU time"), "t"))
    assert load_stack(path).allocator is None
    # a page is a power of two: 4000 bytes is refused in one line naming file and field
    odd = AllocatorFigures(2.5e-7, 4000, 32 * MIB, "least of 5")
    path.write_text(toml_text(with_allocator(data, odd, "vm", "today", "CPU time"), "t"))
    with pytest.raises(ConfigError) as err:
        load_stack(path)
    assert "allocator.page_bytes" in str(err.value) and str(path) in str(err.value)


@pytest.fixture(scope="module")
def two_core(write_profile):
    """xeon-8380 with 2 cores: a skinny GEMM's 4 x 16 micro-tiles fill whole waves."""
    return write_profile("xeon-8380", "cores = 40", "cores = 2", "two-core.toml")


def test_packing_traffic_closed_form(two_core):
    # fp32 8 x 1024 x 1024 under pytorch-eager: the pack reads X and W once (their compulsory
    # DRAM read, 4 (m k + k n) B beside the output's 4 m n) and writes the packed copy,
    # 4 (m k + k n) B, on-chip; its time is 2 x 4 (m k + k n) B at the DRAM stream rate. The
    # micro-kernels read 4 B x (1/64 + 1/64) per MAC from the cache (64 x 64 output blocks),
    # at exactly the useful MACs on 2 cores. Energy counts exactly these bytes.
    m, k, n = 8, 1024, 1024
    stack = builtin_stacks()["pytorch-eager"]
    r = row(m, k, n, "fp32", stack, two_core)
    profile = load_profile(two_core)
    bandwidth = profile.offchip_memory.bandwidth_bytes_per_s * DRAM_EFF
    operands = 4 * (m * k + k * n + m * n)
    packed = 4 * (m * k + k * n)
    tiles = m * k * n * 4 * (1 / 64 + 1 / 64)
    peak = profile.compute.vector_peak_flops_per_s["fp32"]
    gemm_eff = load_efficiency("cpu")["assumed.gemm_efficiency"]
    assert r["compute_s"] == pytest.approx(2 * m * k * n / (peak * gemm_eff)
                                           + 2 * packed / bandwidth, rel=1e-12)
    assert r["memory_s"] == pytest.approx(operands / bandwidth, rel=1e-12)
    assert r["dram_bytes"] == pytest.approx(operands, rel=1e-12)
    assert r["onchip_bytes"] == pytest.approx(tiles + packed, rel=1e-12)
    expected_j = dynamic_energy_j(profile, "fp32", np.array([2.0 * m * k * n]), np.zeros(1),
                                  np.array([operands]), np.array([tiles + packed]))[0]
    assert r["dynamic_energy_j"] == pytest.approx(expected_j, rel=1e-9)


def test_a_bf16_embedding_rounds_its_table_into_fresh_pages():
    """numpy's bf16 embedding rounds its whole V x D table into a new fp32 array each call:
    4 V D bytes, whole pages, when at or above the threshold; nothing below it or at fp32."""
    g = GraphBuilder("emb")
    g.embedding(g.input("ids", (16,), "index"), num_embeddings=30522, embedding_dim=768,
                name="emb")
    graph = g.build()
    table_bytes = 4 * 30522 * 768
    pages = math.ceil(table_bytes / 4096) * 4096

    def fresh(precision, threshold, casts=True):
        work = work_table(graph, 1, precision)
        return fresh_bytes(work, gemms_for(graph, 1), precision, np.zeros(len(work), bool),
                           casts, threshold, 4096)[0]

    assert fresh("bf16", 32 * MIB) == pages
    assert fresh("bf16", table_bytes + 1) == 0
    assert fresh("fp32", 32 * MIB) == 0
    assert fresh("bf16", 32 * MIB, casts=False) == 0
