"""Human output of one simulation record: the answer first, then the slowest layers.

    print(render(record, layers=10))   # summary block, then the top 10 layers by time
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from accelsim.results.cluster_text import cluster_lines
from accelsim.results.headline import Headline, PowerSplit
from accelsim.results.serving_text import has_slo, overload_text, slo_text
from accelsim.results.textfit import WIDTH, text_table, wrap_lines

_UNIT = {"infer": "per batch", "train": "per step", "serve": "mean per request"}


def _num(x: float | None, fmt: str, unit: str = "") -> str:
    return "n/a" if x is None else f"{x:{fmt}}{unit}"


def _memory_line(mem: dict[str, Any]) -> str:
    cap = mem["capacity_bytes"]
    cap_s = "unknown capacity" if cap is None else f"{fmt_si(cap)}B"
    largest = mem.get("largest_batch_that_fits")
    most = "" if largest is None else f"; largest batch that fits: {largest:,}"
    verdict = "fits" if mem["fits"] else "DOES NOT FIT"
    parts = ", ".join(f"{k.removesuffix('_bytes').replace('_', ' ')} {fmt_si(v)}B"
                      for k, v in mem.items()
                      if k.endswith("_bytes") and k not in ("required_bytes", "capacity_bytes")
                      and v)
    return f"{fmt_si(mem['required_bytes'])}B of {cap_s} ({verdict}{most}) = {parts}"


def _software(hw: dict[str, Any]) -> str:
    """The stack that ran, "(default)" when the device class's default was used."""
    return hw["software"] + (" (default)" if hw.get("software_default") else "")


def summary_lines(r: dict[str, Any]) -> list[str]:
    """The summary block: what ran, the headline figures (`Headline`), the bottleneck, memory,
    notes."""
    w, hw, mem = r["workload"], r["hardware"], r["memory"]
    head = Headline.of(r)
    lines = []
    if not head.memory.fits:
        lines.append(f"DOES NOT FIT: {r['notes'][0].removeprefix('does not fit: ')}")
    prec = w["precision"]
    if hw.get("compute_precision", prec) != prec:
        prec += f" (matmuls in {hw['compute_precision']})"
    batch = "max batch" if w["mode"] == "serve" else "batch"  # (not the largest that fits)
    lines.append(f"{w['name']} {w['mode']}, {batch} {w['batch_size']}, {prec} on {hw['name']} "
                 f"({hw['class']}, {_software(hw)}) in {hw['system']}")
    fits, fig = head.memory.fits, head.figures
    over = overload_text(r) if fits else None
    if over:
        lines.append(f"  OVERLOADED   {over}")
    if fits:  # a decoder's token figures first: what its users read
        lines += _llm_lines(r, head)
        lines += _headline_lines(r, head)
        lines += _cost_lines(r.get("cost"))
    lines += [
        f"  bottleneck   {fig.bottleneck}: {fig.bottleneck_detail or ''}",
        f"  memory       {_memory_line(mem)}",
    ]
    if w["mode"] == "train" and fits and head.training is not None:  # (not a decoder's step)
        lines += _train_lines(r)
    if w["mode"] == "serve" and fits and head.serving is not None:
        sv = head.serving
        lines.append(
            f"  serving      p50 {duration_text(sv.latency_p50_s, 2)}, p95 "
            f"{duration_text(sv.latency_p95_s, 2)}, p99 {duration_text(sv.latency_p99_s, 2)}; mean "
            f"batch {r['batch_size_mean']:.1f}; {r['devices']} device(s)"
            + ("" if sv.offered_load is None else f"; offered load {sv.offered_load:.2f}"))
    if r.get("execution"):
        lines.append(_execution_line(r["execution"]))
    notes = r.get("notes", [])[0 if fits else 1:]
    lines += [f"  note         {n}" for n in notes]
    return lines


def _execution_line(x: dict[str, Any]) -> str:
    """--execute: what the kernels computed and what their zeros bought."""
    def share(v: float | None) -> str:
        return "n/a" if v is None else f"{v:.1%}"

    pruned = " (weights pruned to 2:4)" if x.get("pruned_2_4") else ""
    return (f"  executed     {x['precision']} kernels{pruned}, 1 sample: output error "
            f"{x['output_error']:.2e} vs fp32 (worst layer {x['max_layer_output_error']:.2e}); "
            f"zeros in {share(x['input_sparsity'])} of matmul inputs, "
            f"{share(x['weight_sparsity'])} of weights; {x['layers_with_2_4_weights']} layers "
            f"2:4 sparse; time -{x['time_saved_share']:.1%}, energy "
            f"-{x['energy_saved_share']:.1%} vs dense")


def _headline_lines(r: dict[str, Any], head: Headline) -> list[str]:
    fig = head.figures
    tput, power, per_j = fig.throughput_samples_per_s, fig.average_power_w, fig.samples_per_j
    lines = [
        f"  throughput   {tput:,.1f} samples/s",
        f"  latency      {duration_text(fig.latency_s)} {_UNIT[r['workload']['mode']]}",
    ]
    if fig.energy_j_per_sample is None:  # not modelled (LLM serving)
        return lines
    clock = r.get("clock") or {}
    if clock.get("power_limited_time_share"):  # DVFS under the power limit
        lines.append(f"  clock        {clock['sustained_mhz']:,.0f} MHz sustained of "
                     f"{clock['rated_mhz']:,.0f} rated (power-limited "
                     f"{clock['power_limited_time_share']:.0%} of the time)")
    energy = energy_text(fig.energy_j_per_sample) + "/sample"
    per_token = head.tokens.energy_j_per_token if head.tokens else None
    if per_token is not None:  # decoder training: samples are long
        energy += f" ({per_token:.3g} J/token)"
    return lines + [
        f"  energy       {energy}, {power_text(power)} average"
        f"{_split(fig.split)}, {'n/a' if per_j is None else per_energy_text(per_j)}",
    ]


def _usd(x: float) -> str:
    """Dollars at 3 significant digits ($0.000277, $4.92, $1,234)."""
    return f"${x:,.0f}" if x >= 1000 else f"${x:.3g}"


def _cost_lines(c: dict[str, Any] | None) -> list[str]:
    """The cost line where a price or an electricity price stands behind it (`sim.cost`);
    none where no $ figure is known (the record keeps the nulls and says why)."""
    if not c or (c["usd_per_hour"] is None and c["energy_usd_per_hour"] is None):
        return []
    parts = []
    if c["usd_per_hour"] is not None:
        parts.append(f"{_usd(c['usd_per_hour'])}/h ({c['devices']} x "
                     f"{_usd(c['usd_per_device_hour'])}, {c['price_offer'].split(' (')[0]})")
    if c["energy_usd_per_hour"] is not None:
        parts.append(f"energy {_usd(c['energy_usd_per_hour'])}/h at "
                     f"{_usd(c['usd_per_kwh'])}/kWh, PUE {c['pue']:g}")
    for key, what in (("usd_per_1000_samples", "per 1,000 samples"),
                      ("usd_per_million_tokens", "per million tokens"), ("usd_per_run", "the run")):
        if c[key] is not None:
            parts.append(f"{_usd(c[key])} {what}")
    return [f"  cost         {'; '.join(parts)}"] + [f"  note         {n}" for n in c["notes"]]


def energy_text(joules: float) -> str:
    """An energy in the unit its magnitude reads best in: mJ below 1 J, then J."""
    if joules < 1.0:
        return f"{joules * 1e3:.3f} mJ"
    return f"{joules:.3f} J" if joules < 10 else f"{joules:,.1f} J"


def power_text(watts: float) -> str:
    """"193 W", or "108.9 kW" from 10 kW up (a cluster)."""
    return f"{watts:.0f} W" if watts < 1e4 else f"{watts / 1e3:,.1f} kW"


def per_energy_text(samples_per_j: float) -> str:
    """Performance per watt, samples/J; below 0.01, per kJ (from 1 up) or per MJ, 3
    significant digits, rather than "7.72e-05 samples/J"."""
    if samples_per_j >= 0.01:
        return f"{samples_per_j:.2f} samples/J"
    if samples_per_j * 1e3 >= 1.0:
        return f"{samples_per_j * 1e3:.3g} samples/kJ"
    return f"{samples_per_j * 1e6:.3g} samples/MJ"


def _llm_lines(r: dict[str, Any], head: Headline) -> list[str]:
    """A decoder at the token level (`accelsim.llm`): TTFT, TPOT, tokens/s, MFU, split."""
    t = head.tokens
    if t is None:
        return []
    mfu = "n/a" if t.mfu is None else f"{t.mfu:.1%}"
    if t.ttft_s is not None:
        tpot = "n/a" if t.tpot_s is None else duration_text(t.tpot_s, 2)
        return [f"  tokens       TTFT {duration_text(t.ttft_s, 1)}, TPOT {tpot}, "
                f"{t.tokens_per_s:,.0f} output tokens/s, MFU {mfu}; KV cache "
                f"{fmt_si(t.kv_cache_bytes)}B; tp {r['tp']} x pp {r['pp']}"]
    if r.get("zero") is not None and r.get("step_time_s") is not None:  # decoder training
        return [f"  tokens       {t.tokens_per_s:,.0f} tokens/s, step "
                f"{r['step_time_s'] * 1e3:,.1f} ms ({r['global_batch_tokens']:,} tokens), MFU "
                f"{mfu}; tp {r['tp']} x pp {r['pp']}"
                + (f" x cp {r['cp']}" if r.get("cp", 1) > 1 else "")
                + f" x dp {r['dp']}, ZeRO {r['zero']}"
                + (", recompute" if r["recompute"] else "")] + _checkpoint_lines(r)
    if t.ttft_p50_s is not None:
        good = (f"; goodput {t.goodput_requests_per_s:.2f} req/s meeting {slo_text(r)}"
                if has_slo(r) else "")
        return [f"  tokens       TTFT p50 {duration_text(t.ttft_p50_s, 1)}, p99 "
                f"{duration_text(t.ttft_p99_s, 1)}; TPOT p50 {duration_text(t.tpot_p50_s, 2)}, "
                f"p99 {duration_text(t.tpot_p99_s, 2)}; {t.tokens_per_s:,.0f} tokens/s{good}; "
                f"{r['batching']} batching, tp {r['tp']} x pp {r['pp']}"]
    return []


def _checkpoint_lines(r: dict[str, Any]) -> list[str]:
    """A decoder training run's checkpoints (`accelsim.llm.checkpoint`), if it takes them."""
    c = r.get("checkpoint")
    if not c:
        return []
    return [f"  checkpoint   {fmt_si(c['bytes'])}B every {c['every_steps']} steps ({c['mode']}): "
            f"training waits {c['stall_s']:,.1f} s each ({c['lost_fraction']:.1%} of the run)",
            f"               write {c['write_s']:,.1f} s at {c['write_bytes_per_s'] / 1e9:,.1f} "
            f"GB/s (limited by {c['write_limited_by']}); restore {c['restore_s']:,.1f} s "
            f"(limited by {c['restore_limited_by']})"]


def _split(split: PowerSplit | None) -> str:
    """" (device 1 W + host 10 W)" where a host CPU ran part of the work, else ""."""
    host_w = None if split is None else split.host_power_w
    return f" (device {split.device_power_w:.2f} W + host {host_w:.1f} W)" if host_w else ""


def _train_lines(r: dict[str, Any]) -> list[str]:
    stalls = ", ".join(f"{k} {v['fraction']:.1%}" for k, v in r["stalls"].items())
    util = ", ".join(f"{k} {v:.0%}" for k, v in r["utilization"].items())
    return [
        f"  pipeline     {r['devices']} device{'s' if r['devices'] != 1 else ''}, "
        f"{r['steps']} steps, {r['samples']:,} samples of {r['dataset']} from "
        f"{r['storage']}, {r['run_time_s']:.2f} s simulated",
        f"  AU           {r['accelerator_utilization']:.1%} (MLPerf Storage: compute share of "
        f"the steps after the first; {au_verdict(r)}); stalls: {stalls}",
        f"  utilization  busy share of the whole run: {util}",
        _allreduce_line(r),
        "  energy parts " + ", ".join(f"{k} {_joules(v)}"
                                      for k, v in r["energy_breakdown_j"].items()),
    ] + _jobs_lines(r) + cluster_lines(r)


INPUT_STALLS = ("fetch", "prep", "transfer")


def au_verdict(r: dict[str, Any]) -> str:
    """"meets the 90% target", or "misses the 90% target", said to be not the input
    pipeline's doing where the stalls are mostly not input stalls (a run bound by its
    all-reduce or its slowest device: MLPerf Storage's target judges the storage)."""
    if r["meets_au_target"]:
        return f"meets the {r['au_target']:.0%} target"
    stalls = {k: v["fraction"] for k, v in r["stalls"].items()}
    fed = sum(stalls.get(k, 0.0) for k in INPUT_STALLS)
    rest = sum(stalls.values()) - fed
    if rest > fed:
        return (f"misses the {r['au_target']:.0%} target, not for its input: input stalls "
                f"{fed:.1%}, communication and slowest device {rest:.1%}")
    return f"misses the {r['au_target']:.0%} target"


def _jobs_lines(r: dict[str, Any]) -> list[str]:
    """Several training jobs on one node and dataset: this one's throughput and all of theirs."""
    jobs = r.get("jobs", 1)
    if jobs == 1:
        return []
    how = ("coordinated: one read and one decode of each sample feed them all"
           if r.get("coordinated") else "each with its own reads and decode")
    return [f"  jobs         {jobs} like this one on the node ({how}): this one "
            f"{r['throughput_samples_per_s']:,.1f} samples/s, all "
            f"{jobs * r['throughput_samples_per_s']:,.1f} samples/s"]


def _joules(v: float | None) -> str:
    """"1.23kJ", "0.0456 J", or "unknown" (a part whose power is not published)."""
    if v is None:
        return "unknown"
    return f"{fmt_si(v)}J" if v >= 1e3 else f"{v:.3g} J"


def _allreduce_line(r: dict[str, Any]) -> str:
    return "  all-reduce   " + allreduce_text(r)


def allreduce_text(r: dict[str, Any]) -> str:
    """What a training pipeline's gradient all-reduce cost, or that there is none (one
    device)."""
    if r["comm_link"] is None:
        return "none (one device)"
    every = "" if r["accumulate"] == 1 else f" once every {r['accumulate']} micro-steps"
    if r["overlap_allreduce"]:
        how = (f"{r['allreduce_buckets']} buckets of {fmt_si(r['bucket_bytes'])}B overlapped "
               f"with backward, which runs {r['comm_contention_share']:.0%} slower meanwhile")
    else:
        how = "one message after backward"
    if r.get("nodes", 1) > 1:
        every += (f" across {r['nodes']} nodes ({r['comm_network']} between them, "
                  f"{r['comm_network_time_s'] * 1e3:.2f} ms of it) and")
    return (f"{fmt_si(r['memory']['gradients_bytes'])}B of gradients{every} over "
            f"{r['comm_link']} ({r['allreduce_algorithm']}, "
            f"{r['comm_achievable_bandwidth_gb_s']:.0f} GB/s achievable), "
            f"{r['allreduce_time_s'] * 1e3:.2f} ms as one message; {how}; "
            f"communication/computation {r['comm_to_compute_ratio']:.2f}")


def layer_lines(r: dict[str, Any], top: int | None) -> list[str]:
    """The layers by time, slowest first (`top` of them, or all in graph order if None); a
    host-bound run (`host_bound_line`) says so in one line instead of rows of equal times."""
    layers = pd.DataFrame(r["layers"])
    if layers.empty:
        return []
    total_s = float(layers["time_s"].sum())
    layers["share"] = layers["time_s"] / total_s if total_s > 0 else 0.0
    if top is not None:
        layers = layers.sort_values("time_s", ascending=False, kind="stable").head(top)
        host = host_bound_line(r, layers)
        if host is not None:
            return ["", host]
        head = (f"Top {len(layers)} of {len(r['layers'])} layer rows by time "
                "(--layers all for every row):")
    else:
        head = f"All {len(layers)} layer rows:"
    shown = layers.assign(
        flops=layers["flops"].map(fmt_si), bytes=layers["bytes"].map(fmt_si),
        time_ms=(layers["time_s"] * 1e3).map(lambda x: f"{x:.4f}"),
        energy_mj=(layers["energy_j"] * 1e3).map(lambda x: f"{x:.4f}"),
        share=layers["share"].map(lambda s: f"{s:.1%}"))
    cols = ["name", "op", "phase", "flops", "bytes", "time_ms", "share", "energy_mj", "bound"]
    cols += [c for c in ("unit",) if c in shown]
    if "output_error" in shown:  # --execute: what the kernels computed
        shown = shown.assign(error=shown["output_error"].map(_opt(".1e")),
                             zeros_in=shown["input_sparsity"].map(_opt(".0%")),
                             zeros_w=shown["weight_sparsity"].map(_opt(".0%")))
        cols += ["error", "zeros_in", "zeros_w"]
    right = {i for i, c in enumerate(cols) if c not in ("name", "op", "phase", "bound", "unit")}
    cells = shown[cols].astype(str).to_numpy().tolist()
    return ["", head, *text_table(cols, cells, right, WIDTH, shrink=0)]


# NB: rows within 5% of one another read as equal; 80% of them per-op overhead is host-bound.
EQUAL_TIMES = 1.05
HOST_BOUND_SHARE = 0.8


def host_bound_line(r: dict[str, Any], top: pd.DataFrame) -> str | None:
    """When the slowest rows take about the same time and most are bound by per-op overhead
    (launch and dispatch on the host), one line saying so, with the host time per batch or
    step; else None."""
    all_rows = pd.DataFrame(r["layers"])
    times = top["time_s"]
    if len(top) < 2 or float(times.min()) <= 0 or times.max() > EQUAL_TIMES * times.min():
        return None
    if (top["bound"] == "overhead").mean() < HOST_BOUND_SHARE:
        return None
    over = all_rows[all_rows["bound"] == "overhead"]
    total_s = float(all_rows["time_s"].sum())
    per = "step" if r["workload"]["mode"] == "train" else "batch"
    return (f"Host-bound: per-op overhead (launch and dispatch on the host) sets "
            f"{len(over):,} of {len(all_rows):,} layer rows at about "
            f"{duration_text(float(over['time_s'].median()), 4)} each, "
            f"{duration_text(float(over['time_s'].sum()))} of the "
            f"{duration_text(total_s)} per {per}; no layer stands out (--layers all lists "
            "every row)")


def _opt(spec: str) -> Any:
    """A formatter for a measured column: "-" where a row has no measurement."""
    return lambda v: "-" if v is None or v != v else format(v, spec)


def render(r: dict[str, Any], layers: int | None = 10) -> str:
    """The whole human output; `layers` rows of the layer table (None: all, 0: none)."""
    if r.get("workload", {}).get("mode") == "federated":
        from accelsim.results.federated_text import federated_lines

        return "\n".join(federated_lines(r))
    lines = summary_lines(r)
    if layers != 0 and Headline.of(r).memory.fits:
        lines += layer_lines(r, layers)
    return "\n".join(wrap_lines(lines, WIDTH))


def duration_text(seconds: float, ms_digits: int = 3) -> str:
    """A duration in the unit its magnitude reads best in (issue 23): ms below a second (at
    `ms_digits` decimals, as before), then s, min or h with 3 significant digits or more."""
    if seconds < 1.0:
        return f"{seconds * 1e3:.{ms_digits}f} ms"
    for unit, scale in (("h", 3600.0), ("min", 60.0)):
        if seconds >= scale:
            return f"{seconds / scale:,.2f} {unit}"
    return f"{seconds:.3f} s"


def fmt_si(x: float) -> str:
    """1.23G-style number for tables."""
    for unit, scale in (("T", 1e12), ("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if abs(x) >= scale:
            return f"{x / scale:.2f}{unit}"
    return f"{x:.0f}"
