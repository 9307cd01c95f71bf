"""Decoder training steps (accelsim.llm.train) against closed forms: ZeRO's bytes per
parameter, 6 x params FLOPs per token plus attention, the replicas' gradient all-reduce, and
what recomputation trades."""

import pytest

from accelsim.devices.profile import load_profile
from accelsim.errors import AccelsimError
from accelsim.interconnect.nccl import collective_time_s
from accelsim.llm.costs import Platform
from accelsim.llm.models import decoder
from accelsim.llm.parallel import layout
from accelsim.llm.train import TrainSplit, train_memory, train_step
from accelsim.sim.api import run_simulation
from accelsim.sim.knobs import make_config
from accelsim.sim.system import load_system

CFG, SYSTEM = decoder("llama2_7b"), load_system("dgx-a100")
PLAT = Platform(CFG, load_profile("a100"), "compiled", "bf16", "bf16")
LAY = layout(CFG, SYSTEM, 1, 1)


@pytest.mark.parametrize("zero", [0, 1, 2, 3])
def test_zero_shards_sixteen_bytes_per_parameter_stage_by_stage(zero):
    mem = train_memory(PLAT, LAY, TrainSplit(8, 1, 1024, zero=zero), 80e9)
    psi = CFG.params - CFG.d_model  # all but the final norm's scale
    assert mem["optimizer_bytes"] == pytest.approx(12 * psi / (8 if zero >= 1 else 1))
    assert mem["gradients_bytes"] == pytest.approx(2 * psi / (8 if zero >= 2 else 1))
    assert mem["weights_bytes"] == pytest.approx(2 * psi / (8 if zero >= 3 else 1))


def test_model_flops_are_six_per_parameter_per_token_plus_attention():
    s = 1024
    out = train_step(PLAT, LAY, TrainSplit(1, 2, s), 80e9)
    gemm_params = CFG.n_layers * (CFG.attention_params() + CFG.expert_params())
    head = CFG.vocab * CFG.d_model  # logits of every token for the loss
    attention = CFG.n_layers * CFG.n_heads * (4 * CFG.head_dim + 5) * (s + 1) / 2  # causal
    assert out["flops_per_token"] == pytest.approx(3 * (2 * (gemm_params + head) + attention))


def test_replicas_add_one_gradient_all_reduce_per_step():
    one = train_step(PLAT, LAY, TrainSplit(1, 1, 1024), 80e9)
    eight = train_step(PLAT, LAY, TrainSplit(8, 1, 1024), 80e9)
    psi = CFG.params - CFG.d_model
    ar_s, _ = collective_time_s("allreduce", "auto", 8, 2 * psi, SYSTEM.device_to_device)
    assert eight["dp_comm_s"] == pytest.approx(ar_s)
    assert eight["step_time_s"] == pytest.approx(one["step_time_s"] + ar_s)
    assert eight["tokens_per_s"] == pytest.approx(8 * 1024 / eight["step_time_s"])


def test_recomputation_trades_a_forward_for_activation_memory():
    plain = train_step(PLAT, LAY, TrainSplit(1, 4, 2048), 80e9)
    again = train_step(PLAT, LAY, TrainSplit(1, 4, 2048, recompute=True), 80e9)
    assert again["memory"]["activations_bytes"] < plain["memory"]["activations_bytes"] / 4
    extra = CFG.n_layers * plain["forward_s_per_layer"]
    assert again["step_time_s"] == pytest.approx(plain["step_time_s"] + extra)
    assert again["mfu"] < plain["mfu"]  # the same model FLOPs in more time


def test_the_pipeline_bubble_shrinks_with_microbatches():
    lay = layout(CFG, SYSTEM, 1, 4)
    few = train_step(PLAT, lay, TrainSplit(1, 1, 1024, microbatches=1), 80e9)
    many = train_step(PLAT, lay, TrainSplit(1, 1, 1024, microbatches=12), 80e9)
    assert few["pipeline_bubble"] == pytest.approx(3 / 4)
    assert many["pipeline_bubble"] == pytest.approx(3 / 15)


def test_training_runs_from_the_command_line_knobs_and_refuses_pipeline_knobs():
    r = run_simulation(make_config("llama2_70b", "dgx-a100", mode="train", seq_len=4096,
                                   batch=1, precision="bf16", tp=8, zero=1)).record
    assert not r["memory"]["fits"] and r["notes"][0].startswith("does not fit")
    r = run_simulation(make_config("llama2_7b", "dgx-a100", mode="train", seq_len=2048,
                                   batch=1, precision="bf16", tp=2, zero=1,
                                   accumulate=4)).record
    assert r["memory"]["fits"] and r["dp"] == 4 and 0 < r["mfu"] < 1
    assert r["global_batch_tokens"] == 4 * 4 * 2048
    with pytest.raises(AccelsimError, match="storage-to-accelerator"):
        run_simulation(make_config("llama2_7b", "dgx-a100", mode="train", tp=2, steps=3))


def test_training_energy_is_within_the_tdp_and_replicas_add_static_power_while_exchanging():
    from accelsim.devices.energy import static_power_w

    one = train_step(PLAT, LAY, TrainSplit(1, 1, 1024), 80e9)
    eight = train_step(PLAT, LAY, TrainSplit(8, 1, 1024), 80e9)
    tdp_w, static_w = PLAT.profile.power.tdp_w, static_power_w(PLAT.profile)
    for out, gpus in ((one, 1), (eight, 8)):
        per_gpu_w = out["average_power_w"] / gpus
        assert static_w < per_gpu_w <= tdp_w
        assert out["energy_j_per_token"] == pytest.approx(
            out["average_power_w"] * out["step_time_s"] / out["global_batch_tokens"])
    # each replica does the same work, then idles at static power through the all-reduce
    assert eight["energy_j"] == pytest.approx(
        8 * one["energy_j"] + 8 * static_w * eight["dp_comm_s"])


def test_recomputation_costs_energy_and_a_pipeline_bubble_draws_static_power():
    from accelsim.devices.energy import static_power_w

    plain = train_step(PLAT, LAY, TrainSplit(1, 4, 2048), 80e9)
    again = train_step(PLAT, LAY, TrainSplit(1, 4, 2048, recompute=True), 80e9)
    assert again["energy_j"] > plain["energy_j"]
    # the same work on 4 stages: three stage passes of each GPU idle in the bubble
    static_w = static_power_w(PLAT.profile)
    flat = train_step(PLAT, LAY, TrainSplit(1, 1, 1024), 80e9)
    staged = train_step(PLAT, layout(CFG, SYSTEM, 1, 4), TrainSplit(1, 1, 1024), 80e9)
    idle_gpu_s = 4 * staged["step_time_s"] - flat["step_time_s"]
    # NB rel: each stage updates its own quarter of the weights (optimizer rows differ a hair)
    assert staged["energy_j"] == pytest.approx(flat["energy_j"] + static_w * idle_gpu_s,
                                               rel=5e-3)
