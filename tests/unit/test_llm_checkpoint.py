"""Checkpoints of a decoder's training (issue 21 item 5), against closed forms of the write
path's capacities: size 14 bytes a parameter (MLPerf Storage's checkpointing configs: fp16
model, fp32 optimizer: weights 2 + master, momentum, variance 12), the write over the least
part, sync waits for it, async only for the copy to host memory unless the write outlasts the
interval."""

import pytest

from accelsim.errors import AccelsimError
from accelsim.profiles.storage_systems import load_storage_system
from accelsim.profiles.systems import load_system
from accelsim.run import run_simulation
from accelsim.sim.knobs import make_config

KNOBS = {"mode": "train", "batch": 1, "seq_len": 4096, "zero": 1, "recompute": True,
         "precision": "bf16"}
DDN = "AI400X2T_24x14TiB_nvme_8xNDR200_16clients"


def _run(**knobs):
    r = run_simulation(make_config("llama-3.1-8b", "dgx-h100", **KNOBS, **knobs)).record
    return r, r["checkpoint"]


def test_sync_to_the_nodes_drives_waits_for_the_whole_write():
    r, c = _run(checkpoint_every=100)
    node = load_system("dgx-h100")
    size = r["workload"]["params"] * (2 + 4 + 4 + 4)
    assert c["bytes"] == pytest.approx(size, rel=1e-12)
    drives = node.storage_count * node.storage.write_bandwidth_bytes_per_s
    assert c["write_s"] == pytest.approx(size / drives, rel=1e-12)
    assert c["write_limited_by"] == "local drives"
    copy = size / 8 / node.host_to_device.achieved_bandwidth_bytes_per_s  # 8 GPUs, a link each
    assert c["stall_s"] == pytest.approx(max(copy, size / drives), rel=1e-12)
    interval = 100 * r["step_time_s"]
    assert c["lost_fraction"] == pytest.approx(c["stall_s"] / (interval + c["stall_s"]))
    assert c["restore_s"] == pytest.approx(size / node.storage_read_bandwidth_bytes_per_s)


def test_async_waits_for_the_copy_and_for_a_write_longer_than_the_interval():
    _, sync = _run(checkpoint_every=100)
    r, lazy = _run(checkpoint_every=100, checkpoint_mode="async")
    assert lazy["stall_s"] == pytest.approx(lazy["copy_to_host_s"], rel=1e-12)
    assert lazy["stall_s"] < sync["stall_s"]
    r, often = _run(checkpoint_every=1, checkpoint_mode="async")
    behind = often["write_s"] - r["step_time_s"]
    assert behind > 0  # one step is shorter than one write
    assert often["stall_s"] == pytest.approx(often["copy_to_host_s"] + behind, rel=1e-12)


def test_a_storage_system_bounds_the_write_by_its_least_part():
    r, c = _run(checkpoint_every=50, checkpoint_storage=DDN)
    s = load_storage_system(DDN).servers
    drives = s.count * s.drives * s.drive.write_bandwidth_bytes_per_s
    assert c["write_parts_bytes_per_s"]["server drives"] == pytest.approx(drives)
    name = min(c["write_parts_bytes_per_s"], key=c["write_parts_bytes_per_s"].get)
    assert c["write_limited_by"] == name
    assert c["write_s"] == pytest.approx(c["bytes"] / c["write_parts_bytes_per_s"][name])
    assert DDN in c["destination"]


@pytest.mark.parametrize("knobs, words", [
    ({"checkpoint_mode": "async"}, "add checkpoint_every"),
    ({"checkpoint_every": 5, "checkpoint_storage": "Micron_6500_Gen4_High_Capacity_NVMe"},
     "micron-6500-ion.toml"),
    ({"checkpoint_every": 5, "checkpoint_mode": "lazy"}, "choose sync or async"),
])
def test_bad_checkpoint_knobs_get_one_line(knobs, words):
    with pytest.raises(AccelsimError, match=words):
        run_simulation(make_config("llama-3.1-8b", "dgx-h100", **KNOBS, **knobs))


def test_a_convnet_takes_no_checkpoint_knob():
    with pytest.raises(AccelsimError, match="apply to decoder models"):
        run_simulation(make_config("resnet50-train", "dgx-a100", steps=2, checkpoint_every=5))
