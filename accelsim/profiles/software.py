"""Software stacks as data: `hw_profiles/software/<name>.toml`, one per framework / runtime.

    stack, note = resolve_software("tensorrt", "gpu", host_single_thread_hz=3.8e9)
    stack.host_per_kernel_s("gpu")   # framework host time per kernel on this host, s

A stack says what a framework costs beside the kernels themselves: host time per kernel (by
device class) and per step (and per request, for a server), what it fuses into its producer
kernel, the NCHW/NHWC layout conversions it inserts around tensor-core convolutions, whether
autocast casts the fp32 master weights every forward, and modifiers of the class model's kernel
efficiencies. Every number has a `[sources]` entry (a fitted one names its fit set).

Schema (units in the keys; `accelsim.schema` checks types, bounds, unknown keys and sources):

    description            str   one line
    classes                [str] device classes it runs on (registered: gpu cpu tpu fpga npu null)
    default_for            [str] optional: classes that run it when no stack is asked for (as
                           each class's registration says)
    aliases                [str] optional: older names that select it ("eager", "compiled")
    [host] per_step_us     >= 0  host time per step / batch, serial with the device
           per_request_us  >= 0  optional: a server's time per request (triton)
           per_collective_us  >= 0  optional: time each tensor-parallel collective call adds
                           beside its transfer (its launch, the library's base latency, a sync
                           the stack makes), serial with the device (absent: none)
           payload_gb_s    > 0   optional: a server's request payload rate: the inputs of each
                           request (the model's input tensors) are serialised, sent and
                           received at this rate, on the host, serial with the device
           reference_single_thread_ghz  > 0  the host single-thread clock (Ice Lake-equivalent,
                           `single_thread_equiv_clock` of CPU profiles) the host times hold at
           framework_cores_per_device  int >= 0  optional: host cores its own process keeps
                           busy per accelerator (training loop, launches)
    [host.per_kernel_us]   >= 0  per class (gpu, cpu, ...): host time to issue one kernel / op
    [graph] fuses          [str] optional: "elementwise", "normalization" rows fused into the
                           producer kernel (absent: nothing fused)
           weight_casts    bool  autocast: one cast kernel per weighted matmul per forward
           layout_conversions_per_conv  >= 0  transposes per tensor-core conv (each reads and
                           writes the conv's input activation)
           fp32_on_tf32    [str] optional: "conv", "matmul": op groups whose fp32 GEMMs the
                           stack runs as tf32 on tensor cores where the device has them (PyTorch's
                           allow_tf32, TensorFlow's TF32 execution, TensorRT's kTF32 defaults)
           removes_padding  bool  optional: a transformer batch of varied lengths runs packed
                           (each sequence's own tokens; absent/false: padded to its longest)
    [efficiency] tensor_core, cuda_core, dram_bandwidth   (0, 2]  modifiers multiplying the
                           class model's factors (the product is capped at 1)
    efficiency_classes     [str] optional, sourced: the classes the modifiers hold on (absent:
                           every class of the stack); other classes run it at modifiers 1 (a
                           modifier fitted on GPU rows says nothing of the stack on a CPU)
    [cpu_efficiency]       (0, 10] optional, CPU only (at most 1 for the FLOP-peak kernels:
                           `CPU_PEAK_KERNELS`): `<kernel>_<precision>` (kernel: gemm, conv,
                           attention, vector, stream, pack, gemv, quantize, or a non-matmul
                           op kind such as relu, gelu) fractions of the CPU profile's peak
                           (fp32 vector peak; DRAM bandwidth for `stream`, streaming op kinds,
                           `pack` (the matmuls' BLAS packing and weight-cast passes),
                           `gemv` (a matmul's operand stream from DRAM) and `quantize` (an
                           integer precision only: the stack quantises both fp32 operands of
                           each GEMM per call and multiplies in its own loop, no BLAS)) that
                           replace the class factors for that kernel and precision (a measured
                           stack: `accelsim calibrate`)
    [cpu_tiling] micro_tile_m, micro_tile_n   optional, CPU only: the register micro-tile of
                           the stack's GEMM kernels (rows along M, columns along N), replacing
                           the class's `assumed.micro_tile` (accelsim.devices.cpu.blas)
    [llm]                  optional, for decoders (`accelsim.llm`): kv_block_tokens (int >= 1,
                           tokens per paged KV-cache block), max_running_sequences (int >= 1,
                           a server's default largest running batch), memory_reserve_fraction
                           [0, 1] (device memory left to context, allocator, buffers),
                           sequence_parallel (bool, training: norms' activations split over TP),
                           chunked_prefill_tokens (int >= 0: the tokens a serving step takes
                           with prompts prefilled in chunks beside the decodes, its default
                           when a run sets none; 0: whole prompts in prefill-only steps)
    (framework_cores_per_device and [llm] absent: the device class's default stack's figure)
    [allocator] fresh_page_us > 0, page_bytes int, mmap_threshold_kib int   optional, CPU
                           only: the C allocator under the stack's kernels (a measured stack):
                           per-call temporaries at or above the mmap threshold are fresh
                           pages, each faulted in at `fresh_page_us` (accelsim.devices.cpu.alloc)
    [cpu_passes.<pass>] working_set_bytes [> 0, increasing], ns_per_element [> 0]   optional,
                           CPU only: measured time per element of numpy's per-call element
                           passes (cast_fp16, cast_bf16, quantize_int8, gemv_fp32) by working
                           set, interpolated log-log (accelsim.devices.cpu.passes); a pass with
                           a table is priced by it, not by a `[cpu_efficiency]` figure

`--software` takes a built-in name or a path to a stack file (`*.toml`).

Host times scale with the host CPU: time x reference clock / the host's single-thread clock.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

from accelsim.datafiles import builtin_files
from accelsim.errors import ConfigError
from accelsim.profiles.pass_tables import split_pass_tables
from accelsim.profiles.software_schema import (  # noqa: F401 - re-exported
    _STACK_CLASSES,
    CPU_KERNELS,
    CPU_OP_KEYS,
    CPU_PEAK_KERNELS,
    CPU_PRECISIONS,
    CPU_VECTOR_OPS,
    DEFAULT,
    FUSION_GROUP_OPS,
    FUSION_GROUPS,
    LEGACY_NAMES,
    MAX_CPU_EFFICIENCY,
    MAX_MICRO_TILE,
    MAX_MODIFIER,
    MAX_PEAK_EFFICIENCY,
    TF32_GROUPS,
    US,
    class_default_name,
    register_stack_class,
    stack_classes,
    stack_fields,
)
from accelsim.schema import parse_profile
from accelsim.tomlfiles import find_profile, read_toml


@dataclass(frozen=True)
class SoftwareStack:
    """One stack, in SI units, on one host (`host_single_thread_hz`; None: its reference)."""

    name: str
    description: str
    classes: tuple[str, ...]
    default_for: tuple[str, ...]
    aliases: tuple[str, ...]
    per_step_s: float
    per_request_s: float
    reference_single_thread_hz: float
    per_kernel_s: dict[str, float]
    fuses: tuple[str, ...]
    weight_casts: bool
    layout_conversions_per_conv: float
    efficiency: dict[str, float]
    host_single_thread_hz: float | None = None
    sources: dict[str, str] = field(default_factory=dict, compare=False, repr=False)
    cpu_efficiency: dict[str, float] = field(default_factory=dict)
    cpu_micro_tile: tuple[int, int] | None = None
    fp32_on_tf32: tuple[str, ...] = ()
    removes_padding: bool = False  # `graph.removes_padding`: varied lengths run packed
    tf32_asked: bool | None = None  # `with_tf32`: the run's choice (None: the stack's default)
    payload_bytes_per_s: float | None = None  # a server's request payload rate (None: none)
    efficiency_classes: tuple[str, ...] | None = None  # None: every class of the stack
    source: str = field(default="", compare=False, repr=False)  # the file it was loaded from
    framework_cores_per_device: int | None = None  # None: the stack gives none
    kv_block_tokens: int | None = None  # None (and below): the stack gives none
    max_running_sequences: int | None = None
    memory_reserve_fraction: float | None = None
    sequence_parallel: bool = False  # training with TP: Megatron's sequence parallelism
    chunked_prefill_tokens: int | None = None  # serving's default step budget (0: off)
    per_collective_s: float = 0.0  # `host.per_collective_us`: each TP collective call, s
    # (fresh_page_s, page_bytes, mmap_threshold_bytes): `[allocator]`; None: no fault term
    allocator: tuple[float, int, int] | None = None
    # `[cpu_passes]`: measured element-pass tables by pass name (`pass_tables.PassTable`)
    cpu_passes: dict[str, Any] = field(default_factory=dict)

    def figure(self, path: str, device_class: str) -> Any:
        """An optional figure ("host.framework_cores_per_device", "llm.<key>"): the stack's,
        else the `device_class` default stack's; ConfigError naming it where neither has one."""
        key = path.split(".")[1]
        if getattr(self, key) is not None:
            return getattr(self, key)
        from accelsim.profiles.stack_choice import default_stack  # (it resolves stacks)

        fallback = default_stack(device_class)
        if getattr(fallback, key) is None:
            raise ConfigError(self.source or self.name, path, None, f"neither this stack nor "
                              f"'{fallback.name}' (the {device_class} default, "
                              f"{fallback.source or 'built in'}) gives it")
        return getattr(fallback, key)

    @property
    def host_scale(self) -> float:
        """Host time on this host / host time on the reference host (1 with no host given).
        NB: framework host time is single-threaded Python/C++ dispatch, taken to scale
        inversely with single-thread speed."""
        if self.host_single_thread_hz is None:
            return 1.0
        return self.reference_single_thread_hz / self.host_single_thread_hz

    def host_per_kernel_s(self, device_class: str) -> float:
        """Host time to issue one kernel / op on `device_class`, on this host, s."""
        if device_class not in self.per_kernel_s:
            raise ConfigError(self.name, f"host.per_kernel_us.{device_class}", None,
                              f"stack '{self.name}' gives no host time per kernel on a "
                              f"{device_class}")
        return self.per_kernel_s[device_class] * self.host_scale

    @property
    def host_per_step_s(self) -> float:
        """Host time per step on this host, s."""
        return self.per_step_s * self.host_scale

    @property
    def host_per_request_s(self) -> float:
        """A server's host time per request on this host, s (0: not a server)."""
        return self.per_request_s * self.host_scale

    def host_payload_s(self, n_bytes: float) -> float:
        """A server's host time to take in `n_bytes` of request inputs on this host, s (0: not
        a server). NB: serialisation is host work, so it scales with the host like the rest."""
        if not self.payload_bytes_per_s:
            return 0.0
        return n_bytes / self.payload_bytes_per_s * self.host_scale

    def with_tf32(self, on: bool | None) -> SoftwareStack:
        """The stack with fp32 GEMMs run as TF32 on tensor cores (`on`: every matmul-like op
        group) or kept in fp32 (off: CUDA cores), as a run asks (the `tf32` knob; PyTorch's
        allow_tf32, TensorFlow's enable_tensor_float_32_execution, NVIDIA_TF32_OVERRIDE=0,
        TensorRT's kTF32 flag); None: as the stack's file says."""
        if on is None:
            return self
        return dataclasses.replace(self, fp32_on_tf32=TF32_GROUPS if on else (), tf32_asked=on)

    def on_host(self, host_single_thread_hz: float | None) -> SoftwareStack:
        """The same stack on a host of that single-thread clock (None: the reference)."""
        return dataclasses.replace(self, host_single_thread_hz=host_single_thread_hz)

    def modifier(self, factor: str, device_class: str) -> float:
        """Kernel-efficiency modifier ("tensor_core", "cuda_core", "dram_bandwidth") on
        `device_class`: 1 on a class outside `efficiency_classes`."""
        if self.efficiency_classes is not None and device_class not in self.efficiency_classes:
            return 1.0
        return self.efficiency[factor]

    def cpu_factor(self, kernel: str, precision: str) -> float | None:
        """The stack's own CPU efficiency of `kernel` (CPU_KERNELS) at `precision` (a fraction
        of the profile's peak), or None where it gives none (the class factor applies)."""
        return self.cpu_efficiency.get(f"{kernel}_{precision}")


def _from_values(name: str, v: dict[str, Any], sources: dict[str, str]) -> SoftwareStack:
    host, graph = v["host"], v["graph"]
    per_kernel = {c[:-2]: s for c, s in host["per_kernel_us"].items() if s is not None}
    return SoftwareStack(
        name=name, description=v["description"], classes=v["classes"],
        default_for=v["default_for"] or (), aliases=v["aliases"] or (),
        per_step_s=host["per_step_s"], per_request_s=host["per_request_s"] or 0.0,
        per_collective_s=host.get("per_collective_s") or 0.0,
        payload_bytes_per_s=host.get("payload_bytes_per_s"),
        reference_single_thread_hz=host["reference_single_thread_hz"],
        per_kernel_s=per_kernel, fuses=graph["fuses"] or (),
        weight_casts=graph["weight_casts"],
        layout_conversions_per_conv=graph["layout_conversions_per_conv"],
        fp32_on_tf32=graph.get("fp32_on_tf32") or (),
        removes_padding=bool(graph.get("removes_padding")),
        efficiency_classes=v.get("efficiency_classes"),
        efficiency=dict(v["efficiency"]), sources=sources,
        cpu_efficiency={k: x for k, x in (v.get("cpu_efficiency") or {}).items()
                        if x is not None},
        cpu_micro_tile=(None if not v.get("cpu_tiling") else
                        (v["cpu_tiling"]["micro_tile_m"], v["cpu_tiling"]["micro_tile_n"])),
        framework_cores_per_device=host.get("framework_cores_per_device"),
        **{k: (v.get("llm") or {}).get(k) for k in ("kv_block_tokens", "max_running_sequences",
                                                    "memory_reserve_fraction",
                                                    "chunked_prefill_tokens")},
        sequence_parallel=bool((v.get("llm") or {}).get("sequence_parallel")),
        allocator=(None if not v.get("allocator") else
                   (v["allocator"]["fresh_page_s"], v["allocator"]["page_bytes"],
                    v["allocator"]["mmap_threshold_kib"] * 1024)))


def load_stack(name_or_path: str | Path) -> SoftwareStack:
    """A built-in stack by name or a user TOML by path, validated (ConfigError naming the
    file, the field and the value)."""
    path = find_profile(name_or_path, "software/*.toml", "software stack")
    src = str(path)
    raw, passes, pass_sources = split_pass_tables(read_toml(path), src)
    values, sources = parse_profile(raw, stack_fields(), src)
    page = (values.get("allocator") or {}).get("page_bytes")
    if page is not None and page & (page - 1):
        raise ConfigError(src, "allocator.page_bytes", page, "must be a power of two (a page)")
    stack = dataclasses.replace(_from_values(path.stem, values, {**sources, **pass_sources}),
                                source=src, cpu_passes=passes)
    missing = [c for c in stack.classes if c in ("gpu", "cpu") and c not in stack.per_kernel_s]
    if missing:
        raise ConfigError(src, f"host.per_kernel_us.{missing[0]}", None,
                          f"a stack that runs on a {missing[0]} needs its host time per kernel")
    for key, value in sorted(stack.cpu_efficiency.items()):
        if value > MAX_PEAK_EFFICIENCY and key.rpartition("_")[0] in CPU_PEAK_KERNELS:
            raise ConfigError(src, f"cpu_efficiency.{key}", value, "a fraction of the CPU "
                              f"profile's FLOP peak cannot exceed {MAX_PEAK_EFFICIENCY:g} (the "
                              "peak is too low, e.g. derived from a base clock the cores boost "
                              "above: recalibrate, or raise the profile's clock)")
    stray = sorted(set(stack.default_for) - set(stack.classes))
    if stray:
        raise ConfigError(src, "default_for", list(stack.default_for),
                          f"'{stray[0]}' is not one of the stack's classes")
    return stack


@lru_cache(maxsize=1)
def builtin_stacks() -> dict[str, SoftwareStack]:
    """Every built-in stack by name (loaded once; frozen)."""
    stacks = {name: load_stack(path)
              for name, path in builtin_files("hw_profiles", "software/*.toml").items()}
    seen: dict[str, str] = {}
    for stack in stacks.values():
        for c in stack.default_for:  # the data agrees with the classes' registrations
            if _STACK_CLASSES.get(c, stack.name) != stack.name:
                raise ConfigError(stack.source, "default_for", c, f"class '{c}' registers "
                                  f"'{_STACK_CLASSES[c]}' as its default stack")
        for key in (*stack.aliases, *(f"default:{c}" for c in stack.default_for)):
            if key in seen or key in stacks:
                raise ConfigError(f"hw_profiles/software/{stack.name}.toml", "aliases", key,
                                  f"already claimed by stack '{seen.get(key, key)}'")
            seen[key] = stack.name
    return stacks


def stack_names() -> list[str]:
    """Names of the built-in stacks."""
    return sorted(builtin_stacks())
