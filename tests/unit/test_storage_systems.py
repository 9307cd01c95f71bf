"""Storage systems from their parts: the loader (bad files name file, field and value), the
parts' capacities against arithmetic on the files' own figures, the max-min water-filling
against a naive progressive filling, and the SimPy flows against processor-sharing closed
forms."""

from __future__ import annotations

import itertools
from pathlib import Path

import numpy as np
import pytest
import simpy

from accelsim.errors import ConfigError
from accelsim.profiles.links import load_link
from accelsim.profiles.storage import load_storage
from accelsim.profiles.storage_systems import (
    available_fs_classes,
    available_storage_systems,
    load_fs_class,
    load_storage_system,
)
from accelsim.sim.storage_system.fluid import SharedReads, water_fill, water_fill_array
from accelsim.sim.storage_system.parts import parts_of
from tests.helpers.storage_systems import system_toml

NET = system_toml(
    "lustre",
    {"count": 4, "drives": 6, "drive": "nvme-gen4", "cores": 12, "ports": 2,
     "port_link": "infiniband-hdr-200g"},
    {"hosts": 16, "cores": 20, "dram_gb": 92.0, "nics": 1, "nic_link": "infiniband-edr-100g"})


def write(tmp_path: Path, text: str, name: str = "sys.toml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_every_builtin_system_and_class_loads() -> None:
    assert {"local", "lustre", "nvme-tcp"} <= set(available_fs_classes())
    for name in available_fs_classes():
        assert load_fs_class(name).name == name
    for name in available_storage_systems():
        system = load_storage_system(name)
        assert (system.servers is None) == (system.fs.name == "local")


def test_parts_are_the_files_figures_multiplied(tmp_path: Path) -> None:
    system = load_storage_system(write(tmp_path, NET))
    fs = load_fs_class("lustre")
    drive, port, nic = (load_storage("nvme-gen4"), load_link("infiniband-hdr-200g"),
                        load_link("infiniband-edr-100g"))
    p = parts_of(system, request_bytes=1e6, sample_bytes=1e6, file_bytes=1e8)
    assert p.shared_bytes_per_s["server ports"] == pytest.approx(
        4 * 2 * port.bandwidth_bytes_per_s * fs.protocol_efficiency)
    assert p.shared_bytes_per_s["server drives"] == pytest.approx(
        24 * drive.read_bandwidth_bytes_per_s * fs.drive_read_efficiency)
    assert p.host_bytes_per_s["client NICs"] == pytest.approx(
        nic.bandwidth_bytes_per_s * fs.protocol_efficiency)
    assert p.request_latency_s == pytest.approx(fs.request_latency_s + drive.request_latency_s)
    # 16 hosts x one client NIC against the servers: the less of the two.
    cap, part = p.limit(16)
    assert cap == pytest.approx(min(16 * p.host_cap_bytes_per_s, p.shared_cap_bytes_per_s))
    host_part = min(p.host_bytes_per_s, key=p.host_bytes_per_s.__getitem__)
    assert part == (min(p.shared_bytes_per_s, key=p.shared_bytes_per_s.__getitem__)
                    if 16 * p.host_cap_bytes_per_s > p.shared_cap_bytes_per_s else host_part)
    assert p.limit(1) == (p.host_cap_bytes_per_s, min(p.host_bytes_per_s,
                                                      key=p.host_bytes_per_s.__getitem__))
    # Tiny requests hit the drives' IOPS before their bandwidth.
    small = parts_of(system, request_bytes=4096, sample_bytes=1e6, file_bytes=1e8)
    assert small.shared_bytes_per_s["server drives"] == pytest.approx(
        24 * min(drive.random_read_4k_iops * 4096,
                 drive.read_bandwidth_bytes_per_s * fs.drive_read_efficiency))


@pytest.mark.parametrize(("edit", "field", "words"), [
    (("fs_class = \"lustre\"", "fs_class = \"zfs\""), "fs_class", "one of"),
    (("drive = \"nvme-gen4\"", "drive = \"no-such-drive\""), "servers.drive", "cannot be loaded"),
    (("port_link = \"infiniband-hdr-200g\"", "port_link = \"nope\""), "servers.port_link",
     "cannot be loaded"),
    (("count = 4", "count = 0"), "servers.count", ""),
    (("hosts = 16", "hosts = 2.5"), "clients.hosts", ""),
    (("nics = 1\n", "nicks = 1\n"), "clients.nicks", "unknown key"),
    (("fs_class = \"lustre\"", "fs_class = \"local\""), "servers", "class 'local'"),
])
def test_bad_files_name_file_field_and_value(tmp_path: Path, edit: tuple[str, str],
                                             field: str, words: str) -> None:
    path = write(tmp_path, NET.replace(*edit))
    with pytest.raises(ConfigError) as err:
        load_storage_system(path)
    assert err.value.source == str(path)
    assert err.value.field == field
    assert words in err.value.problem


def test_network_class_without_servers_is_refused(tmp_path: Path) -> None:
    text = NET.split("[servers]")[0] + "[clients]" + NET.split("[clients]")[1]
    text = "\n".join(line for line in text.splitlines() if not line.startswith('"servers.'))
    with pytest.raises(ConfigError, match="served by storage servers"):
        load_storage_system(write(tmp_path, text))


def naive_max_min(cap: list[float], weight: list[float], shared: float) -> list[float]:
    """Progressive filling in small steps: raise every unfrozen host's per-weight rate
    together; freeze a host when its own cap is reached; stop when the shared part is full."""
    rate = [0.0] * len(cap)
    frozen = [w == 0 for w in weight]
    step = 1e-4
    while not all(frozen):
        total = sum(r * w for r, w in zip(rate, weight, strict=True))
        live = [h for h in range(len(cap)) if not frozen[h]]
        room = shared - total
        if room <= 1e-9:
            break
        inc = min(step, room / sum(weight[h] for h in live))
        for h in live:
            rate[h] = min(rate[h] + inc, cap[h] / weight[h])
            if rate[h] >= cap[h] / weight[h] - 1e-12:
                frozen[h] = True
    return rate


@pytest.mark.parametrize("seed", range(6))
def test_water_fill_is_max_min_fair(seed: int) -> None:
    rng = np.random.default_rng(seed)
    hosts = int(rng.integers(1, 6))
    cap = [float(c) for c in rng.uniform(0.5, 3.0, hosts)]
    weight = [float(w) for w in rng.integers(0, 4, hosts)]
    shared = float(rng.uniform(0.5, 8.0))
    got = water_fill(cap, weight, shared)
    want = naive_max_min(cap, weight, shared)
    assert got == pytest.approx(want, abs=2e-3)
    used = sum(r * w for r, w in zip(got, weight, strict=True))
    assert used <= min(shared, sum(c for c, w in zip(cap, weight, strict=True) if w)) + 1e-9


def test_flows_end_when_processor_sharing_says() -> None:
    """Two hosts (caps 10 and 10), a shared 12: host 0 one flow of 60, host 1 flows of 60
    and 30. Max-min: rates 4, 4, 4 until the 30 ends at 7.5 s; then 6 and 6: both 60s end at
    7.5 + 30 / 6 = 12.5 s. Every byte arrives."""
    env = simpy.Environment()
    reads = SharedReads(env, np.array([10.0, 10.0]), 12.0)
    ends: dict[str, float] = {}

    def flow(host: int, n_bytes: float, name: str):  # type: ignore[no-untyped-def]
        yield reads.read(host, n_bytes, 1.0)
        ends[name] = env.now

    for host, n_bytes, name in ((0, 60.0, "a"), (1, 60.0, "b"), (1, 30.0, "c")):
        env.process(flow(host, n_bytes, name))
    env.run()
    assert ends == pytest.approx({"a": 12.5, "b": 12.5, "c": 7.5})
    assert reads.served_bytes == pytest.approx([60.0, 90.0])


def test_weighted_flows_share_by_weight() -> None:
    """One host, cap 9: flows of weight 1 and 2 with 30 bytes each take 3 and 6 bytes/s; the
    heavier ends at 5 s, then the lighter takes all 9: 30 - 15 = 15 bytes left, 15 / 9 s."""
    env = simpy.Environment()
    reads = SharedReads(env, np.array([9.0]), 100.0)
    ends = {}

    def flow(weight: float):  # type: ignore[no-untyped-def]
        yield reads.read(0, 30.0, weight)
        ends[weight] = env.now

    for w in (1.0, 2.0):
        env.process(flow(w))
    env.run()
    assert ends == pytest.approx({2.0: 5.0, 1.0: 5.0 + 15.0 / 9.0})


def test_staggered_arrivals_conserve_bytes() -> None:
    env = simpy.Environment()
    reads = SharedReads(env, np.array([5.0, 3.0, 8.0]), 10.0)
    sizes = {}

    def flow(i: int, host: int, delay: float, n_bytes: float):  # type: ignore[no-untyped-def]
        yield env.timeout(delay)
        yield reads.read(host, n_bytes, 1.0 + i % 3)
        sizes[i] = n_bytes

    for i, (host, delay) in enumerate(itertools.product(range(3), (0.0, 0.7, 2.1))):
        env.process(flow(i, host, delay, 4.0 + i))
    env.run()
    assert len(sizes) == 9
    assert reads.served_bytes.sum() == pytest.approx(sum(sizes.values()))
    # Never faster than the shared part allows.
    assert env.now >= sum(sizes.values()) / 10.0 - 1e-9


@pytest.mark.parametrize("seed", range(4))
def test_the_array_water_fill_is_the_list_one(seed: int) -> None:
    """Many hosts take the vectorised `water_fill_array`: the same levels as `water_fill`
    (itself checked against the naive filling above), idle hosts included."""
    rng = np.random.default_rng(100 + seed)
    for _ in range(200):
        hosts = int(rng.integers(1, 40))
        cap = rng.uniform(0.5, 3.0, hosts)
        weight = rng.integers(0, 4, hosts).astype(float)
        shared = float(rng.uniform(0.5, 40.0))
        assert water_fill_array(cap, weight, shared) == pytest.approx(
            water_fill(cap.tolist(), weight.tolist(), shared))


def _random_reads(seed: int, general: bool, monkeypatch) -> list[float]:
    """When each of 60 random reads over 16 hosts ends, with the shared reads' kept sums
    (`general` False) or the water-filling recomputed from scratch at every event."""
    if general:
        monkeypatch.setattr(SharedReads, "_rates", lambda self: (
            water_fill_array(self.cap, self.weight, self.shared), None))
    rng = np.random.default_rng(seed)
    env = simpy.Environment()
    reads = SharedReads(env, rng.uniform(1e9, 5e9, 16), float(rng.uniform(5e9, 40e9)))
    ends: list[float] = []

    def one(host: int, start_s: float, n_bytes: float, weight: float):
        yield env.timeout(start_s)
        yield reads.read(host, n_bytes, weight)
        ends.append(env.now)

    for _ in range(60):
        env.process(one(int(rng.integers(16)), float(rng.uniform(0, 2)),
                        float(rng.uniform(1e8, 4e9)), float(rng.integers(1, 9))))
    env.run()
    monkeypatch.undo()
    return ends


@pytest.mark.parametrize("seed", range(5))
def test_kept_sums_give_the_water_filling_to_the_bit(seed, monkeypatch) -> None:
    kept = _random_reads(seed, False, monkeypatch)
    assert len(kept) == 60 and kept == _random_reads(seed, True, monkeypatch)
