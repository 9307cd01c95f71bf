"""fp4 W4A4 decoders on Blackwell (issue 20 item 1, NVFP4), against the datasheet's fp8 / fp4
peak ratio, the NVFP4 byte count (4 bits and an e4m3 scale per 16) and a bandwidth floor."""

import pytest

from accelsim.errors import AccelsimError
from accelsim.formats import get_format
from accelsim.llm.costs import Platform, cost_rows
from accelsim.llm.memory import memory_plan, shard_embedding_params, shard_layer_params
from accelsim.llm.models import decoder
from accelsim.llm.parallel import layout
from accelsim.llm.steps import decode_step, prefill_step
from accelsim.llm.work import Rows, layer_rows
from accelsim.profiles.devices import load_profile
from accelsim.profiles.hardware import resolve_hardware
from accelsim.run import run_simulation
from accelsim.sim.knobs import make_config

B200 = load_profile("b200")
NVFP4_BYTES = 0.5 + 1 / 16  # e2m1 and one e4m3 scale per 16 elements


def low(gemm: str, name="llama-3.1-8b", kv="fp8"):
    return Platform(decoder(name), B200, "tensorrt-llm", "fp16", gemm, 1, False, kv, gemm)


def run(model, hw, **knobs):
    return run_simulation(make_config(model, hw, **knobs)).record


def _gemm_compute_s(plat):
    rows = Rows(plat.phase, plat.tiles)
    layer_rows(rows, plat.cfg, plat.shard, prefill_step(8, 2048.0), plat.formats,
               plat.fused_attention)
    done, _ = cost_rows(plat, rows)
    return done.set_index("name")["compute_s"]


def test_a_large_prefill_gemm_runs_at_the_fp4_peak():
    """A compute-bound GEMM's compute time scales as the datasheet's fp8 / fp4 peaks, plus
    its pipeline fill: the same bytes of K per stage hold twice the fp4 elements, so the
    fill's share of a K loop half as long in time is larger (a few percent at K = 4096)."""
    fp8, fp4 = _gemm_compute_s(low("fp8")), _gemm_compute_s(low("fp4"))
    peaks = B200.compute.matrix_peak_flops_per_s
    ratio = peaks["fp8"] / peaks["fp4"]
    for gemm in ("qkv_proj", "o_proj", "gate_up_proj", "down_proj"):
        assert ratio <= fp4[gemm] / fp8[gemm] < ratio * 1.06
    # attention stays 16-bit: the same but for quantising its output for o_proj
    assert fp4["attention"] == pytest.approx(fp8["attention"], rel=0.02)


def test_nvfp4_weights_and_gemm_inputs_count_their_block_scales():
    assert get_format("fp4").bytes_per_element == NVFP4_BYTES
    plat = low("fp4")
    system, _ = resolve_hardware("b200")
    lay = layout(plat.cfg, system, 1, 1, False, False)
    mem = memory_plan(plat, lay, 180e9)
    closed = (plat.cfg.n_layers * shard_layer_params(plat) * NVFP4_BYTES
              + shard_embedding_params(plat, lay) * 2.0)
    assert mem.weights_bytes == pytest.approx(closed)
    rows = Rows(plat.phase, plat.tiles)
    layer_rows(rows, plat.cfg, plat.shard, decode_step(1, 1.0), plat.formats, True)
    qkv = rows.frames()[0].set_index("name").loc["qkv_proj"]
    assert qkv["read_bytes"] - qkv["weight_bytes"] == pytest.approx(
        plat.cfg.d_model * NVFP4_BYTES)


def test_w4a4_decode_respects_the_bandwidth_floor_of_its_weights():
    r = run("llama-3.1-8b", "b200", precision="fp4", kv_precision="fp8", batch=16,
            prompt_tokens=512, output_tokens=64, software="tensorrt-llm")
    cfg = decoder("llama-3.1-8b")
    head = cfg.vocab * cfg.d_model
    kv = 16 * (512 + 32) * cfg.kv_bytes_per_token(1.0)
    floor_s = ((cfg.params - 2 * head) * NVFP4_BYTES + head * 2.0 + kv) / (
        B200.offchip_memory.bandwidth_bytes_per_s)
    assert floor_s <= r["tpot_s"] < 3 * floor_s
    fp8 = run("llama-3.1-8b", "b200", precision="fp8", kv_precision="fp8", batch=16,
              prompt_tokens=512, output_tokens=64, software="tensorrt-llm")
    # half the weight bytes, not half the time: the head, the KV cache and launches remain
    assert 0.5 < r["tpot_s"] / fp8["tpot_s"] < 0.95


def test_fp4_without_fp4_units_runs_weight_only_and_says_so():
    hopper = run("llama-3.1-8b", "h100", precision="fp4", prompt_tokens=128, output_tokens=16)
    assert any("no fp4 matrix units" in n and "weight-only" in n for n in hopper["notes"])
    explicit = run("llama-3.1-8b", "h100", precision="fp16", weight_precision="fp4",
                   prompt_tokens=128, output_tokens=16)
    assert hopper["ttft_s"] == pytest.approx(explicit["ttft_s"])
    blackwell = run("llama-3.1-8b", "b200", precision="fp4", prompt_tokens=128,
                    output_tokens=16)
    assert any("W4A4" in n for n in blackwell["notes"])


def test_fp4_training_is_refused_in_one_line():
    with pytest.raises(AccelsimError, match="training is not modelled"):
        run("llama-2-7b", "b200", precision="fp4", mode="train", seq_len=512, batch=1)
