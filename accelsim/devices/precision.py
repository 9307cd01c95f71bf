"""Which numeric format a device really computes in, and which to use when it cannot run the
one asked for. Stateless rules, one place, so that every output says what ran.

    hardware_key("fp8_e4m3")                    # "fp8": profiles list fp8 peaks once
    hardware_key("mxfp4")                       # "fp4": and fp4 peaks once
    compute_precision(load_profile("tpu-v3"), "fp16")  # ("bf16", "tpu-v3 runs fp16 ... bf16")
    fallback_precision("fp16", ("int8",))       # "int8"
    cannot_train(load_profile("tpu-v1"))        # "tpu-v1 is an inference-only device: ..."
"""

from __future__ import annotations

from typing import Any

from accelsim.devices import registry
from accelsim.formats import get_format

# FPGA DSP operand widths that carry floating-point formats (fp16 / bf16 mantissas, `fpga`).
_FLOAT_DSP_WIDTHS = frozenset({"int16"})


# Formats that run on the units a profile lists under another name.
_HARDWARE_KEYS = {"fp8_e4m3": "fp8", "fp8_e5m2": "fp8", "nvfp4": "fp4", "mxfp4": "fp4"}


def hardware_key(precision: str) -> str:
    """The profile key of a format: both fp8 encodings run on the units listed as "fp8",
    both block-scaled 4-bit formats on those listed as "fp4"."""
    return _HARDWARE_KEYS.get(precision, precision)


def compute_precision(profile: Any, precision: str) -> tuple[str, str | None]:
    """(format the matrix units compute in, a note when it differs from `precision`): the
    class record's `matrix_precision` (a TPU's MXU: bf16 for fp32 / fp16), else `precision`."""
    record = registry.CLASSES.get(getattr(profile, "device_class", None))
    if record is None or record.matrix_precision is None:
        return precision, None
    used = record.matrix_precision(profile, hardware_key(precision))
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


def fallback_note(device: str, requested: str, ran: str, runs: tuple[str, ...]) -> str:
    """The note of a row that ran `ran` where `device` lacks `requested` (compare, sweep)."""
    return f"ran {ran}: {device} cannot run {requested} (it runs {', '.join(runs)})"


def _known(precision: str) -> bool:
    try:
        get_format(precision)
    except Exception:  # noqa: BLE001 - any unknown name is simply skipped
        return False
    return True


def cannot_train(profile: Any) -> str | None:
    """Why `profile` cannot run a training step, None when it can. A profile's own
    `inference_only` (True / False) decides; where it has none, a device whose units compute
    no floating-point format (int8 only: TPU v1, Edge TPU, Orin DLA) cannot train. NB:
    gradients and the optimizer update need a float format; integer-only training is not
    something these products do."""
    explicit = getattr(profile, "inference_only", None)
    name = getattr(profile, "name", "device")
    if explicit is not None:
        return (f"{name} is an inference-only device (its profile says inference_only); "
                "simulate inference or choose a device that trains") if explicit else None
    compute = getattr(profile, "compute", None)
    if compute is None:  # the null device
        return None
    formats = {*compute.matrix_peak_flops_per_s, *compute.vector_peak_flops_per_s}
    floats = {p for p in formats if not _is_integer(p)}
    if floats or _FLOAT_DSP_WIDTHS & set(compute.macs_per_dsp):
        return None
    return (f"{name} is an inference-only device: its units compute only "
            f"{', '.join(sorted(formats))}, no floating-point format for gradients and the "
            "optimizer update; simulate inference or choose a device that trains")
