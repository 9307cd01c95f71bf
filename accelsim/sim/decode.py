"""Where training samples are decoded: on the host CPU, on the accelerator's SMs (nvJPEG /
DALI), or on its hardware JPEG decoder (NVJPG on A100/H100).

    plan = decode_plan("gpu", gpudirect=True, dataset=ds, device=profile, device_power_w=300.0)
    plan.s_per_sample        # device seconds per sample (0 on the CPU path)

- "cpu": prep workers decode and augment on host cores (the dataset's per-core cost); the
  decoded samples cross the host-to-device link. Refused with GPUDirect Storage, which puts
  the compressed bytes in device memory.
- "gpu": the compressed bytes cross the link (or come straight from storage with GPUDirect
  Storage) and the SMs decode them at `sm_images_per_s`, holding the device: decode and the
  training step take turns, so each sample costs 1 / rate of device time.
- "hw": as "gpu", but the hardware decoder does it at `hw_images_per_s`, beside the SMs
  (it overlaps compute and contends only with itself).

The rates per device: `accelsim.profiles.decoders`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from accelsim.errors import AccelsimError
from accelsim.profiles.datasets import Dataset
from accelsim.profiles.decoders import available_decoders, load_decoder

DECODE_PLACES = ("cpu", "gpu", "hw")
# Device classes whose SMs can decode (the null device stands in for any in tests).
DECODING_CLASSES = ("gpu", "null")

@dataclass(frozen=True)
class DecodePlan:
    """Where one run decodes, and what a sample costs there."""

    place: str  # DECODE_PLACES
    s_per_sample: float = 0.0  # device seconds per sample (0: on the CPU, or nothing to do)
    power_w: float | None = 0.0  # draw of what decodes while it does (None: unknown)
    notes: tuple[str, ...] = ()

    @property
    def on_device(self) -> bool:
        return self.place != "cpu"


def _bad(value: object, problem: str) -> AccelsimError:
    return AccelsimError(f"training config: 'decode' = {value!r}: {problem}")


def decode_plan(place: str | None, gpudirect: bool, dataset: Dataset, device: Any,
                device_power_w: float | None) -> DecodePlan:
    """Validate `place` (None: "gpu" with GPUDirect Storage, else "cpu") against the data path
    and the device; `device_power_w` is the device's draw above static at full load (None:
    unknown), charged while its SMs decode."""
    if place is None:
        place = "gpu" if gpudirect else "cpu"
    if place not in DECODE_PLACES:
        raise _bad(place, f"choose one of {', '.join(DECODE_PLACES)}")
    if place == "cpu":
        if gpudirect:
            raise _bad(place, "GPUDirect Storage puts the compressed bytes in device memory, "
                       "so the device decodes them: use decode gpu or hw, or drop gpudirect")
        return DecodePlan("cpu")
    if device.device_class not in DECODING_CLASSES:
        raise _bad(place, f"device '{device.name}' (class {device.device_class}) cannot "
                   "decode JPEGs: use decode cpu")
    if dataset.prep_s_per_sample_per_core == 0:
        return DecodePlan(place, notes=(f"dataset '{dataset.name}' needs no decoding: "
                                        f"decode {place} costs nothing",))
    if device.name not in available_decoders():
        if device.device_class == "null":  # the test device: free unless named after a GPU
            return DecodePlan(place, notes=(f"null device '{device.name}': decoding on it "
                                            "costs nothing",))
        raise _bad(place, f"no decode rate for device '{device.name}' in "
                   "hw_profiles/decoders/: decode on the host (decode cpu, without "
                   "gpudirect), or add its profile")
    dec = load_decoder(device.name)
    # NB: rates are for ImageNet-size JPEGs, applied per sample whatever the dataset's size.
    if place == "gpu":
        # NB: the SMs decode at the device's full draw (an upper bound).
        return DecodePlan("gpu", 1.0 / dec.sm_images_per_s, device_power_w)
    if dec.hw_images_per_s is None:
        raise _bad(place, f"device '{device.name}' has no hardware JPEG decoder: use decode "
                   "gpu or cpu")
    notes = () if dec.hw_power_w is not None else (
        f"power of the hardware JPEG decoder of '{device.name}' is unknown: its energy is "
        "reported as unknown",)
    return DecodePlan("hw", 1.0 / dec.hw_images_per_s, dec.hw_power_w, notes)
