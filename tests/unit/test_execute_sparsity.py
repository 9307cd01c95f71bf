"""simulate --execute: what the kernels compute (output error, operand zeros) and how the zeros
feed the estimate (zero gating: energy; 2:4 sparse weights on sparse tensor cores: time)."""

from __future__ import annotations

import json
import tomllib
from itertools import combinations
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from accelsim.devices.estimate import estimate
from accelsim.formats import get_format
from accelsim.kernels.measure import (
    is_2_4_sparse,
    measure_graph,
    operand_zero_share,
    prune_2_4,
    zero_share,
)
from accelsim.profiles.devices import load_profile, load_profile_file
from accelsim.run import run_simulation
from accelsim.sim.knobs import make_config
from accelsim.workload.ops import Op, OpKind
from accelsim.workload.zoo import build_model
from tests.helpers.paths import HW_PROFILES

PROFILES = HW_PROFILES / "devices"


def small_mlp():  # noqa: ANN201
    return build_model("mlp", image_size=4, hidden=64, layers=2)  # 16 -> 64 -> 64 -> 10


def linear_op(n_in: int, n_out: int) -> Op:
    return next(op for op in build_model("mlp", image_size=1, in_channels=n_in, hidden=n_out,
                                         layers=1).ops if op.kind == OpKind.LINEAR)


def test_zero_share_of_a_relu_output_is_the_share_of_non_positive_inputs() -> None:
    x = np.arange(-6, 4, dtype=np.float32)  # 7 of 10 values <= 0
    assert zero_share(np.maximum(x, 0)) == pytest.approx(0.7)
    fp32 = get_format("fp32")
    assert operand_zero_share(np.maximum(x, 0), fp32, linear_op(10, 4), None) == \
        pytest.approx(0.7)


def test_measured_input_sparsity_after_relu_is_near_one_half() -> None:
    # He-initialised linear on N(0, 1) inputs: pre-activations symmetric about 0, so ReLU
    # zeroes about half (64 units x 8 samples: within 0.5 +- 0.15 at > 4 sigma).
    m = measure_graph(small_mlp(), batch=8, precision="fp32")
    rows = m.layers.set_index("name")
    assert rows.loc["fc1.linear", "input_sparsity"] == 0.0  # N(0, 1) input: no zeros
    assert 0.35 <= rows.loc["fc2.linear", "input_sparsity"] <= 0.65
    assert (m.layers["output_error"] == 0.0).all() and m.output_error == 0.0  # fp32 vs fp32


def test_int8_execution_has_an_error_and_fp16_a_smaller_one() -> None:
    err8 = measure_graph(small_mlp(), 2, "int8").output_error
    err16 = measure_graph(small_mlp(), 2, "fp16").output_error
    # int8 keeps ~8 bits, fp16 11: the error ratio is of the order of 2**3 or more.
    assert 0 < err16 < err8 / 4 < 0.05


def test_prune_2_4_keeps_the_two_largest_of_each_group_of_four() -> None:
    op = linear_op(16, 8)
    w = np.random.default_rng(0).standard_normal((8, 16)).astype(np.float32)
    pruned = prune_2_4(op, w)
    assert is_2_4_sparse(op, pruned) and not is_2_4_sparse(op, w)
    assert zero_share(pruned) == 0.5
    for r in range(8):  # naive loop: per group, the kept pair is the largest-magnitude pair
        for g in range(4):
            group = w[r, 4 * g:4 * g + 4]
            best = max(combinations(range(4), 2), key=lambda ij: abs(group[ij[0]])
                       + abs(group[ij[1]]))
            kept = tuple(np.flatnonzero(pruned[r, 4 * g:4 * g + 4]))
            assert kept == best


def _measured(graph, weights_2_4: bool, s_in: float = 0.0, s_w: float = 0.0) -> pd.DataFrame:  # noqa: ANN001
    return pd.DataFrame([{"op_index": i, "name": op.name, "output_error": 0.0,
                          "input_sparsity": s_in, "weight_sparsity": s_w,
                          "weights_2_4": weights_2_4 and op.kind == OpKind.LINEAR}
                         for i, op in enumerate(graph.ops)])


def test_2_4_weights_run_matmuls_at_the_sparse_rate_on_h100() -> None:
    g = build_model("mlp", hidden=4096)  # big enough to be compute-bound at batch 512
    h100 = load_profile("h100")
    dense = estimate(g, h100, 512, "fp16")
    sparse = estimate(g, h100, 512, "fp16", measured=_measured(g, True))
    raw = tomllib.loads((PROFILES / "h100.toml").read_text())["compute"]["matrix"]
    factor = raw["peak_tflops_fp16_dense"] / raw["peak_tflops_fp16_sparse"]
    mm = dense.layers["matmul"].to_numpy(dtype=bool)
    np.testing.assert_allclose(sparse.layers["compute_s"][mm], dense.layers["compute_s"][mm]
                               * factor, rtol=1e-12)
    ratio = sparse.step_time_s / dense.step_time_s
    assert factor <= ratio < 1.0  # time falls, by no more than the sparse rate's factor
    # no 2:4 weights, or a GPU without a sparse rate (V100): time unchanged
    same = estimate(g, h100, 512, "fp16", measured=_measured(g, False))
    assert same.step_time_s == pytest.approx(dense.step_time_s, rel=1e-12)
    v100 = load_profile("v100")
    assert estimate(g, v100, 512, "fp16", measured=_measured(g, True)).step_time_s == \
        pytest.approx(estimate(g, v100, 512, "fp16").step_time_s, rel=1e-12)


def _gating_profile(tmp_path: Path):  # noqa: ANN202
    text = (PROFILES / "tpu-v1.toml").read_text()
    text = text.replace("[compute]\n", "[compute]\nzero_operand_gating = true\n", 1)
    text = text.replace("[sources]\n", '[sources]\n"compute.zero_operand_gating" = '
                        '"defined: a test device that gates zero operands"\n', 1)
    path = tmp_path / "tpu-v1-gated.toml"
    path.write_text(text)
    return load_profile_file(path)


def test_zero_gating_scales_mac_energy_by_the_non_zero_share(tmp_path: Path) -> None:
    g, prof = small_mlp(), _gating_profile(tmp_path)

    def dyn(s_in: float, s_w: float = 0.0, profile=prof) -> np.ndarray:  # noqa: ANN001
        est = estimate(g, profile, 4, "int8", measured=_measured(g, False, s_in, s_w))
        return est.layers["dynamic_energy_j"].to_numpy()

    e0, e1 = dyn(0.0), dyn(1.0)
    mm = estimate(g, prof, 4, "int8").layers["matmul"].to_numpy(dtype=bool)
    mac_j = e0 - e1  # all MACs gated: what is left is memory energy
    assert (mac_j[mm] > 0).all() and (e1[mm] > 0).all() and (mac_j[~mm] == 0).all()
    # non-zero share (1 - 0.3) x (1 - 0.5) = 0.35 of the MAC energy is spent
    np.testing.assert_allclose(dyn(0.3, 0.5), e1 + 0.35 * mac_j, rtol=1e-9)
    # a profile without the field: energy unchanged, whatever the zeros
    plain = load_profile("tpu-v1")
    np.testing.assert_allclose(dyn(0.7, profile=plain), dyn(0.0, profile=plain), rtol=1e-12)


def test_simulate_execute_reports_layers_and_totals_and_default_is_unchanged() -> None:
    cfg = make_config("mlp", "tpu-v1", precision="int8")
    plain = run_simulation(cfg).record
    assert "execution" not in plain and "output_error" not in plain["layers"][0]
    from dataclasses import replace

    rec = run_simulation(replace(cfg, execute=True)).record
    json.dumps(rec)  # JSON-ready
    x = rec["execution"]
    assert x["precision"] == "int8" and 0 < x["output_error"] < 0.1
    linear = [r for r in rec["layers"] if r["op"] == "linear"]
    assert all(r["output_error"] > 0 and r["weight_sparsity"] is not None for r in linear)
    assert rec["latency_s"] == pytest.approx(plain["latency_s"])  # tpu-v1: no gating, no 2:4


def test_execute_on_a_model_too_large_gives_a_note(monkeypatch: pytest.MonkeyPatch) -> None:
    import accelsim.kernels.execute as ex

    monkeypatch.setattr(ex, "PARAM_LIMIT_BYTES", 1000)
    from dataclasses import replace

    rec = run_simulation(replace(make_config("mlp", "a100"), execute=True)).record
    assert rec["execution"] is None
    assert any("kernels were not run" in n and "limit" in n for n in rec["notes"])
    assert all(r["output_error"] is None and "weight_sparsity" in r for r in rec["layers"])
    assert rec["throughput_samples_per_s"] > 0


def test_an_onnx_model_with_2_4_pruned_weights_runs_faster_on_h100(
        tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    pytest.importorskip("onnx")
    import onnx

    from accelsim.cli import main
    from tests.helpers import onnx_builders as b

    n, rng = b.Net(), np.random.default_rng(1)
    op = linear_op(4, 4)

    def pruned(out: int, n_in: int) -> str:  # Gemm transB: weight (out, in), like nn.Linear
        return n.init("w", prune_2_4(op, rng.standard_normal((out, n_in)).astype(np.float32)))

    y = n.op("Flatten", "image", axis=1)
    y = n.op("Relu", n.op("Gemm", y, pruned(2048, 1024), n.weight("b", 2048), transB=1))
    y = n.op("Gemm", y, pruned(16, 2048), n.weight("b", 16), transB=1)
    path = tmp_path / "pruned.onnx"
    onnx.save(n.model([b.image_input(1, 32)], [y]), str(path))
    assert main(["simulate", str(path), "--hw", "h100", "--precision", "fp16", "--batch",
                 "1024", "--execute", "--json"]) == 0
    rec = json.loads(capsys.readouterr().out)
    x = rec["execution"]
    assert x["layers_with_2_4_weights"] == 2 and x["weight_sparsity"] == pytest.approx(0.5)
    assert 0 < x["time_saved_share"] <= 0.5  # the sparse rate halves matmul compute at most
    assert x["latency_s_dense"] > rec["latency_s"]


def test_pruning_to_2_4_costs_error_even_in_fp32_and_is_measured_as_2_4() -> None:
    m = measure_graph(small_mlp(), 4, "fp32", prune=True)
    linear = m.layers[m.layers["name"].str.contains("fc")
                      & m.layers["weight_sparsity"].notna()]
    assert len(linear) == 3 and linear["weights_2_4"].all()
    assert (linear["weight_sparsity"] == 0.5).all()
    assert m.output_error > 0.05  # half the weights gone, no retraining: a visible error
    assert measure_graph(small_mlp(), 4, "fp32").output_error == 0.0  # dense: none


def test_prune_flag_buys_time_on_h100_only_with_execute() -> None:
    from dataclasses import replace

    from accelsim.errors import AccelsimError

    cfg = make_config("mlp", "h100", precision="fp16", batch=4096, software="tensorrt")
    with pytest.raises(AccelsimError, match="--execute"):
        run_simulation(replace(cfg, prune_2_4=True))
    rec = run_simulation(replace(cfg, execute=True, prune_2_4=True)).record
    x = rec["execution"]
    assert x["pruned_2_4"] and x["layers_with_2_4_weights"] == 3
    assert 0 < x["time_saved_share"] <= 0.5


def test_prune_flag_without_execute_is_refused_on_a_token_level_decoder_too() -> None:
    """The flag is never ignored silently: the LLM path refuses it as the graph path does."""
    from dataclasses import replace

    from accelsim.errors import AccelsimError

    cfg = make_config("gpt2", "a100", prompt_tokens=16, output_tokens=2)
    assert cfg.llm
    with pytest.raises(AccelsimError, match="--execute"):
        run_simulation(replace(cfg, prune_2_4=True))
