"""The one-time conversion of a dataset of small files into record shards (issue 21 item 7):
what packing costs on a node's CPU and storage, and what it saves per epoch of training.

    cost = conversion_cost(load_dataset("imagenet-raw"), load_dataset("imagenet-records"),
                           load_system("dgx-a100"), workers=64)
    cost["time_s"], cost["limited_by"]

The packing runs as TensorFlow's ImageNet converters do (tensorflow/tpu
tools/datasets/imagenet_to_gcs.py, `_process_image`): each worker reads a source file, decodes
it once to check its shape (the JPEG bytes themselves are stored, not re-encoded) and appends
it to a shard. Three phases run side by side over the workers, so the conversion takes the
longest of them (NB: a pipeline at its bottleneck; the ramp at the start and the last short
shard are left out):
- read: every source byte from the node's drives at their read bandwidth, a random IO a file
  at the drives' IOPS (as the training pipeline charges its reads), and every file's request
  latency over the requests the workers keep in flight (at most the drives' queue);
- decode: every sample once, at the source dataset's decode figure per core, rescaled to the
  host CPU (`accelsim.sim.hostprep.prep_scale`), over the workers;
- write: every shard byte to the same drives at their datasheet write rate.
The saving: an epoch of the training run on each dataset (`run_simulation` over `steps`
steps, the epoch taken at that throughput), and the epochs the conversion takes to pay back
(none where the saving is under 0.1% of the epoch).
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

from accelsim.errors import AccelsimError
from accelsim.sim.hostprep import prep_scale

SAVING_FLOOR = 1e-3  # of the epoch: a smaller saving is taken as none


def _total_bytes(ds: Any) -> float:
    return float(ds.file_count * ds.file_size_mean_bytes)


def conversion_cost(src: Any, dst: Any, system: Any, workers: int,
                    medium: Any = None, count: int | None = None) -> dict[str, Any]:
    """Seconds to pack `src` into `dst`'s shards on `system`'s host with `workers` worker
    processes, reading and writing `count` x `medium` (default: the system's storage); each
    phase's seconds and the one that sets the time."""
    if src.sample_count != dst.sample_count:
        raise AccelsimError(f"'{src.name}' holds {src.sample_count:,} samples and "
                            f"'{dst.name}' {dst.sample_count:,}: a conversion keeps them all")
    if not 1 <= workers <= system.host.cores:
        raise AccelsimError(f"workers = {workers}: between 1 and the host's "
                            f"{system.host.cores} cores")
    medium = system.storage if medium is None else medium
    count = system.storage_count if count is None else count
    if medium.write_bandwidth_bytes_per_s is None:
        why = medium.sources.get("write_bandwidth_mb_s", "absent")
        raise AccelsimError(f"the shards are written to {medium.name}, whose profile gives no "
                            f"write_bandwidth_mb_s (hw_profiles/storage/{medium.name}.toml: "
                            f"{why})")
    in_flight = min(workers, count * medium.max_concurrency)
    read_bw_s = _total_bytes(src) / (count * medium.read_bandwidth_bytes_per_s)
    read_latency_s = src.file_count * medium.request_latency_s / in_flight
    # one random IO a file at least, as the training pipeline charges its reads
    read_iops_s = src.file_count / (count * medium.random_read_4k_iops)
    scale, scale_note = prep_scale(src, system.host)
    decode_s = src.sample_count * src.prep_s_per_sample_per_core * scale / workers
    write_s = _total_bytes(dst) / (count * medium.write_bandwidth_bytes_per_s)
    phases = {"read (bandwidth)": read_bw_s, "read (IOPS)": read_iops_s,
              "read (request latency)": read_latency_s,
              "decode": decode_s, "write": write_s}
    limit = max(phases, key=phases.__getitem__)
    notes = [f"decode: {scale_note}" if scale_note else "decode: the dataset's figure as is",
             "NB: the phases overlap over the workers (the longest sets the time); the "
             "drives' datasheet write rate, no file-system cost"]
    return {"source": src.name, "target": dst.name, "workers": workers,
            "storage": f"{count} x {medium.name}", "read_bytes": _total_bytes(src),
            "write_bytes": _total_bytes(dst), "phases_s": phases, "time_s": phases[limit],
            "limited_by": limit, "notes": notes}


def epoch_s(cfg: Any, dataset: Any, steps: int) -> tuple[float, str]:
    """Seconds of one epoch of training run `cfg` reading `dataset`, at the throughput of
    `steps` simulated steps; and the run's bottleneck."""
    from accelsim.run import run_simulation

    run = replace(cfg, train={**cfg.train, "dataset": dataset, "steps": steps})
    rec = run_simulation(run).record
    per_s = rec["throughput_samples_per_s"]
    if not per_s or not math.isfinite(per_s):
        raise AccelsimError(f"the training run on '{dataset.name}' reports no throughput")
    return dataset.sample_count / per_s, str(rec.get("bottleneck"))


def conversion_record(cfg: Any, src: Any, dst: Any, system: Any, workers: int,
                      steps: int) -> dict[str, Any]:
    """The conversion's cost on `system` and what it saves per epoch of `cfg` (a training run
    on that system); `payback_epochs` None when it saves nothing."""
    medium = cfg.train.get("storage")
    if isinstance(medium, str):
        from accelsim.profiles.storage import load_storage

        medium = load_storage(medium)
    cost = conversion_cost(src, dst, system, workers, medium, cfg.train.get("storage_count"))
    before, before_bound = epoch_s(cfg, src, steps)
    after, after_bound = epoch_s(cfg, dst, steps)
    saving = before - after
    # NB: a saving under 0.1% of the epoch is within the sampled steps' spread: none
    pays = saving > SAVING_FLOOR * before
    return cost | {
        "epoch_s": {src.name: before, dst.name: after},
        "bottleneck": {src.name: before_bound, dst.name: after_bound},
        "saving_per_epoch_s": saving, "steps_simulated": steps,
        "payback_epochs": cost["time_s"] / saving if pays else None}
