"""Which numeric format a device really computes in, and which to use when it cannot run the
one asked for. Stateless rules, one place, so that every output says what ran.

    hardware_key("fp8_e4m3")                    # "fp8": profiles list fp8 peaks once
    compute_precision(load_profile("tpu-v3"), "fp16")  # ("bf16", "tpu-v3 runs fp16 ... bf16")
    fallback_precision("fp16", ("int8",))       # "int8"
    software_applied("tpu", "eager")            # ("compiled (ahead of time)", "...")
"""

from __future__ import annotations

from typing import Any

from accelsim.kernels.formats import get_format

# Device classes whose cost model charges a framework's per-op host time (`software`
# matters); the others compile ahead of time (XLA, the DPU compiler, NPU toolchains).
FRAMEWORK_CLASSES = frozenset({"gpu", "cpu", "null"})


def hardware_key(precision: str) -> str:
    """The profile key of a format: both fp8 encodings run on the units listed as "fp8"."""
    return "fp8" if precision.startswith("fp8") else precision


def compute_precision(profile: Any, precision: str) -> tuple[str, str | None]:
    """(format the matrix units compute in, a note when it differs from `precision`)."""
    if getattr(profile, "device_class", None) != "tpu":
        return precision, None
    from accelsim.devices.systolic import mxu_precision

    used = mxu_precision(profile, hardware_key(precision))
    if used == hardware_key(precision):
        return precision, None
    return used, (f"{profile.name} has no {precision} matrix units: matmuls run as one {used} "
                  f"pass (XLA's default), memory traffic stays {precision}")


def _is_integer(precision: str) -> bool:
    return precision.startswith("int")


def fallback_precision(requested: str, runs: tuple[str, ...] | list[str]) -> str | None:
    """The format to use on a device that runs `runs` but not `requested`: the closest one of
    the same kind (float or integer) by width, the wider on a tie, else the closest of the
    other kind; None when the device runs nothing known."""
    known = [p for p in runs if _known(p)]
    if not known:
        return None
    want = get_format(requested).bytes_per_element

    def rank(p: str) -> tuple[int, float, float]:
        width = get_format(p).bytes_per_element
        return (_is_integer(p) != _is_integer(requested), abs(width - want), -width)

    return min(known, key=rank)


def _known(precision: str) -> bool:
    try:
        get_format(precision)
    except Exception:  # noqa: BLE001 - any unknown name is simply skipped
        return False
    return True


def software_applied(device_class: str, software: str) -> tuple[str, str | None]:
    """(the software the cost model applied, a note when that is not what was asked for)."""
    if device_class in FRAMEWORK_CLASSES:
        return software, None
    return "compiled (ahead of time)", (
        f"this {device_class.upper()} runs a graph compiled ahead of time: software "
        f"'{software}' (a framework's per-op host time) does not apply")
