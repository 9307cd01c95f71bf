"""fp8 W8A8 decoders (issue 20 item 1) and decode attention split into sequences, against
datasheet peak ratios, closed-form byte counts and direct costing of the step."""

import numpy as np
import pytest

from accelsim.llm.costs import Platform, cost_rows, quantised_gemm_rows, shape_costs
from accelsim.llm.memory import memory_plan, shard_embedding_params, shard_layer_params
from accelsim.llm.models import decoder
from accelsim.llm.parallel import layout
from accelsim.llm.steps import StepModel, decode_step, prefill_step
from accelsim.llm.work import Rows, layer_rows
from accelsim.profiles.devices import load_profile
from accelsim.profiles.hardware import resolve_hardware
from accelsim.run import run_simulation
from accelsim.sim.knobs import make_config

H100 = load_profile("h100")


def w8a8(name="llama-3.1-8b", profile=H100, kv="fp8", tp=1):
    return Platform(decoder(name), profile, "tensorrt-llm", "fp16", "fp8", tp, False, kv,
                    "fp8")


def fp16(name="llama-3.1-8b", profile=H100, tp=1):
    return Platform(decoder(name), profile, "tensorrt-llm", "fp16", "fp16", tp)


def run(model, hw, **knobs):
    return run_simulation(make_config(model, hw, **knobs)).record


def test_a_large_prefill_gemm_runs_at_the_fp8_peak_not_the_fp16_one():
    """A compute-bound GEMM row's compute time scales as the datasheet's fp16 / fp8 peaks."""
    step = prefill_step(8, 2048.0)
    costs = []
    for plat in (fp16(), w8a8()):
        rows = Rows(plat.phase, plat.tiles)
        layer_rows(rows, plat.cfg, plat.shard, step, plat.formats, plat.fused_attention)
        done, _ = cost_rows(plat, rows)
        costs.append(done.set_index("name")["compute_s"])
    peaks = H100.compute.matrix_peak_flops_per_s
    ratio = peaks["fp16"] / peaks["fp8"]
    for gemm in ("qkv_proj", "o_proj", "gate_up_proj", "down_proj"):
        assert costs[1][gemm] / costs[0][gemm] == pytest.approx(ratio, rel=0.02)
    # attention is not quantised: the same but for quantising its output for o_proj
    assert costs[1]["attention"] == pytest.approx(costs[0]["attention"], rel=0.01)


def test_only_the_layers_weight_gemms_are_quantised():
    plat = w8a8("mixtral-8x7b")
    rows = Rows(plat.phase, plat.tiles)
    layer_rows(rows, plat.cfg, plat.shard, decode_step(8, 8 * 100.0), plat.formats, True)
    work, _, _ = rows.frames()
    low = set(work["name"][quantised_gemm_rows(work)])
    assert low == {"qkv_proj", "o_proj", "gate_up_proj", "down_proj"}


def test_w8a8_weights_are_one_byte_a_layer_weight_and_two_for_the_embedding_and_head():
    plat = w8a8()
    system, _ = resolve_hardware("h100")
    lay = layout(plat.cfg, system, 1, 1, False, False)
    mem = memory_plan(plat, lay, 80e9)
    closed = (plat.cfg.n_layers * shard_layer_params(plat) * 1.0
              + shard_embedding_params(plat, lay) * 2.0)
    assert mem.weights_bytes == pytest.approx(closed)
    # a GEMM's input activation is read at one byte: the qkv row reads tokens x d_model bytes
    rows = Rows(plat.phase, plat.tiles)
    layer_rows(rows, plat.cfg, plat.shard, decode_step(1, 1.0), plat.formats, True)
    work, _, _ = rows.frames()
    qkv = work.set_index("name").loc["qkv_proj"]
    assert qkv["read_bytes"] - qkv["weight_bytes"] == pytest.approx(plat.cfg.d_model * 1.0)


def test_fp8_on_hopper_is_w8a8_and_on_ampere_falls_back_to_weight_only_and_says_so():
    hopper = run("llama-3.1-8b", "h100", precision="fp8", prompt_tokens=128, output_tokens=16)
    ampere = run("llama-3.1-8b", "a100", precision="fp8", prompt_tokens=128, output_tokens=16)
    assert any("W8A8" in n for n in hopper["notes"])
    assert any("no fp8 matrix units" in n and "weight-only" in n for n in ampere["notes"])
    # the same run as an explicit weight-only one on the A100
    weight_only = run("llama-3.1-8b", "a100", precision="fp16", weight_precision="fp8",
                      prompt_tokens=128, output_tokens=16)
    assert ampere["ttft_s"] == pytest.approx(weight_only["ttft_s"])


def test_w8a8_decode_respects_the_bandwidth_floor_of_its_one_byte_weights():
    """TPOT >= (fp8 layer weights + fp16 head + fp8 KV cache) / peak DRAM bandwidth."""
    r = run("llama-3.1-8b", "h100", precision="fp8", kv_precision="fp8", batch=16,
            prompt_tokens=512, output_tokens=64, software="tensorrt-llm")
    cfg = decoder("llama-3.1-8b")
    head = cfg.vocab * cfg.d_model
    layers = cfg.params - 2 * head  # untied embedding and head
    kv = 16 * (512 + 32) * cfg.kv_bytes_per_token(1.0)
    floor_s = (layers * 1.0 + head * 2.0 + kv) / H100.offchip_memory.bandwidth_bytes_per_s
    assert r["tpot_s"] >= floor_s
    assert r["tpot_s"] < 3 * floor_s  # memory-bound at batch 16, not charged for nothing


def test_fp8_training_is_faster_than_bf16_by_at_most_the_peak_ratio():
    knobs = dict(mode="train", seq_len=2048, batch=1, accumulate=4, zero=1,
                 software="megatron")
    bf16 = run("llama-2-7b", "dgx-h100", precision="bf16", **knobs)
    fp8 = run("llama-2-7b", "dgx-h100", precision="fp8", **knobs)
    speedup = bf16["latency_s"] / fp8["latency_s"]
    peaks = H100.compute.matrix_peak_flops_per_s
    assert 1.2 < speedup < peaks["fp8"] / peaks["bf16"]


@pytest.mark.parametrize("seqs,per_seq", [(1, 700.0), (37, 1100.0), (400, 1100.0),
                                          (200, 3000.0)])
def test_decode_attention_of_many_sequences_follows_the_step_costed_directly(seqs, per_seq):
    """The decode table's attention (a grid over sequences and tokens per sequence) against
    the attention rows of the very step: many short sequences are not one long one."""
    plat = w8a8()
    system, _ = resolve_hardware("h100")
    model = StepModel(plat, layout(plat.cfg, system, 1, 1, False, False))
    table = model.decode_table(512, 512 * 4096.0)
    direct = shape_costs(plat, [decode_step(seqs, seqs * per_seq)], "attention")
    for key, got in (("s", direct.time_s), ("dram", direct.dram_bytes)):
        assert table.attention(key, seqs, seqs * per_seq) == pytest.approx(float(got[0]),
                                                                            rel=0.1)
    one_long = shape_costs(plat, [decode_step(1, seqs * per_seq)], "attention")
    if seqs >= 100:  # the old approximation: one sequence holding every key
        assert float(one_long.dram_bytes[0]) > 1.3 * float(direct.dram_bytes[0])
    assert np.all(direct.time_s > 0)
