"""What one training simulation runs: a scenario on a system, with overrides, validated.

    cfg = TrainConfig(resolve_workload("resnet50-train"), load_system("dgx-a100"),
                      devices=4, dataset="imagenet-records", steps=100, seed=1)
    plan = resolve_config(cfg)   # loads the parts, checks every field; AccelsimError if bad

`TrainConfig` holds what the user chose (None = take the scenario's or the system's default);
`resolve_config` fills the defaults in, loads the named parts and runs one cross-field
validation (the Ciw pattern), returning a `TrainPlan` the SimPy model reads. Both are frozen
and picklable, so sweeps can ship them to worker processes.

Data parallelism: `allreduce` is ring, tree, nvls (switches that reduce in-network) or auto;
overlapped, gradients are all-reduced in buckets of `bucket_mb` MiB as backward makes them
(PyTorch DDP), else in one message after backward; `accumulate` micro-steps share one
all-reduce and one optimizer step (each simulated step is a micro-step).

Device spread: `device_spread` is the relative standard deviation of step time between devices
of one class; synchronised steps wait for the slowest (`accelsim.sim.straggler`). None: the
class's fitted value (0 where none is fitted).

Multi-node: `nodes` copies of the system, joined by its NICs (`links.network` x `nic_count`
rails), all-reduce hierarchically (`accelsim.interconnect.multinode`); `devices` is per node.

Per-accelerator knobs: `io_threads` and `prep_workers` are per accelerator, as a PyTorch
DataLoader's `num_workers` is per rank and DLIO's `read_threads` per accelerator; they share
the host's storage and cores.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from accelsim.errors import AccelsimError
from accelsim.interconnect.buckets import DEFAULT_BUCKET_MIB
from accelsim.interconnect.collectives import ALGORITHMS
from accelsim.interconnect.nccl import AUTO, check_algorithm, proxy_cores_per_rank
from accelsim.profiles.datasets import Dataset, load_dataset
from accelsim.profiles.hardware import host_clock_hz
from accelsim.profiles.software import DEFAULT, SoftwareStack
from accelsim.profiles.stack_choice import (
    check_software,
    is_stack_file,
    resolve_software,
    software_choices,
)
from accelsim.profiles.storage import StorageMedium, load_storage
from accelsim.profiles.systems import GDS_STORAGE_KINDS, System
from accelsim.sim.cluster.spec import ClusterSpec, cluster_spec
from accelsim.sim.decode import DecodePlan, decode_plan
from accelsim.sim.straggler import SPREAD_RANGE, class_spread, is_spread
from accelsim.workload.scenario import Scenario

EVENTS_PER_DEVICE_STEP = 8  # records per step and accelerator besides reads and preps


@dataclass(frozen=True)
class TrainConfig:
    """A training run as the user asked for it. None means: the scenario's or system's value.

    Lengths: give `steps` (global steps, may span epochs) or `epochs` (whole epochs, each
    simulated sample by sample-batch, not extrapolated); neither means one epoch."""

    scenario: Scenario
    system: System
    devices: int | None = None
    dataset: str | Dataset | None = None
    storage: str | StorageMedium | None = None
    storage_count: int | None = None
    io_threads: int | None = None
    prep_workers: int | None = None
    prefetch_batches: int | None = None
    gpudirect: bool | None = None
    decode: str | None = None  # cpu, gpu or hw (None: gpu with GPUDirect, else cpu)
    pinned_memory: bool = True
    allreduce: str = "ring"
    overlap_allreduce: bool = True
    bucket_mb: float = DEFAULT_BUCKET_MIB  # MiB, as DDP's bucket_cap_mb
    accumulate: int = 1  # micro-steps per all-reduce and optimizer step
    nodes: int = 1  # copies of the system joined by its NICs (devices is per node)
    # relative std of step time between devices (`accelsim.sim.straggler`); None: the class's
    # fitted value
    device_spread: float | None = None
    jobs: int = 1  # training jobs of this one sharing the node, its storage and dataset
    coordinated: bool = False  # the jobs share one read and one decode of each sample
    # every node simulated (`accelsim.sim.cluster`); any of the four after it implies it
    every_node: bool = False
    fabric: str | None = None  # hw_profiles/fabrics/ name or .toml (None: non-blocking)
    placement: str = "packed"  # ranks in topology order, or scattered at random
    slow_node: float = 1.0  # one node's devices this many times slower
    link_failures: int = 0  # nodes that each lost one NIC link
    steps: int | None = None
    epochs: int | None = None
    seed: int = 0
    software: str = DEFAULT
    tf32: bool | None = None  # fp32 GEMMs as TF32 (None: the stack's default)
    device_profile: Any = None  # a loaded device profile (e.g. NullProfile) replacing the system's
    max_events: int = 2_000_000  # refuse runs estimated to schedule more events than this


@dataclass(frozen=True)
class TrainPlan:
    """A validated `TrainConfig` with every default filled in and every part loaded."""

    scenario: Scenario
    system: System  # storage, storage count and device count already overridden
    dataset: Dataset
    device_profile: Any
    devices: int
    batch_size: int  # per accelerator
    io_threads: int  # per accelerator
    prep_workers: int  # per accelerator
    prefetch_batches: int
    gpudirect: bool
    pinned_memory: bool
    allreduce: str
    overlap_allreduce: bool
    bucket_mb: float
    accumulate: int
    steps: int | None
    epochs: int
    seed: int
    software: str  # the knob's value, as asked (the record shows it)
    stack: SoftwareStack  # `software` resolved for the device class on the system's host
    max_events: int = 2_000_000
    nodes: int = 1  # devices is per node; one node is simulated, the others alike
    decode: DecodePlan = DecodePlan("cpu")  # where samples are decoded
    device_spread: float = 0.0  # relative std of step time between devices
    jobs: int = 1  # jobs like this one on the node (`devices` each), one simulated
    coordinated: bool = False  # one read and one decode of each sample serve every job
    cluster: ClusterSpec | None = None  # every node simulated (None: one, the others alike)

    @property
    def share(self) -> float:
        """This job's share of the node's storage, page-cache bandwidth and network: 1 / jobs,
        or all of it when the jobs' loading is coordinated (one stream feeds them all)."""
        return 1.0 if self.coordinated else 1.0 / self.jobs

    @property
    def global_batch(self) -> int:
        return self.batch_size * self.devices * self.nodes

    @property
    def steps_per_epoch(self) -> int:
        return -(-self.dataset.sample_count // self.global_batch)

    @property
    def total_steps(self) -> int:
        return self.steps if self.steps is not None else self.epochs * self.steps_per_epoch

    @property
    def estimated_events(self) -> int:
        """Records the run will make, estimated before it runs: per step and accelerator one
        read and one preparation per reader thread, and about 8 others (copies, 3 compute
        phases, loader residence, stalls), plus one all-reduce per step. NB: within a few %
        of the real count (the stalls vary)."""
        per_step = self.devices * (2 * self.io_threads + EVENTS_PER_DEVICE_STEP) + 1
        return self.total_steps * per_step

    @property
    def framework_cores(self) -> int:
        """Host cores the framework's own threads keep busy: the stack's per accelerator
        (`host.framework_cores_per_device`), and across nodes NCCL's network proxy thread's
        (`accelsim.interconnect.nccl.proxy_cores_per_rank`)."""
        device_class = self.device_profile.device_class
        per_device = self.stack.figure("host.framework_cores_per_device", device_class)
        return (per_device + (proxy_cores_per_rank() if self.nodes > 1 else 0)) * self.devices

    @property
    def prep_cores(self) -> int:
        """Host cores left for this job's input preparation after every job's framework
        threads: its 1 / jobs share, or all of them for the coordinated loader."""
        left = self.system.host.cores - self.framework_cores * self.jobs
        return left if self.coordinated else left // self.jobs


def _bad(field: str, value: object, problem: str) -> AccelsimError:
    return AccelsimError(f"training config: '{field}' = {value!r}: {problem}")


def _whole(field: str, value: object, low: int) -> int:
    if not isinstance(value, int) or isinstance(value, bool):
        raise _bad(field, value, "expected a whole number")
    if value < low:
        raise _bad(field, value, f"must be at least {low}")
    return value


def _flag(field: str, value: object) -> bool:
    if not isinstance(value, bool):
        raise _bad(field, value, "expected true or false")
    return value


def _load_profile(system: System, given: Any) -> Any:
    if given is not None:
        return given
    from accelsim.profiles.hardware import system_device

    return system_device(system)


def power_bounds_w(device: Any) -> tuple[float, float]:
    """(TDP, static power) of `device`, W; (inf, 0) for a profile without power figures."""
    from accelsim.devices.estimate import power_limits_w

    try:
        return power_limits_w(device)
    except (AttributeError, ImportError):
        return float("inf"), 0.0


def _decode(place: str | None, gpudirect: bool, dataset: Dataset, device: Any) -> DecodePlan:
    """Where the run decodes (`accelsim.sim.decode`), with the device's draw while it does."""
    tdp_w, static_w = power_bounds_w(device)
    power_w = tdp_w - static_w if tdp_w < float("inf") else None
    return decode_plan(place, gpudirect, dataset, device, power_w)


def resolve_config(cfg: TrainConfig) -> TrainPlan:
    """Fill the defaults in, load the parts and validate all fields together."""
    sc, sysm, pipe = cfg.scenario, cfg.system, cfg.scenario.pipeline
    if sc.mode != "train":
        raise _bad("scenario.mode", sc.mode, f"scenario '{sc.name}' is not a training scenario")
    jobs = _whole("jobs", cfg.jobs, 1)
    coordinated = _flag("coordinated", cfg.coordinated)
    if coordinated and jobs == 1:
        raise _bad("coordinated", True, "shares loading between jobs: give jobs >= 2")
    devices = _whole("devices", max(sysm.device_count // jobs, 1) if cfg.devices is None
                     else cfg.devices, 1)
    if devices * jobs > sysm.device_count:
        raise _bad("devices", devices, f"system '{sysm.name}' has only {sysm.device_count} "
                   f"accelerators" + (f" for {jobs} jobs of {devices}" if jobs > 1 else ""))
    io_threads = _whole("io_threads", pipe.io_threads if cfg.io_threads is None
                        else cfg.io_threads, 1)
    prep_workers = _whole("prep_workers", pipe.prep_workers if cfg.prep_workers is None
                          else cfg.prep_workers, 1)
    prefetch = _whole("prefetch_batches", pipe.prefetch_batches if cfg.prefetch_batches is None
                      else cfg.prefetch_batches, 0)
    gpudirect = _flag("gpudirect", pipe.gpudirect if cfg.gpudirect is None else cfg.gpudirect)
    pinned = _flag("pinned_memory", cfg.pinned_memory)
    overlap = _flag("overlap_allreduce", cfg.overlap_allreduce)
    if cfg.allreduce not in (*ALGORITHMS, AUTO):
        raise _bad("allreduce", cfg.allreduce, f"choose one of {', '.join((*ALGORITHMS, AUTO))}")
    nodes = _whole("nodes", cfg.nodes, 1)
    if nodes > 1:
        if sysm.network is None or not sysm.nic_count:
            raise _bad("nodes", nodes, f"system '{sysm.name}' has no NICs (links.network and "
                       "links.nic_count) to join several nodes")
        if cfg.allreduce == "nvls":
            raise _bad("allreduce", "nvls", "reduces inside one NVLink switch domain only; "
                       "across nodes choose ring, tree or auto")
    if sysm.device_to_device is not None and devices > 1:
        try:
            check_algorithm("allreduce", cfg.allreduce, sysm.device_to_device)
        except AccelsimError as err:
            raise _bad("allreduce", cfg.allreduce, str(err)) from None
    bucket_mb = cfg.bucket_mb
    if (isinstance(bucket_mb, bool) or not isinstance(bucket_mb, int | float)
            or not 0 < bucket_mb < float("inf")):
        raise _bad("bucket_mb", bucket_mb, "expected a bucket size in MiB, > 0")
    accumulate = _whole("accumulate", cfg.accumulate, 1)
    spread = cfg.device_spread
    if spread is not None and not is_spread(spread):
        raise _bad("device_spread", spread, SPREAD_RANGE)
    if is_stack_file(cfg.software):
        check_software(cfg.software)  # ConfigError naming the stack file, field and value
    elif cfg.software not in software_choices():
        raise _bad("software", cfg.software, f"choose one of {', '.join(software_choices())}")
    if cfg.steps is not None and cfg.epochs is not None:
        raise _bad("steps", cfg.steps, "give steps or epochs, not both")
    steps = None if cfg.steps is None else _whole("steps", cfg.steps, 1)
    epochs = 1 if cfg.epochs is None else _whole("epochs", cfg.epochs, 1)
    seed = _whole("seed", cfg.seed, 0)

    storage = sysm.storage
    if cfg.storage is not None:
        storage = cfg.storage if isinstance(cfg.storage, StorageMedium) else load_storage(
            cfg.storage)
    storage_count = _whole("storage_count", sysm.storage_count if cfg.storage_count is None
                           else cfg.storage_count, 1)
    if storage.over_network and sysm.network is None:
        raise _bad("storage", storage.name, f"is reached over the network and system "
                   f"'{sysm.name}' has none")
    ds_spec = cfg.dataset if cfg.dataset is not None else sc.dataset
    if ds_spec is None:
        dataset = sysm.default_dataset
    else:
        dataset = ds_spec if isinstance(ds_spec, Dataset) else load_dataset(ds_spec)
    if gpudirect:
        if not sysm.gpudirect_storage:
            raise _bad("gpudirect", True, f"system '{sysm.name}' does not support GPUDirect "
                       "Storage")
        if storage.kind not in GDS_STORAGE_KINDS:
            raise _bad("gpudirect", True, f"needs {' or '.join(GDS_STORAGE_KINDS)} storage, "
                       f"not {storage.kind} ('{storage.name}')")
    system = replace(sysm, storage=storage, storage_count=storage_count, device_count=devices)
    profile = _load_profile(sysm, cfg.device_profile)
    if spread is None:
        spread = class_spread(profile)[0]
    plan = TrainPlan(
        scenario=sc, system=system, dataset=dataset,
        device_profile=profile, devices=devices,
        batch_size=sc.batch_size, io_threads=io_threads, prep_workers=prep_workers,
        prefetch_batches=prefetch, gpudirect=gpudirect, pinned_memory=pinned,
        allreduce=cfg.allreduce, overlap_allreduce=overlap, bucket_mb=float(bucket_mb),
        accumulate=accumulate, steps=steps, epochs=epochs,
        seed=seed, software=cfg.software,
        stack=resolve_software(cfg.software, profile.device_class,
                               host_clock_hz(system))[0].with_tf32(cfg.tf32),
        max_events=_whole("max_events", cfg.max_events, 1),
        nodes=nodes, decode=_decode(cfg.decode, gpudirect, dataset, profile),
        device_spread=float(spread) + 0.0,  # + 0.0: -0.0 reads as 0
        jobs=jobs, coordinated=coordinated, cluster=cluster_spec(cfg, nodes))
    if not plan.decode.on_device and plan.prep_cores < 1:
        raise _bad("devices", devices, f"host has {sysm.host.cores} cores and the framework "
                   f"takes {plan.framework_cores // devices} per accelerator: none left to "
                   "prepare input")
    if plan.estimated_events > plan.max_events:
        raise _bad("steps", plan.total_steps, f"this run would schedule about "
                   f"{plan.estimated_events:,} events, over the limit of {plan.max_events:,}: "
                   "simulate fewer steps, or raise max_events (--max-events) to run it")
    return plan
