"""Every node simulated (`--every-node`, `accelsim.sim.cluster`) against independent answers:
the one-node SimPy model where the nodes are alike, the shared NAS's bandwidth where it binds,
the closed form of one slow node, and one-line errors for bad settings."""

from __future__ import annotations

import json

import pytest

from accelsim.profiles.storage import load_storage
from accelsim.run import run_simulation
from accelsim.sim.knobs import make_config
from tests.helpers.cli import one_line_error


def record(nodes: int = 8, steps: int = 20, **knobs) -> dict:
    return run_simulation(make_config("resnet50-train", "dgx-a100", nodes=nodes, steps=steps,
                                      batch=64, **knobs)).record


def test_alike_nodes_match_the_one_node_model() -> None:
    # no device spread, a non-blocking fabric: every node is the simulated one
    one = record(8, device_spread=0.0)
    every = record(8, device_spread=0.0, every_node=True)
    assert "cluster" not in one
    assert every["throughput_samples_per_s"] == pytest.approx(one["throughput_samples_per_s"],
                                                              rel=0.01)
    c = every["cluster"]
    assert c["nodes_simulated"] == 8 and c["time_share"]["slowest_node"] == pytest.approx(0.0)
    json.dumps(every["cluster"], allow_nan=False)  # data, finite


def test_a_shared_nas_splits_its_bandwidth_over_the_nodes() -> None:
    nodes = 32
    rec = record(nodes, steps=40, storage="nas-nfs", storage_count=1, every_node=True)
    nas = load_storage("nas-nfs")
    from accelsim.profiles.datasets import load_dataset

    per_sample = load_dataset("imagenet-raw").stored_bytes_per_sample
    # one filer serves every node: the cluster reads at most its bandwidth
    limit = nas.read_bandwidth_bytes_per_s / per_sample
    assert rec["throughput_samples_per_s"] == pytest.approx(limit, rel=0.05)
    assert rec["throughput_samples_per_s"] <= limit * 1.001
    assert rec["bottleneck"] == "storage"
    # the one-node model gives every node the whole filer
    assert rec["cluster"]["one_node_model_throughput_samples_per_s"] > 5 * limit


def test_one_slow_node_costs_its_factor_on_the_compute() -> None:
    base = record(4, device_spread=0.0, every_node=True)
    slow = record(4, device_spread=0.0, slow_node=2.0)
    step = base["step_time_s"]
    compute = base["compute_time_per_step_s"]
    # the slow node's compute doubles; the exposed all-reduce after it stays
    assert slow["step_time_s"] == pytest.approx(step + compute, rel=0.03)
    assert slow["bottleneck"] == "slowest node"
    assert slow["cluster"]["slowest_node"] == 0


def test_an_oversubscribed_fabric_with_scattered_ranks_congests() -> None:
    packed = record(768, steps=5, fabric="llama3-roce-24k", device_spread=0.0)
    scattered = record(768, steps=5, fabric="llama3-roce-24k", placement="scattered",
                       device_spread=0.0)
    assert packed["cluster"]["network_slowdown_max"] == pytest.approx(1.0)
    # two groups of 384 at 1:7: half of each node's ring successors are across the uplinks
    expected = 7.0 * 384 / 767
    assert scattered["cluster"]["network_slowdown_max"] == pytest.approx(expected, rel=1e-6)
    assert scattered["step_time_s"] > packed["step_time_s"]


@pytest.mark.parametrize("args, says", [
    (("--every-node",), "needs nodes > 1"),
    (("--nodes", "4", "--placement", "round-robin"), "choose packed or scattered"),
    (("--nodes", "4", "--slow-node", "0.5"), "slow_node"),
    (("--nodes", "4", "--link-failures", "5"), "more than the 4 nodes"),
    (("--nodes", "4", "--fabric", "no-such-fabric"), "unknown fabric"),
])
def test_bad_cluster_settings_are_one_line(capsys, args, says) -> None:
    err = one_line_error(capsys, "simulate", "resnet50-train", "--hw", "dgx-a100", "--steps",
                         "3", *args)
    assert says in err


def test_au_and_static_energy_follow_the_cluster() -> None:
    from accelsim.profiles.devices import load_profile
    from accelsim.sim.config import power_bounds_w

    base = record(4, device_spread=0.0, every_node=True)
    one = record(4, device_spread=0.0)
    assert base["accelerator_utilization"] == pytest.approx(one["accelerator_utilization"],
                                                            abs=0.01)
    slow = record(4, device_spread=0.0, slow_node=2.0)
    c, t0 = base["compute_time_per_step_s"], base["step_time_s"]
    # three nodes compute c and one 2c in a step of about t0 + c
    assert slow["accelerator_utilization"] == pytest.approx(5 * c / (4 * (t0 + c)), rel=0.03)
    # the same simulated node's parts; the 32 GPUs idle at static power the extra time
    _, static_w = power_bounds_w(load_profile("a100"))
    extra_s = slow["run_time_s"] - base["run_time_s"]
    got = slow["energy_breakdown_j"]["static"] - base["energy_breakdown_j"]["static"]
    assert got == pytest.approx(static_w * 32 * extra_s, rel=1e-6)


@pytest.mark.slow
@pytest.mark.parametrize("knobs", [
    dict(accumulate=4), dict(overlap_allreduce=False), dict(jobs=2), dict(allreduce="tree"),
    dict(prefetch=0),  # input-bound: the loader's pace sets the step
    dict(storage="nas-nfs", storage_count=8, nodes=2),  # network storage, two nodes
])
def test_alike_nodes_match_the_one_node_model_in_every_regime(knobs) -> None:
    knobs = {"nodes": 8, **knobs}
    one = record(steps=15, device_spread=0.0, **knobs)
    every = record(steps=15, device_spread=0.0, every_node=True, **knobs)
    assert every["throughput_samples_per_s"] == pytest.approx(
        one["throughput_samples_per_s"], rel=0.01)
    assert every["accelerator_utilization"] == pytest.approx(
        one["accelerator_utilization"], abs=0.02)


def test_a_storage_system_share_is_not_shared_again(capsys) -> None:
    # --storage-system gives each node its 1 / nodes share of the system's parts already
    from tests.helpers.cli import run_cli

    args = ("simulate", "resnet50-train", "--hw", "dgx-a100", "--nodes", "16", "--steps",
            "15", "--dataset", "imagenet-raw", "--storage-system", "Cray_C500_4xHDR200_1host",
            "--device-spread", "0", "--json")
    one = json.loads(run_cli(capsys, *args)[1])
    every = json.loads(run_cli(capsys, *args, "--every-node")[1])
    assert every["throughput_samples_per_s"] == pytest.approx(one["throughput_samples_per_s"],
                                                              rel=0.02)
