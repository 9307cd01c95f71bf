"""MLPerf Storage's DLIO emulation on a storage system from its parts, against closed forms:
below capacity every accelerator computes all the time and the storage delivers what they
ask; above it the storage delivers its capacity (the least of its parts) and that part is
named; client hosts add capacity until the shared parts bind; the searches land where the
capacity arithmetic says."""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path

import pytest

from accelsim.profiles.emulation import Emulation, load_emulation
from accelsim.profiles.storage_systems import StorageSystem, load_storage_system
from accelsim.sim.storage_system.dlio import emulate_system, emulated_dataset
from accelsim.sim.storage_system.parts import parts_of
from accelsim.sim.storage_system.size import scaled, size_storage
from accelsim.sim.storage_system.sizing import batch_bytes, max_accelerators_system
from tests.helpers.storage_systems import write_system


def system(tmp_path: Path, hosts: int = 1) -> StorageSystem:
    """The test system with no fixed cost per request and no CPU cost: a pure bandwidth
    problem, whose capacities are the drives', ports' and NICs' figures."""
    path = write_system(
        tmp_path, f"sys{hosts}", "nvme-tcp",
        {"count": 2, "drives": 2, "drive": "nvme-gen4", "cores": 16, "ports": 1,
         "port_link": "ethernet-100g"},
        {"hosts": hosts, "cores": 32, "dram_gb": 64.0, "nics": 1, "nic_link": "ethernet-25g"})
    s = load_storage_system(path)
    fs = replace(s.fs, request_latency_s=0.0, client_core_s_per_byte=0.0,
                 client_core_s_per_sample=0.0, client_core_s_per_file=0.0,
                 server_core_s_per_byte=0.0,
                 drive_read_efficiency=1.0, requests_in_flight=None)
    drive = replace(s.servers.drive, request_latency_s=0.0)
    return replace(s, fs=fs, servers=replace(s.servers, drive=drive))


UNET = load_emulation("h100", "unet3d")
RESNET = load_emulation("h100", "resnet50")


def demand_bytes_per_s(s: StorageSystem, emu: Emulation = UNET) -> float:
    return batch_bytes(emu, emulated_dataset(emu, s)) / emu.computation_time_s


def capacity(s: StorageSystem) -> tuple[float, str]:
    return parts_of(s, 1e6, 1e6, 1e8).limit(s.clients.hosts)


def test_below_capacity_every_accelerator_computes(tmp_path: Path) -> None:
    s = system(tmp_path)
    cap, _ = capacity(s)
    n = int(0.5 * cap / demand_bytes_per_s(s, RESNET))
    assert n >= 4
    rec = emulate_system(RESNET, s, n)
    assert rec["storage_throughput_bytes_per_s"] == pytest.approx(
        n * demand_bytes_per_s(s, RESNET), rel=0.03)
    assert rec["accelerator_utilization"] == pytest.approx(1.0, abs=0.01)
    busiest = rec["parts"][0]
    assert not busiest["saturated"]


def test_above_capacity_the_least_part_is_full_and_named(tmp_path: Path) -> None:
    s = system(tmp_path)
    cap, part = capacity(s)
    # ResNet-50's records are all one size: no draw of file sizes in the way.
    n = math.ceil(2.0 * cap / demand_bytes_per_s(s, RESNET))
    rec = emulate_system(RESNET, s, n)
    assert rec["storage_throughput_bytes_per_s"] == pytest.approx(cap, rel=0.03)
    # AU = what the storage gives over what n accelerators ask for.
    assert rec["accelerator_utilization"] == pytest.approx(
        cap / (n * demand_bytes_per_s(s, RESNET)), rel=0.03)
    assert rec["parts"][0]["part"] == part
    assert rec["parts"][0]["saturated"]
    assert rec["parts"][0]["busy"] == pytest.approx(1.0, abs=0.03)


@pytest.mark.parametrize("hosts", [1, 2, 16])
def test_hosts_add_capacity_until_the_servers_bind(tmp_path: Path, hosts: int) -> None:
    s = system(tmp_path, hosts)
    p = parts_of(s, 1e6, 1e6, 1e8)
    want = min(hosts * p.host_cap_bytes_per_s, p.shared_cap_bytes_per_s)
    n = math.ceil(3.0 * want / demand_bytes_per_s(s, RESNET))
    n += (-n) % hosts  # the same count on every host
    rec = emulate_system(RESNET, s, n)
    assert rec["storage_throughput_bytes_per_s"] == pytest.approx(want, rel=0.03)
    name = rec["parts"][0]["part"]
    assert name == ("client NICs" if hosts * p.host_cap_bytes_per_s
                    < p.shared_cap_bytes_per_s else "server ports")


def test_max_accelerators_is_the_capacity_over_the_threshold_demand(tmp_path: Path) -> None:
    s = system(tmp_path, hosts=4)
    cap, _ = capacity(s)
    closed = cap / (UNET.au_target * demand_bytes_per_s(s))
    rec = max_accelerators_system(UNET, s)
    assert abs(rec["max_accelerators"] - closed) <= 1.5
    assert rec["accelerator_utilization"] >= UNET.au_target
    assert rec["next_accelerator_utilization"] < UNET.au_target


def test_size_is_the_fewest_servers_whose_capacity_carries_the_accelerators(
        tmp_path: Path) -> None:
    s = system(tmp_path, hosts=32)
    n = 24
    rec = size_storage(UNET, s, n, simulate=False)
    assert rec["units"] is not None
    need = n * UNET.au_target * demand_bytes_per_s(s)

    def shared(units: int) -> float:
        return capacity(scaled(s, units))[0]

    assert shared(rec["units"]) >= need > shared(rec["units"] - 1)
    # Too few client hosts: no server count helps, and the answer says the clients bind.
    few = size_storage(UNET, system(tmp_path, hosts=2), n, simulate=False)
    assert few["units"] is None and few["limit_at_size"] == "client NICs"


def test_a_system_with_no_bound_is_refused(tmp_path: Path) -> None:
    """Every capacity unbounded (an object-store medium, no CPU cost) would run rates to
    infinity: refused in one line instead."""
    from accelsim.errors import AccelsimError

    s = system(tmp_path)
    inf_drive = replace(s.servers.drive, read_bandwidth_bytes_per_s=math.inf,
                        random_read_4k_iops=math.inf)
    port = replace(s.servers.port_link, bandwidth_bytes_per_s=math.inf)
    nic = replace(s.clients.nic_link, bandwidth_bytes_per_s=math.inf)
    s = replace(s, servers=replace(s.servers, drive=inf_drive, port_link=port),
                clients=replace(s.clients, nic_link=nic))
    with pytest.raises(AccelsimError, match="no part bounds"):
        emulate_system(UNET, s, 2)
