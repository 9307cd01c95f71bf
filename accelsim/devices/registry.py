"""Device classes: one record per class, registered once from the class's own folder.

    from accelsim.devices.registry import DeviceClass, register
    register(DeviceClass(name="gpu", model=gpu_costs, peaks=peaks, schema=SCHEMA,
                         default_stack="pytorch-eager", dvfs=True))
    get("tpu").peaks(load_profile("tpu-v3"), "bf16")   # (matrix, vector) peak FLOP/s
    peaks(profile, "int8")                             # the same, by the profile's class

A record says everything the shared core needs to know about its class, so that nothing above
it branches on a class name: the cost model (`accelsim.devices.core` gives its contract), the
peak rates of its units (read alike by the invariants, the roofline and `explore.compare`), the
profile keys it may and must have (filled into the profile schema's table of classes,
`device_schema.register_class_schema`), its default software stack (into the stack loader's,
`software.register_stack_class`), and the few class-specific steps of `estimate` as fields.
The built-in classes register when `accelsim.devices` is imported (its `__init__` imports
their folders); a plug-in class registers the same way from its own module.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import numpy as np
import pandas as pd

from accelsim.devices.core import ClassModel
from accelsim.errors import AccelsimError
from accelsim.profiles.device_schema import ClassSchema, register_class_schema
from accelsim.profiles.software import SoftwareStack, register_stack_class
from accelsim.profiles.stack_choice import for_class
from accelsim.workload.columns import Columns

PeakFn = Callable[[Any, str], tuple[float, float]]
# (profile, layers, precision, matmul rows, matrix peak per row) -> the matrix peak per row
RowPeakFn = Callable[[Any, pd.DataFrame, str, np.ndarray, np.ndarray], np.ndarray]


def profile_power_limits(profile: Any) -> tuple[float, float]:
    """(TDP, static power) of a device profile, W; the TDP infinite where the profile says it
    does not limit the clock (`power.limits_clock = false`: an unknown limit)."""
    from accelsim.devices.energy import static_power_w

    if getattr(profile.power, "limits_clock", None) is False:
        return float("inf"), static_power_w(profile)
    return profile.power.tdp_w, static_power_w(profile)


def profile_capacity_bytes(profile: Any) -> float | None:
    """Device memory of a profile for weights and activations, bytes (None: not published)."""
    mem = profile.offchip_memory
    return None if mem is None else mem.capacity_bytes


def profile_has_offchip_memory(profile: Any) -> bool:
    """Whether operands live in device DRAM (False: an NPU streaming from its host)."""
    return profile.offchip_memory is not None


@dataclass(frozen=True)
class DeviceClass:
    """One device class. `name`: the profile's `class` value ("tpu" for the systolic model);
    `model`: its cost model; `peaks(profile, precision)`: (matrix-path, vector-path) peak
    FLOP/s (OP/s for int8); `schema`: its profile-schema rules (None: it has no profile files,
    the null device); `default_stack`: the software stack it runs when none is asked for (a
    built-in stack's name or a stack file).

    Class-specific steps of `estimate`: `takes_batch` (the model is given the batch size: an
    FPGA overlay fetches weights once per run of images); `host_fallback` (a device that hands
    the ops it cannot run to a host CPU: the stand-in host profile's name, used where the
    system gives none; the model is then given `host` and `host_model`, the host's class model);
    `dvfs` (the clock drops under the power cap, `accelsim.devices.dvfs`); `step_overhead` (the
    stack's per-step host time is added); `power_limits`, `capacity_bytes`,
    `has_offchip_memory` (read off the profile); `row_matrix_peaks` (a per-row matrix peak
    the invariants hold rows to, where some rows ran on other units: a GPU's tf32 rows);
    `notes(profile, work, gemms, stack, precision)` (lines the estimate adds to its notes);
    `matrix_precision(profile, precision)` (the format its matrix units compute a request in,
    None: as asked); `reads_arrays` (the model and its notes read the work and GEMM tables as
    read-only arrays, `accelsim.workload.columns.Columns`, as the built-in classes do; False,
    the default: they are given DataFrames, as a class written against pandas expects)."""

    name: str
    model: ClassModel
    peaks: PeakFn
    schema: ClassSchema | None
    default_stack: str
    takes_batch: bool = False
    host_fallback: str | None = None
    dvfs: bool = False
    step_overhead: bool = True
    power_limits: Callable[[Any], tuple[float, float]] = profile_power_limits
    capacity_bytes: Callable[[Any], float | None] = profile_capacity_bytes
    has_offchip_memory: Callable[[Any], bool] = profile_has_offchip_memory
    row_matrix_peaks: RowPeakFn | None = None
    notes: Callable[[Any, pd.DataFrame, pd.DataFrame, SoftwareStack, str], list[str]] | None = None
    matrix_precision: Callable[[Any, str], str] | None = None
    reads_arrays: bool = False

    def host_for(self, host: Any = None) -> Any:
        """The host CPU profile that runs what the device cannot: `host` (the system's), else
        the stand-in; None for a class without host fallback."""
        if self.host_fallback is None:
            return None
        return host if host is not None else _stand_in_host(self.host_fallback)

    def cost(self, profile: Any, work: Any, gemms: Any, precision: str,
             stack: SoftwareStack, batch: int | None = None, host: Any = None) -> Any:
        """The class model's cost rows under `stack` (resolved for this class), given what
        this class takes beside the common inputs (the batch; the host CPU, its class model
        and the stack as it runs there)."""
        extra: dict[str, Any] = {}
        if self.takes_batch and batch is not None:
            extra["batch"] = batch
        if self.host_fallback is not None:
            extra["host"] = self.host_for(host)
            extra["host_model"] = get(extra["host"].device_class).run
            extra["host_stack"] = for_class(stack, extra["host"].device_class)[0]
        return self.run(profile, work, gemms, precision, stack, **extra)

    def run(self, profile: Any, work: Any, gemms: Any, precision: str, stack: Any,
            **extra: Any) -> Any:
        """The class model on `work` and `gemms` given in either table form (each converted
        to the one the model reads, `tables`)."""
        return self.model(profile, *self.tables(work, gemms), precision, stack, **extra)

    def tables(self, *tables: Any) -> tuple[Any, ...]:
        """`tables` in the form this class's model reads (`reads_arrays`)."""
        if self.reads_arrays:
            return tables
        return tuple(t.to_frame() if isinstance(t, Columns) else t for t in tables)


@lru_cache(maxsize=8)
def _stand_in_host(name: str) -> Any:
    """A built-in host CPU profile, loaded once."""
    from accelsim.profiles.devices import load_profile

    return load_profile(name)


CLASSES: dict[str, DeviceClass] = {}


def register(record: DeviceClass) -> DeviceClass:
    """Add a device class (ValueError if its name is taken); returns it."""
    if record.name in CLASSES:
        raise ValueError(f"device class '{record.name}' is already registered")
    CLASSES[record.name] = record
    if record.schema is not None:
        register_class_schema(record.name, record.schema)
    register_stack_class(record.name, record.default_stack)
    return record


def unregister(name: str) -> None:
    """Remove a device class registered by `register` (a test's toy class)."""
    CLASSES.pop(name, None)
    register_class_schema(name, None)
    register_stack_class(name, None)


def get(name: str) -> DeviceClass:
    """The record of a device class; AccelsimError for a class nobody registered."""
    record = CLASSES.get(name)
    if record is None:
        raise AccelsimError(f"no cost model for device class '{name}'")
    return record


def names() -> list[str]:
    """The registered device classes, in registration order."""
    return list(CLASSES)


def peaks(profile: Any, precision: str) -> tuple[float, float]:
    """(matrix-path, vector-path) peak FLOP/s (OP/s for int8) of a device at `precision`, by
    its class's `peaks`: the profile's published peaks, or where it publishes none the rate
    its class model derives from published counts (an NB there)."""
    return get(profile.device_class).peaks(profile, precision)


def unbounded_peaks(profile: Any, precision: str) -> tuple[float, float]:
    """No peak: a device whose costs are fixed by construction (the null device)."""
    return math.inf, math.inf
