"""Which bytes each IO thread reads for each batch: the epoch's file order, cut into batches.

One epoch: the files are shuffled (seeded), their samples are taken in that order (whole
files, as a sequential TFRecord reader or a shuffled list of JPEGs does), and consecutive runs
of samples form the per-accelerator batches of each global step. A batch touches the files
(or file parts: "segments") its samples lie in; those are dealt round-robin to the
accelerator's `io_threads`. A batch whose few segments cannot keep every thread busy (large
shards) is cut into one ranged read per thread instead.

NB: per batch per IO thread one aggregate request: its `requests` file reads are issued one
after another by the thread, so the thread pays `requests` x latency and the medium serves
`bytes` (and `requests` IOs against its IOPS cap). This keeps SimPy events per batch, not per
file, while latency, IOPS and bandwidth all still count per file.

    plan = read_plan(dataset, devices=8, batch=256, io_threads=16, steps=None, epochs=1, seed=0)
    plan.bytes[step, device, thread], plan.samples[...], plan.requests[...]

Also the two closed forms of storage under the plan: a file-size draw from a dataset's
distribution (`sample_file_sizes_bytes`) and one uncontended read (`read_time_s`).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

from accelsim.physical import BYTES
from accelsim.profiles.datasets import Dataset
from accelsim.profiles.storage import StorageMedium


@dataclass(frozen=True)
class ReadPlan:
    """Per (step, device, IO thread): file requests, bytes on storage and samples read."""

    requests: np.ndarray  # int64, shape (steps, devices, threads)
    bytes: np.ndarray  # float64, same shape
    samples: np.ndarray  # int64, same shape
    epoch: np.ndarray  # int64, shape (steps,): the epoch each step belongs to

    @property
    def steps(self) -> int:
        return int(self.samples.shape[0])

    def batch_samples(self) -> np.ndarray:
        """Samples per (step, device)."""
        return self.samples.sum(axis=2)

    def batch_bytes(self) -> np.ndarray:
        """Stored bytes per (step, device)."""
        return self.bytes.sum(axis=2)


def _device_batch_sizes(sample_count: int, devices: int, batch: int,
                        max_steps: int | None = None) -> np.ndarray:
    """Samples of each (step, device) batch for one epoch, or for its first `max_steps`
    steps; the epoch's last step may be short and is split as evenly as possible (no sample
    dropped, none repeated)."""
    global_batch = devices * batch
    full, rest = divmod(sample_count, global_batch)
    steps = full + (rest > 0)
    shown = steps if max_steps is None else min(steps, max_steps)
    sizes = np.full((shown, devices), batch, dtype=np.int64)
    if rest and shown == steps:
        sizes[-1] = rest // devices + (np.arange(devices) < rest % devices)
    return sizes


def _epoch(ds: Dataset, devices: int, batch: int, threads: int,
           rng: np.random.Generator, max_steps: int | None = None) -> ReadPlan:
    """The reads of one epoch, or of its first `max_steps` steps: the same reads the whole
    epoch would start with (the files are still drawn and shuffled for all of it), so the
    arrays are sized by the steps simulated, not by the dataset."""
    n_files = ds.file_count
    sizes = sample_file_sizes_bytes(ds, n_files, rng).astype(np.float64)
    counts = np.full(n_files, ds.samples_per_file, dtype=np.int64)
    counts[-1] = ds.sample_count - (n_files - 1) * ds.samples_per_file
    order = rng.permutation(n_files)
    counts, sizes = counts[order], sizes[order]
    file_ends = np.cumsum(counts)

    db_sizes = _device_batch_sizes(ds.sample_count, devices, batch, max_steps)
    n_steps = db_sizes.shape[0]
    db_ends = np.cumsum(db_sizes.ravel())
    # The files the simulated steps reach; segments end where a file or a batch ends.
    file_ends = file_ends[:np.searchsorted(file_ends, db_ends[-1], side="left") + 1]
    seg_ends = np.sort(np.concatenate((file_ends, db_ends)), kind="stable")  # two sorted runs
    seg_ends = seg_ends[(np.diff(seg_ends, prepend=0) > 0) & (seg_ends <= db_ends[-1])]
    seg_samples = np.diff(seg_ends, prepend=0)
    seg_file = np.searchsorted(file_ends, seg_ends, side="left")
    # The batch of each segment: the batch ends before it (each batch end is a segment end).
    at_db = np.bincount(np.searchsorted(seg_ends, db_ends), minlength=seg_ends.size)
    seg_db = np.cumsum(at_db) - at_db
    seg_bytes = seg_samples * (sizes / counts)[seg_file]

    n_db = db_ends.size
    n_seg = np.bincount(seg_db, minlength=n_db)
    first = np.concatenate(([0], np.cumsum(n_seg)[:-1]))
    local = np.arange(seg_ends.size) - first[seg_db]
    slot = seg_db * threads + local % threads
    shape = (n_db, threads)
    req = np.bincount(slot, minlength=n_db * threads).reshape(shape)
    byt = np.bincount(slot, weights=seg_bytes, minlength=n_db * threads).reshape(shape)
    smp = np.bincount(slot, weights=seg_samples, minlength=n_db * threads).reshape(shape)
    smp = smp.astype(np.int64)

    # Few large segments (shards): one ranged read per thread, samples dealt evenly.
    db_samples = db_sizes.ravel()
    k_eff = np.minimum(threads, db_samples)
    few = n_seg < k_eff
    if few.any():
        t = np.arange(threads)
        k = k_eff[few][:, None]
        share = (db_samples[few][:, None] // k) + (t < db_samples[few][:, None] % k)
        share = np.where(t < k, share, 0)
        total_bytes = byt[few].sum(axis=1, keepdims=True)
        smp[few] = share
        byt[few] = total_bytes * share / db_samples[few][:, None]
        # NB: a ranged read that straddles two files counts as one request.
        req[few] = (share > 0).astype(np.int64)
    shape3 = (n_steps, devices, threads)
    return ReadPlan(req.reshape(shape3), byt.reshape(shape3), smp.reshape(shape3),
                    np.zeros(n_steps, dtype=np.int64))


def read_plan(ds: Dataset, devices: int, batch: int, io_threads: int, steps: int | None,
              epochs: int, seed: int) -> ReadPlan:
    """The reads of `steps` global steps (spanning epochs as needed) or of `epochs` epochs.
    Each epoch reshuffles the files with a generator seeded by (seed, epoch)."""
    parts: list[ReadPlan] = []
    have, epoch = 0, 0
    while (steps is None and epoch < epochs) or (steps is not None and have < steps):
        part = _epoch(ds, devices, batch, io_threads, np.random.default_rng([seed, epoch]),
                      None if steps is None else steps - have)
        parts.append(dataclasses.replace(part, epoch=np.full(part.steps, epoch, np.int64)))
        have += part.steps
        epoch += 1
    cut = slice(0, steps)
    return ReadPlan(*(np.concatenate([getattr(p, name) for p in parts])[cut]
                      for name in ("requests", "bytes", "samples", "epoch")))


def read_time_s(n_bytes: float, medium: StorageMedium, gds: bool = False) -> float:
    """Closed form for one uncontended request: latency + bytes / read bandwidth."""
    if n_bytes < 0:
        raise ValueError(f"n_bytes must be >= 0, got {n_bytes!r}")
    latency = medium.request_latency_s
    if gds and medium.gds_request_latency_s is not None:
        latency = medium.gds_request_latency_s
    # NB: ignores the IOPS cap and queueing; the SimPy pipeline models those.
    return latency + n_bytes / medium.read_bandwidth_bytes_per_s


def sample_file_sizes_bytes(dataset: Dataset, n: int,
                            rng: np.random.Generator | int) -> np.ndarray:
    """`n` file sizes in bytes (int64, each in [1, `physical.BYTES.high`]) drawn from the
    dataset's distribution.

    Vectorised and deterministic for a seed (an int or a `numpy.random.Generator`)."""
    if n < 0:
        raise ValueError(f"n must be >= 0, got {n!r}")
    gen = rng if isinstance(rng, np.random.Generator) else np.random.default_rng(rng)
    if dataset.file_size_distribution == "constant":
        sizes = np.full(n, dataset.file_size_mean_bytes)
    else:
        mu, sigma = dataset.lognormal_params
        # NB: the lognormal shape is this model's choice; only mean and stdev are published.
        sizes = gen.lognormal(mu, sigma, size=n)
    # NB: rounding to whole bytes shifts the mean by < 0.5 B; the far tail of a wide lognormal
    # is cut at the physical ceiling of a size (so it stays inside int64).
    return np.clip(np.rint(sizes), 1, BYTES.high).astype(np.int64)
