"""Decoders at the token level (accelsim.llm) against closed forms, published counts and a
naive loop over the engine's steps."""


import pytest

from accelsim.errors import AccelsimError
from accelsim.interconnect.nccl import collective_time_s
from accelsim.llm.costs import Platform, shape_costs
from accelsim.llm.memory import memory_plan, shard_layer_params
from accelsim.llm.models import BUILTINS, PUBLISHED_PARAMS, decoder
from accelsim.llm.parallel import layout
from accelsim.llm.steps import StepModel, decode_step
from accelsim.profiles.devices import load_profile
from accelsim.profiles.efficiency import load_efficiency
from accelsim.profiles.systems import load_system
from accelsim.run import run_simulation
from accelsim.sim.knobs import make_config
from accelsim.workload.zoo import build_model

A100 = load_profile("a100")


def plat(name="llama2_7b", software="compiled", weights="fp16", tp=1, profile=A100):
    return Platform(decoder(name), profile, software, "fp16", weights, tp)


def run(model, hw, **knobs):
    return run_simulation(make_config(model, hw, **knobs)).record


# --- models -------------------------------------------------------------------------------

@pytest.mark.parametrize("name", sorted(BUILTINS))
def test_parameter_counts_match_the_published_checkpoints(name):
    assert BUILTINS[name].params == PUBLISHED_PARAMS[name]


@pytest.mark.parametrize("name", ["llama2_13b", "llama3_8b", "llama3_70b", "mixtral_8x7b"])
def test_zoo_graphs_of_the_new_decoders_have_the_published_counts(name):
    assert build_model(name, seq_len=16).params == PUBLISHED_PARAMS[name]


def test_kv_cache_per_token_is_k_and_v_of_every_layer_and_kv_head():
    assert decoder("llama2_7b").kv_bytes_per_token(2) == 2 * 32 * 32 * 128 * 2
    assert decoder("llama2_70b").kv_bytes_per_token(2) == 2 * 80 * 8 * 128 * 2  # GQA: 8 kv
    assert decoder("mixtral_8x7b").active_params == pytest.approx(12.9e9, rel=0.01)


def test_a_bad_config_is_one_line_naming_the_field():
    with pytest.raises(AccelsimError, match="n_kv_heads"):
        type(decoder("gpt2"))("x", 2, 64, 4, 3, 128, 100, 64)


# --- prefill and decode, closed forms -----------------------------------------------------

def test_prefill_flops_are_two_params_per_token_plus_causal_attention():
    cfg, b, p = decoder("llama2_7b"), 2, 256
    pre = StepModel(plat(), layout(cfg, load_system("dgx-a100"), 1, 1)).prefill(b, p)
    matmul_params = cfg.n_layers * (cfg.attention_params() + cfg.expert_params())
    pairs = b * p * (p + 1) / 2  # causal: each query sees itself and the keys before it
    attention = cfg.n_layers * cfg.n_heads * (4 * cfg.head_dim + 5) * pairs
    head = 2 * b * cfg.vocab * cfg.d_model  # logits of each prompt's last token
    assert pre.flops == pytest.approx(2 * matmul_params * b * p + attention + head, rel=1e-9)


def test_a_memory_bound_decode_step_streams_weights_and_cache_at_achievable_bandwidth():
    cfg, context = decoder("llama2_7b"), 2048
    p = plat()
    table = StepModel(p, layout(cfg, load_system("dgx-a100"), 1, 1)).decode_table(1, context)
    weights = (cfg.n_layers * (cfg.attention_params() + cfg.expert_params())
               + cfg.vocab * cfg.d_model) * 2
    cache = context * cfg.kv_bytes_per_token(2)
    bw = A100.offchip_memory.bandwidth_bytes_per_s * load_efficiency("gpu")[
        "fitted.dram_bandwidth_efficiency"]
    floor_s = (weights + cache) / bw
    # overheads: a kernel launch per row (~10 rows per layer) and activations (tiny at b = 1)
    assert floor_s <= table.step_s(1, context) <= floor_s + cfg.n_layers * 12 * 5e-6


def test_tp2_halves_weights_per_gpu_and_adds_two_allreduces_per_layer():
    cfg, system = decoder("llama2_7b"), load_system("dgx-a100")
    one, two = plat(tp=1), plat(tp=2)
    norms = cfg.norm_params()
    assert shard_layer_params(two) - norms == pytest.approx(
        (shard_layer_params(one) - norms) / 2)
    lay1, lay2 = layout(cfg, system, 1, 1), layout(cfg, system, 2, 1)
    mem1, mem2 = memory_plan(one, lay1, 80e9), memory_plan(two, lay2, 80e9)
    assert mem2.weights_bytes == pytest.approx(mem1.weights_bytes / 2, rel=1e-3)
    b = 8
    step = StepModel(two, lay2).decode_table(b, b * 600).step(b, b * 600)
    one_ar, _ = collective_time_s("allreduce", "auto", 2, b * cfg.d_model * 2,
                                  system.device_to_device)
    assert step.comm_s == pytest.approx(cfg.n_layers * 2 * one_ar)
    # the shard's own work halves too: one layer's weights stream in about half the time
    s1 = shape_costs(one, [decode_step(b, b * 600)], "linear").dram_bytes[0]
    s2 = shape_costs(two, [decode_step(b, b * 600)], "linear").dram_bytes[0]
    assert s2 == pytest.approx(s1 / 2, rel=0.02)


def test_int4_weights_read_a_quarter_and_pay_their_dequantisation_in_compute():
    step = [decode_step(1, 1000)]
    fp16 = shape_costs(plat(), step, "linear")
    int4 = shape_costs(plat(weights="int4"), step, "linear")
    assert int4.dram_bytes[0] < 0.3 * fp16.dram_bytes[0]
    assert int4.matmul_flops[0] == fp16.matmul_flops[0]  # same model FLOPs
    assert int4.time_s[0] < fp16.time_s[0]  # memory-bound at batch 1


# --- whole runs, memory and errors --------------------------------------------------------

def test_the_issue_command_adds_the_llm_figures():
    r = run("llama2_7b", "a100", prompt_tokens=512, output_tokens=128, batch=8)
    assert r["memory"]["fits"]
    for key in ("ttft_s", "tpot_s", "tokens_per_s", "kv_cache_bytes", "mfu"):
        assert r[key] > 0
    assert r["kv_cache_bytes"] == 8 * 640 * decoder("llama2_7b").kv_bytes_per_token(2)
    assert r["e2e_latency_s"] == pytest.approx(r["ttft_s"] + 127 * r["tpot_s"])
    assert r["tokens_per_s"] == pytest.approx(8 * 128 / r["e2e_latency_s"])
    assert 0 < r["mfu"] < 1 and r["prefill_compute_limit_s"] < r["ttft_s"]


def test_llama2_70b_fits_dgx_a100_only_when_split():
    whole = run("llama2_70b", "dgx-a100", prompt_tokens=512, output_tokens=128, batch=8)
    assert not whole["memory"]["fits"] and whole["ttft_s"] is None
    assert "--tp 2" in whole["notes"][0]
    split = run("llama2_70b", "dgx-a100", prompt_tokens=512, output_tokens=128, batch=8, tp=4,
                pp=2)
    assert split["memory"]["fits"] and split["devices"] == 8 and split["tpot_s"] > 0


def test_largest_batch_is_the_memory_boundary():
    p = plat()
    mem = memory_plan(p, layout(p.cfg, load_system("dgx-a100"), 1, 1), 80e9)
    b = mem.largest_batch(640, 512)
    assert mem.need_bytes(b, 640, b * 512) <= 80e9 < mem.need_bytes(b + 1, 640, (b + 1) * 512)


@pytest.mark.parametrize("knobs,words", [
    ({"tp": 3}, "must divide"), ({"tp": 2}, "has 1"), ({"batching": "static"}, "serve"),
    ({"weight_precision": "int3"}, "weight_precision"),
])
def test_bad_llm_knobs_are_one_line(knobs, words):
    with pytest.raises(AccelsimError, match=words):
        run("llama2_7b", "a100", prompt_tokens=64, output_tokens=8, **knobs)


def test_llm_knobs_on_a_non_decoder_are_refused():
    with pytest.raises(AccelsimError, match="decoder models"):
        run("resnet50", "a100", prompt_tokens=64)


def test_overlapped_all_reduces_hide_behind_compute_but_no_more():
    cfg, system = decoder("llama2_13b"), load_system("dgx-a100")
    p, b, held = plat("llama2_13b", tp=4), 32, 32 * 600
    serial = StepModel(p, layout(cfg, system, 4, 1)).decode_table(b, held)
    hidden = StepModel(p, layout(cfg, system, 4, 1, overlap_tp=True)).decode_table(b, held)
    comm_s = serial.step(b, held).comm_s
    assert serial.step_s(b, held) - comm_s <= hidden.step_s(b, held) < serial.step_s(b, held)


def test_expert_parallelism_keeps_memory_and_flops_and_trades_all_reduce_for_all_to_all():
    cfg, system = decoder("mixtral_8x7b"), load_system("dgx-h100")
    h100 = load_profile("h100")
    sliced = Platform(cfg, h100, "compiled", "fp16", "fp16", 4)
    spread = Platform(cfg, h100, "compiled", "fp16", "fp16", 4, expert_parallel=True)
    assert shard_layer_params(spread) == pytest.approx(shard_layer_params(sliced))
    step = [decode_step(64, 64 * 600)]
    # all token-expert pairs are computed once across the 4 GPUs either way
    assert shape_costs(spread, step, "linear").matmul_flops[0] == pytest.approx(
        shape_costs(sliced, step, "linear").matmul_flops[0], rel=1e-9)
    lay = layout(cfg, system, 4, 1, expert_parallel=True)
    msg = 64 * cfg.d_model * 2
    expected = lay.allreduce_s(msg) + 2 * collective_time_s(
        "alltoall", "auto", 4, msg * cfg.experts_per_token, system.device_to_device)[0]
    assert StepModel(spread, lay)._comm_s(64)[0] == pytest.approx(expected)
    with pytest.raises(AccelsimError, match="mixture-of-experts"):
        layout(decoder("llama2_7b"), system, 2, 1, expert_parallel=True)


def test_the_events_are_the_prefill_and_every_decode_step():
    res = run_simulation(make_config("llama2_7b", "a100", prompt_tokens=64, output_tokens=9,
                                     batch=2, software="compiled"))
    ev = res.records
    assert list(ev["detail"]) == ["prefill"] + ["decode"] * 8
    assert ev["end_s"].iloc[-1] == pytest.approx(res.record["e2e_latency_s"])


def test_an_fp8_kv_cache_holds_half_the_bytes_and_decodes_faster():
    cfg, system = decoder("llama2_7b"), load_system("dgx-a100")
    fp16, fp8 = plat(), Platform(cfg, A100, "compiled", "fp16", "fp16", kv="fp8")
    lay = layout(cfg, system, 1, 1)
    assert memory_plan(fp8, lay, 80e9).kv_bytes_per_token == cfg.kv_bytes_per_token(1)
    b, held = 32, 32 * 2000
    slow = StepModel(fp16, lay).decode_table(b, held).step_s(b, held)
    fast = StepModel(fp8, lay).decode_table(b, held).step_s(b, held)
    assert fast < slow


def test_a_sweep_over_batch_gives_llm_columns_and_the_throughput_latency_curve(tmp_path):
    import accelsim
    from accelsim.plots.sweep import plot_sweep

    frame = accelsim.sweep("llama2_7b", hw=["a100"], batch=[1, 16], prompt_tokens=[64],
                           output_tokens=[8], software="compiled")
    assert frame["error"].isna().all() and (frame["tpot_s"] > 0).all()
    # a larger batch: more output tokens per second, each one slower
    assert frame["tokens_per_s"].is_monotonic_increasing
    assert frame["tpot_s"].is_monotonic_increasing
    assert plot_sweep(frame, tmp_path / "s.png").stat().st_size > 0
