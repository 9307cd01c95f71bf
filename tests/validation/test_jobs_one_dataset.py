"""Several training jobs on one node and dataset (issue 21 item 6): each job reads at its share
of the storage and decodes on its share of the cores, or with coordinated loading one read
and one decode feed every job; against the closed form of storage bound by IOPS (one random
IO a file: raw ImageNet on 8 HDDs serves 8 x 152 files a second in all)."""

import pytest

from accelsim.errors import AccelsimError
from accelsim.profiles.storage import load_storage
from accelsim.profiles.systems import load_system
from accelsim.run import run_simulation
from accelsim.sim.config import TrainConfig, resolve_config
from accelsim.sim.knobs import make_config
from accelsim.workload.scenario import resolve_workload

HDD = load_storage("hdd")
IOPS_BOUND = 8 * HDD.random_read_4k_iops  # files (= samples) a second, all jobs together


def _per_job(**knobs) -> float:
    cfg = make_config("resnet50-train", "dgx-a100", steps=30, storage="hdd", storage_count=8,
                      **knobs)
    return run_simulation(cfg).record["throughput_samples_per_s"]


def test_jobs_share_the_storage_unless_their_loading_is_coordinated():
    one = _per_job()
    assert one == pytest.approx(IOPS_BOUND, rel=0.02)  # one job of 8 GPUs: IOPS-bound
    each = _per_job(jobs=8, devices=1)
    assert 8 * each == pytest.approx(IOPS_BOUND, rel=0.02)  # 8 jobs: the same IOs split
    shared = _per_job(jobs=8, devices=1, coordinated=True)
    assert shared == pytest.approx(IOPS_BOUND, rel=0.05)  # one stream feeds all eight


def test_each_job_prepares_on_its_share_of_the_cores():
    sc, dgx = resolve_workload("resnet50-train"), load_system("dgx-a100")
    alone = resolve_config(TrainConfig(sc, dgx, devices=2, steps=2))
    four = resolve_config(TrainConfig(sc, dgx, devices=2, steps=2, jobs=4))
    both = resolve_config(TrainConfig(sc, dgx, devices=2, steps=2, jobs=4, coordinated=True))
    left = dgx.host.cores - 4 * alone.framework_cores
    assert (four.prep_cores, both.prep_cores) == (left // 4, left)
    assert alone.prep_cores == dgx.host.cores - alone.framework_cores
    with pytest.raises(AccelsimError, match="for 3 jobs of 4"):
        resolve_config(TrainConfig(sc, dgx, devices=4, steps=2, jobs=3))
