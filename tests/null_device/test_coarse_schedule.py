"""The coarse schedule (one SimPy process per group of alike reads or workers,
`accelsim.sim.groups`) against the fine one (one per read and per worker,
`TrainModel.max_group = 1`), the reference, on small runs of the main regimes: compute-bound
JPEGs and record shards on NVMe, IO-bound HDD and NAS, prep-bound with few cores, the page
cache of a second epoch. Throughput within 0.5 %, every stall share within 1 point, and the
records' totals (busy time and bytes per resource) alike; each case also checks that the coarse
run did group (so the comparison is not the fine schedule against itself).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from accelsim.devices.null import NullProfile
from accelsim.profiles.datasets import load_dataset
from accelsim.profiles.storage import load_storage
from accelsim.profiles.systems import load_system
from accelsim.sim import train
from accelsim.sim.config import TrainConfig
from accelsim.sim.run import TrainResult, simulate_training
from tests.helpers.pipeline import scenario

DEVICE = NullProfile(op_time_s=2e-5)  # a few ms per step of the mlp at batch 256


def small(name: str, samples: int) -> Any:
    ds = load_dataset(name)
    files = -(-samples // ds.samples_per_file)
    return replace(ds, sample_count=samples, file_count=files)


def dgx(storage: str | None = None, cores: int | None = None) -> Any:
    s = load_system("dgx-a100")
    if storage is not None:
        s = replace(s, storage=load_storage(storage))
    if cores is not None:
        s = replace(s, host=replace(s.host, cores=cores))
    return s


CASES = {
    # name: (system, config keywords, which groups the coarse run must form)
    "jpeg-nvme": (dgx(), dict(dataset=small("imagenet-raw", 60_000), epochs=1),
                  ("read", "prep")),
    "records-nvme": (dgx(), dict(dataset=small("imagenet-records", 60_000), epochs=1),
                     ("read", "prep")),
    "jpeg-hdd": (dgx("hdd"), dict(dataset=small("imagenet-raw", 30_000), epochs=1),
                 ("prep",)),
    "jpeg-nas": (dgx("nas-nfs"), dict(dataset=small("imagenet-raw", 30_000), epochs=1),
                 ("read", "prep")),
    "prep-bound": (dgx(cores=24), dict(dataset=small("imagenet-raw", 30_000), epochs=1,
                                       prep_workers=4), ("read", "prep")),
    "page-cache": (dgx(), dict(dataset=small("imagenet-raw", 30_000), epochs=2),
                   ("read", "prep")),
    # NAS on two nodes: storage reads and the all-reduce's cross-node phase share the NICs
    "nas-two-nodes": (dgx("nas-nfs"), dict(dataset=small("imagenet-raw", 30_000), epochs=1,
                                           nodes=2), ("read", "prep")),
    # IO-bound with every batch's reads grouped: no prefetch, so each starts on idle threads
    "object-store-no-prefetch": (dgx("object-store"), dict(dataset=small("imagenet-raw", 8_000),
                                                           epochs=1, prefetch_batches=0),
                                 ("read", "prep")),
    # one device, one batch in flight: reading and training take turns
    "sata-one-device": (dgx("sata-ssd"), dict(dataset=small("imagenet-raw", 8_000), epochs=1,
                                              devices=1, prefetch_batches=1),
                        ("read", "prep")),
}


def run(system: Any, kw: dict[str, Any], max_group: int, monkeypatch: pytest.MonkeyPatch,
        calls: dict[str, int] | None = None) -> TrainResult:
    monkeypatch.setattr(train.TrainModel, "max_group", max_group)
    if calls is not None:
        for kind, name in (("read", "_read_group"), ("prep", "_prep_group")):
            orig = getattr(train.TrainModel, name)

            def counted(self: Any, *a: Any, _orig: Any = orig, _kind: str = kind) -> Any:
                calls[_kind] = calls.get(_kind, 0) + 1
                return _orig(self, *a)

            monkeypatch.setattr(train.TrainModel, name, counted)
    sc = scenario("mlp", batch=256)
    return simulate_training(TrainConfig(sc, system, device_profile=DEVICE, **kw))


def totals(res: TrainResult) -> dict[tuple[str, str], tuple[float, float, int]]:
    """(busy seconds, bytes, samples) per (resource, kind) of the busy records."""
    df = res.records
    busy = df[~df["kind"].str.startswith(("stall", "batch"))]
    g = busy.groupby(["resource", "kind"])[["duration_s", "bytes", "samples"]].sum()
    return {k: (float(v.duration_s), float(v.bytes), int(v.samples)) for k, v in g.iterrows()}


@pytest.mark.parametrize("case", sorted(CASES))
def test_coarse_matches_fine(case: str, monkeypatch: pytest.MonkeyPatch) -> None:
    system, kw, grouped = CASES[case]
    fine = run(system, kw, 1, monkeypatch)
    calls: dict[str, int] = {}
    coarse = run(system, kw, 1 << 30, monkeypatch, calls)
    for kind in grouped:
        assert calls.get(kind, 0) > 0, f"{case}: the coarse run formed no {kind} group"
    assert coarse.samples == fine.samples
    assert coarse.throughput_samples_per_s == pytest.approx(fine.throughput_samples_per_s,
                                                            rel=0.005)
    for name, stall in fine.stalls.items():
        assert coarse.stalls[name]["fraction"] == pytest.approx(stall["fraction"], abs=0.01), name
    # the same work: every read, preparation and copy, its bytes and samples, once
    a, b = totals(coarse), totals(fine)
    assert a.keys() == b.keys()
    for key, (busy_s, n_bytes, samples) in b.items():
        assert a[key][1] == pytest.approx(n_bytes, rel=1e-9), key
        assert a[key][2] == samples, key
        assert a[key][0] == pytest.approx(busy_s, rel=0.005, abs=1e-9), key
    assert coarse.bottleneck == fine.bottleneck
