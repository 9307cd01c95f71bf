"""Read a SCALE-Sim `.cfg` file as a systolic-array device profile (class "tpu").

    profile = read_profile(Path("scale.cfg"))    # accelsim simulate net.csv --hw scale.cfg
    profile.operand_srams.ifmap_words            # IfmapSramSzkB x 1024 one-byte words

What the file gives (`[architecture_presets]`, keys case-insensitive as SCALE-Sim reads them):
ArrayHeight and ArrayWidth (one R x C array), IfmapSramSzkB, FilterSramSzkB, OfmapSramSzkB
(the three double-buffered SRAMs of `accelsim.devices.systolic.sram`, in SCALE-Sim's one-byte
words), Dataflow (ws, os, is) and Bandwidth (DRAM words per cycle, per operand port; a list
takes its first entry, as SCALE-Sim does). SCALE-Sim v3 feeds the ifmap and filter SRAMs at
`[layout]` IfmapSRAMBankBandwidth and FilterSRAMBankBandwidth when that section is given, and
the ofmap port at Bandwidth; without it every port runs at Bandwidth (v2). `[run_presets]`
InterfaceBandwidth = CALC asks SCALE-Sim for the bandwidth that never stalls: the ports are
then unbounded here (no stalls). MemoryBanks, ReadRequestBuffer and WriteRequestBuffer are read
and checked where given, but change no figure (NB: SCALE-Sim v3 does not use them either
outside its Ramulator path). Sparsity and Ramulator traces are refused: they are not modelled.

What SCALE-Sim does not say is assumed, and flagged "assumed:" in the profile's sources: the
clock (cycles are what SCALE-Sim counts; seconds = cycles / clock), the DRAM technology and
capacity, the host link and the power envelope. The array runs every precision at one MAC per
PE per cycle (SCALE-Sim has no numeric format), and its SRAMs count elements, not bytes.
Built through `accelsim.profiles.devices.parse_profile`, so the usual profile checks apply.
"""

from __future__ import annotations

import configparser
import dataclasses
import math
from pathlib import Path
from typing import Any

from accelsim.devices.energy import energy_constants
from accelsim.errors import ConfigError, DataFileError
from accelsim.numbers import is_float_text, is_int_text, shown
from accelsim.physical import MAX_COUNT
from accelsim.profiles.device_types import DeviceProfile, SramSpec
from accelsim.profiles.devices import parse_profile
from accelsim.profiles.links import load_link
from accelsim.tomlfiles import read_text_file

ARRAY = "architecture_presets"
DATAFLOWS = ("ws", "os", "is")
WORD_BYTES = 1  # SCALE-Sim's word (single_layer_sim.py: word_size = 1)
KB_BYTES = 1024  # SCALE-Sim's kB (single_layer_sim.py: 1024 * ifmap_buf_size_kb)
# NB: assumed figures SCALE-Sim has no notion of (flagged in the profile's sources).
ASSUMED_CLOCK_MHZ = 1000.0
ASSUMED_DRAM = "ddr4"
ASSUMED_CAPACITY_GIB = 1024
ASSUMED_HOST_LINK = "pcie-gen4-x16"  # its bandwidth: hw_profiles/links/
# NB: its figures are read from the link profile (`accelsim.profiles.links`).
TDP_HEADROOM = 4.0  # the power envelope over the 45 nm peak power: the array never throttles
PRECISIONS = ("fp32", "fp16", "bf16", "int8")
_FILE = "defined: SCALE-Sim .cfg"
# NB: the largest SRAM of one operand: 1 GiB (2^20 kB), 20x the on-chip SRAM of the largest
# chip built (a Cerebras WSE-3 wafer, 44 GB, over 900,000 cores; one array's buffers are far
# smaller). 10^12 kB would be an exabyte.
MAX_SRAM_KIB = 1 << 20


def run_name(path: Path) -> str:
    """The .cfg's `[general]` run_name: SCALE-Sim writes a run's reports into OUTDIR/run_name/."""
    cfg = _parse(path)
    name = cfg.get("general", "run_name", fallback="").strip()
    if not name or name in (".", "..") or any(c in name for c in "/\\\0"):
        raise ConfigError(str(path), "general.run_name", name, "must be a folder name (SCALE-Sim "
                          "writes the reports into OUTDIR/run_name/)")
    return name


def read_profile(path: Path) -> DeviceProfile:
    """The device a SCALE-Sim .cfg describes; a bad file raises ConfigError (one line naming
    the file, the field and the value)."""
    cfg = _parse(path)
    src = str(path)
    rows = _count(cfg, src, ARRAY, "ArrayHeight")
    cols = _count(cfg, src, ARRAY, "ArrayWidth")
    kib = {op: _count(cfg, src, ARRAY, f"{op}SramSzkB", MAX_SRAM_KIB)
           for op in ("Ifmap", "Filter", "Ofmap")}
    dataflow = _get(cfg, src, ARRAY, "Dataflow").lower()
    if dataflow not in DATAFLOWS:
        raise ConfigError(src, f"{ARRAY}.Dataflow", dataflow, f"choose one of {DATAFLOWS}")
    for key in ("MemoryBanks", "ReadRequestBuffer", "WriteRequestBuffer"):
        if cfg.has_option(ARRAY, key):
            _count(cfg, src, ARRAY, key)
    _refuse(cfg, src)
    ports = _port_words_per_cycle(cfg, src)
    srams = SramSpec(kib["Ifmap"] * KB_BYTES // WORD_BYTES, kib["Filter"] * KB_BYTES // WORD_BYTES,
                     kib["Ofmap"] * KB_BYTES // WORD_BYTES, *ports)
    raw = _profile_table(path, rows, cols, dataflow, kib, ports)
    profile = parse_profile(raw, path.stem, src)
    return dataclasses.replace(profile, operand_srams=srams)


def _parse(path: Path) -> configparser.ConfigParser:
    text = read_text_file(path)
    # NB: no interpolation: SCALE-Sim's own reader has none, and a '%' is then a character.
    cfg = configparser.ConfigParser(inline_comment_prefixes=("#", ";"), interpolation=None)
    try:
        cfg.read_string(text, source=str(path))
    except configparser.Error as err:
        first = str(err).splitlines()[0]
        raise DataFileError(str(path), f"not a SCALE-Sim .cfg (INI) file: {first}") from None
    if not cfg.has_section(ARRAY):
        raise ConfigError(str(path), f"[{ARRAY}]", None, "missing section: not a SCALE-Sim .cfg")
    return cfg


def _get(cfg: configparser.ConfigParser, src: str, section: str, key: str) -> str:
    if not cfg.has_option(section, key):
        raise ConfigError(src, f"{section}.{key}", None, "missing")
    return cfg.get(section, key).strip()


def _count(cfg: configparser.ConfigParser, src: str, section: str, key: str,
           most: int = MAX_COUNT) -> int:
    """A whole number from 1 to `most` (SCALE-Sim reads these with int(); ASCII digits here,
    the rule of every number accelsim reads)."""
    value = _get(cfg, src, section, key)
    if not is_int_text(value):
        raise ConfigError(src, f"{section}.{key}", shown(value)[1:-1],
                          "must be a whole number") from None
    n = int(value)
    if not 1 <= n <= most:
        raise ConfigError(src, f"{section}.{key}", value, f"must be from 1 to {most:,}")
    return n


def _refuse(cfg: configparser.ConfigParser, src: str) -> None:
    """Features SCALE-Sim has that are not modelled here: an error, never ignored."""
    for section, key in (("sparsity", "SparsitySupport"), ("run_presets", "UseRamulatorTrace")):
        if cfg.has_option(section, key) and cfg.get(section, key).strip().lower() == "true":
            raise ConfigError(src, f"{section}.{key}", cfg.get(section, key).strip(),
                              "not modelled by accelsim; set it to false")


def _port_words_per_cycle(cfg: configparser.ConfigParser, src: str
                          ) -> tuple[float, float, float]:
    """(ifmap, filter, ofmap) DRAM words per cycle (module docstring)."""
    mode = (cfg.get("run_presets", "InterfaceBandwidth", fallback="USER").strip().upper()
            if cfg.has_section("run_presets") else "USER")
    if mode not in ("USER", "CALC"):
        raise ConfigError(src, "run_presets.InterfaceBandwidth", mode, "choose USER or CALC")
    if mode == "CALC":
        return math.inf, math.inf, math.inf
    first = _get(cfg, src, ARRAY, "Bandwidth").split(",")[0].strip()
    if not is_float_text(first):
        raise ConfigError(src, f"{ARRAY}.Bandwidth", shown(first)[1:-1], "must be a number")
    bw = float(first)
    if not (math.isfinite(bw) and 0 < bw <= MAX_COUNT):
        raise ConfigError(src, f"{ARRAY}.Bandwidth", first,
                          f"must be a number of words > 0 and at most {MAX_COUNT:,}")
    if not cfg.has_section("layout"):
        return bw, bw, bw
    ifmap = _count(cfg, src, "layout", "IfmapSRAMBankBandwidth")
    return float(ifmap), float(_count(cfg, src, "layout", "FilterSRAMBankBandwidth")), bw


def _profile_table(path: Path, rows: int, cols: int, dataflow: str, kib: dict[str, int],
                   ports: tuple[float, float, float]) -> dict[str, Any]:
    """The profile as a TOML table, with its [sources]."""
    clock_hz = ASSUMED_CLOCK_MHZ * 1e6
    peak = 2.0 * rows * cols * clock_hz  # one MAC (2 ops) per PE per cycle
    words = sum(ports) if all(map(math.isfinite, ports)) else 2.0 * (rows + cols) + cols
    # NB: CALC mode: DRAM sized to the array's edges (two operands in, one result out).
    dram_gb_s = words * WORD_BYTES * clock_hz / 1e9
    c = energy_constants()
    dram_w = dram_gb_s * 1e9 * c.dram_j_per_byte[ASSUMED_DRAM]
    tdp_w = TDP_HEADROOM * (peak / 2 * max(c.mac_j[p] for p in PRECISIONS) + dram_w)
    peaks = {("peak_tops_int8_dense" if p == "int8" else f"peak_tflops_{p}_dense"): peak / 1e12
             for p in PRECISIONS}
    key = f"{_FILE} {path.name} [{ARRAY}]"
    assumed = "assumed: SCALE-Sim"
    sources = {
        "compute.clock_mhz": f"{assumed} counts cycles and has no clock",
        "compute.cores": f"{key}: one array",
        "compute.mxu_rows": f"{key} ArrayHeight", "compute.mxu_cols": f"{key} ArrayWidth",
        "compute.mxu_count": f"{key}: one array",
        **{f"compute.matrix.{k}": "derived: 2 x rows x cols x clock (SCALE-Sim has no numeric "
           "format: one MAC per PE per cycle at any precision)" for k in peaks},
        "onchip_memory.unified_buffer_kib": f"{key} Ifmap + Filter + Ofmap SramSzkB",
        "offchip_memory.capacity_gib": f"{assumed} has no DRAM capacity",
        "offchip_memory.bandwidth_gb_s": (f"derived: {key} Bandwidth (words per cycle per "
                                          "operand port, 1-byte words) x 3 ports x clock"),
        "host_link.bandwidth_gb_s": (f"{assumed} has no host: hw_profiles/links/"
                                     f"{ASSUMED_HOST_LINK}.toml per direction"),
        "power.tdp_w": (f"{assumed} models no power: {TDP_HEADROOM:g} x the 45 nm MAC power at "
                        "peak plus DRAM at the ports' rate, so that the array never throttles"),
    }
    return {
        "class": "tpu",
        "display_name": f"SCALE-Sim {rows}x{cols} {dataflow} array ({path.name})",
        "vendor": "SCALE-Sim configuration",
        "notes": "Read from a SCALE-Sim .cfg; clock, DRAM technology and capacity, host link "
                 "and power are assumed.",
        "compute": {"clock_mhz": ASSUMED_CLOCK_MHZ, "cores": 1, "mxu_rows": rows,
                    "mxu_cols": cols, "mxu_count": 1, "dataflow": dataflow, "matrix": peaks},
        "onchip_memory": {"unified_buffer_kib": sum(kib.values())},
        "offchip_memory": {"technology": ASSUMED_DRAM, "capacity_gib": ASSUMED_CAPACITY_GIB,
                           "bandwidth_gb_s": dram_gb_s},
        "host_link": {"kind": ASSUMED_HOST_LINK,
                      "bandwidth_gb_s": load_link(ASSUMED_HOST_LINK).bandwidth_bytes_per_s / 1e9},
        "power": {"tdp_w": tdp_w},
        "sources": sources,
    }


_CFG_TEMPLATE = """[general]
run_name = {run_name}

[architecture_presets]
ArrayHeight: {rows}
ArrayWidth: {cols}
IfmapSramSzkB: {ifmap_kib}
FilterSramSzkB: {filter_kib}
OfmapSramSzkB: {ofmap_kib}
IfmapOffset: 0
FilterOffset: 10000000
OfmapOffset: 20000000
Bandwidth : {bw}
Dataflow : {dataflow}
MemoryBanks: 1
ReadRequestBuffer: 32
WriteRequestBuffer: 32

[layout]
IfmapCustomLayout: False
IfmapSRAMBankBandwidth: {bw}
IfmapSRAMBankNum: 1
IfmapSRAMBankPort: 2
FilterCustomLayout: False
FilterSRAMBankBandwidth: {bw}
FilterSRAMBankNum: 1
FilterSRAMBankPort: 2

[sparsity]
SparsitySupport : false
SparseRep : ellpack_block
OptimizedMapping : false
BlockSize : 8
RandomNumberGeneratorSeed : 40

[run_presets]
InterfaceBandwidth: USER
UseRamulatorTrace: False
"""


def cfg_text(rows: int, cols: int, ifmap_kib: int, filter_kib: int, ofmap_kib: int,
             words_per_cycle: int, dataflow: str, run_name: str = "accelsim") -> str:
    """A SCALE-Sim v3 .cfg for one array, every DRAM port at `words_per_cycle` (USER mode),
    as `read_profile` reads it and SCALE-Sim runs it."""
    return _CFG_TEMPLATE.format(run_name=run_name, rows=rows, cols=cols, ifmap_kib=ifmap_kib,
                                filter_kib=filter_kib, ofmap_kib=ofmap_kib,
                                bw=words_per_cycle, dataflow=dataflow)
