"""Numeric formats: rounding against independent references, int8 quantization (the
hypothesis properties of rounding: properties/test_format_properties.py)."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from accelsim.errors import AccelsimError, ShapeError, UnknownNameError
from accelsim.formats import FORMATS, NumericFormat, get_format
from accelsim.kernels.formats import relative_error, round_to_format
from accelsim.kernels.quantize import (
    dequantize,
    int8_matmul,
    int8_matmul_acc,
    quantize_int8,
    requantize,
)

RNG = np.random.default_rng(0)


def _wide_float32(n: int) -> np.ndarray:
    """Random float32 values over many binades, both signs, plus edge cases."""
    mant = RNG.uniform(1, 2, n)
    exp = RNG.integers(-30, 30, n)
    sign = RNG.choice([-1.0, 1.0], n)
    x = (sign * mant * 2.0**exp).astype(np.float32)
    edges = np.array([0.0, -0.0, 1.0, 1.5, 65504.0, 1e-40, 3.0e38, -3.0e38], np.float32)
    return np.concatenate([x, edges])


# --- names ---------------------------------------------------------------------------


def test_closed_set_and_aliases() -> None:
    assert set(FORMATS) == {"fp32", "tf32", "fp16", "bf16", "fp8_e4m3", "fp8_e5m2", "int8",
                            "nvfp4", "mxfp4"}
    assert get_format("fp8") is FORMATS["fp8_e4m3"]
    assert get_format("fp4") is FORMATS["nvfp4"]
    assert get_format("BF16") is FORMATS["bf16"]
    assert get_format(FORMATS["fp16"]) is FORMATS["fp16"]
    assert FORMATS["tf32"].bytes_per_element == 4
    assert FORMATS["int8"].is_integer and FORMATS["int8"].mantissa_bits is None
    with pytest.raises(UnknownNameError, match="fp6") as e:
        get_format("fp6")
    assert isinstance(e.value, AccelsimError) and "fp8_e4m3" in str(e.value)


def test_format_is_frozen() -> None:
    with pytest.raises(AttributeError):
        FORMATS["fp16"].bytes_per_element = 4  # type: ignore[misc]
    assert isinstance(FORMATS["fp16"], NumericFormat)


# --- float rounding against independent references -------------------------------------


def test_fp32_is_identity() -> None:
    x = _wide_float32(1000)
    np.testing.assert_array_equal(round_to_format(x, "fp32"), x)


def test_fp16_equals_numpy_cast() -> None:
    x = np.concatenate([_wide_float32(5000), np.array([70000.0, np.inf, -np.inf], np.float32)])
    y = round_to_format(x, "fp16")
    assert y.dtype == np.float32
    with np.errstate(over="ignore"):
        ref = x.astype(np.float16).astype(np.float32)
    np.testing.assert_array_equal(y, ref)
    assert y[-3] == np.inf  # IEEE overflow, not saturation


def _bf16_reference(x: np.ndarray) -> np.ndarray:
    """Round float32 to bf16 with integer ops: add 0x7FFF + lsb, clear the low 16 bits."""
    u = x.astype(np.float32).view(np.uint32).astype(np.uint64)
    lsb = (u >> 16) & 1
    r = ((u + 0x7FFF + lsb) & 0xFFFF0000).astype(np.uint32)
    return r.view(np.float32)


def test_bf16_equals_bit_reference() -> None:
    x = _wide_float32(5000)
    # Exact ties between two bf16 values: both must go to the even neighbour.
    ties = np.arange(0x3F800000, 0x3F800000 + 64 * 0x10000, 0x10000, dtype=np.uint32) + 0x8000
    x = np.concatenate([x, ties.view(np.float32), -ties.view(np.float32)])
    np.testing.assert_array_equal(round_to_format(x, "bf16"), _bf16_reference(x))


def test_tf32_keeps_ten_mantissa_bits() -> None:
    x = _wide_float32(5000)
    x = x[np.abs(x) < 3.0e38]  # keep clear of overflow
    y = round_to_format(x, "tf32")
    assert np.all(y.view(np.uint32) & 0x1FFF == 0)
    normal = np.abs(x) >= np.finfo(np.float32).tiny
    rel = np.abs(y[normal].astype(np.float64) - x[normal]) / np.abs(x[normal])
    assert np.all(rel <= 2.0**-11)
    # Ties to even: 1 + 2^-11 is halfway between 1 and 1 + 2^-10, goes down to 1;
    # 1 + 3 * 2^-11 is halfway between 1 + 2^-10 and 1 + 2^-9, goes up.
    t = np.array([1 + 2.0**-11, 1 + 3 * 2.0**-11, -(1 + 2.0**-11)], np.float32)
    np.testing.assert_array_equal(round_to_format(t, "tf32"), [1.0, 1 + 2.0**-9, -1.0])


def test_tf32_inf_nan_and_overflow() -> None:
    x = np.array([np.inf, -np.inf, np.nan, np.finfo(np.float32).max], np.float32)
    y = round_to_format(x, "tf32")
    assert y[0] == np.inf and y[1] == -np.inf and np.isnan(y[2])
    assert y[3] == np.inf  # fp32 max is above the last tf32 midpoint: RNE overflows


def _positive_finite(dtype: type) -> np.ndarray:
    """Every positive finite value of an 8-bit float dtype, by enumerating bit patterns."""
    v = np.arange(256, dtype=np.uint8).view(dtype).astype(np.float32)
    return np.unique(v[np.isfinite(v) & (v > 0)])


@pytest.mark.parametrize(
    ("name", "dtype", "e", "m", "nan_codes_in_top_binade", "top_binade_is_special", "maxval"),
    [
        ("fp8_e4m3", ml_dtypes.float8_e4m3fn, 4, 3, 1, False, 448.0),
        ("fp8_e5m2", ml_dtypes.float8_e5m2, 5, 2, 0, True, 57344.0),
    ],
)
def test_fp8_value_sets(
    name: str,
    dtype: type,
    e: int,
    m: int,
    nan_codes_in_top_binade: int,
    top_binade_is_special: bool,
    maxval: float,
) -> None:
    # OCP FP8 spec: subnormals 2^m - 1; normal binades 2^e - 1 (e4m3fn keeps the top one,
    # except its all-ones mantissa which is nan), 2^e - 2 for IEEE-like e5m2.
    binades = 2**e - 2 if top_binade_is_special else 2**e - 1
    expected = (2**m - 1) + binades * 2**m - nan_codes_in_top_binade
    values = _positive_finite(dtype)
    assert len(values) == expected == (126 if name == "fp8_e4m3" else 123)
    assert values.max() == maxval == FORMATS[name].max_finite
    # Representable values are fixed points; random values land in the set.
    np.testing.assert_array_equal(round_to_format(values, name), values)
    y = round_to_format(RNG.uniform(-maxval, maxval, 2000).astype(np.float32), name)
    assert np.all(np.isin(np.abs(y[y != 0]), values))


@pytest.mark.parametrize(("name", "maxval"), [("fp8_e4m3", 448.0), ("fp8_e5m2", 57344.0)])
def test_fp8_saturates(name: str, maxval: float) -> None:
    x = np.array([1e6, -1e6, np.inf, -np.inf, maxval * 1.2, np.nan], np.float32)
    y = round_to_format(x, name)
    np.testing.assert_array_equal(y[:5], [maxval, -maxval, maxval, -maxval, maxval])
    assert np.isnan(y[5])


def test_fp8_is_rne() -> None:
    # e4m3 spacing in [1, 2) is 1/8: 1 + 1/16 is a tie -> 1 (even), 1 + 3/16 -> 1.25.
    y = round_to_format(np.array([1 + 1 / 16, 1 + 3 / 16], np.float32), "fp8")
    np.testing.assert_array_equal(y, [1.0, 1.25])


# --- int8 -------------------------------------------------------------------------------


@pytest.mark.parametrize("axis", [None, 0, 1, -1])
def test_int8_round_trip_within_half_a_step(axis: int | None) -> None:
    x = (RNG.normal(size=(16, 24)) * RNG.uniform(0.01, 100, (16, 1))).astype(np.float32)
    q, s = quantize_int8(x, axis=axis)
    assert q.dtype == np.int8 and s.dtype == np.float32
    assert s.shape == (() if axis is None else (x.shape[axis],))
    assert q.min() >= -127 and q.max() <= 127
    y = dequantize(q, s, axis=axis)
    assert y.dtype == np.float32 and y.shape == x.shape
    step = np.broadcast_to(
        s if axis is None else np.expand_dims(s, [i for i in (0, 1) if i != axis % 2]), x.shape
    )
    assert np.all(np.abs(y - x) <= step / 2 * (1 + 1e-5))


def test_int8_all_zero_and_given_scale() -> None:
    q, s = quantize_int8(np.zeros((3, 4), np.float32), axis=0)
    assert np.all(q == 0) and np.all(s == 1.0)
    q, s = quantize_int8(np.array([1.0, -10.0, 0.3], np.float32), scale=0.05)
    np.testing.assert_array_equal(q, [20, -127, 6])  # -200 clips to -127
    with pytest.raises(ValueError):
        quantize_int8(np.array([1.0, np.inf], np.float32))


def test_per_channel_beats_per_tensor() -> None:
    ranges = np.array([1e-3, 1e-1, 1.0, 1e2], np.float32)
    x = (RNG.normal(size=(4, 256)) * ranges[:, None]).astype(np.float32)
    qt, st_ = quantize_int8(x)
    qc, sc = quantize_int8(x, axis=0)
    yt, yc = dequantize(qt, st_), dequantize(qc, sc, axis=0)
    assert relative_error(yc, x) <= relative_error(yt, x)
    err_t = [relative_error(yt[i], x[i]) for i in range(4)]
    err_c = [relative_error(yc[i], x[i]) for i in range(4)]
    # Per tensor, the small channels are wiped out; per channel each keeps ~8 bits.
    assert max(err_c) < 0.02 and err_t[0] > 0.5 and err_t[1] > 0.05
    assert all(c <= t * (1 + 1e-6) for c, t in zip(err_c, err_t, strict=True))


def _triple_loop(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    m, k = a.shape
    n = b.shape[1]
    out = np.zeros((m, n), np.int64)
    for i in range(m):
        for j in range(n):
            acc = 0
            for t in range(k):
                acc += int(a[i, t]) * int(b[t, j])
            out[i, j] = acc
    return out


def test_int8_matmul_matches_triple_loop_and_fp32() -> None:
    a = RNG.normal(size=(5, 7)).astype(np.float32)
    b = RNG.normal(size=(7, 3)).astype(np.float32) * np.array([0.1, 1.0, 10.0], np.float32)
    a_q, a_s = quantize_int8(a)
    b_q, b_s = quantize_int8(b, axis=1)  # per output column
    acc = int8_matmul_acc(a_q, b_q)
    assert acc.dtype == np.int32
    np.testing.assert_array_equal(acc, _triple_loop(a_q, b_q))
    y = int8_matmul(a_q, a_s, b_q, b_s)
    assert y.dtype == np.float32
    np.testing.assert_allclose(y, acc * a_s * b_s[None, :], rtol=1e-6)
    # |a_hat b_hat - a b| <= sum_k |da||b| + |a_hat||db|, da <= a_s/2, db <= b_s/2.
    ref = a.astype(np.float64) @ b
    bound = (a_s / 2) * np.abs(b).sum(0)[None, :] + (np.abs(a) + a_s / 2).sum(1)[:, None] * (
        b_s[None, :] / 2
    )
    assert np.all(np.abs(y - ref) <= bound * (1 + 1e-5))
    assert relative_error(y, ref) < 0.02


def test_int8_matmul_checks() -> None:
    a = np.ones((2, 3), np.int8)
    with pytest.raises(TypeError):
        int8_matmul_acc(a.astype(np.int32), a.T)
    with pytest.raises(ShapeError):
        int8_matmul_acc(a, a)
    with pytest.raises(ShapeError):
        int8_matmul(a, np.ones(5), a.T.copy(), 1.0)
    # Extremes do not overflow: 127 * 127 * K fits int32 for allowed K.
    big = np.full((1, 4096), -127, np.int8)
    assert int8_matmul_acc(big, big.T.copy())[0, 0] == 127 * 127 * 4096


def test_requantize_matches_float_path() -> None:
    a = RNG.normal(size=(6, 10)).astype(np.float32)
    w = RNG.normal(size=(10, 4)).astype(np.float32)
    a_q, a_s = quantize_int8(a)
    w_q, w_s = quantize_int8(w, axis=1)
    y = int8_matmul(a_q, a_s, w_q, w_s)
    out_s = np.float32(np.abs(y).max() / 127)
    q = requantize(int8_matmul_acc(a_q, w_q), a_s, w_s, out_s)
    assert q.dtype == np.int8 and q.shape == (6, 4)
    np.testing.assert_array_equal(q, quantize_int8(y, scale=out_s)[0])
    with pytest.raises(TypeError):
        requantize(q, a_s, w_s, out_s)


def test_relative_error() -> None:
    assert relative_error(np.array([3.0, 4.0]), np.array([0.0, 0.0])) == float("inf")
    assert relative_error(np.zeros(2), np.zeros(2)) == 0.0
    assert relative_error(np.array([1.0, 1.0]), np.array([1.0, 0.0])) == pytest.approx(1.0)
    with pytest.raises(ShapeError):
        relative_error(np.zeros(2), np.zeros(3))
