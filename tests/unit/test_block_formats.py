"""The block-scaled 4-bit formats (NVFP4, MXFP4) against a scalar loop written from the
format definitions, and the kernels run in them against fp8 (the references: NVIDIA's NVFP4
post and the OCP Microscaling v1.0 spec, as cited in `accelsim.kernels.block_formats`)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from accelsim.formats import FORMATS, get_format
from accelsim.kernels.execute import compare_to_fp32
from accelsim.kernels.formats import relative_error, round_to_format
from accelsim.workload.graph import GraphBuilder

E2M1 = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0)  # the eight magnitudes of e2m1, by code


def _e4m3_values() -> list[float]:
    """Every non-negative finite e4m3 value from its bit fields (bias 7; 0x7F is nan)."""
    out = []
    for e in range(16):
        for m in range(8):
            if e == 15 and m == 7:
                continue
            out.append(m / 8 * 2.0**-6 if e == 0 else (1 + m / 8) * 2.0 ** (e - 7))
    return out


E4M3 = _e4m3_values()


def _nearest_even(v: float, grid: list[float] | tuple[float, ...]) -> float:
    """The grid value nearest |v| (ties to the even index: the even mantissa), saturating at
    the grid's top, with v's sign."""
    a = min(abs(v), grid[-1])
    best = min(range(len(grid)), key=lambda i: (abs(grid[i] - a), i % 2))
    return math.copysign(grid[best], v)


def _naive(x: np.ndarray, block: int, scale_rule: str) -> np.ndarray:
    out = np.zeros_like(x, dtype=np.float64)
    rows = x.reshape(-1, x.shape[-1]).astype(np.float64)
    top = float(np.abs(rows).max())
    glob = 2.0 ** math.ceil(math.log2(top / (6 * 448))) if top else 0.0
    res = out.reshape(-1, x.shape[-1])
    for r, row in enumerate(rows):
        for start in range(0, len(row), block):
            chunk = row[start:start + block]
            amax = float(np.abs(chunk).max())
            if amax == 0.0:
                continue
            if scale_rule == "e4m3":
                s = _nearest_even(amax / 6 / glob, E4M3) * glob
            else:
                s = 2.0 ** (math.floor(math.log2(amax)) - 2)
            if s == 0.0:
                continue
            for i, v in enumerate(chunk):
                res[r, start + i] = _nearest_even(v / s, E2M1) * s
    return out.astype(np.float32)


@pytest.mark.parametrize(("name", "block", "rule"), [("nvfp4", 16, "e4m3"),
                                                     ("mxfp4", 32, "e8m0")])
def test_rounding_matches_a_scalar_loop_of_the_definition(name: str, block: int,
                                                          rule: str) -> None:
    rng = np.random.default_rng(7)
    # rows of 70: blocks that do not divide the row (the last one padded), and rows whose
    # magnitudes differ by orders so that the block scales spread over many binades
    x = (rng.standard_normal((5, 70)) * 10.0 ** rng.integers(-3, 4, (5, 1))).astype(np.float32)
    x[2, :20] = 0.0  # an all-zero block
    np.testing.assert_array_equal(round_to_format(x, name), _naive(x, block, rule))


def test_e2m1_codes_are_the_fifteen_values() -> None:
    # one MXFP4 block of 32 with amax 6: its scale is 2^(floor(log2 6) - 2) = 1, so the
    # outputs are the e2m1 values themselves
    x = np.linspace(-6, 6, 32, dtype=np.float32)
    got = set(round_to_format(x, "mxfp4").tolist())
    assert got == {s * v for v in E2M1 for s in (1, -1)}  # 15 values (+-0 are one)
    assert len(got) == 15


def test_bytes_count_the_block_scale() -> None:
    nv, mx = get_format("nvfp4"), get_format("mxfp4")
    assert nv.element_bits == mx.element_bits == 4  # e2m1
    assert nv.bytes_per_element * 8 == 4 + 8 / 16  # an e4m3 scale per 16
    assert mx.bytes_per_element * 8 == 4 + 8 / 32  # an e8m0 scale per 32
    assert FORMATS["fp16"].block_elements is None


def test_nvfp4_is_more_accurate_than_mxfp4_and_less_than_fp8() -> None:
    # NVIDIA's post: NVFP4's finer (e4m3, 16-element) scales give lower error than MXFP4's
    # power-of-two scales per 32; both are far coarser than fp8's 3 mantissa bits
    x = np.random.default_rng(0).standard_normal((256, 512)).astype(np.float32)
    err = {n: relative_error(round_to_format(x, n), x) for n in ("fp8", "nvfp4", "mxfp4")}
    assert err["fp8"] < err["nvfp4"] < err["mxfp4"] < 0.2
    # e2m1 has one mantissa bit: the error of a Gaussian block is several percent
    assert err["nvfp4"] > 0.05


def test_nan_stays_inf_saturates_and_tiny_blocks_flush() -> None:
    x = np.array([[np.nan, 1.0, 2.0, 3.0], [np.inf, -np.inf, 1.0, 0.5]], np.float32)
    y = round_to_format(x, "nvfp4")
    assert np.isnan(y[0, 0]) and not np.isnan(y[0, 1:]).any()
    # +-inf saturates at the block's largest code, 6 x its scale, where its finite amax lands
    assert y[1, 0] == -y[1, 1] == y[1, 2] and y[1, 3] == y[1, 2] / 2
    z = round_to_format(np.array([1e6, 1e-6], np.float32).reshape(2, 1), "nvfp4")
    assert z[1, 0] == 0.0 and z[0, 0] > 0.0  # a block scale below e4m3's range flushes


def test_fp4_kernels_err_more_than_fp8_on_a_mlp() -> None:
    g = GraphBuilder("mlp")
    x = g.relu(g.linear(g.input("x", (256,)), out_features=256))
    g.linear(x, out_features=64)
    graph = g.build()
    e = {p: compare_to_fp32(graph, 4, p, per_layer=False)["output_relative_error"]
         for p in ("fp8", "nvfp4", "mxfp4")}
    assert 0.0 < e["fp8"] < e["nvfp4"] < e["mxfp4"] < 0.3
