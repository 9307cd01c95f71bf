"""The software-stack file's schema (`stack_fields`), its bounds and vocabularies, and the
registry of device classes with their default stacks; `accelsim.profiles.software` reads the
files against it (its docstring documents every field).
"""

from __future__ import annotations

from accelsim.physical import BANDWIDTH, DURATION, FREQUENCY, MAX_BATCH, MAX_INPUT, MAX_THREADS
from accelsim.profiles.device_schema import load_builtin_classes
from accelsim.schema import Field, count, flag, non_negative, positive, text, texts
from accelsim.workload.ops import ELEMENTWISE_KINDS, MATMUL_KINDS, OpKind

# The op kinds each `fuses` group of a stack names (the device models fuse them).
FUSION_GROUP_OPS = {
    "elementwise": frozenset(k.value for k in ELEMENTWISE_KINDS),
    "normalization": frozenset({OpKind.BATCHNORM.value, OpKind.LAYERNORM.value,
                                OpKind.RMSNORM.value, OpKind.SOFTMAX.value}),
}
FUSION_GROUPS = tuple(FUSION_GROUP_OPS)  # "elementwise", "normalization"
TF32_GROUPS = ("conv", "matmul")  # `graph.fp32_on_tf32`: convolutions, other matmul-like ops
LEGACY_NAMES = ("eager", "compiled")  # the software knob's values before stacks were data
DEFAULT = "default"  # the software knob's value that means "the device class's default stack"
US = 1e-6
MAX_MODIFIER = 2.0
# NB: a measured CPU efficiency of the DRAM bandwidth may pass 1 (a stream op whose operands
# stay in cache outruns the DRAM figure); one of the FLOP peak may not (`CPU_PEAK_KERNELS`).
MAX_CPU_EFFICIENCY = 10.0
# Non-matmul ops whose time a CPU spends on arithmetic (transcendentals, reductions) rather than
# on moving bytes: a stack's own figure for such an op kind is a vector efficiency (of the FLOP
# peak); for any other non-matmul op kind, a DRAM stream efficiency.
CPU_VECTOR_OPS = frozenset(k.value for k in (
    OpKind.GELU, OpKind.SIGMOID, OpKind.TANH, OpKind.SILU, OpKind.SOFTMAX, OpKind.LAYERNORM,
    OpKind.RMSNORM, OpKind.BATCHNORM, OpKind.INSTANCENORM, OpKind.ROPE))
# `[cpu_efficiency]` kernels that are fractions of the CPU's FLOP peak, so at most 1: a figure
# above it would have `simulate` run FLOPs faster than the peak (an invariant of every estimate)
CPU_PEAK_KERNELS = ("gemm", "conv", "attention", "vector", *sorted(CPU_VECTOR_OPS))
MAX_PEAK_EFFICIENCY = 1.0
MAX_MICRO_TILE = 64  # NB: register tiles are a few rows by a few SIMD vectors
CPU_KERNELS = ("gemm", "conv", "attention", "vector", "stream", "pack", "gemv", "quantize")
CPU_PRECISIONS = ("fp32", "tf32", "fp16", "bf16", "fp8", "int8")  # profile keys (hardware_key)
# A non-matmul op kind may carry its own CPU efficiency (`relu_fp32`), before its group's.
CPU_OP_KEYS = tuple(k.value for k in OpKind if k not in MATMUL_KINDS and k != OpKind.UNMAPPED)

_STACK_CLASSES: dict[str, str] = {}  # class -> default stack, filled by devices.registry


def register_stack_class(device_class: str, default_stack: str | None) -> None:
    """Make `device_class` a class stacks may name, running `default_stack` (a built-in stack's
    name or a stack file's path) when none is asked for; None forgets it (a toy class)."""
    if default_stack is None:
        _STACK_CLASSES.pop(device_class, None)
    else:
        _STACK_CLASSES[device_class] = default_stack


def class_default_name(device_class: str) -> str | None:
    """The stack `device_class` registered as its default (a name or a file's path), if any."""
    return _STACK_CLASSES.get(device_class) if device_class in stack_classes() else None


def stack_classes() -> tuple[str, ...]:
    """The device classes a stack may name, in registration order."""
    load_builtin_classes()
    return tuple(_STACK_CLASSES)


def stack_fields() -> tuple[Field, ...]:
    """The schema of a stack file, for the registered classes."""
    classes = stack_classes()
    per_kernel = tuple(non_negative(c, US, f"{c}_s", required=False, span=DURATION)
                       for c in classes)
    return (
        text("description"),
        texts("classes", classes),
        texts("default_for", classes, required=False),
        texts("aliases", LEGACY_NAMES, required=False, sourced=False),
        Field("host", dict, sub=(
            non_negative("per_step_us", US, "per_step_s", span=DURATION),
            non_negative("per_request_us", US, "per_request_s", required=False, span=DURATION),
            non_negative("per_collective_us", US, "per_collective_s", required=False,
                         span=DURATION),
            positive("payload_gb_s", 1e9, "payload_bytes_per_s", required=False,
                     span=BANDWIDTH),
            positive("reference_single_thread_ghz", 1e9, "reference_single_thread_hz",
                     span=FREQUENCY),
            Field("framework_cores_per_device", int, required=False, low=0.0, high=MAX_THREADS,
                  si_type=int),
            Field("per_kernel_us", dict, sub=per_kernel),
        )),
        Field("graph", dict, sub=(
            texts("fuses", FUSION_GROUPS, required=False, sourced=True),
            flag("weight_casts"),
            non_negative("layout_conversions_per_conv"),
            texts("fp32_on_tf32", TF32_GROUPS, required=False, sourced=True),
            flag("removes_padding", required=False),
        )),
        texts("efficiency_classes", classes, required=False, sourced=True),
        Field("efficiency", dict, sub=tuple(
            Field(k, float, low=0.0, low_open=True, high=MAX_MODIFIER)
            for k in ("tensor_core", "cuda_core", "dram_bandwidth"))),
        Field("cpu_efficiency", dict, required=False, sub=tuple(
            Field(f"{k}_{p}", float, required=False, low=0.0, low_open=True,
                  high=MAX_CPU_EFFICIENCY)
            for k in (*CPU_KERNELS, *CPU_OP_KEYS) for p in CPU_PRECISIONS)),
        Field("cpu_tiling", dict, required=False, sub=(
            count("micro_tile_m", high=MAX_MICRO_TILE),
            count("micro_tile_n", high=MAX_MICRO_TILE))),
        Field("llm", dict, required=False, sub=(
            count("kv_block_tokens", high=MAX_INPUT, required=False),
            count("max_running_sequences", high=MAX_BATCH, required=False),
            Field("memory_reserve_fraction", float, required=False, low=0.0, high=1.0),
            Field("sequence_parallel", bool, required=False),
            Field("chunked_prefill_tokens", int, required=False, low=0.0, high=MAX_INPUT,
                  si_type=int))),
        Field("allocator", dict, required=False, sub=(
            positive("fresh_page_us", US, "fresh_page_s", span=DURATION),
            count("page_bytes"), count("mmap_threshold_kib"))),
    )
