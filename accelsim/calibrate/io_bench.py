"""Disk and decode measurements of a calibration run: sequential read bandwidth and 4 KiB random
read IOPS on a temporary file, and JPEG decode time per image where Pillow is installed.

    disk = measure_disk(Path("."), file_bytes=128 << 20)   # DiskResult
    decode_s, note = measure_jpeg_decode(images=16)          # s per image, or None and why

The file is written, flushed to the device, then dropped from the page cache
(`posix_fadvise(DONTNEED)`) before each read pass, so reads come from the device.
NB: where the kernel keeps the pages anyway (some filesystems, a VM's host cache) the figure is
the cache's; `cached` flags a read bandwidth above 20 GB/s, beyond any single drive here.
"""

from __future__ import annotations

import io
import os
import random
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

BLOCK_BYTES = 1 << 20  # sequential reads of 1 MiB
RANDOM_BYTES = 4096  # random reads of 4 KiB
CACHED_ABOVE_BYTES_PER_S = 20e9  # NB: faster than any one drive: the page cache answered
HDD_MAX_IOPS = 1000  # NB: a rotating disk serves ~100-200 random reads/s; far more is flash
JPEG_SIDE_PX = 500  # NB: about an ImageNet image (average ~400 x 350, ~110 KB)


@dataclass(frozen=True)
class DiskResult:
    """Read figures of the disk under `path`: bandwidth (B/s), IOPS at queue depth 1, the
    mean latency of one 4 KiB read (s), the device kind as guessed, and whether the page cache
    probably answered."""

    path: str
    read_bandwidth_bytes_per_s: float
    random_read_4k_iops: float
    request_latency_s: float
    kind: str
    cached: bool


def _drop_cache(fd: int) -> None:
    os.fsync(fd)
    if hasattr(os, "posix_fadvise"):
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)


def disk_kind(path: Path) -> str:
    """The storage kind of the block device under `path` ("nvme", "hdd", else "sata").
    NB: guessed from the device name and `queue/rotational`; a VM's virtual disk reads "sata"."""
    try:
        dev = os.stat(path).st_dev
        block = Path(f"/sys/dev/block/{os.major(dev)}:{os.minor(dev)}").resolve()
        disk = block.parent if (block / "partition").exists() else block
        if disk.name.startswith("nvme"):
            return "nvme"
        rotational = (disk / "queue" / "rotational").read_text().strip()
        return "hdd" if rotational == "1" else "sata"
    except (OSError, ValueError):
        return "sata"


def measure_disk(directory: Path, file_bytes: int, random_reads: int = 2000) -> DiskResult:
    """Write a temporary file of `file_bytes` under `directory`, then time one sequential pass
    in 1 MiB reads and `random_reads` 4 KiB reads at random aligned offsets (one at a time)."""
    directory.mkdir(parents=True, exist_ok=True)
    block = np.random.default_rng(0).bytes(BLOCK_BYTES)  # incompressible
    blocks = max(1, file_bytes // BLOCK_BYTES)
    with tempfile.NamedTemporaryFile(dir=directory, prefix="accelsim-calibrate-") as tmp:
        fd = tmp.fileno()
        for _ in range(blocks):
            os.write(fd, block)
        _drop_cache(fd)
        start_s = time.perf_counter()
        offset = 0
        while os.pread(fd, BLOCK_BYTES, offset):
            offset += BLOCK_BYTES
        read_s = time.perf_counter() - start_s
        _drop_cache(fd)
        rng = random.Random(0)
        pages = blocks * BLOCK_BYTES // RANDOM_BYTES
        offsets = [rng.randrange(pages) * RANDOM_BYTES for _ in range(random_reads)]
        start_s = time.perf_counter()
        for off in offsets:
            os.pread(fd, RANDOM_BYTES, off)
        random_s = time.perf_counter() - start_s
    bandwidth = blocks * BLOCK_BYTES / read_s
    iops = random_reads / random_s
    kind = disk_kind(directory)
    if kind == "hdd" and iops > HDD_MAX_IOPS:  # a virtual disk that says it rotates
        kind = "sata"
    return DiskResult(path=str(directory), read_bandwidth_bytes_per_s=bandwidth,
                      random_read_4k_iops=iops, request_latency_s=random_s / random_reads,
                      kind=kind, cached=bandwidth > CACHED_ABOVE_BYTES_PER_S)


def measure_jpeg_decode(images: int) -> tuple[float | None, str]:
    """(least decode time of one ~500 x 375 JPEG with Pillow over `images` decodes, s; what
    was decoded), or (None, why) where Pillow is not installed."""
    try:
        from PIL import Image
    except ImportError:
        return None, "Pillow is not installed: JPEG decode not measured (pip install pillow)"
    rng = np.random.default_rng(0)
    # NB: smooth noise compresses like a photograph better than white noise does.
    small = rng.integers(0, 256, size=(JPEG_SIDE_PX * 3 // 4 // 8, JPEG_SIDE_PX // 8, 3),
                         dtype=np.uint8)
    pixels = np.kron(small, np.ones((8, 8, 1), dtype=np.uint8))
    buf = io.BytesIO()
    Image.fromarray(pixels).save(buf, format="JPEG", quality=90)
    data = buf.getvalue()
    best_s = float("inf")
    for _ in range(max(1, images)):
        start_s = time.perf_counter()
        with Image.open(io.BytesIO(data)) as img:
            img.load()
        best_s = min(best_s, time.perf_counter() - start_s)
    side = f"{pixels.shape[1]} x {pixels.shape[0]}"
    return best_s, f"Pillow {Image.__version__}, a {side} px JPEG of {len(data)} B, quality 90"
