"""What one host core costs to prepare a sample: the dataset's measured per-core figure,
rescaled from the CPU it was measured on to the system's host CPU.

Rule (a contract; `prep_scale`): decode + augment time per sample on one core is
    t_host = t_ref x (f_ref / f_host) x ((1 - s) + s x w_ref / w_host)
- f: the core's single-thread-equivalent clock (`single_thread_equiv_clock` of CPU profiles:
  max turbo x per-clock performance relative to an Ice Lake core, the same figure that scales
  the framework's host time in `accelsim.profiles.software`), else its max turbo, else its clock;
  for the reference, the dataset's `prep_reference_clock_ghz`. Per-clock performance and clock
  enter once, as a product: an unvectorised decoder's time is cycles / clock, and cycles per
  sample scale inversely with the core's per-clock performance.
- w: the SIMD width the decoder can use, min(the core's `simd_width_bits`, the widest path of
  libjpeg-turbo, `assumed.prep_simd_width_cap_bits`); s: the share of decode time spent in its
  SIMD kernels (IDCT, colour conversion, resampling; the Huffman decode is scalar),
  `assumed.prep_simd_time_share` in `hw_profiles/efficiency/cpu.toml`. Amdahl's law over the
  two parts.

    scale, note = prep_scale(dataset, system.host)
    prep_s = dataset.prep_s_per_sample_per_core * scale

A dataset without a reference CPU, or a host CPU without a clock, keeps its figure (scale 1)
and the note says so.
"""

from __future__ import annotations

from typing import Any

from accelsim.errors import AccelsimError
from accelsim.profiles.efficiency import load_efficiency


def core_clock_hz(compute: Any) -> float | None:
    """A CPU core's single-thread-equivalent clock, else its max turbo, else its clock."""
    for attr in ("single_thread_equiv_clock_hz", "max_turbo_clock_hz", "clock_hz"):
        value = getattr(compute, attr, None)
        if value:
            return float(value)
    return None


def simd_term(width_ref_bits: int | None, width_host_bits: int | None) -> float:
    """(1 - s) + s x w_ref / w_host with both widths capped at the decoder's widest path;
    1 when either width is unknown."""
    if not width_ref_bits or not width_host_bits:
        return 1.0
    eff = load_efficiency("cpu")
    cap, share = eff["assumed.prep_simd_width_cap_bits"], eff["assumed.prep_simd_time_share"]
    w_ref, w_host = min(width_ref_bits, cap), min(width_host_bits, cap)
    return (1.0 - share) + share * w_ref / w_host


def host_cpu(host: Any) -> tuple[str, float | None, int | None]:
    """(name, single-thread-equivalent clock in Hz, SIMD width in bits) of a system's host CPU:
    its profile, else the inline definition in the system file (clock only)."""
    if host.cpu_inline is not None:
        return host.cpu_inline.name, host.cpu_inline.clock_hz, None
    from accelsim.profiles.devices import load_profile

    try:
        compute = load_profile(host.cpu).compute
    except AccelsimError:
        return host.cpu, None, None
    return host.cpu, core_clock_hz(compute), getattr(compute, "simd_width_bits", None)


def prep_scale(dataset: Any, host: Any) -> tuple[float, str]:
    """The factor on `dataset.prep_s_per_sample_per_core` for `host` (see the module
    docstring), and one line saying what it rests on."""
    f_ref = dataset.prep_reference_clock_hz
    name, f_host, w_host = host_cpu(host)
    if dataset.prep_s_per_sample_per_core <= 0:
        return 1.0, ""
    if f_ref is None:
        return 1.0, (f"dataset '{dataset.name}' names no CPU its preparation figure was "
                     "measured on: not rescaled to the host CPU")
    if f_host is None:
        return 1.0, (f"host CPU '{name}' has no clock figure: preparation not rescaled from "
                     "the dataset's reference CPU")
    scale = f_ref / f_host * simd_term(dataset.prep_reference_simd_width_bits, w_host)
    simd = ""
    if host.cpu_inline is not None:
        simd = ("; an inline CPU: its raw clock, per-clock performance and SIMD width "
                "unknown, taken as the reference's")
    elif w_host is None and dataset.prep_reference_simd_width_bits:
        simd = "; its SIMD width is unknown, taken as the reference's"
    return scale, (f"preparation {dataset.prep_s_per_sample_per_core * 1e3:.3g} ms/sample per "
                   f"core on the dataset's reference CPU, x{scale:.3g} on host CPU '{name}' "
                   f"(single-thread clock {f_host / 1e9:.3g} vs {f_ref / 1e9:.3g} GHz{simd})")
