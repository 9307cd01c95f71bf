"""`accelsim calibrate`: measure this host with the project's own kernels and write its
profiles (a CPU device, a numpy software stack, a storage medium; PyTorch where importable)."""

from __future__ import annotations

import click

from accelsim.cli.common import cli, echo_json


@cli.command()
@click.option("--out", "out_dir", type=click.Path(file_okay=False), default="calibration",
              show_default=True,
              help="Folder for the profiles and calibration.json (created).")
@click.option("--budget", type=click.Choice(["full", "tiny"]), default="full", hidden=True,
              help="tiny: a few small sizes in fp32 only (tests).")
@click.option("--no-torch", is_flag=True, help="Do not measure PyTorch even if importable.")
@click.option("--cpu-time", is_flag=True, help="Time by the process's CPU time, not the wall "
              "clock, numpy's BLAS (and PyTorch) on one thread: on a host shared with other "
              "work, what the kernels take alone on one core.")
@click.option("--on-busy", type=click.Choice(["cpu-time", "refuse", "wall"]),
              default="cpu-time", show_default=True,
              help="Where the host is busy before the cases (load average, BLAS scaling): "
              "switch to --cpu-time, refuse, or keep the wall clock. Said and written either "
              "way.")
@click.option("--json", "as_json", is_flag=True, help="Print the summary as one JSON object.")
def calibrate(out_dir: str, budget: str, no_torch: bool, cpu_time: bool, on_busy: str,
              as_json: bool) -> None:
    """Measure this host (GEMMs, convolutions, attention, normalisation and elementwise ops
    through the numpy kernels, a memory stream, disk reads, JPEG decode) and write profiles
    for `simulate --hw OUT/host-cpu.toml --software OUT/numpy-host.toml`."""
    from accelsim.calibrate.run import calibrate as run_calibration
    from accelsim.results.files import output_folder

    folder = output_folder(out_dir, "calibrate --out")  # the text: "" is not Path("") = "."
    result = run_calibration(folder, budget=budget, progress=not as_json, torch=not no_torch,
                             cpu_time=cpu_time, on_busy=on_busy)
    s = result.summary
    if as_json:
        echo_json(s)
        return
    numpy_fit = s["numpy"]
    click.echo(f"calibrated {s['cpu']} ({s['cores']} CPUs) on {s['host']}, {s['date']} "
               f"({s['clock']})")
    click.echo(f"  host: {_load_line(s)}")
    boosted = s["clock_mhz"] > s["reported_clock_mhz"]
    clock = (f"at {s['clock_mhz']:,.0f} MHz, the clock the in-cache GEMM implies (reported "
             f"{s['reported_clock_mhz']:,.0f})" if boosted else
             f"at the reported {s['clock_mhz']:,.0f} MHz (the in-cache GEMM stays below it)")
    click.echo(f"  fp32 vector peak {s['fp32_vector_peak_flops_per_s'] / 1e9:.1f} GFLOP/s "
               f"{clock}, memory stream {s['stream_bytes_per_s'] / 1e9:.1f} GB/s (measured)")
    effs = ", ".join(f"{k} {v:.3g}" for k, v in numpy_fit["efficiency"].items()
                     if k.startswith(("gemm_", "conv_")))
    click.echo(f"  numpy: {numpy_fit['per_kernel_s'] * 1e6:.1f} us per op; of peak: {effs} "
               f"(every op kind in the stack file); median |fit error| "
               f"{numpy_fit['median_abs_fit_error']:.1%} over {len(numpy_fit['cases'])} cases")
    power = s["power"]
    if power["limits_clock"]:
        mean = power["package_mean_w_during_cases"]
        click.echo(f"  power: RAPL limit {power['tdp_w']:g} W (measured)" +
                   (f", {mean:.1f} W mean over the cases" if mean is not None else ""))
    else:
        click.echo(f"  power: no power limit readable (RAPL): TDP {power['tdp_w']:g} W assumed "
                   "for energy only, not limiting the clock")
    for name in ("numpy", "pytorch"):
        over = s[name].get("clamped") or {}
        if over:
            click.echo(f"  {name}: fitted above their cap, written at it (a term the model "
                       "lacks): " + ", ".join(f"{k} {v[0]:.3g} -> {v[1]:g}"
                                              for k, v in over.items()))
    disk = s["disk"]
    click.echo(f"  disk: {disk['read_bandwidth_bytes_per_s'] / 1e6:.0f} MB/s sequential, "
               f"{disk['random_read_4k_iops']:.0f} IOPS at queue depth 1"
               + (" (page cache probably answered)" if disk["cached"] else ""))
    jpeg = s["jpeg_decode_s_per_image"]
    click.echo(f"  JPEG decode: {jpeg * 1e3:.2f} ms per image" if jpeg is not None
               else f"  JPEG decode: {s['jpeg_note']}")
    torch_s = s["pytorch"]
    click.echo(f"  pytorch: {torch_s['skipped']}" if "skipped" in torch_s else
               f"  pytorch {torch_s['version']}: {torch_s['per_kernel_s'] * 1e6:.1f} us per op")
    click.echo(f"  note: {s['note']}")
    for kind, path in result.files.items():
        click.echo(f"  wrote {kind}: {path}")


def _state(load: dict) -> str:
    return "busy: " + "; ".join(load["reasons"]) if load["busy"] else "idle"


def _load_line(s: dict) -> str:
    """What the host's load was and what calibration did about it."""
    threads = s["blas_threads"]
    text = (f"before the cases {_state(s['host_load_before'])}; during them "
            f"{_state(s['host_load'])} (numpy's BLAS on "
            f"{threads if threads is not None else 'its default'} thread(s))")
    after = s["host_load"]
    if s["switched_to_cpu_time"]:
        text += "; so timed by CPU time on one thread (--on-busy cpu-time)"
    elif after["busy"] and not s["cpu_time_asked"]:
        text += ("; timed by wall time all the same: the figures lean slow (rerun when idle, "
                 "or with --cpu-time)")
    return text
