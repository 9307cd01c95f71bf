"""MLPerf Storage sizing (`accelsim.sim.mlperf_storage`) against closed forms: a storage system
of bandwidth B feeds about B / (AU target x d) emulated accelerators of demand d each, and at N
accelerators the AU is min(1, B / (N d)). Demand comes from the DLIO figures in the data files
(batch x bytes per sample / compute time per batch), not from the code under test.
"""

from __future__ import annotations

import json
import math
from dataclasses import replace

import pytest

from accelsim.cli import main
from accelsim.errors import AccelsimError
from accelsim.profiles.datasets import load_dataset
from accelsim.profiles.emulation import load_emulation
from accelsim.profiles.storage import load_storage
from accelsim.profiles.systems import load_system
from accelsim.sim.mlperf_storage import emulate, max_accelerators

EMU = load_emulation("a100", "resnet50")  # constant-size samples: demand is exact
DS = load_dataset(EMU.dataset)
DEMAND = EMU.batch_size * DS.file_size_mean_bytes / DS.samples_per_file / EMU.computation_time_s


def system(bandwidth: float):
    medium = replace(load_storage("nvme-gen4"), read_bandwidth_bytes_per_s=bandwidth)
    return replace(load_system("dgx-a100"), storage=medium, storage_count=1)


def test_storage_feeds_bandwidth_over_demand_accelerators() -> None:
    bw = 10.5 * DEMAND  # 11 accelerators at 95 % AU, 12 at 87.5 %
    rec = max_accelerators("resnet50", system(bw), "a100")
    assert rec["max_accelerators"] == math.floor(bw / (EMU.au_target * DEMAND)) == 11
    assert rec["accelerator_utilization"] >= EMU.au_target > rec["next_accelerator_utilization"]
    assert math.isclose(rec["storage_throughput_needed_gb_s"] * 1e9,
                        11 * EMU.au_target * DEMAND)
    assert math.isclose(rec["simulated_storage_throughput_gb_s"] * 1e9, bw, rel_tol=0.02)


@pytest.mark.parametrize("devices", [4, 14])
def test_au_is_bandwidth_over_demand_when_storage_bound(devices: int) -> None:
    bw = 10.5 * DEMAND
    got = emulate(EMU, system(bw), devices)["accelerator_utilization"]
    assert math.isclose(got, min(1.0, bw / (devices * DEMAND)), abs_tol=0.01)


def test_the_command_and_its_errors(capsys: pytest.CaptureFixture[str]) -> None:
    args = ["simulate", "resnet50-train", "--hw", "dgx-a100", "--emulate-accelerators", "h100",
            "--max-accelerators", "--storage", "sata-ssd", "--storage-count", "2", "--json"]
    assert main(args) == 0
    rec = json.loads(capsys.readouterr().out)
    bw = 2 * load_storage("sata-ssd").read_bandwidth_bytes_per_s
    h100 = load_emulation("h100", "resnet50")
    demand = h100.batch_size * DS.stored_bytes_per_sample / h100.computation_time_s
    assert rec["max_accelerators"] == math.floor(bw / (h100.au_target * demand))
    with pytest.raises(AccelsimError, match="emulates"):
        load_emulation("a100", "bert_large")
    for bad in (["--max-accelerators"], ["--emulate-accelerators", "a100", "--batch", "8"]):
        assert main(["simulate", "unet3d-train", "--hw", "dgx-a100", *bad]) == 2
        assert len(capsys.readouterr().err.strip().splitlines()) == 1
