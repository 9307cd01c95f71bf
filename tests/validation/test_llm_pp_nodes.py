"""Decoder training with a replica over several nodes (issue 20 item 6, in part): pipeline
stages across the NICs, Megatron's interleaved schedule and sequence parallelism, against
closed forms (the fabric's per-GPU NIC share, the interleaved bubble (pp - 1) / v, the norms'
activation bytes split over TP)."""

import pytest

from accelsim.errors import AccelsimError
from accelsim.interconnect.multinode import fabric
from accelsim.llm.costs import Platform
from accelsim.llm.models import decoder
from accelsim.llm.parallel import layout
from accelsim.llm.train import TrainSplit, train_memory, train_step
from accelsim.profiles.devices import load_profile
from accelsim.profiles.systems import load_system
from accelsim.run import run_simulation
from accelsim.sim.knobs import make_config

CFG, DGX = decoder("llama-2-70b"), load_system("dgx-h100")
# tp 2 x pp 4: one node of 8 (cheap stage transfers); 80 layers, 20 a stage
MEGATRON = Platform(CFG, load_profile("h100"), "megatron", "bf16", "bf16", 2)
EAGER = Platform(CFG, load_profile("h100"), "pytorch-eager", "bf16", "bf16", 2)


def test_a_stage_boundary_between_nodes_crosses_the_nics_at_the_fabric_share():
    lay = layout(CFG, DGX, 4, 4, nodes=2)
    assert lay.replica_nodes == 2
    fab = fabric(DGX, 2)
    msg = 4096 * CFG.d_model * 2.0
    assert lay.p2p_s(msg) == pytest.approx(fab.network_latency_s
                                           + msg / fab.network_bandwidth_bytes_per_s)
    in_node = layout(CFG, DGX, 4, 2)  # the same stage boundary inside one node: NVLink
    assert in_node.replica_nodes == 1 and in_node.p2p_s(msg) < lay.p2p_s(msg)


def test_tensor_parallelism_over_whole_nodes_is_hierarchical():
    """TP 16 over two nodes of 8: each all-reduce is the closed form of the hierarchical one,
    a ring reduce-scatter of M among the node's 8 (M (k-1)/k over the achievable NVLink
    bandwidth plus (k-1) latencies), an all-reduce of M/8 between the 2 nodes over each GPU's
    share of the NICs (ring: 2 (n-1)/n M/8 / b + 2 (n-1) l) and the mirror all-gather."""
    from accelsim.interconnect.nccl import achievable

    lay = layout(decoder("llama-2-7b"), DGX, 16, 1, nodes=2)
    assert lay.replica_nodes == 2
    msg, k, n = 8 * 4096 * 2.0, 8, 2
    bw, lat = achievable(DGX.device_to_device).bandwidth_bytes_per_s, DGX.device_to_device.latency_s
    fab = fabric(DGX, 2)
    intra = 2 * ((k - 1) / k * msg / bw + (k - 1) * lat)
    ring = (2 * (n - 1) / n * (msg / k) / fab.network_bandwidth_bytes_per_s
            + 2 * (n - 1) * fab.network_latency_s)
    assert lay.allreduce_s(msg) <= intra + ring * (1 + 1e-12)  # ring or tree, the faster
    assert lay.allreduce_s(msg) > layout(decoder("llama-2-7b"), DGX, 8, 1).allreduce_s(msg)
    with pytest.raises(AccelsimError, match="whole nodes"):  # 12 GPUs: one node and a half
        layout(decoder("ft-gpt-20b"), DGX, 12, 1, nodes=2)


@pytest.mark.parametrize(("tp", "pp", "nodes", "match"), [
    (2, 6, 2, "whole nodes"),
    (4, 4, 3, "multiple of 2"),
    (4, 4, 1, "--nodes"),
])
def test_replicas_that_cannot_fill_whole_nodes_are_refused(tp, pp, nodes, match):
    with pytest.raises(AccelsimError, match=match):
        layout(decoder("llama-2-7b"), DGX, tp, pp, nodes=nodes)


def test_interleaving_cuts_the_bubble_by_the_virtual_stages():
    lay = layout(CFG, DGX, 2, 4)
    m = 8
    plain = train_step(MEGATRON, lay, TrainSplit(2, 1, 2048, microbatches=m), 80e9, DGX)
    inter = train_step(MEGATRON, lay, TrainSplit(2, 1, 2048, microbatches=m,
                                                 virtual_stages=5), 80e9, DGX)
    assert plain["pipeline_bubble"] == pytest.approx(3 / (m + 3))
    assert inter["pipeline_bubble"] == pytest.approx((3 / 5) / (m + 3 / 5))
    assert inter["step_time_s"] < plain["step_time_s"]


def test_interleaving_needs_stages_it_divides_and_microbatches_in_groups_of_pp():
    lay = layout(CFG, DGX, 2, 4)
    with pytest.raises(AccelsimError, match="vp"):
        train_step(MEGATRON, lay, TrainSplit(2, 1, 2048, microbatches=8, virtual_stages=3),
                   80e9, DGX)
    with pytest.raises(AccelsimError, match="multiple"):
        train_step(MEGATRON, lay, TrainSplit(2, 1, 2048, microbatches=6, virtual_stages=5),
                   80e9, DGX)


def test_sequence_parallelism_splits_the_norms_activations_over_tp():
    lay, split = layout(CFG, DGX, 2, 4), TrainSplit(2, 1, 2048, microbatches=8)
    sp = train_memory(MEGATRON, lay, split, 80e9)["activations_bytes"]
    full = train_memory(EAGER, lay, split, 80e9)["activations_bytes"]
    # per layer and token both norms' inputs and outputs: 4 x d_model at 2 bytes, half saved
    # at tp 2, over the stage's layers and the pp = 4 micro-batches in flight
    saved = 4 * CFG.d_model * 2.0 * (1 - 1 / 2) * lay.layers_per_stage * 2048 * 4
    assert full - sp == pytest.approx(saved)


def test_a_replica_over_two_nodes_trains_from_the_knobs():
    r = run_simulation(make_config("llama-2-70b", "dgx-h100", mode="train", seq_len=4096,
                                   batch=1, precision="fp8", tp=4, pp=4, vp=20, nodes=8,
                                   accumulate=32, zero=1, software="megatron")).record
    assert r["memory"]["fits"] and r["dp"] == 4 and r["devices"] == 64 and r["vp"] == 20
    assert 0.2 < r["mfu"] < 0.8
    with pytest.raises(AccelsimError, match="nodes"):
        run_simulation(make_config("llama-2-70b", "dgx-h100", mode="train", seq_len=4096,
                                   batch=1, precision="bf16", tp=4, pp=4, zero=1))


def _serve(**knobs):
    return run_simulation(make_config(
        "llama-3.1-405b", "dgx-h100", mode="serve", tp=8, pp=2, precision="fp8", rate=1.0,
        requests=40, prompt_tokens=256, output_tokens=32, software="tensorrt-llm",
        **knobs)).record


def test_serving_replicas_over_two_nodes_each():
    r = _serve(nodes=4)
    assert r["devices"] == 32 and r["pp"] == 2
    # each decode step of a two-node replica crosses the NICs once: its TPOT holds at least
    # that transfer of one token's hidden state
    lay = layout(decoder("llama-3.1-405b"), DGX, 8, 2, nodes=2)
    assert lay.replica_nodes == 2
    assert r["tpot_mean_s"] > lay.p2p_s(decoder("llama-3.1-405b").d_model * 2.0)
    with pytest.raises(AccelsimError, match="larger than a node"):
        run_simulation(make_config("llama-3.1-8b", "dgx-h100", mode="serve", tp=2, nodes=2,
                                   rate=1.0, requests=10, prompt_tokens=64, output_tokens=8))


def test_one_inference_batch_takes_exactly_its_replicas_nodes():
    knobs = dict(tp=8, pp=3, batch=1, prompt_tokens=60, output_tokens=4, precision="fp16")
    r = run_simulation(make_config("ft-megatron-530b", "dgx-a100", nodes=3, **knobs)).record
    assert r["tp"] * r["pp"] == 24
    with pytest.raises(AccelsimError, match="fills 3 node"):
        run_simulation(make_config("ft-megatron-530b", "dgx-a100", nodes=6, **knobs))


def test_nodes_on_a_cnn_inference_is_refused_in_one_line():
    with pytest.raises(AccelsimError, match="applies to mode train"):
        make_config("resnet50", "dgx-a100", nodes=2, batch=8)


def test_fp8_training_saves_each_gemm_input_as_its_one_byte_cast():
    lay, split = layout(CFG, DGX, 2, 4), TrainSplit(2, 1, 2048, microbatches=8)
    fp8 = Platform(CFG, load_profile("h100"), "megatron", "bf16", "bf16", 2, matmul="fp8")
    bf16 = train_memory(MEGATRON, lay, split, 80e9)["activations_bytes"]
    low = train_memory(fp8, lay, split, 80e9)["activations_bytes"]
    # per layer and token: the two norms' outputs (sequence parallel: / tp), the attention
    # output and the FFN's product (SwiGLU), one byte instead of two
    gemm_inputs = 2 * CFG.d_model / 2 + CFG.d_model / 2 + CFG.d_ff / 2
    assert bf16 - low == pytest.approx(gemm_inputs * 1.0 * lay.layers_per_stage * 2048 * 4)


def test_a_gelu_ffn_saves_two_hidden_activations_where_swiglu_saves_three():
    gelu = decoder("gpt3-175b")
    assert gelu.mlp == "gelu"
    lay, split = layout(gelu, DGX, 4, 2), TrainSplit(1, 1, 2048, microbatches=2)
    plat = Platform(gelu, load_profile("h100"), "pytorch-eager", "bf16", "bf16", 4)
    per_token = train_memory(plat, lay, split, 80e9)["activations_bytes"]
    logits = 2048 * gelu.vocab / 4 * 4.0  # LOGIT_BYTES: fp32 logits of the tp shard
    layer = (4 * gelu.d_model + gelu.qkv_out / 4 + gelu.d_model / 4 + 2 * gelu.d_ff / 4) * 2.0
    assert per_token - logits == pytest.approx(layer * lay.layers_per_stage * 2048 * 2)
