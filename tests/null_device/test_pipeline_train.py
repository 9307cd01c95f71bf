"""The training pipeline against closed forms, on the null device.

Every stage is made "infinitely fast" (huge bandwidths, no latency, free preparation, a
null device with ~0 op time) except the ones under test, so the expected numbers follow from
the profile figures alone: bandwidth / bytes per sample, threads / latency, IOPS, the sum or
the max of the stage times, the alpha-beta all-reduce formulas.
"""

from __future__ import annotations

import json
import math
import pickle
from dataclasses import replace
from typing import Any

import pandas as pd
import pytest

from accelsim.devices.estimate import estimate
from accelsim.devices.null import NullProfile
from accelsim.errors import AccelsimError
from accelsim.interconnect.collectives import (
    allreduce_time_s,
    allreduce_wire_bytes,
    ring_allreduce_time_s,
    tree_allreduce_time_s,
)
from accelsim.interconnect.nccl import achievable
from accelsim.profiles.datasets import Dataset, load_dataset
from accelsim.profiles.links import load_link
from accelsim.profiles.storage import load_storage
from accelsim.profiles.systems import System, load_system
from accelsim.sim.config import TrainConfig, resolve_config
from accelsim.sim.readplan import read_plan
from accelsim.sim.run import TrainResult, simulate_training
from accelsim.workload.scenario import Scenario
from tests.helpers.pipeline import fast_storage, fast_system, scenario, shards

MIB = 2**20
FAST_NULL = NullProfile(op_time_s=1e-12)


def run(sc: Scenario, system: System, **kw: Any) -> TrainResult:
    kw.setdefault("device_profile", FAST_NULL)
    kw.setdefault("devices", 1)
    return simulate_training(TrainConfig(sc, system, **kw))


def recs(res: TrainResult, kind: str, detail: str | None = None) -> pd.DataFrame:
    df = res.records
    sel = df["kind"] == kind
    if detail is not None:
        sel &= df["detail"] == detail
    return df[sel]


def steady_step_s(res: TrainResult) -> float:
    """Median interval between consecutive step ends, second half of the run."""
    ends = recs(res, "compute", "optimizer").groupby("step")["end_s"].max().sort_index()
    diffs = ends.diff().dropna()
    return float(diffs.iloc[len(diffs) // 2:].median())


# ---------------------------------------------------------------- collectives: closed forms

def test_ring_and_tree_closed_forms() -> None:
    m, bw, lat = 100e6, 25e9, 2e-6
    assert ring_allreduce_time_s(8, m, bw, lat) == pytest.approx(2 * 7 / 8 * m / bw + 14 * lat)
    assert tree_allreduce_time_s(8, m, bw, lat) == pytest.approx(6 * (lat + m / bw))
    assert tree_allreduce_time_s(5, m, bw, lat) == pytest.approx(6 * (lat + m / bw))  # ceil
    for algo in ("ring", "tree"):
        assert allreduce_time_s(algo, 1, m, bw, lat) == 0.0
        assert allreduce_wire_bytes(algo, 1, m) == 0.0
    # ring is bandwidth-optimal for big messages, tree latency-optimal for tiny ones
    assert ring_allreduce_time_s(64, m, bw, lat) < tree_allreduce_time_s(64, m, bw, lat)
    assert tree_allreduce_time_s(64, 8.0, bw, lat) < ring_allreduce_time_s(64, 8.0, bw, lat)
    with pytest.raises(AccelsimError, match="butterfly"):
        allreduce_time_s("butterfly", 8, m, bw, lat)


# ---------------------------------------------------------------- IO: bandwidth, latency, IOPS

def test_bandwidth_bound_throughput_is_bandwidth_over_bytes_per_sample() -> None:
    bw = 1e9
    ds = shards()
    res = run(scenario(io_threads=4, prefetch_batches=2),
              fast_system(storage=fast_storage(read_bandwidth_bytes_per_s=bw)), dataset=ds)
    expected = bw / ds.stored_bytes_per_sample
    assert res.throughput_samples_per_s == pytest.approx(expected, rel=0.01)
    assert res.utilization["storage"] == pytest.approx(1.0, rel=0.01)
    assert res.bottleneck == "io" and "saturated" in res.bottleneck_detail


def test_latency_bound_small_files_follow_threads_over_latency() -> None:
    lat, threads = 1e-3, 4
    small = load_dataset("synthetic-small")  # 1024 one-sample 4 KiB files, free to prepare
    res = run(scenario(batch=16, io_threads=threads, prefetch_batches=4),
              fast_system(storage=fast_storage(request_latency_s=lat)), dataset=small)
    assert res.throughput_samples_per_s == pytest.approx(threads / lat, rel=0.02)
    assert res.bottleneck == "io" and "latency" in res.bottleneck_detail


def test_iops_cap_bounds_small_file_reads() -> None:
    iops = 2000.0
    res = run(scenario(batch=16, io_threads=8, prefetch_batches=4),
              fast_system(storage=fast_storage(random_read_4k_iops=iops)),
              dataset=load_dataset("synthetic-small"))
    assert res.throughput_samples_per_s == pytest.approx(iops, rel=0.02)


def test_small_files_on_a_nas_are_latency_bound_where_shards_are_not() -> None:
    nas = load_storage("nas-nfs")
    system = fast_system(storage=nas)
    sc = scenario(batch=256, io_threads=4, prefetch_batches=4)
    out = {}
    for name in ("imagenet-raw", "imagenet-records"):
        ds = replace(load_dataset(name), prep_s_per_sample_per_core=0.0)
        out[name] = run(sc, system, dataset=ds, steps=12)
    file_bytes = load_dataset("imagenet-raw").stored_bytes_per_sample  # one JPEG per file
    bw_bound = nas.read_bandwidth_bytes_per_s / file_bytes
    raw, rec = out["imagenet-raw"], out["imagenet-records"]
    per_file_s = nas.request_latency_s + file_bytes / nas.read_bandwidth_bytes_per_s
    assert raw.throughput_samples_per_s == pytest.approx(4 / per_file_s, rel=0.05)
    assert raw.throughput_samples_per_s < 0.2 * bw_bound
    assert rec.throughput_samples_per_s > 0.8 * bw_bound
    assert raw.utilization["storage"] < 0.2 < 0.8 < rec.utilization["storage"]
    assert "latency" in raw.bottleneck_detail and "saturated" in rec.bottleneck_detail


# ---------------------------------------------------------------- conservation

def test_no_sample_lost_or_read_twice_and_bytes_conserved() -> None:
    base = load_dataset("synthetic-small")
    ds = replace(base, sample_count=1000, file_count=1000)  # 1000 = 35 steps of 3 x 7 + 55
    sc = scenario(batch=7, io_threads=3)
    res = run(sc, fast_system(), dataset=ds, devices=3, epochs=2)
    steps_per_epoch = math.ceil(1000 / 21)
    reads = recs(res, "read")
    epoch = reads["step"] // steps_per_epoch
    assert (reads.groupby(epoch)["samples"].sum() == 1000).all()
    assert (reads.groupby(epoch)["bytes"].sum() == 1000 * 4096).all()
    fwd = recs(res, "compute", "forward")
    assert fwd["samples"].sum() == 2000 and res.samples == 2000
    per_step = fwd.groupby("step")["samples"].sum()
    assert (per_step.drop([steps_per_epoch - 1, 2 * steps_per_epoch - 1]) == 21).all()
    assert per_step[steps_per_epoch - 1] == 1000 - 21 * (steps_per_epoch - 1)
    # bytes conserved stage to stage: decoded bytes out of prep = bytes over the host link
    prep, h2d = recs(res, "prep"), recs(res, "h2d")
    assert prep["samples"].sum() == h2d["samples"].sum() == 2000
    assert prep["bytes"].sum() == h2d["bytes"].sum() == 2000 * ds.decoded_sample_bytes


def test_read_plan_partitions_each_epoch_into_batches() -> None:
    ds = load_dataset("imagenet-records")  # 1024 shards, last one short
    plan = read_plan(ds, devices=8, batch=256, io_threads=16, steps=None, epochs=1, seed=3)
    assert plan.samples.sum() == ds.sample_count
    assert plan.bytes.sum() == pytest.approx(ds.total_bytes, rel=1e-6)
    assert (plan.batch_samples()[:-1] == 256).all()


# ---------------------------------------------------------------- prefetch

def stage_config() -> tuple[Scenario, System, Dataset, NullProfile, dict[str, float]]:
    """One accelerator, four stages of known time: read 4, prep 10, transfer 2, compute 6 ms."""
    batch, workers = 32, 8
    times = {"read": 4e-3, "prep": 10e-3, "transfer": 2e-3, "compute": 6e-3}
    ds = shards(prep_s=times["prep"] * workers / batch)
    batch_bytes = batch * MIB
    units = estimate(scenario().graph(), NullProfile(op_time_s=1.0), batch, "bf16",
                     "train").step_time_s
    system = fast_system(h2d_bw=batch_bytes / times["transfer"],
                         storage=fast_storage(read_bandwidth_bytes_per_s=batch_bytes /
                                              times["read"]), cores=workers + 1)
    sc = scenario(batch=batch, io_threads=4, prep_workers=workers)
    return sc, system, ds, NullProfile(op_time_s=times["compute"] / units), times


@pytest.mark.parametrize("prefetch", [0, 4])
def test_prefetch_zero_serialises_stages_and_prefetch_overlaps_them(prefetch: int) -> None:
    sc, system, ds, dev, times = stage_config()
    res = run(sc, system, dataset=ds, device_profile=dev, prefetch_batches=prefetch, steps=40)
    expected = sum(times.values()) if prefetch == 0 else max(times.values())
    assert steady_step_s(res) == pytest.approx(expected, rel=1e-6)
    if prefetch:
        assert res.bottleneck == "prepare"
        assert res.stalls["prep"]["time_s"] > res.stalls["fetch"]["time_s"]


# ---------------------------------------------------------------- transfer: GDS, pinned

def test_gpudirect_storage_cuts_host_cpu_time_and_transfer_stalls() -> None:
    ds = replace(load_dataset("imagenet-records"), prep_s_per_sample_per_core=1e-5)
    system = fast_system(h2d_bw=2e9, h2d_latency_s=1e-5,
                         storage=replace(load_storage("nvme-gen4")), storage_count=8)
    sc = scenario(batch=64, io_threads=8, prep_workers=4, prefetch_batches=0)
    out = {gds: run(sc, system, dataset=ds, gpudirect=gds, steps=20) for gds in (False, True)}
    cpu = {g: r.records.loc[r.records["resource"] == "host_cpu", "duration_s"].sum()
           for g, r in out.items()}
    assert cpu[True] == 0.0 < cpu[False]
    assert out[True].stalls["transfer"]["time_s"] < out[False].stalls["transfer"]["time_s"]
    assert out[True].energy_breakdown_j["host_cpu"] < out[False].energy_breakdown_j["host_cpu"]
    assert (recs(out[True], "h2d")["detail"] == "gds").all()


def test_pageable_memory_costs_host_cpu_and_time() -> None:
    sc = scenario(batch=64, prefetch_batches=0)
    system = fast_system(h2d_bw=10e9)
    pinned = run(sc, system, dataset=shards(), steps=5)
    pageable = run(sc, system, dataset=shards(), steps=5, pinned_memory=False)
    assert len(recs(pageable, "staging_copy")) == 5 and recs(pinned, "staging_copy").empty
    assert pageable.run_time_s > pinned.run_time_s


# ---------------------------------------------------------------- communication

def test_eight_way_data_parallel_scales_better_over_nvswitch_than_25gbe() -> None:
    dgx = load_system("dgx-a100")
    eth = load_link("ethernet-25g")
    sc = scenario(model="resnet50", batch=64, prefetch_batches=2)
    dev = NullProfile(op_time_s=2e-5)  # a ~10 ms step, as resnet50 at batch 64 on an A100
    systems = {"nvswitch": fast_system(device_to_device=dgx.device_to_device),
               "25gbe": fast_system(device_to_device=eth)}
    one = run(sc, systems["nvswitch"], dataset=shards(), device_profile=dev, steps=8)
    eff, ratio = {}, {}
    for name, system in systems.items():
        res = run(sc, system, dataset=shards(), device_profile=dev, devices=8, steps=8,
                  overlap_allreduce=False)
        eff[name] = res.throughput_samples_per_s / (8 * one.throughput_samples_per_s)
        ratio[name] = res.comm_to_compute_ratio
        grad_bytes = scenario("resnet50").graph().params * 4  # bf16 AMP: fp32 gradients
        link = system.device_to_device
        assert res.allreduce_time_s == pytest.approx(ring_allreduce_time_s(
            8, grad_bytes, achievable(link).bandwidth_bytes_per_s, link.latency_s))
    assert eff["nvswitch"] > 0.9 > 0.5 > eff["25gbe"]
    assert ratio["nvswitch"] < 0.1 < 1.0 < ratio["25gbe"]
    assert res.bottleneck == "communication"


def test_overlap_hides_allreduce_behind_backward() -> None:
    dgx = load_system("dgx-a100")
    sc = scenario(model="resnet50", batch=64, prefetch_batches=2)
    system = fast_system(device_to_device=dgx.device_to_device)
    dev = NullProfile(op_time_s=1e-5)  # backward ~3.5 ms vs all-reduce ~0.3 ms
    kw = dict(dataset=shards(), device_profile=dev, devices=8, steps=6)
    hidden = run(sc, system, overlap_allreduce=True, **kw)
    exposed = run(sc, system, overlap_allreduce=False, **kw)
    waits = recs(exposed, "stall_comm")
    later = waits.loc[waits["step"] > 0, "duration_s"].sum()  # step 0 also waits for stragglers
    assert later == pytest.approx(8 * 5 * exposed.allreduce_time_s, rel=1e-6)
    # Overlapped, only the last bucket (the first layers' gradients, ready when backward
    # ends) is exposed; the others ran during backward.
    last_s = recs(hidden, "allreduce").groupby("step")["duration_s"].last()
    waits = recs(hidden, "stall_comm")
    later_hidden = waits.loc[waits["step"] > 0, "duration_s"].sum()
    assert later_hidden == pytest.approx(8 * last_s.iloc[1:].sum(), rel=1e-6)
    assert later_hidden < 0.5 * later


# ---------------------------------------------------------------- results, determinism, errors

def test_same_seed_same_result() -> None:
    ds = replace(load_dataset("imagenet-raw"), prep_s_per_sample_per_core=1e-5)
    sc = scenario(batch=32, io_threads=4, prep_workers=2)
    system = fast_system(storage=load_storage("sata-ssd"))
    a, b, c = (run(sc, system, dataset=ds, steps=10, seed=s) for s in (7, 7, 8))
    pd.testing.assert_frame_equal(a.records, b.records)
    assert a.to_dict() == b.to_dict()
    assert not a.records["bytes"].equals(c.records["bytes"])


def test_result_fields_and_au() -> None:
    res = run(scenario(), fast_system(), dataset=shards(), steps=10,
              device_profile=NullProfile(op_time_s=1e-4))
    d = res.to_dict()
    for key in ("utilization", "stalls", "accelerator_utilization", "meets_au_target",
                "energy_breakdown_j", "bottleneck"):
        assert key in d and res[key] == d[key]
    assert set(d["energy_breakdown_j"]) >= {"accelerators", "host_cpu", "dram", "links",
                                            "storage", "static"}
    assert res.accelerator_utilization == pytest.approx(1.0) and res.meets_au_target
    assert res.bottleneck == "compute"
    assert set(res.stalls["fetch"]) == {"time_s", "fraction"}
    json.dumps(d)
    pickle.dumps(TrainConfig(scenario(), fast_system(), steps=3))


@pytest.mark.parametrize("kw, match", [
    (dict(prep_workers=0), "prep_workers"),
    (dict(io_threads=0), "io_threads"),
    (dict(prefetch_batches=-1), "prefetch_batches"),
    (dict(devices=9), "only 8 accelerators"),
    (dict(devices=0), "devices"),
    (dict(steps=3, epochs=1), "not both"),
    (dict(allreduce="butterfly"), "allreduce"),
    (dict(device_profile=NullProfile(capacity_bytes=1e6)), "needs"),
    (dict(storage="sata-ssd", gpudirect=True), "gpudirect"),
])
def test_impossible_settings_give_a_clear_error(kw: dict[str, Any], match: str) -> None:
    kw = {"device_profile": FAST_NULL, "steps": 2, **kw}
    if "epochs" in kw:
        kw["steps"] = 3
    with pytest.raises(AccelsimError, match=match):
        simulate_training(TrainConfig(scenario(), fast_system(), **kw))


def test_system_without_gds_or_an_inference_scenario_is_refused() -> None:
    ws = load_system("workstation")
    with pytest.raises(AccelsimError, match="GPUDirect"):
        resolve_config(TrainConfig(scenario(), ws, gpudirect=True, device_profile=FAST_NULL))
    infer = replace(scenario(), mode="infer")
    with pytest.raises(AccelsimError, match="not a training scenario"):
        resolve_config(TrainConfig(infer, ws, device_profile=FAST_NULL))


def test_page_cache_serves_later_epochs_when_the_dataset_fits_in_ram() -> None:
    # A slow disk (100 MB/s) under a 4 GiB dataset: epoch 1 is storage-bound either way;
    # from epoch 2 the page cache serves it at DRAM bandwidth if it fits in host memory.
    ds = shards()
    total_bytes = ds.file_count * ds.file_size_mean_bytes
    slow = fast_storage(read_bandwidth_bytes_per_s=100e6)
    sc = scenario(batch=256, prefetch_batches=2)
    big = fast_system(storage=slow)
    small = replace(big, host=replace(big.host, dram_bytes=int(total_bytes / 2)))
    cached = run(sc, big, dataset=ds, epochs=2)
    cold = run(sc, small, dataset=ds, epochs=2)
    store = recs(cached, "read")
    from_disk = store[store["resource"] == "storage"]["bytes"].sum()
    from_cache = store[store["resource"] == "page_cache"]["bytes"].sum()
    assert from_disk == pytest.approx(total_bytes, rel=1e-9)  # epoch 1 only
    assert from_cache == pytest.approx(total_bytes, rel=1e-9)  # epoch 2
    cold_reads = recs(cold, "read")
    assert set(cold_reads["resource"]) == {"storage"}
    assert cold_reads["bytes"].sum() == pytest.approx(2 * total_bytes, rel=1e-9)
    # Epoch 2 from DRAM is nearly free next to 4 GiB at 100 MB/s: the run about halves.
    assert cached.run_time_s < 0.6 * cold.run_time_s
