"""The small zoo models (MLP, LSTM language model): counts from their formulas, computed here."""

from __future__ import annotations

import time

import pytest

from accelsim.workload.tables import gemm_table, unsupported_ops
from accelsim.workload.zoo import MODELS, build_model, model_knobs


def gemm_macs(name: str, **knobs: int) -> int:
    t = gemm_table(build_model(name, **knobs))
    return int((t["m"] * t["n"] * t["k"] * t["count"]).sum())


def mlp_params(sizes: list[int]) -> int:
    return sum(a * b + b for a, b in zip(sizes[:-1], sizes[1:], strict=True))


def lstm_lm_params(vocab: int, hidden: int, layers: int) -> int:
    """Embedding + per layer W_ih, W_hh (4h x in, 4h x h) and two 4h biases + decoder."""
    per_layer = 4 * hidden * (hidden + hidden) + 2 * 4 * hidden
    return vocab * hidden + layers * per_layer + hidden * vocab + vocab


def test_mlp_default() -> None:
    g = build_model("mlp")
    assert g.params == mlp_params([784, 512, 512, 10]) == 669_706
    assert g.shapes[g.outputs[0]] == (10,)
    assert gemm_macs("mlp") == 784 * 512 + 512 * 512 + 512 * 10


def test_mlp_knobs() -> None:
    g = build_model("mlp", image_size=32, in_channels=3, hidden=256, layers=3, classes=100)
    assert g.params == mlp_params([3 * 32 * 32, 256, 256, 256, 100])
    assert g.shapes[g.outputs[0]] == (100,)


def test_lstm_medium() -> None:
    g = build_model("lstm")
    assert model_knobs("lstm")["seq_len"] == 35
    assert g.params == lstm_lm_params(10_000, 650, 2) == 19_780_400
    assert g.inputs["tokens"] == ((35,), "index")
    assert g.shapes[g.outputs[0]] == (35, 10_000)
    per_token = 2 * 4 * 650 * (650 + 650) + 650 * 10_000
    assert gemm_macs("lstm") == 35 * per_token


def test_lstm_seq_len_knob() -> None:
    g = build_model("lstm", seq_len=70)
    assert g.shapes[g.outputs[0]] == (70, 10_000)
    assert g.params == build_model("lstm").params
    assert gemm_macs("lstm", seq_len=70) == 2 * gemm_macs("lstm")


@pytest.mark.parametrize("name", ["mlp", "lstm"])
def test_small_models_build_fast_and_are_supported(name: str) -> None:
    start = time.perf_counter()
    g = MODELS[name]()
    assert time.perf_counter() - start < 0.25
    assert unsupported_ops(g) == []
