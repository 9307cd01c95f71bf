"""The report page of a token-level LLM run (`accelsim.llm.run`): inference of one batch,
serving, or a training step. What ran and on what split, the token figures (TTFT, TPOT,
tokens/s, KV cache, MFU; serving percentiles and goodput; training step, tokens/s, MFU, the
exposed TP and DP communication), what limits it beside the bandwidth and compute limits the
record carries, where a training step's time and energy go, the data-parallel exchange's events,
and device memory against capacity.

    text = llm_page("llama2_7b", "a100", {"prompt_tokens": 512, "batch": 8}, result)

NB: no re-simulated what-ifs as the pipeline page has (`accelsim.report.relief` varies the
pipeline's knobs); the limits and the largest batch and context that fit stand in.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from accelsim.llm.serve import request_times
from accelsim.llm.train_record import step_parts as train_step_parts
from accelsim.plots.breakdown import memory_figure, share_figure
from accelsim.plots.serving import distribution_figure, occupancy_figure
from accelsim.plots.timeline import gantt
from accelsim.report.cards import bottleneck_card, has_slo, slo_text, summary_html
from accelsim.report.html import (
    bottleneck_para,
    bullets,
    embed_figure,
    opening,
    page,
    pairs,
    para,
    section,
    table,
)
from accelsim.results.render import fmt_si
from accelsim.workload.scenario import Scenario

# memory entries that are not a part of what the GPU holds
NOT_PARTS = ("required_bytes", "capacity_bytes", "kv_cache_budget_bytes")


def is_token_level(rec: dict[str, Any]) -> bool:
    """Whether `rec` is a token-level LLM record (it carries the split and tokens/s)."""
    return "tp" in rec and "tokens_per_s" in rec


def _ms(x: float | None) -> str:
    return "n/a" if x is None else f"{x * 1e3:,.2f}"


def _pct(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.1%}"


def _setup(rec: dict[str, Any], knobs: dict[str, Any]) -> str:
    w, h = rec["workload"], rec["hardware"]
    split = f"tp {rec['tp']} x pp {rec['pp']}"
    if "dp" in rec:
        split += (f" x dp {rec['dp']} ({rec['nodes']} node(s)), ZeRO {rec['zero']}, "
                  f"recompute {'on' if rec['recompute'] else 'off'}, "
                  f"{rec['accumulate']} micro-batch(es) per step")
    rows: list[tuple[str, Any]] = [
        ("model", f"{w['name']} ({w['mode']}), {w['params']:,} parameters"
                  + (f" ({w['active_params']:,} active per token)"
                     if w.get("active_params") not in (None, w["params"]) else "")),
        ("precision", f"{w['precision']} (compute {h.get('compute_precision')})"),
        ("device", f"{h['name']} ({h['class']}), software {h['software']}"),
        ("system", h["system"]),
        ("split", split),
    ]
    if w.get("model_source"):
        rows.append(("model source", w["model_source"]))
    given = ", ".join(f"{k}={v}" for k, v in knobs.items()) or "none (the defaults)"
    rows.append(("knobs given", given))
    return pairs(rows)


def _tokens(rec: dict[str, Any]) -> str:
    mode = rec["workload"]["mode"]
    if mode == "train":
        rows = [("step time (s)", f"{rec['step_time_s']:.4g}"),
                ("tokens per step", f"{rec['global_batch_tokens']:,}"),
                ("tokens/s", f"{rec['tokens_per_s']:,.0f}"),
                ("MFU", _pct(rec["mfu"])),
                ("TP collectives exposed, bubble passes included (s)",
                 f"{rec['tp_comm_s']:.4g} ({rec['tp_events']:,} events per micro-batch)"),
                ("DP exchange exposed (s)", f"{rec['dp_comm_s']:.4g} "
                                            f"({rec['dp_collectives']:,} collectives, "
                                            f"{rec['dp_algorithm'] or 'none'})"),
                ("backward speed a collective takes", f"{rec['dp_contention_share']:.1%}"),
                ("pipeline bubble", f"{rec['pipeline_bubble']:.1%}"),
                ("optimizer (s)", f"{rec['optimizer_s']:.4g}"),
                ("energy (J/token)", f"{rec['energy_j_per_token']:.4g}")]
    elif mode == "serve":
        rows = [(k.removesuffix("_s").replace("_", " ") + " (ms)", _ms(rec[k]))
                for k in ("ttft_p50_s", "ttft_p99_s", "tpot_p50_s", "tpot_p99_s",
                          "latency_p50_s", "latency_p99_s")]
        rows += [("tokens/s", f"{rec['tokens_per_s']:,.0f}"),
                 ("requests/s", f"{rec['requests_per_s']:.3g}")]
        if has_slo(rec):  # without a target every request counts: goodput says nothing
            rows.append((f"goodput (requests/s meeting {slo_text(rec)})",
                         f"{rec['goodput_requests_per_s']:.3g}"))
        rows += [("batching", f"{rec['batching']}, mean running batch "
                              f"{rec['batch_size_mean']:.1f}, {rec['preemptions']} "
                              "preemptions"),
                 ("KV cache budget", f"{fmt_si(rec['kv_cache_bytes'])}B"),
                 ("energy (J/token)", f"{rec['energy_j_per_token']:.4g}")]
    else:
        rows = [("TTFT (ms)", _ms(rec["ttft_s"])), ("TPOT (ms)", _ms(rec["tpot_s"])),
                ("end-to-end (ms)", _ms(rec["e2e_latency_s"])),
                ("output tokens/s", f"{rec['tokens_per_s']:,.0f}"),
                ("prefill tokens/s", f"{rec['prefill_tokens_per_s']:,.0f}"),
                ("KV cache", f"{fmt_si(rec['kv_cache_bytes'])}B"),
                ("MFU (prefill, decode, all)", f"{_pct(rec['mfu_prefill'])}, "
                                               f"{_pct(rec['mfu_decode'])}, {_pct(rec['mfu'])}"),
                ("energy (J/token)", f"{rec['energy_j_per_token']:.4g}")]
    return table(["figure", "value"], rows, table_id="tokens", numeric=(1,))


def _limits(rec: dict[str, Any]) -> list[str]:
    out = [bottleneck_para(rec)]
    mode = rec["workload"]["mode"]
    if mode == "infer":
        rows = [("prefill (TTFT)", _ms(rec["ttft_s"]), _ms(rec["prefill_compute_limit_s"]),
                 "its FLOPs at the peak of every GPU"),
                ("decode step (TPOT)", _ms(rec["tpot_s"]), _ms(rec["decode_bandwidth_limit_s"]),
                 "weights and KV cache each GPU streams, at peak bandwidth "
                 f"({_pct(rec['decode_bandwidth_utilization'])} used)")]
        out.append(table(["phase", "time (ms)", "limit (ms)", "limit: what it is"], rows,
                         table_id="limits", numeric=(1, 2)))
        phases = pd.Series({"prefill": rec["ttft_s"],
                            "decode": rec["e2e_latency_s"] - rec["ttft_s"]})
        out.append(embed_figure(share_figure(phases, "time (ms)", "One batch's time by phase",
                                             1e3), "time by phase",
                                "Prefill (the TTFT) and the decode steps of one batch."))
    if mode == "train":
        out.append(embed_figure(share_figure(step_parts(rec), "time (ms)",
                                             "One training step's time", 1e3),
                                "step time by part", "Compute, the pipeline bubble, the TP "
                                "collectives and DP exchange left exposed, and the optimizer."))
    return out


def step_parts(rec: dict[str, Any]) -> pd.Series:
    """A training step's time split into parts that sum to it, s
    (`accelsim.llm.train_record.step_parts`)."""
    return pd.Series(train_step_parts(rec))


def _train_extra(rec: dict[str, Any], events: pd.DataFrame) -> list[str]:
    out = []
    parts = rec["energy_breakdown_j"]
    known = pd.Series({k: v for k, v in parts.items() if v is not None}, dtype=float)
    rows = [(k, "unknown" if v is None else f"{v:,.1f}") for k, v in parts.items()]
    out.append(section("Energy", embed_figure(
        share_figure(known, "energy per step (J)", "Energy by part"), "energy by part",
        f"{rec['energy_j_per_token']:.4g} J per token, {rec['average_power_w']:,.0f} W on "
        "average (the whole step: GPUs, links, switches and NICs)."),
        table(["part", "energy per step (J)"], rows, table_id="energy", numeric=(1,)),
        section_id="energy"))
    if len(events):
        fig = gantt(events, title="The data-parallel exchange of one step")
        out.append(section("Timeline", embed_figure(
            fig, "data-parallel exchange", "The gradient collectives (buckets, overlapping "
            "the last micro-batch's backward) on the GPU fabric and, across nodes, the NICs; "
            "one data-parallel group (the others run alike)."), section_id="timeline"))
    return out


def _requests(rec: dict[str, Any], events: pd.DataFrame) -> list[str]:
    """A served decoder's requests one by one (its `request` records): the distribution of
    TTFT, TPOT and latency, and the requests waiting and decoding through the run. NB: the
    engine's steps are not recorded one by one; the running batch is counted from each
    request's first token to its return."""
    times = request_times(events)
    dist = distribution_figure(times, rec.get("slo_ttft_s"), rec.get("slo_tpot_s"))
    occ = occupancy_figure(times, int(rec["workload"]["batch_size"]))
    return [embed_figure(dist, "TTFT, TPOT and latency distributions",
                         "Share of requests whose TTFT, TPOT and end-to-end latency are at or "
                         "below each value; dashed p50, dotted p99"
                         + (", red the SLO target." if has_slo(rec) else ".")),
            embed_figure(occ, "requests waiting and decoding over time",
                         "Requests decoding (the running batch: from a request's first token "
                         "to its return) and waiting for their first token (queued or in "
                         "prefill), through the run.")]


def _memory(rec: dict[str, Any]) -> str:
    mem = rec["memory"]
    parts = pd.Series({k.removesuffix("_bytes"): float(v) for k, v in mem.items()
                       if k.endswith("_bytes") and k not in NOT_PARTS and v})
    verdict = "fits" if mem["fits"] else "does NOT fit"
    fig = memory_figure(parts, mem["capacity_bytes"],
                        f"{mem['required_bytes'] / 1e9:.2f} GB per GPU: {verdict}")
    facts = [f"Needs {fmt_si(mem['required_bytes'])}B per GPU of "
             f"{fmt_si(mem['capacity_bytes'])}B: {verdict}."]
    if mem.get("largest_batch_that_fits") is not None:
        facts.append(f"Largest batch that fits: {mem['largest_batch_that_fits']:,}.")
    if mem.get("largest_context_that_fits") is not None:
        facts.append(f"Largest context that fits: {mem['largest_context_that_fits']:,} "
                     "tokens.")
    if mem.get("kv_bytes_per_token"):
        facts.append(f"KV cache: {fmt_si(mem['kv_bytes_per_token'])}B per token.")
    return para(" ".join(facts)) + embed_figure(fig, "device memory by part",
                                                "Device memory per GPU by part.")


def llm_page(workload: Any, hw: str, knobs: dict[str, Any], result: Any) -> str:
    """The report of a token-level LLM run already simulated (`result`: `accelsim.Result`)."""
    import accelsim

    rec = result.record
    w, h = rec["workload"], rec["hardware"]
    fits = result.fits
    verdict = [bottleneck_card(rec)] if fits else []
    parts = opening(rec, summary_html(rec, verdict, []), _setup(rec, knobs))
    if fits:
        parts += [section("Tokens", _tokens(rec), section_id="tokens"),
                  section("What limits it", *_limits(rec), section_id="bottleneck")]
        if w["mode"] == "train":
            parts += _train_extra(rec, result.events)
        if w["mode"] == "serve" and len(result.events):
            parts.append(section("Requests", *_requests(rec, result.events),
                                 section_id="requests"))
    else:
        parts.append(section("What limits it", bottleneck_para(rec),
                                   section_id="bottleneck"))
    parts.append(section("Device memory", _memory(rec), section_id="memory"))
    if rec["notes"]:
        parts.append(section("Notes", bullets(rec["notes"]), section_id="notes"))
    title = f"{w['name']} {w['mode']} on {h['system']}"
    subtitle = (f"{h['name']} ({h['class']}, {h['software']}), {w['precision']}, tp "
                f"{rec['tp']} x pp {rec['pp']} - accelsim report")
    name = workload.name if isinstance(workload, Scenario) else str(workload)
    call = ", ".join([repr(name), f"hw={hw!r}"] + [f"{k}={v!r}" for k, v in knobs.items()])
    footer = (f"Generated by accelsim {accelsim.__version__}; the same run in Python: "
              f"accelsim.simulate({call})")
    return page(title, "".join(parts), subtitle, footer)
