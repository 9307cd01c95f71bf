"""A report's summary as cards: the answer (the figures a reader came for, by mode) and the
verdict (what would relieve the bottleneck, the bottleneck, an overload), read from the
record's `Headline`, not from the terminal text.

    answer_cards(rec)        # [Card("throughput", "2,345.6 samples/s", ""), ...]
    summary_html(rec, [bottleneck_card(rec)], notes=[])
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from accelsim.results.headline import Headline
from accelsim.results.render import au_verdict, duration_text, fmt_si
from accelsim.results.serving_text import has_slo, overload_text, slo_text

_PER = {"infer": "per batch", "train": "per step", "serve": "mean per request"}


@dataclass(frozen=True)
class Card:
    """One figure of the summary: what it is, its value with unit, a line of context; `kind`
    styles it ("answer", "relief", "bottleneck", "alert")."""

    label: str
    value: str
    detail: str = ""
    kind: str = "answer"


def _ms(seconds: float | None, digits: int = 2) -> str:
    return "n/a" if seconds is None else duration_text(seconds, digits)


def _pct(share: float | None) -> str:
    return "n/a" if share is None else f"{share:.1%}"


def _energy(j_per_sample: float) -> str:
    return f"{j_per_sample * 1e3:.3g} mJ" if j_per_sample < 1 else f"{j_per_sample:,.3g} J"


def answer_cards(rec: dict[str, Any]) -> list[Card]:
    """The figures of the run, most wanted first: AU for a training pipeline, p99 for a
    server, TTFT, TPOT and tokens/s for a decoder; for a run that does not fit, what it needs
    against what the device has."""
    head = Headline.of(rec)
    if not head.memory.fits:
        mem = head.memory
        parts = ([] if mem.capacity_bytes is None
                 else [f"the device has {fmt_si(mem.capacity_bytes)}B"])
        if mem.largest_batch_that_fits is not None:
            parts.append(f"the largest batch that fits: {mem.largest_batch_that_fits:,}")
        return [Card("does not fit", f"needs {fmt_si(mem.required_bytes)}B per device",
                     "; ".join(parts), "alert")]
    if head.tokens is not None and "tp" in rec:
        return _token_cards(rec, head)
    fig, mode = head.figures, rec["workload"]["mode"]
    out = []
    if mode == "train" and head.training is not None:
        out.append(Card("accelerator utilisation", _pct(rec["accelerator_utilization"]),
                        f"MLPerf Storage AU; {au_verdict(rec)}"))
    if mode == "serve" and head.serving is not None:
        sv = head.serving
        out.append(Card("p99 latency", _ms(sv.latency_p99_s),
                        f"p50 {_ms(sv.latency_p50_s)}, p95 {_ms(sv.latency_p95_s)}"))
    tput = fig.throughput_samples_per_s
    out.append(Card("throughput", (f"{tput:,.1f}" if tput >= 10 else f"{tput:.3g}") + " samples/s",
                    f"{rec.get('devices', 1)} accelerator(s)"))
    out.append(Card("latency", _ms(fig.latency_s, 3), _PER[mode]))
    if fig.energy_j_per_sample is not None:
        per_w = fig.samples_per_j
        out.append(Card("energy", f"{_energy(fig.energy_j_per_sample)}/sample",
                        f"{fig.average_power_w:,.0f} W average"
                        + ("" if per_w is None else f", {per_w:.3g} samples/J")))
    return out


def _token_cards(rec: dict[str, Any], head: Headline) -> list[Card]:
    t, mode = head.tokens, rec["workload"]["mode"]
    assert t is not None
    if mode == "train":
        return [Card("tokens/s", f"{t.tokens_per_s:,.0f}",
                     f"{rec['global_batch_tokens']:,} tokens per step"),
                Card("step time", _ms(rec["step_time_s"]), f"tp {rec['tp']} x pp {rec['pp']} "
                     f"x dp {rec['dp']}, ZeRO {rec['zero']}"),
                Card("MFU", _pct(t.mfu), "model FLOPs / peak of every GPU"),
                Card("energy", f"{t.energy_j_per_token:.3g} J/token",
                     f"{rec['average_power_w']:,.0f} W average")]
    if mode == "serve":
        out = [Card("TTFT", _ms(t.ttft_p50_s, 1), f"p50; p99 {_ms(t.ttft_p99_s, 1)}"),
               Card("TPOT", _ms(t.tpot_p50_s), f"p50; p99 {_ms(t.tpot_p99_s)}"),
               Card("tokens/s", f"{t.tokens_per_s:,.0f}",
                    f"{rec['requests_per_s']:.3g} requests/s served")]
        if has_slo(rec):
            out.append(Card("goodput", f"{t.goodput_requests_per_s:.3g} req/s",
                            f"{rec['slo_met_fraction']:.1%} of requests meet {slo_text(rec)}"))
        return out
    return [Card("TTFT", _ms(t.ttft_s, 1), "prefill of the batch"),
            Card("TPOT", _ms(t.tpot_s), "one decode step"),
            Card("tokens/s", f"{t.tokens_per_s:,.0f}", "output tokens, the whole batch"),
            Card("MFU", _pct(t.mfu), f"KV cache {fmt_si(t.kv_cache_bytes or 0)}B")]


def bottleneck_card(rec: dict[str, Any]) -> Card:
    """What bounds the run, and why (`Headline.figures`)."""
    fig = Headline.of(rec).figures
    return Card("bottleneck", fig.bottleneck, fig.bottleneck_detail or "", "bottleneck")


def summary_html(rec: dict[str, Any], verdict: list[Card], notes: list[str]) -> str:
    """The summary section's body: the answer's cards, an overload said in words, the verdict
    (`verdict`: relief, bottleneck) and `notes` as a list."""
    from accelsim.report.html import bullets, cards

    over = overload_text(rec)
    alert = [Card("overloaded", over, "", "alert")] if over else []
    return cards(answer_cards(rec)) + cards(alert + verdict) + bullets(notes)
