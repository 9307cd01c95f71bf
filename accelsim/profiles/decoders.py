"""Decoder profiles: the JPEG decode rates of a device's SMs and hardware decoders, read by the
decode placement of the training pipeline (`accelsim.sim.decode`).

Data: `hw_profiles/decoders/<device>.toml`, name = the device profile's name. Schema:

================= ======== ===============================================================
key               required meaning
================= ======== ===============================================================
description       yes      one line
sm_images_per_s   yes      > 0; ImageNet-size JPEGs decoded and resized per second by the
                           whole device's SMs
hw_images_per_s   no       > 0; the same by all its hardware JPEG decoders (absent: none)
hw_power_w        no       >= 0; the hardware decoders' draw while busy (absent: unknown)
================= ======== ===============================================================

plus `[sources]`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from accelsim.datafiles import builtin_files
from accelsim.physical import OPS_RATE, POWER
from accelsim.schema import non_negative, parse_profile, positive, text
from accelsim.tomlfiles import find_profile, read_toml

FIELDS = (
    text("description"),
    positive("sm_images_per_s", span=OPS_RATE),
    positive("hw_images_per_s", required=False, span=OPS_RATE),
    non_negative("hw_power_w", required=False, span=POWER),
)


@dataclass(frozen=True)
class DecoderProfile:
    """One device's JPEG decode rates, samples per second."""

    name: str
    description: str
    sm_images_per_s: float
    hw_images_per_s: float | None = None
    hw_power_w: float | None = None
    sources: dict[str, str] = field(default_factory=dict, compare=False, repr=False)


def load_decoder(name_or_path: str | Path) -> DecoderProfile:
    """A device's decoder profile by device name (`available_decoders()`) or TOML path."""
    path = find_profile(name_or_path, "decoders/*.toml", "decoder profile")
    values, sources = parse_profile(read_toml(path), FIELDS, str(path))
    return DecoderProfile(name=path.stem, sources=sources, **values)


def available_decoders() -> list[str]:
    return sorted(builtin_files("hw_profiles", "decoders/*.toml"))
