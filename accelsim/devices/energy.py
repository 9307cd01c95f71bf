"""Energy of arithmetic and data movement, and the static power of a device.

Constants come from `hw_profiles/energy/constants.toml` (Horowitz, ISSCC 2014, 45 nm, 0.9 V;
off-chip pJ/bit by memory technology; validated by
`accelsim.profiles.energy.load_energy_constants`) and `hw_profiles/energy/static_power.toml`,
loaded once.

    >>> e = dynamic_energy_j(load_profile("a100"), "fp16", matmul_flops=np.array([2e12]),
    ...                      other_flops=np.zeros(1), dram_bytes=np.zeros(1),
    ...                      onchip_bytes=np.zeros(1))  # doctest: +SKIP

Process scaling: the reference files cite no node-scaling law, so the 45 nm figures are NOT
scaled by node. Instead each device gets one on-die factor, `die_energy_scale(profile)`,
DERIVED from its datasheet (never fitted to measurements): the largest on-die power the 45 nm
figures imply (matrix engine at its most power-hungry peak + the L2/L3 stream of full DRAM
bandwidth) is shrunk, if needed, so that it plus DRAM power at peak bandwidth plus static power
equals the TDP (where DRAM alone exceeds it, both shrink alike). Where the 45 nm figures
already fit (CPUs, FPGAs, TPU v1/v3) the factor is 1; V100 gets 0.85. A GPU whose profile
names its process node instead takes V100's factor at its sustained (fitted-efficiency)
tensor-core load, scaled by node (`dvfs.toml`): V100 and T4 1.6, A100 0.93, H100 0.53;
where its sustained load then outruns its board limit (a 70 W T4), DVFS in
`core.finish` lowers the clock and voltage until each kernel fits (`accelsim.devices.dvfs`).
The factors never fall below `scale_floors` (on die: the 45 nm figures scaled as CV^2 to a 3 nm
node; off chip: kT ln 2 per bit): a TDP too small for a device's peaks (1 mW on an A100) leaves
the energy per op physical and the power cap throttles the device instead.
Static power is always below the TDP (`static_power_w`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import numpy as np

from accelsim.errors import AccelsimError, ConfigError
from accelsim.profiles.energy import EnergyConstants, energy_table, load_energy_constants

# Landauer's bound on the energy of erasing one bit, kT ln 2: Boltzmann's constant (exact since
# the 2019 SI redefinition) at 300 K. NB: room temperature; a running die is hotter, which would
# only raise the bound, so the floor it sets is conservative.
BOLTZMANN_J_PER_K = 1.380649e-23
DIE_TEMPERATURE_K = 300.0
LANDAUER_J_PER_BIT = BOLTZMANN_J_PER_K * DIE_TEMPERATURE_K * math.log(2)
BITS_PER_BYTE = 8

# Non-matmul arithmetic: which Horowitz add/mult pair a precision's vector math costs.
# NB: bf16/fp8/fp4 vector math priced as fp16, tf32 as fp32 (tf32 is a matrix-engine mode
# only; fp4 elementwise work runs on 16-bit units after dequantisation).
_VECTOR_OP_FAMILY = {"fp32": "fp32", "tf32": "fp32", "fp16": "fp16", "bf16": "fp16",
                     "fp8": "fp16", "fp4": "fp16", "int8": "int8"}


@dataclass(frozen=True)
class EnergyTables:
    """SI energies: J per MAC and per non-matmul FLOP by precision, J per byte of off-chip
    memory by technology, and the static fraction of TDP."""

    constants: EnergyConstants
    mac_j: dict[str, float]
    vector_flop_j: dict[str, float]
    dram_j_per_byte: dict[str, float]
    static_fraction_of_tdp: float
    least_die_scale: float  # the floor of the on-die factor (die_scaling.toml)


@lru_cache(maxsize=1)
def energy_constants() -> EnergyTables:
    """Load the energy constants (validated by `accelsim.profiles.energy`) and static power,
    once."""
    c = load_energy_constants()
    path, static = energy_table("static_power")
    fraction = static.get("static_power", {}).get("fraction_of_tdp")
    if not isinstance(fraction, int | float) or not 0 < fraction < 1:
        raise ConfigError(str(path), "static_power.fraction_of_tdp", fraction,
                          "must be a number between 0 and 1")
    vector = {p: (c.op_j[f"{fam}_add"] + c.op_j[f"{fam}_mult"]) / 2
              for p, fam in _VECTOR_OP_FAMILY.items()}
    return EnergyTables(constants=c, mac_j=dict(c.mac_j), vector_flop_j=vector,
                        dram_j_per_byte=dict(c.offchip_j_per_byte),
                        static_fraction_of_tdp=float(fraction),
                        least_die_scale=_least_die_scale(c))


def _least_die_scale(c: EnergyConstants) -> float:
    """CV^2 scaling from the constants' process to die_scaling.toml's floor node and supply."""
    path, raw = energy_table("die_scaling")
    floor, sources = raw.get("floor", {}), raw.get("sources", {})
    for key in ("node_nm", "supply_v"):
        value = floor.get(key)
        if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
            raise ConfigError(str(path), f"floor.{key}", value, "must be a number > 0")
        if not isinstance(sources.get(f"floor.{key}"), str):
            raise ConfigError(str(path), f"sources.floor.{key}", None, "needs a source")
    node_m = floor["node_nm"] * 1e-9
    scale = node_m / c.process_node_m * (floor["supply_v"] / c.supply_v) ** 2
    if not 0 < scale <= 1:
        raise ConfigError(str(path), "floor", floor, "must scale the constants' energy down")
    return scale


def sram_j_per_byte(profile: Any) -> float:
    """Per-byte energy of the device-wide on-chip memory (L2/L3/buffers).
    NB: caches above 1 MiB priced at Horowitz's largest array (1 MiB): a lower bound."""
    size = getattr(getattr(profile, "onchip_memory", None), "capacity_bytes", None)
    return energy_constants().constants.sram_energy_j_per_byte(int(size or 2**20))


def mac_energy_j(precision: str) -> float:
    """Energy of one multiply-accumulate at `precision` (45 nm), J."""
    table = energy_constants().mac_j
    if precision not in table:
        raise AccelsimError(f"no MAC energy for precision '{precision}'; known: {sorted(table)}")
    return table[precision]


def arithmetic_energy_j(matmul_flops: np.ndarray, other_flops: np.ndarray, precision: str,
                        scale: float = 1.0) -> np.ndarray:
    """Matmul FLOPs at the MAC energy (2 FLOPs per MAC), other FLOPs at the mean of the
    precision's add and multiply energy; times the on-die `scale`."""
    c = energy_constants()
    per_mac = mac_energy_j(precision)
    per_op = c.vector_flop_j.get(precision, c.vector_flop_j["fp32"])
    mm = np.asarray(matmul_flops, dtype=float)
    other = np.asarray(other_flops, dtype=float)
    return scale * (mm / 2 * per_mac + other * per_op)


def dram_energy_j(nbytes: np.ndarray, technology: str | None) -> np.ndarray:
    """Off-chip energy of `nbytes` on memory `technology` (0 where the device has none)."""
    nbytes = np.asarray(nbytes, dtype=float)
    if technology is None:
        return np.zeros_like(nbytes)
    table = energy_constants().dram_j_per_byte
    if technology not in table:
        raise AccelsimError(f"no off-chip energy for memory '{technology}'; known: {sorted(table)}")
    return nbytes * table[technology]


def sram_energy_j(nbytes: np.ndarray, profile: Any, scale: float = 1.0) -> np.ndarray:
    """On-chip (L2/L3/buffer) energy of `nbytes` on `profile`, times the on-die `scale`."""
    return scale * np.asarray(nbytes, dtype=float) * sram_j_per_byte(profile)


def static_power_w(profile: Any) -> float:
    """Static power, W: the profile's idle_w, else its measured_min_w (the floor of a running
    chip), else `fraction_of_tdp` x TDP (derived in static_power.toml, a fraction below 1).
    Always below the TDP: a published figure at or above it is an impossible device
    (ConfigError naming the file and field), as is a TDP that is not a finite number."""
    power = profile.power
    tdp_w = float(power.tdp_w)
    source = getattr(profile, "source_path", profile.name)
    if not math.isfinite(tdp_w) or tdp_w <= 0:
        raise ConfigError(source, "power.tdp_w", power.tdp_w, "must be a finite power > 0 W")
    for field in ("idle_w", "measured_min_w"):
        published = getattr(power, field)
        if published is None:
            continue
        if not 0 <= published < tdp_w:
            raise ConfigError(source, f"power.{field}", published,
                              f"static power must be at least 0 and below tdp_w = {tdp_w:g} W "
                              "(the device could do no work within its envelope)")
        return float(published)
    return energy_constants().static_fraction_of_tdp * tdp_w


def _peak_bandwidth_bytes_per_s(profile: Any) -> float:
    mem = profile.offchip_memory
    return 0.0 if mem is None else float(mem.bandwidth_bytes_per_s)


def _dram_power_w(profile: Any) -> float:
    mem = profile.offchip_memory
    if mem is None:
        return 0.0
    return float(dram_energy_j(np.array([mem.bandwidth_bytes_per_s]), mem.technology)[0])


@lru_cache(maxsize=256)
def _scales(tdp_w: float, static_w: float, dram_w: float, die_w: float) -> tuple[float, float]:
    headroom_w = tdp_w - static_w
    if die_w + dram_w <= headroom_w:
        return 1.0, 1.0
    if dram_w < headroom_w:
        return (headroom_w - dram_w) / die_w, 1.0
    # NB: the off-chip figure alone exceeds the envelope (Horowitz's DDR pJ/bit on an LPDDR
    # edge part): scale off-chip and on-die energy alike.
    both = headroom_w / (die_w + dram_w)
    return both, both


def scale_floors() -> tuple[float, float]:
    """(on-die, off-chip) factors below which `energy_scales` never goes. On die: CV^2
    scaling of the 45 nm figures to die_scaling.toml's node and supply (about 0.04; the least
    a built-in profile derives is 0.15). Off chip: Landauer's kT ln 2 per bit (a byte moved
    overwrites eight) on the cheapest technology, a bound of physics, as no off-chip figure
    for an advanced node is in the reference. Either binds only on an impossible TDP."""
    c = energy_constants()
    return (c.least_die_scale,
            BITS_PER_BYTE * LANDAUER_J_PER_BIT / min(c.dram_j_per_byte.values()))


@lru_cache(maxsize=1)
def dvfs_settings() -> tuple[str, float]:
    """(the reference GPU profile of the node scaling, the voltage floor as a fraction of the
    boost voltage), from hw_profiles/energy/dvfs.toml, validated."""
    path, raw = energy_table("dvfs")
    ref = raw.get("gpu_node_scaling", {}).get("reference_device")
    floor = raw.get("voltage", {}).get("floor_fraction_of_boost")
    if not isinstance(ref, str) or not ref:
        raise ConfigError(str(path), "gpu_node_scaling.reference_device", ref,
                          "must name a GPU profile")
    if isinstance(floor, bool) or not isinstance(floor, int | float) or not 0 < floor <= 1:
        raise ConfigError(str(path), "voltage.floor_fraction_of_boost", floor,
                          "must be a number in (0, 1]")
    for key in ("gpu_node_scaling.reference_device", "voltage.floor_fraction_of_boost"):
        if not isinstance(raw.get("sources", {}).get(key), str):
            raise ConfigError(str(path), f"sources.{key}", None, "needs a source")
    return ref, float(floor)


@lru_cache(maxsize=1)
def _reference_die_scale_per_nm() -> float:
    """The reference GPU's on-die factor per nm of its node: the one that makes its sustained
    tensor-core load (matrix peak x the GPU class's fitted tensor-core efficiency) plus the L2
    stream, DRAM at peak bandwidth and static power fill its TDP exactly. NB: energy is
    charged per operation done, so a GPU at its achieved rate must draw what the real card
    draws at full load; at the datasheet peak it would draw more."""
    from accelsim.profiles.devices import load_profile
    from accelsim.profiles.efficiency import load_efficiency

    name, _ = dvfs_settings()
    ref = load_profile(name)
    if ref.device_class != "gpu" or not ref.process_node_nm:
        raise ConfigError("hw_profiles/energy/dvfs.toml", "gpu_node_scaling.reference_device",
                          name, "must be a GPU profile with process_node_nm")
    busy = load_efficiency("gpu")["fitted.tensor_core_efficiency"]
    headroom_w = float(ref.power.tdp_w) - static_power_w(ref) - _dram_power_w(ref)
    if not headroom_w > 0:
        raise ConfigError(ref.source_path, "power.tdp_w", ref.power.tdp_w,
                          "leaves no on-die power for the reference GPU")
    return headroom_w / _die_peak_w(ref, busy) / ref.process_node_nm


def energy_scales(profile: Any) -> tuple[float, float]:
    """(on-die, off-chip) energy factors of a device, derived from datasheets (see the module
    docstring): a GPU whose profile names its process node takes the reference GPU's on-die
    factor scaled by node (dvfs.toml; NB: capacitance with the node's name, voltage as at the
    reference's boost), so a card whose peaks outrun its board limit is power-limited; any
    other device: 1 where the 45 nm figures at peak fit TDP - static, else the on-die figures
    shrink so that they plus DRAM at peak bandwidth fill it exactly. Never below
    `scale_floors` (a TDP too small for the peaks then throttles the device instead)."""
    die, offchip = _tdp_scales(profile)
    node_nm = getattr(profile, "process_node_nm", None)
    if profile.device_class == "gpu" and node_nm:
        die = _reference_die_scale_per_nm() * node_nm
    die_floor, offchip_floor = scale_floors()
    return max(die, die_floor), max(offchip, offchip_floor)


def _die_peak_w(profile: Any, utilisation: float = 1.0) -> float:
    """On-die power at the 45 nm figures: the most power-hungry matrix / vector peak (times
    `utilisation`) plus the L2/L3 stream of full DRAM bandwidth, W."""
    c = energy_constants()
    compute = profile.compute
    peaks = [*compute.matrix_peak_flops_per_s.items(), *compute.vector_peak_flops_per_s.items()]
    mac_w = utilisation * max((f / 2 * c.mac_j[p] for p, f in peaks if p in c.mac_j),
                              default=0.0)
    stream_w = _peak_bandwidth_bytes_per_s(profile) * sram_j_per_byte(profile)
    return max(mac_w + stream_w, 1e-30)


def _tdp_scales(profile: Any) -> tuple[float, float]:
    """The factors that make the device's own peaks, DRAM stream and static power fill its
    TDP (1 where they already fit)."""
    return _scales(float(profile.power.tdp_w), static_power_w(profile),
                   _dram_power_w(profile), _die_peak_w(profile))


def die_energy_scale(profile: Any) -> float:
    """The on-die factor of `energy_scales`."""
    return energy_scales(profile)[0]


def offchip_energy_j(profile: Any, dram_bytes: np.ndarray) -> np.ndarray:
    """The off-chip part of `dynamic_energy_j` (DRAM energy does not scale with core DVFS)."""
    mem = profile.offchip_memory
    tech = None if mem is None else mem.technology
    return energy_scales(profile)[1] * dram_energy_j(dram_bytes, tech)


def dynamic_energy_j(profile: Any, precision: str, matmul_flops: np.ndarray,
                     other_flops: np.ndarray, dram_bytes: np.ndarray,
                     onchip_bytes: np.ndarray) -> np.ndarray:
    """Switching energy per row: arithmetic + on-chip SRAM + off-chip memory (by the profile's
    memory technology), each times its factor from `energy_scales`."""
    die, offchip = energy_scales(profile)
    mem = profile.offchip_memory
    tech = None if mem is None else mem.technology
    return (arithmetic_energy_j(matmul_flops, other_flops, precision, die)
            + sram_energy_j(onchip_bytes, profile, die)
            + offchip * dram_energy_j(dram_bytes, tech))
