"""Decoder training steps (accelsim.llm.train) against closed forms: ZeRO's bytes per
parameter, 6 x params FLOPs per token plus attention, the replicas' gradient all-reduce, and
what recomputation trades."""

import numpy as np
import pytest

from accelsim.errors import AccelsimError
from accelsim.interconnect.nccl import achievable
from accelsim.llm.costs import Platform
from accelsim.llm.models import decoder
from accelsim.llm.parallel import layout
from accelsim.llm.train import TrainSplit, train_memory, train_step
from accelsim.profiles.devices import load_profile
from accelsim.profiles.systems import load_system
from accelsim.run import run_simulation
from accelsim.sim.knobs import make_config

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
    out = train_step(PLAT, LAY, TrainSplit(1, 2, s), 80e9, SYSTEM)
    gemm_params = CFG.n_layers * (CFG.attention_params() + CFG.expert_params())
    head = CFG.vocab * CFG.d_model  # logits of every token for the loss
    attention = CFG.n_layers * CFG.n_heads * (4 * CFG.head_dim + 5) * (s + 1) / 2  # causal
    assert out["flops_per_token"] == pytest.approx(3 * (2 * (gemm_params + head) + attention))


def _ring_s(n, n_bytes, link, steps):
    """Ring closed form by hand: `steps` x (n-1) hops of n_bytes / n at the link's achievable
    bandwidth, each paying its latency (all-reduce: 2, reduce-scatter or all-gather: 1)."""
    bw = achievable(link).bandwidth_bytes_per_s
    return steps * ((n - 1) / n * n_bytes / bw + (n - 1) * link.latency_s)


@pytest.mark.parametrize("overlap, bucket", [(False, 25 * 2**20), (True, 2**40)])
def test_one_message_all_reduce_adds_the_ring_closed_form_to_the_step(overlap, bucket):
    one = train_step(PLAT, LAY, TrainSplit(1, 1, 1024), 80e9, SYSTEM)
    eight = train_step(PLAT, LAY, TrainSplit(8, 1, 1024, overlap_dp=overlap,
                                             bucket_bytes=bucket), 80e9, SYSTEM)
    grads = 2 * (CFG.params - CFG.d_model)  # bf16 gradients of all but the final norm
    ar_s = _ring_s(8, grads, SYSTEM.device_to_device, 2)
    assert eight["dp_comm_s"] == pytest.approx(ar_s)
    assert eight["step_time_s"] == pytest.approx(one["step_time_s"] + ar_s)
    assert eight["tokens_per_s"] == pytest.approx(8 * 1024 / eight["step_time_s"])
    assert eight["dp_collectives"] == 1


def test_buckets_overlap_backward_and_carry_every_gradient_byte_once():
    link = SYSTEM.device_to_device
    whole = train_step(PLAT, LAY, TrainSplit(8, 1, 1024, overlap_dp=False), 80e9, SYSTEM)
    split = TrainSplit(8, 1, 1024, bucket_bytes=25 * 2**20)
    out = train_step(PLAT, LAY, split, 80e9, SYSTEM)
    grads = 2 * (CFG.params - CFG.d_model)
    assert out["dp_collectives"] == -(-grads // (25 * 2**20))
    records = run_records(split)
    # ring all-reduce: every GPU sends 2 (n-1)/n of its gradients, 8 GPUs together
    assert records["bytes"].sum() == pytest.approx(2 * 7 * grads)
    assert records["energy_j"].sum() == pytest.approx(2 * 7 * grads * 8 * link.energy_j_per_bit)
    # the last bucket (the embedding's gradients, ready as backward ends) stays exposed
    last = records["duration_s"].iloc[-1]
    assert last <= out["dp_comm_s"] < whole["dp_comm_s"]


def run_records(split):
    """The collectives' records of a step (not the GPU's backward and optimizer beside them)."""
    records = train_step(PLAT, LAY, split, 80e9, SYSTEM)["records"]
    return records[records["resource"] != "accel0"]


def test_zero_reduce_scatters_then_gathers_the_updated_weights():
    one = train_step(PLAT, LAY, TrainSplit(1, 1, 1024, zero=1), 80e9, SYSTEM)
    out = train_step(PLAT, LAY, TrainSplit(8, 1, 1024, zero=2, overlap_dp=False), 80e9, SYSTEM)
    psi = CFG.params - CFG.d_model
    rs_s = _ring_s(8, 2 * psi, SYSTEM.device_to_device, 1)
    ag_s = _ring_s(8, 2 * psi, SYSTEM.device_to_device, 1)
    assert out["dp_comm_s"] == pytest.approx(rs_s + ag_s)
    kinds = run_records(TrainSplit(8, 1, 1024, zero=2, overlap_dp=False))["kind"].tolist()
    assert kinds == ["reducescatter", "allgather"]
    # the optimizer updates 1/8 of the weights on each GPU
    assert out["optimizer_s"] == pytest.approx(one["optimizer_s"] / 8, rel=0.05)


@pytest.mark.parametrize("zero, microbatches, volume, collectives",
                         [(0, 1, 2, 1), (1, 1, 2, 2), (2, 1, 2, 2), (3, 1, 3, 3), (3, 2, 5, 5)])
def test_data_parallel_bytes_per_step_are_the_zero_papers(zero, microbatches, volume,
                                                          collectives):
    """Rajbhandari et al. 2020 (ZeRO, arXiv:1910.02054, section 7): per step and GPU, stages
    0-2 move 2 psi (an all-reduce, or the gradients' reduce-scatter and the updated weights'
    all-gather), stage 3 3 psi (the reduce-scatter, and all-gathers of the weights in forward
    and in backward: 2 per micro-batch, so 1 + 2m psi over m micro-batches); a ring sends
    (n - 1)/n of each, 16-bit values. Every collective timed is counted."""
    split = TrainSplit(8, 1, 1024, microbatches=microbatches, zero=zero, overlap_dp=False)
    out = train_step(PLAT, LAY, split, 80e9, SYSTEM)
    psi = CFG.params - CFG.d_model
    sent_per_gpu = run_records(split)["bytes"].sum() / 8
    assert sent_per_gpu == pytest.approx(7 / 8 * volume * psi * 2)
    assert out["dp_collectives"] == collectives
    assert out["dp_algorithm"] == "ring"  # every collective of the exchange runs as a ring


def test_the_dp_algorithm_names_every_collective_when_they_differ():
    from accelsim.llm.dp_events import algorithm_summary

    assert algorithm_summary([]) is None
    assert algorithm_summary([("allreduce", "tree")] * 3) == "tree"
    mixed = [("reducescatter", "ring")] * 12 + [("allgather", "nvls")]
    assert algorithm_summary(mixed) == "reducescatter ring x 12, allgather nvls x 1"


def test_nodes_run_the_cross_node_phase_on_the_nics():
    one = train_step(PLAT, LAY, TrainSplit(8, 1, 1024), 80e9, SYSTEM)
    two = train_step(PLAT, LAY, TrainSplit(16, 1, 1024, nodes=2), 80e9, SYSTEM)
    assert set(two["records"]["resource"]) == {"d2d", "network", "accel0"}
    assert two["dp_comm_s"] > one["dp_comm_s"] and two["devices"] == 16
    assert two["energy_breakdown_j"]["nics"] > 0 == one["energy_breakdown_j"]["nics"]


def test_recomputation_trades_a_forward_for_activation_memory():
    plain = train_step(PLAT, LAY, TrainSplit(1, 4, 2048), 80e9, SYSTEM)
    again = train_step(PLAT, LAY, TrainSplit(1, 4, 2048, recompute=True), 80e9, SYSTEM)
    assert again["memory"]["activations_bytes"] < plain["memory"]["activations_bytes"] / 4
    extra = CFG.n_layers * plain["forward_s_per_layer"]
    assert again["step_time_s"] == pytest.approx(plain["step_time_s"] + extra)
    assert again["mfu"] < plain["mfu"]  # the same model FLOPs in more time


def test_the_pipeline_bubble_shrinks_with_microbatches():
    lay = layout(CFG, SYSTEM, 1, 4)
    few = train_step(PLAT, lay, TrainSplit(1, 1, 1024, microbatches=1), 80e9, SYSTEM)
    many = train_step(PLAT, lay, TrainSplit(1, 1, 1024, microbatches=12), 80e9, SYSTEM)
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

    one = train_step(PLAT, LAY, TrainSplit(1, 1, 1024), 80e9, SYSTEM)
    eight = train_step(PLAT, LAY, TrainSplit(8, 1, 1024), 80e9, SYSTEM)
    tdp_w, static_w = PLAT.profile.power.tdp_w, static_power_w(PLAT.profile)
    for out, gpus in ((one, 1), (eight, 8)):
        per_gpu_w = out["energy_breakdown_j"]["accelerators"] / out["step_time_s"] / gpus
        assert static_w < per_gpu_w <= tdp_w
        assert out["energy_j_per_token"] == pytest.approx(
            out["average_power_w"] * out["step_time_s"] / out["global_batch_tokens"])
    # each replica does the same work, then idles at static power through the all-reduce
    acc = {k: out["energy_breakdown_j"]["accelerators"] for k, out in (("1", one), ("8", eight))}
    assert acc["8"] == pytest.approx(8 * acc["1"] + 8 * static_w * eight["dp_comm_s"])
    # the rest: the links' bytes and the NVSwitch chips, idle or busy
    parts = eight["energy_breakdown_j"]
    assert eight["energy_j"] == pytest.approx(sum(parts.values()))
    assert parts["links"] > 0 and parts["switches"] > 0


def test_recomputation_costs_energy_and_a_pipeline_bubble_draws_static_power():
    from accelsim.devices.energy import static_power_w

    plain = train_step(PLAT, LAY, TrainSplit(1, 4, 2048), 80e9, SYSTEM)
    again = train_step(PLAT, LAY, TrainSplit(1, 4, 2048, recompute=True), 80e9, SYSTEM)
    assert again["energy_j"] > plain["energy_j"]
    # the same work on 4 stages: three stage passes of each GPU idle in the bubble
    static_w = static_power_w(PLAT.profile)
    flat = train_step(PLAT, LAY, TrainSplit(1, 1, 1024), 80e9, SYSTEM)
    staged = train_step(PLAT, layout(CFG, SYSTEM, 1, 4), TrainSplit(1, 1, 1024), 80e9, SYSTEM)
    idle_gpu_s = 4 * staged["step_time_s"] - flat["step_time_s"]
    # NB rel: each stage updates its own quarter of the weights (optimizer rows differ a hair)
    acc = {k: out["energy_breakdown_j"]["accelerators"] for k, out in (("flat", flat),
                                                                       ("staged", staged))}
    assert acc["staged"] == pytest.approx(acc["flat"] + static_w * idle_gpu_s, rel=5e-3)


def test_tensor_parallel_collectives_run_as_the_inference_events_each_way():
    from accelsim.interconnect.nccl import collective_time_s

    assert train_step(PLAT, LAY, TrainSplit(1, 1, 1024), 80e9, SYSTEM)["tp_events"] == 0
    plat = Platform(CFG, load_profile("a100"), "compiled", "bf16", "bf16", 2)
    msg = 1024 * CFG.d_model * 2  # one micro-batch's bf16 hidden states
    ar_s = collective_time_s("allreduce", "auto", 2, msg, SYSTEM.device_to_device)[0]
    serial = train_step(plat, layout(CFG, SYSTEM, 2, 1), TrainSplit(1, 1, 1024), 80e9, SYSTEM)
    # Megatron-LM: two all-reduces per layer forward, two backward, on the critical path
    assert serial["tp_events"] == 4 * CFG.n_layers
    assert serial["tp_comm_s"] == pytest.approx(4 * CFG.n_layers * ar_s)
    hidden = train_step(plat, layout(CFG, SYSTEM, 2, 1, overlap_tp=True),
                        TrainSplit(1, 1, 1024), 80e9, SYSTEM)
    # overlapped (each all-reduce shorter than a layer): only the last layer's of each pass
    assert hidden["tp_comm_s"] == pytest.approx(2 * 2 * ar_s)


def test_expert_parallel_training_moves_the_all_to_all_bytes_both_ways():
    from accelsim.interconnect.nccl import collective_time_s
    from accelsim.llm.train import tp_link_energy

    moe = decoder("mixtral_8x7b")
    plat = Platform(moe, load_profile("a100"), "compiled", "bf16", "bf16", 8, True)
    lay = layout(moe, SYSTEM, 8, 1, expert_parallel=True)
    out = train_step(plat, lay, TrainSplit(1, 1, 1024), 80e9, SYSTEM)
    link, k = SYSTEM.device_to_device, moe.experts_per_token
    msg = 1024 * moe.d_model * 2
    ar_s = collective_time_s("allreduce", "auto", 8, msg, link)[0]
    a2a_s = _ring_s(8, k * msg, link, 1)  # pairwise exchange: (n-1)/n of the buffer, n-1 steps
    # per layer and pass: the attention's all-reduce, the experts' dispatch and combine
    assert out["tp_events"] == 2 * 3 * moe.n_layers
    assert out["tp_comm_s"] == pytest.approx(2 * moe.n_layers * (ar_s + 2 * a2a_s))
    wire = moe.n_layers * 2 * (2 * 7 * msg + 2 * 7 * k * msg)  # all-reduce: 2(n-1)M in all
    energy = tp_link_energy(plat, lay, TrainSplit(1, 1, 1024), 1024, 0.0)["energy_j"]
    assert energy == pytest.approx(wire * 8 * link.energy_j_per_bit)


def test_across_nodes_each_tp_rank_gets_its_share_of_the_nics():
    plat = Platform(CFG, load_profile("a100"), "compiled", "bf16", "bf16", 8)
    lay = layout(CFG, SYSTEM, 8, 1)
    split = TrainSplit(2, 1, 1024, nodes=2, overlap_dp=False)
    out = train_step(plat, lay, split, 80e9, SYSTEM)
    grads = out["memory"]["gradients_bytes"]  # ZeRO 0: every GPU's whole shard
    net = SYSTEM.network
    assert SYSTEM.gpudirect_rdma  # no staging through host memory
    # 8 TP ranks per node run 8 groups at once over the node's NICs: one NIC's worth each;
    # one GPU per node in a group, so the whole all-reduce is the 2-node ring on the network
    bw = SYSTEM.nic_count * achievable(net).bandwidth_bytes_per_s / 8
    assert out["dp_comm_s"] == pytest.approx(grads / bw + 2 * net.latency_s)


def test_zero_three_gathers_the_weights_for_each_forward_and_backward_instead():
    psi = CFG.params - CFG.d_model
    link = SYSTEM.device_to_device
    for m in (1, 3):
        out = train_step(PLAT, LAY, TrainSplit(8, 1, 1024, microbatches=m, zero=3,
                                               overlap_dp=False), 80e9, SYSTEM)
        # one reduce-scatter of the gradients, two all-gathers of the weights per micro-batch
        assert out["dp_comm_s"] == pytest.approx((1 + 2 * m) * _ring_s(8, 2 * psi, link, 1))


def test_zero_refuses_an_allreduce_algorithm_it_would_not_use():
    """ZeRO >= 1 exchanges gradients by reduce-scatter and all-gather: an all-reduce algorithm
    other than ring/auto is refused in one line, not silently dropped."""
    from accelsim.errors import AccelsimError
    from accelsim.run import run_simulation
    from accelsim.sim.knobs import make_config

    with pytest.raises(AccelsimError, match="ZeRO >= 1"):
        run_simulation(make_config("llama2_7b", "dgx-a100", mode="train", batch=1, tp=2,
                                   zero=1, allreduce="tree"))


def test_the_slowest_gpu_paces_a_decoder_step_and_spread_zero_is_the_nominal_step():
    """TP 2 without overlap or DP: the spread s scales the step's compute (all but the exposed
    TP collectives, whose time is the link's) by 1 + s x E[max of 2 normals] = 1 + s/sqrt(pi)."""
    from dataclasses import replace

    tp2 = layout(CFG, SYSTEM, 2, 1)
    base = TrainSplit(1, 1, 1024, microbatches=2)
    nominal = train_step(PLAT, tp2, base, 80e9, SYSTEM)
    spread = train_step(PLAT, tp2, replace(base, device_spread=0.05), 80e9, SYSTEM)
    pace = 1 + 0.05 / np.sqrt(np.pi)
    compute_s = nominal["step_time_s"] - nominal["tp_comm_s"]
    assert spread["step_time_s"] == pytest.approx(nominal["tp_comm_s"] + pace * compute_s)
    assert spread["tp_comm_s"] == pytest.approx(nominal["tp_comm_s"])
    assert train_step(PLAT, tp2, replace(base, device_spread=0.0), 80e9,
                      SYSTEM)["step_time_s"] == nominal["step_time_s"]
