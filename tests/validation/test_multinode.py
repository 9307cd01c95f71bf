"""Multi-node data parallelism and the host CPU's preparation speed, against closed forms.

The hierarchical all-reduce is checked phase by phase against the alpha-beta formulas written
out here (not taken from the code under test); the pipeline against the single-node run it
must reduce to when the network is infinitely fast; preparation against the rescaling rule.
"""

from __future__ import annotations

import json
import math
from dataclasses import replace

import pytest

from accelsim.cli import main
from accelsim.devices.null import NullProfile
from accelsim.errors import AccelsimError
from accelsim.interconnect.multinode import fabric, multinode_time_s, multinode_wire_bytes
from accelsim.interconnect.nccl import achievable, collective_time_s
from accelsim.profiles.datasets import load_dataset
from accelsim.profiles.efficiency import load_efficiency
from accelsim.profiles.systems import InlineCpu, load_system
from accelsim.sim.config import TrainConfig
from accelsim.sim.hostprep import prep_scale
from accelsim.sim.run import simulate_training
from accelsim.workload.scenario import Scenario

M = 64e6  # bytes per device


def ring_s(n: int, m: float, bw: float, lat: float) -> float:
    return 2 * (n - 1) / n * m / bw + 2 * (n - 1) * lat


def half_ring_s(n: int, m: float, bw: float, lat: float) -> float:
    """Ring reduce-scatter or all-gather: (n-1)/n m / bw + (n-1) lat."""
    return (n - 1) / n * m / bw + (n - 1) * lat


def test_hierarchical_allreduce_phases_match_the_closed_forms() -> None:
    dgx = load_system("dgx-a100")
    nodes, k = 4, dgx.device_count
    fab = fabric(dgx, nodes)
    nvs = dgx.device_to_device
    big = achievable(nvs).bandwidth_bytes_per_s
    net_bw = dgx.nic_count * dgx.network.bandwidth_bytes_per_s / k  # no achieved figure: theory
    assert fab.network_bandwidth_bytes_per_s == pytest.approx(net_bw)
    total, net_s, algo = multinode_time_s("allreduce", "ring", fab, M)
    expect_net = ring_s(nodes, M / k, net_bw, dgx.network.latency_s)
    expect = 2 * half_ring_s(k, M, big, nvs.latency_s) + expect_net
    assert (algo, net_s) == ("ring", pytest.approx(expect_net))
    assert total == pytest.approx(expect)
    # bytes: ring RS + AG in each node, ring all-reduce of the shard across nodes per device
    intra_b, net_b = multinode_wire_bytes("allreduce", "ring", fab, M)
    assert intra_b == pytest.approx(nodes * 2 * (k - 1) * M)
    assert net_b == pytest.approx(k * 2 * (nodes - 1) * M / k)


def test_on_one_node_the_hierarchical_allreduce_is_the_in_node_one() -> None:
    dgx = load_system("dgx-a100")
    link = dgx.device_to_device
    one = fabric(dgx, 1)
    for algo in ("ring", "tree", "auto"):
        assert multinode_time_s("allreduce", algo, one, M)[:2] == (
            pytest.approx(collective_time_s("allreduce", algo, 8, M, link)[0]), 0.0)
    # and its reduce-scatter + all-gather halves add up to the ring all-reduce closed form
    bw = achievable(link).bandwidth_bytes_per_s
    assert 2 * half_ring_s(8, M, bw, link.latency_s) == pytest.approx(
        ring_s(8, M, bw, link.latency_s))
    assert multinode_time_s("allreduce", "ring", one, M)[0] == pytest.approx(
        ring_s(8, M, bw, link.latency_s))


def test_cross_node_algorithm_is_chosen_by_message_size() -> None:
    fab = fabric(load_system("dgx-h100"), 64)
    _, _, small = multinode_time_s("allreduce", "auto", fab, 8.0)
    _, _, large = multinode_time_s("allreduce", "auto", fab, 8e9)
    assert (small, large) == ("tree", "ring")  # latency-optimal small, bandwidth-optimal large


def test_without_gpudirect_rdma_bytes_are_staged_through_the_host() -> None:
    dgx = load_system("dgx-a100")
    on, off = fabric(dgx, 2), fabric(replace(dgx, gpudirect_rdma=False), 2)
    extra_s = load_efficiency("collectives")["assumed.gdr_off_extra_latency_us"] * 1e-6
    assert off.network_latency_s == pytest.approx(on.network_latency_s + extra_s)
    assert off.network_bandwidth_bytes_per_s == pytest.approx(min(
        on.network_bandwidth_bytes_per_s, dgx.host_to_device.achieved_bandwidth_bytes_per_s))
    assert multinode_time_s("allreduce", "ring", off, M)[0] > multinode_time_s(
        "allreduce", "ring", on, M)[0]


def test_fewer_rails_than_devices_share_them() -> None:
    dgx1 = load_system("dgx-1")  # 4 EDR ports for 8 GPUs
    fab = fabric(dgx1, 2)
    assert fab.network_bandwidth_bytes_per_s == pytest.approx(
        4 * dgx1.network.bandwidth_bytes_per_s / 8)


def _train(system, nodes: int, steps: int = 12):
    sc = Scenario(name="t", model="mlp", mode="train", batch_size=32, precision="bf16")
    data = replace(load_dataset("synthetic-small"), prep_s_per_sample_per_core=0.0)
    return simulate_training(TrainConfig(sc, system, devices=8, nodes=nodes, steps=steps,
                                         dataset=data, allreduce="ring",
                                         device_profile=NullProfile(op_time_s=2e-5)))


def test_infinite_network_scales_like_one_node() -> None:
    dgx = load_system("dgx-a100")
    net = replace(dgx.network, bandwidth_bytes_per_s=1e30, latency_s=0.0)
    fast = replace(dgx, network=net)
    one, four = _train(fast, 1), _train(fast, 4)
    assert four.devices == 32 and four.samples == 4 * one.samples
    assert four.throughput_samples_per_s / 4 == pytest.approx(one.throughput_samples_per_s,
                                                               rel=1e-9)
    # a real network costs time on top, and its cross-node phase is recorded on the NICs
    real = _train(dgx, 4)
    assert real.throughput_samples_per_s < four.throughput_samples_per_s
    net_recs = real.records[(real.records["resource"] == "network")
                            & (real.records["kind"] == "allreduce")]
    assert len(net_recs) > 0 and real.comm_network == dgx.network.name


def test_multinode_config_errors_are_one_line() -> None:
    edge = load_system("edge-device")  # no NICs
    sc = Scenario(name="t", model="mlp", mode="train", batch_size=8, precision="bf16")
    with pytest.raises(AccelsimError, match="no NICs"):
        simulate_training(TrainConfig(sc, edge, nodes=2, steps=2))
    with pytest.raises(AccelsimError, match="nvls"):
        simulate_training(TrainConfig(sc, load_system("dgx-h100"), nodes=2, steps=2,
                                      allreduce="nvls"))


def test_collective_command_across_nodes(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["collective", "--hw", "dgx-a100", "--nodes", "3", "--sizes", "1MB:4MB",
                 "--json"]) == 0
    rec = json.loads(capsys.readouterr().out)
    assert (rec["devices"], rec["nodes"], rec["rails"], len(rec["rows"])) == (24, 3, 8, 3)
    row = rec["rows"][-1]
    assert row["bus_bandwidth_gb_s"] == pytest.approx(
        row["algorithm_bandwidth_gb_s"] * 2 * 23 / 24)
    assert main(["collective", "--hw", "edge-device", "--nodes", "2"]) == 2
    err = capsys.readouterr().err
    assert "no NICs" in err and len(err.strip().splitlines()) == 1


# ---------------------------------------------------------------- host CPU and preparation

def test_prep_scales_with_the_host_single_thread_clock() -> None:
    ds = load_dataset("imagenet-raw")
    base = load_system("dgx-a100")
    slow = replace(base.host, cpu="slow", cpu_inline=InlineCpu("slow", 64, 1.75e9))
    fast = replace(base.host, cpu="fast", cpu_inline=InlineCpu("fast", 64, 3.5e9))
    s_slow, _ = prep_scale(ds, slow)
    s_fast, note = prep_scale(ds, fast)
    assert s_slow == pytest.approx(2 * s_fast)
    assert s_fast == pytest.approx(ds.prep_reference_clock_hz / 3.5e9) and "inline" in note
    # SIMD: a 128-bit host against the 256-bit-capped reference: Amdahl over the SIMD share
    share = load_efficiency("cpu")["assumed.prep_simd_time_share"]
    ref = replace(ds, prep_reference_simd_width_bits=256)
    from accelsim.sim.hostprep import simd_term
    assert simd_term(256, 128) == pytest.approx((1 - share) + share * 2)
    assert simd_term(512, 512) == 1.0 and simd_term(ref.prep_reference_simd_width_bits, None) == 1


def test_prep_bound_run_speeds_up_with_per_core_performance() -> None:
    sc = Scenario(name="t", model="mlp", mode="train", batch_size=64, precision="bf16")
    ds = replace(load_dataset("synthetic-large"), prep_s_per_sample_per_core=4e-3,
                 prep_reference_clock_hz=3e9)
    base = load_system("dgx-a100")

    def run(clock_hz: float) -> float:
        host = replace(base.host, cores=3, cpu="c", cpu_inline=InlineCpu("c", 3, clock_hz))
        sc2 = replace(sc, pipeline=replace(sc.pipeline, prep_workers=2, prefetch_batches=2))
        res = simulate_training(TrainConfig(sc2, replace(base, host=host), devices=1,
                                            dataset=ds, steps=40,
                                            device_profile=NullProfile(op_time_s=1e-9)))
        assert res.bottleneck == "prepare"
        return res.throughput_samples_per_s

    slow, fast = run(1.5e9), run(3e9)
    assert fast / slow == pytest.approx(2.0, rel=0.02)
    # closed form: 2 prep cores (3 minus the framework's) at t_ref x f_ref / f_host per sample
    assert fast == pytest.approx(2 / 4e-3, rel=0.03)
    assert math.isfinite(slow)


def test_storage_reads_over_the_network_and_the_allreduce_share_the_nics() -> None:
    from accelsim.profiles.storage import load_storage

    dgx = load_system("dgx-a100")
    sc = Scenario(name="t", model="mlp", mode="train", batch_size=256, precision="bf16")
    data = replace(load_dataset("synthetic-large"), prep_s_per_sample_per_core=0.0)
    res = simulate_training(TrainConfig(sc, dgx, devices=8, nodes=2, steps=10, dataset=data,
                                        storage=load_storage("nas-nfs"),
                                        device_profile=NullProfile(op_time_s=2e-5)))
    net = res.records[res.records["resource"] == "network"].sort_values("start_s")
    assert set(net["kind"]) == {"read", "allreduce"}
    # one channel: no two network records overlap in time
    starts, ends = net["start_s"].to_numpy(), net["end_s"].to_numpy()
    assert (starts[1:] >= ends[:-1] - 1e-12).all()


def test_hierarchical_beats_a_flat_ring_over_the_network() -> None:
    dgx = load_system("dgx-a100")
    fab = fabric(dgx, 4)
    flat = ring_s(32, M, fab.network_bandwidth_bytes_per_s, fab.network_latency_s)
    assert multinode_time_s("allreduce", "ring", fab, M)[0] < flat


def test_roce_rails_run_at_their_published_achieved_bandwidth() -> None:
    from accelsim.profiles.links import load_link

    dgx = load_system("dgx-a100")
    roce = load_link("roce-400g")
    fab = fabric(replace(dgx, network=roce), 2)
    assert fab.network_bandwidth_bytes_per_s == pytest.approx(
        dgx.nic_count * roce.bandwidth_bytes_per_s * roce.achieved_efficiency / 8)


def test_reduce_scatter_and_all_gather_across_nodes() -> None:
    dgx = load_system("dgx-a100")
    fab = fabric(dgx, 2)
    nvs, k = dgx.device_to_device, dgx.device_count
    big = achievable(nvs).bandwidth_bytes_per_s
    for op in ("reducescatter", "allgather"):
        total, net_s, _ = multinode_time_s(op, "auto", fab, M)
        expect_net = half_ring_s(2, M / k, fab.network_bandwidth_bytes_per_s,
                                 fab.network_latency_s)
        assert net_s == pytest.approx(expect_net)
        assert total == pytest.approx(half_ring_s(k, M, big, nvs.latency_s) + expect_net)


def test_all_to_all_across_nodes() -> None:
    """Of an M-byte buffer, (k-1)/(N k) stays in the node (pairwise over NVSwitch, k-1
    rounds) and (N-1)/N crosses the network (pairwise, N-1 rounds); the phases add."""
    dgx = load_system("dgx-a100")
    nodes, k = 4, dgx.device_count
    fab = fabric(dgx, nodes)
    nvs = dgx.device_to_device
    big = achievable(nvs).bandwidth_bytes_per_s
    total, net_s, algo = multinode_time_s("alltoall", "auto", fab, M)
    expect_net = half_ring_s(nodes, M, fab.network_bandwidth_bytes_per_s, fab.network_latency_s)
    expect_intra = (k - 1) / (nodes * k) * M / big + (k - 1) * nvs.latency_s
    assert algo == "p2p" and net_s == pytest.approx(expect_net)
    assert total == pytest.approx(expect_intra + expect_net)
    intra_b, net_b = multinode_wire_bytes("alltoall", "p2p", fab, M)
    assert intra_b == pytest.approx((k - 1) * M)
    assert net_b == pytest.approx(nodes * k * (nodes - 1) / nodes * M)


def test_simulate_json_counts_every_node(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["simulate", "mlp", "--mode", "train", "--hw", "dgx-a100", "--nodes", "2",
                 "--steps", "3", "--json"]) == 0
    rec = json.loads(capsys.readouterr().out)
    assert (rec["devices"], rec["nodes"], rec["comm_network"]) == (16, 2, "infiniband-hdr-200g")
    assert rec["global_batch"] % 16 == 0 and rec["samples"] == 3 * rec["global_batch"]
    assert 0 < rec["comm_network_time_s"] < rec["allreduce_time_s"]


def test_each_node_sends_its_ring_share_of_the_gradients_over_the_network() -> None:
    import accelsim

    nodes = 4
    r = accelsim.simulate("mlp", hw="dgx-a100", mode="train", nodes=nodes, steps=3,
                          allreduce="ring")
    grads = r.to_dict()["memory"]["gradients_bytes"]
    ev = r.events
    net = ev[(ev["resource"] == "network") & (ev["kind"] == "allreduce")]
    per_step = net.groupby("step")["bytes"].sum()
    # ring across nodes: every node sends 2 (N-1)/N of the gradients (its k devices' shards)
    assert per_step.to_numpy() == pytest.approx(2 * (nodes - 1) / nodes * grads)


def test_npu_fallback_runs_on_the_systems_own_cpu() -> None:
    import accelsim
    from accelsim.devices.estimate import estimate
    from accelsim.profiles.devices import load_profile
    from accelsim.workload.zoo import build_model

    graph, tpu = build_model("bert_base"), load_profile("edge-tpu")
    on = {h: estimate(graph, tpu, 1, "int8", host_cpu=load_profile(h))
          for h in ("epyc-7763", "xeon-8480")}
    host_s = {h: float(e.layers.loc[e.layers["unit"] == "host", "time_s"].sum())
              for h, e in on.items()}
    assert host_s["epyc-7763"] > 0 and host_s["epyc-7763"] != host_s["xeon-8480"]
    # a device alone runs in the default host (epyc-7763): its fallback is that CPU's
    r = accelsim.simulate("bert_base", hw="edge-tpu", precision="int8")
    assert r.to_dict()["host_energy_j_per_sample"] == pytest.approx(
        on["epyc-7763"].host_energy_j)
    assert not any("stand-in" in n for n in r.to_dict()["notes"])
    # an inline CPU has no profile: the stand-in runs them, and the run says so
    edge = accelsim.simulate("bert_base", hw="edge-device", precision="int8")
    assert any("stand-in" in n for n in edge.to_dict()["notes"])
