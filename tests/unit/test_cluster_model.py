"""The every-node cluster recurrence (`accelsim.sim.cluster.model`) and the fabric's group load
against closed forms: alike nodes, one slow node, a failed link, an input-bound node, the
bucket barrier, and the uplink demand of packed and scattered ranks."""

from __future__ import annotations

import numpy as np
import pytest

from accelsim.errors import AccelsimError
from accelsim.profiles.fabrics import FabricProfile, load_fabric, nonblocking
from accelsim.sim.cluster.fabric_load import GroupLoad
from accelsim.sim.cluster.model import ClusterInputs, StepWork, run_cluster
from accelsim.sim.cluster.nodes import failed_links, node_factors, rail_share

FWD, BWD, OPT = 0.030, 0.060, 0.005  # s, nominal device
LOCAL, NET = 0.002, 0.004  # s, one all-reduce message: in-node and network phases


def inputs(nodes: int = 4, steps: int = 10, factors=None, shares=None, overlap=False,
           ready=(BWD,), local=(LOCAL,), net=(NET,), interval_s=0.0, first_s=0.0,
           prefetch=2, fabric: FabricProfile | None = None, placement="packed",
           read_bytes=0.0, cap=np.inf, nic=25e9) -> ClusterInputs:
    fab = fabric or nonblocking(nodes)
    work = [StepWork(FWD, BWD, OPT, np.array(ready), read_bytes)] * steps
    return ClusterInputs(
        work=work, bucket_local_s=np.array(local), bucket_network_s=np.array(net),
        bucket_latency_s=np.zeros(len(net)), overlap=overlap, interval_s=interval_s,
        first_input_s=first_s, prefetch=prefetch,
        factors=np.ones(nodes) if factors is None else np.array(factors, dtype=float),
        rail_share=np.ones(nodes) if shares is None else np.array(shares, dtype=float),
        load=GroupLoad.of(fab, nodes, placement), nic_bytes_per_s=nic,
        storage_cap_bytes_per_s=cap, nominal_step_s=FWD + BWD + OPT)


def test_alike_nodes_step_is_the_sum_of_the_phases() -> None:
    out = run_cluster(inputs(steps=10))
    step = FWD + BWD + LOCAL + NET + OPT
    assert out.run_time_s == pytest.approx(10 * step)
    assert out.wait_s["slowest_node"] == pytest.approx(0.0)
    assert out.wait_s["communication"] == pytest.approx(10 * 4 * (LOCAL + NET))


def test_one_slow_node_paces_every_step() -> None:
    factor = 1.5
    out = run_cluster(inputs(nodes=4, steps=8, factors=[factor, 1, 1, 1]))
    # the all-reduce waits for the slow node's backward; its optimizer ends the step last
    step = (FWD + BWD) * factor + LOCAL + NET + OPT * factor
    assert out.run_time_s == pytest.approx(8 * step)
    # each fast node waits (FWD + BWD)(factor - 1) for it, and from the second step on also
    # the optimizer time it saved (it started the step that much earlier)
    first = 3 * (FWD + BWD) * (factor - 1)
    later = 3 * (FWD + BWD + OPT) * (factor - 1)
    assert out.wait_s["slowest_node"] == pytest.approx(first + 7 * later)


def test_a_failed_link_slows_the_network_phase_by_the_lost_rail() -> None:
    rails = 8
    share = rail_share(rails, 1)
    out = run_cluster(inputs(nodes=4, steps=5, shares=[1, share, 1, 1]))
    step = FWD + BWD + LOCAL + NET * rails / (rails - 1) + OPT
    assert out.run_time_s == pytest.approx(5 * step)
    assert out.slowdown == pytest.approx(np.full(5, rails / (rails - 1)))


def test_input_bound_nodes_run_at_the_loader_pace() -> None:
    interval = 0.5  # far slower than the step's compute
    first = 0.2
    steps = 12
    out = run_cluster(inputs(steps=steps, interval_s=interval, first_s=first))
    compute = FWD + BWD + LOCAL + NET + OPT
    assert out.run_time_s == pytest.approx(first + (steps - 1) * interval + compute)
    assert out.wait_s["input"] > 0


def test_overlapped_buckets_wait_for_the_slowest_nodes_gradients() -> None:
    # two buckets ready at 40% and 100% of backward; node 1 is 2x slow
    ready = (0.4 * BWD, BWD)
    out = run_cluster(inputs(nodes=2, steps=1, factors=[1.0, 2.0], overlap=True, ready=ready,
                             local=(0.001, 0.001), net=(0.002, 0.002)))
    bwd_start = FWD * 2.0
    b0 = bwd_start + ready[0] * 2.0 + 0.003
    b1 = max(b0, bwd_start + ready[1] * 2.0) + 0.003
    assert out.run_time_s == pytest.approx(b1 + OPT * 2.0)


def test_scattered_ranks_ask_the_oversubscription_of_the_uplinks() -> None:
    fab = FabricProfile("t", "test", "fat tree", 32, 4.0, 2, 3e-7)
    nodes = 256
    nic = 25e9
    scattered = GroupLoad.of(fab, nodes, "scattered")
    packed = GroupLoad.of(fab, nodes, "packed")
    none = np.zeros(scattered.groups)
    # a node's ring successor leaves its group with probability (N - 32) / (N - 1): every node
    # of a full group sends that share up through uplinks of 32 nic / 4
    expected = 4.0 * (nodes - 32) / (nodes - 1)
    assert scattered.utilization(nic, none) == pytest.approx(np.full(8, expected))
    assert scattered.slowdown(nic, none) == pytest.approx(expected)
    # packed: one ring edge leaves each group
    assert packed.utilization(nic, none) == pytest.approx(np.full(8, 4.0 / 32))
    assert packed.slowdown(nic, none) == 1.0


def test_storage_reads_share_the_uplinks_with_the_all_reduce() -> None:
    fab = FabricProfile("t", "test", "fat tree", 16, 2.0, 2, 0.0)
    load = GroupLoad.of(fab, 64, "packed")
    nic = 10e9
    storage = np.full(4, 16 * 6e9)  # every node reading 6 GB/s through uplinks of 80 GB/s
    assert load.utilization(nic, storage) == pytest.approx(np.full(4, (nic + 96e9) / 80e9))
    assert load.storage_cap_bytes_per_s(nic) == pytest.approx(80e9 / 16)


def test_crossing_groups_adds_switch_latency_per_step() -> None:
    fab = FabricProfile("t", "test", "rail-optimised fat tree", 8, 1.0, 3, 2e-7)
    assert GroupLoad.of(fab, 8, "packed").extra_latency_s(14) == 0.0  # one group
    assert GroupLoad.of(fab, 16, "packed").extra_latency_s(30) == pytest.approx(30 * 4 * 2e-7)


def test_node_factors_take_the_slowest_device_and_are_seeded() -> None:
    f = node_factors(500, 8, 0.03, seed=3, slow_node=1.25)
    again = node_factors(500, 8, 0.03, seed=3, slow_node=1.25)
    assert np.array_equal(f, again)
    # E[max of 8 standard normals] = 1.4236: the median node sits near 1 + 0.03 x 1.42
    assert np.median(f[1:]) == pytest.approx(1 + 0.03 * 1.42, abs=0.005)
    assert 0.95 < f[0] / 1.25 < 1.15  # the slow node: its own devices' draw, x 1.25
    assert (node_factors(10, 8, 0.0, seed=0) == 1.0).all()


def test_failed_links_are_distinct_nodes_and_refused_without_a_spare_rail() -> None:
    nodes = failed_links(100, 5, seed=1)
    assert len(set(nodes.tolist())) == 5 and 0 not in nodes
    with pytest.raises(AccelsimError, match="no way to the network"):
        rail_share(1, 1)


def test_builtin_fabrics_load_with_their_sources() -> None:
    pod = load_fabric("dgx-superpod-h100")
    assert pod.nodes_per_group == 32 and pod.oversubscription == 1.0
    assert pod.groups(128) == 4
    assert "SCALING_GPUS" in pod.sources["nodes_per_group"]


def test_reads_over_the_fabric_pace_the_loader_at_the_node_share() -> None:
    read_bytes, cap = 2e9, 1e9  # 2 s of reading per step at the node's share of the storage
    steps = 6
    out = run_cluster(inputs(steps=steps, read_bytes=read_bytes, cap=cap))
    compute = FWD + BWD + LOCAL + NET + OPT
    assert out.run_time_s == pytest.approx(steps * read_bytes / cap + compute)


def test_a_bad_fabric_file_names_its_field_and_value(tmp_path) -> None:
    from accelsim.errors import ConfigError

    text = (fabric_file("dgx-superpod-h100").read_text(encoding="utf-8")
            .replace("oversubscription = 1.0", "oversubscription = 0.5"))
    bad = tmp_path / "bad.toml"
    bad.write_text(text, encoding="utf-8")
    with pytest.raises(ConfigError) as err:
        load_fabric(bad)
    assert "bad.toml" in str(err.value) and "oversubscription" in str(err.value)
    assert "0.5" in str(err.value)


def fabric_file(name: str):
    from accelsim.datafiles import builtin_files

    return builtin_files("hw_profiles", "fabrics/*.toml")[name]
