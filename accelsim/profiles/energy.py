"""Energy constants shared by every device profile: `hw_profiles/energy/constants.toml`.

Per-op, per-MAC, SRAM, DRAM and link energy live in this one file, not in each device profile
(static power is another file's concern). A device profile joins it through
`offchip_memory.technology` (off-chip J/byte) and its precisions (J per MAC):

    >>> from accelsim.profiles.devices import load_profile
    >>> energy = load_energy_constants()
    >>> a100 = load_profile("a100")
    >>> energy.offchip_energy_j_per_byte(a100.offchip_memory.technology)   # hbm2e, 6 pJ/bit
    4.8e-11
    >>> energy.mac_energy_j("bf16")
    2e-12

Schema (every key required; every number > 0 with a `[sources]` entry, as in device profiles):

    [process]           node_nm, supply_v            -> process_node_m, supply_v
    [op_energy]         <int8|int32|fp16|fp32>_<add|mult>_pj     -> op_j["fp32_mult"] (J)
    [mac_energy]        <precision>_pj for every precision        -> mac_j[precision] (J/MAC)
    [sram_read_energy]  read_64bit_<8kib|32kib|1mib>_pj           -> sram_read_j_per_byte
    [offchip_energy]    <technology>_pj_per_bit for every memory technology of the device
                        schema                                    -> offchip_j_per_byte (J/byte)
    [link_energy]       package_link, pcb_link, pcb_source_sync_io, hbm_io: _pj_per_bit;
                        on_chip_wire_pj_per_bit_mm                -> link_j_per_byte,
                                                                     on_chip_wire_j_per_byte_m

The per-op and SRAM figures are Horowitz (ISSCC 2014) at 45 nm / 0.9 V and are not scaled to a
device's process node here; a cost model that scales them says so with an NB: comment.
"""

from __future__ import annotations

import os
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from accelsim.datafiles import builtin_files
from accelsim.errors import AccelsimError, UnknownNameError
from accelsim.physical import ENERGY, ENERGY_PER_BYTE_M, LENGTH, VOLTAGE
from accelsim.profiles.device_schema import MEMORY_TECHNOLOGIES, PRECISIONS
from accelsim.schema import Field, flagged_fields, parse_profile, positive
from accelsim.tomlfiles import read_toml

PJ = 1e-12  # J per pJ
BITS_PER_BYTE = 8
MM = 1e-3  # m per mm
OPS = tuple(f"{t}_{op}" for t in ("int8", "int32", "fp16", "fp32") for op in ("add", "mult"))
SRAM_ARRAYS_BYTES = {"8kib": 8 * 2**10, "32kib": 32 * 2**10, "1mib": 2**20}
LINKS = ("package_link", "pcb_link", "pcb_source_sync_io", "hbm_io")

_PER_BIT_TO_J_PER_BYTE = PJ * BITS_PER_BYTE
FIELDS = (
    Field("process", dict, sub=(
        positive("node_nm", scale=1e-9, attr="process_node_m", span=LENGTH),
        positive("supply_v", span=VOLTAGE),
    )),
    Field("op_energy", dict, sub=tuple(positive(f"{op}_pj", scale=PJ, attr=op, span=ENERGY)
                                       for op in OPS)),
    Field("mac_energy", dict,
          sub=tuple(positive(f"{p}_pj", scale=PJ, attr=p, span=ENERGY) for p in PRECISIONS)),
    Field("sram_read_energy", dict, sub=tuple(
        positive(f"read_64bit_{size}_pj", scale=PJ / 8, attr=size, span=ENERGY)
        for size in SRAM_ARRAYS_BYTES
    )),
    Field("offchip_energy", dict, sub=tuple(
        positive(f"{t}_pj_per_bit", scale=_PER_BIT_TO_J_PER_BYTE, attr=t, span=ENERGY)
        for t in MEMORY_TECHNOLOGIES
    )),
    Field("link_energy", dict, sub=(
        *(positive(f"{link}_pj_per_bit", scale=_PER_BIT_TO_J_PER_BYTE, attr=link, span=ENERGY)
          for link in LINKS),
        positive("on_chip_wire_pj_per_bit_mm", scale=_PER_BIT_TO_J_PER_BYTE / MM,
                 attr="on_chip_wire", span=ENERGY_PER_BYTE_M),
    )),
)


@dataclass(frozen=True)
class EnergyConstants:
    """Energy per op, per MAC, per byte of SRAM / DRAM / link traffic, in J (SI)."""

    process_node_m: float
    supply_v: float
    op_j: dict[str, float]
    mac_j: dict[str, float]
    sram_read_j_per_byte: tuple[tuple[int, float], ...]  # (SRAM array bytes, J/byte), ascending
    offchip_j_per_byte: dict[str, float]
    link_j_per_byte: dict[str, float]
    on_chip_wire_j_per_byte_m: float
    source_path: str
    sources: dict[str, str] = field(default_factory=dict)

    def mac_energy_j(self, precision: str) -> float:
        """Energy of one multiply-accumulate at `precision` (45 nm figures)."""
        if precision not in self.mac_j:
            raise UnknownNameError("precision", precision, list(self.mac_j))
        return self.mac_j[precision]

    def offchip_energy_j_per_byte(self, technology: str) -> float:
        """Energy to move one byte to or from off-chip memory of `technology`."""
        if technology not in self.offchip_j_per_byte:
            raise UnknownNameError("memory technology", technology, list(self.offchip_j_per_byte))
        return self.offchip_j_per_byte[technology]

    def sram_energy_j_per_byte(self, array_bytes: int) -> float:
        """Read energy per byte from an SRAM array of `array_bytes`: the figure of the smallest
        listed array at least that large, else of the largest listed."""
        # NB: a step function over Horowitz's three array sizes, not an interpolation.
        for size, j_per_byte in self.sram_read_j_per_byte:
            if array_bytes <= size:
                return j_per_byte
        return self.sram_read_j_per_byte[-1][1]

    def flagged_fields(self) -> tuple[str, ...]:
        """Fields resting on a proxy, an unverified recollection or an assumption."""
        return flagged_fields(self.sources)


def load_energy_constants(path: str | os.PathLike[str] | None = None) -> EnergyConstants:
    """Load the built-in energy constants, or a user file at `path` with the same schema."""
    if path is None:
        path = builtin_files("hw_profiles", "energy/*.toml")["constants"]
    path = Path(path)
    values, sources = parse_profile(read_toml(path), FIELDS, str(path))
    sram = values["sram_read_energy"]
    links = values["link_energy"]
    return EnergyConstants(
        process_node_m=values["process"]["process_node_m"],
        supply_v=values["process"]["supply_v"],
        op_j=dict(values["op_energy"]),
        mac_j=dict(values["mac_energy"]),
        sram_read_j_per_byte=tuple(
            sorted((SRAM_ARRAYS_BYTES[size], sram[size]) for size in SRAM_ARRAYS_BYTES)
        ),
        offchip_j_per_byte=dict(values["offchip_energy"]),
        link_j_per_byte={link: links[link] for link in LINKS},
        on_chip_wire_j_per_byte_m=links["on_chip_wire"],
        source_path=str(path),
        sources=sources,
    )


def energy_table(name: str) -> tuple[Path, dict[str, Any]]:
    """(path, parsed TOML) of hw_profiles/energy/<name>.toml (static_power, die_scaling, dvfs),
    whose fields `accelsim.devices.energy` checks; AccelsimError when the file is missing."""
    path = builtin_files("hw_profiles", "energy/*.toml").get(name)
    if path is None:
        raise AccelsimError(f"energy data file hw_profiles/energy/{name}.toml is missing")
    return path, tomllib.loads(path.read_text(encoding="utf-8"))
