"""The one-time packing of small files into record shards (issue 21 item 7), against the
closed forms of its phases: bytes over the drives' read and write bandwidth, one random IO a
file at the drives' IOPS, the files' latency over the requests in flight, one decode a sample
over the workers; the longest sets the time."""

import json

import pytest

from accelsim.errors import AccelsimError
from accelsim.explore.convert import conversion_cost
from accelsim.profiles.datasets import load_dataset
from accelsim.profiles.storage import load_storage
from accelsim.profiles.systems import load_system
from accelsim.sim.hostprep import prep_scale
from tests.helpers.cli import one_line_error, run_cli

RAW, REC = load_dataset("imagenet-raw"), load_dataset("imagenet-records")
DGX, HDD = load_system("dgx-a100"), load_storage("hdd")


def test_each_phase_is_its_closed_form_and_the_longest_sets_the_time():
    c = conversion_cost(RAW, REC, DGX, 64, HDD, 8)
    raw_bytes = RAW.file_count * RAW.file_size_mean_bytes
    scale, _ = prep_scale(RAW, DGX.host)
    want = {"read (bandwidth)": raw_bytes / (8 * HDD.read_bandwidth_bytes_per_s),
            "read (IOPS)": RAW.file_count / (8 * HDD.random_read_4k_iops),
            "read (request latency)": RAW.file_count * HDD.request_latency_s
            / min(64, 8 * HDD.max_concurrency),
            "decode": RAW.sample_count * RAW.prep_s_per_sample_per_core * scale / 64,
            "write": REC.file_count * REC.file_size_mean_bytes
            / (8 * HDD.write_bandwidth_bytes_per_s)}
    assert c["phases_s"] == pytest.approx(want)
    assert c["limited_by"] == max(want, key=want.get) == "read (IOPS)"  # 1.28 M small files
    assert c["time_s"] == pytest.approx(max(want.values()))


def test_bad_conversions_get_one_line():
    with pytest.raises(AccelsimError, match="keeps them all"):
        conversion_cost(RAW, load_dataset("synthetic-small"), DGX, 8)
    with pytest.raises(AccelsimError, match="workers = 0"):
        conversion_cost(RAW, REC, DGX, 0)
    with pytest.raises(AccelsimError, match="write_bandwidth_mb_s"):
        conversion_cost(RAW, REC, DGX, 8, load_storage("nas-nfs"), 1)


def test_the_command_pays_back_on_slow_drives_and_never_where_compute_binds(capsys):
    args = ("convert", "resnet50-train", "--hw", "dgx-a100", "--to", "imagenet-records",
            "--sample-steps", "10", "--json")
    code, out, err = run_cli(capsys, *args, "--storage", "hdd", "--storage-count", "8")
    assert code == 0, err
    r = json.loads(out)
    saved = r["epoch_s"]["imagenet-raw"] - r["epoch_s"]["imagenet-records"]
    assert r["saving_per_epoch_s"] == pytest.approx(saved) and saved > 0
    assert r["payback_epochs"] == pytest.approx(r["time_s"] / saved)
    code, out, err = run_cli(capsys, *args)  # eight NVMe drives: the GPUs bind either way
    assert code == 0, err
    assert json.loads(out)["payback_epochs"] is None
    assert "--sample-steps" in one_line_error(capsys, *args, "--steps", "5")
