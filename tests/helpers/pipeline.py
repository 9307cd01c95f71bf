"""The training pipeline's parts made "infinitely fast" (huge bandwidths, no latency, free
preparation), so that a test's expected numbers follow from the one stage it leaves as it is.
Shared by the pipeline tests on the null device (null_device/) and the validation tests that
run the pipeline."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from accelsim.profiles.datasets import Dataset, load_dataset
from accelsim.profiles.storage import StorageMedium, load_storage
from accelsim.profiles.systems import System, load_system
from accelsim.workload.scenario import Scenario

FAST_BW = 1e15  # B/s: "infinitely fast" for these sizes


def scenario(model: str = "mlp", batch: int = 32, **pipe: Any) -> Scenario:
    sc = Scenario(name="t", model=model, mode="train", batch_size=batch, precision="bf16")
    return replace(sc, pipeline=replace(sc.pipeline, **pipe)) if pipe else sc


def fast_storage(**changes: Any) -> StorageMedium:
    base = dict(read_bandwidth_bytes_per_s=FAST_BW, random_read_4k_iops=1e15,
                request_latency_s=0.0, gds_request_latency_s=0.0, max_concurrency=10_000)
    return replace(load_storage("nvme-gen4"), **{**base, **changes})


def fast_system(h2d_bw: float = FAST_BW, h2d_latency_s: float = 0.0, cores: int = 1024,
                **changes: Any) -> System:
    dgx = load_system("dgx-a100")
    h2d = replace(dgx.host_to_device, bandwidth_bytes_per_s=h2d_bw, latency_s=h2d_latency_s,
                  achieved_efficiency=None)
    d2d = replace(dgx.device_to_device, bandwidth_bytes_per_s=FAST_BW, latency_s=0.0,
                  achieved_efficiency=None)
    fields = dict(host_to_device=h2d, device_to_device=d2d, storage=fast_storage(),
                  storage_count=1, host=replace(dgx.host, cores=cores))
    return replace(dgx, **{**fields, **changes})


def shards(prep_s: float = 0.0) -> Dataset:
    """16 shards of 256 samples of 1 MiB, constant size."""
    return replace(load_dataset("synthetic-large"), prep_s_per_sample_per_core=prep_s)
