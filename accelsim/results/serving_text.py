"""What a server's summary says in words, the terminal's and the report's alike: whether an
SLO was given (goodput means nothing without one), the SLO, and an overload.

    overload_text(rec)   # "arrivals 8,000/s exceed capacity 860/s: the queue grows ..." or None
"""

from __future__ import annotations

from typing import Any


def _rate(per_s: float) -> str:
    """8,000 or 12.3: whole numbers from 100 up, 3 significant digits below."""
    return f"{per_s:,.0f}" if per_s >= 100 else f"{per_s:.3g}"


def has_slo(rec: dict[str, Any]) -> bool:
    """Whether a served decoder was given a TTFT or TPOT target (goodput means something)."""
    return rec.get("slo_ttft_s") is not None or rec.get("slo_tpot_s") is not None


def slo_text(rec: dict[str, Any]) -> str:
    """"TTFT <= 500 ms and TPOT <= 50 ms"."""
    from accelsim.results.render import duration_text  # (render imports this module)

    parts = [f"{name} <= {duration_text(rec[key], 0)}" for name, key in
             (("TTFT", "slo_ttft_s"), ("TPOT", "slo_tpot_s")) if rec.get(key) is not None]
    return " and ".join(parts)


def overload_text(rec: dict[str, Any]) -> str | None:
    """The sentence saying a server is overloaded (arrivals beyond what it can serve), or None.
    A batch server: its offered load (arrival rate / capacity) is above 1. A decoder server:
    its record's bottleneck is "queueing" (waits grow through the run); its capacity is then
    the rate it served. NB: a decoder's capacity is not computed apart from the run."""
    load, capacity = rec.get("offered_load"), rec.get("capacity_samples_per_s")
    if load is not None and load > 1 and capacity:
        rate, n = load * capacity, rec.get("requests_served")
    elif rec.get("bottleneck") == "queueing" and rec.get("rate_per_s") and "tp" in rec:
        rate, capacity, n = rec["rate_per_s"], rec["requests_per_s"], rec.get("requests")
    else:
        return None
    return (f"arrivals {_rate(rate)}/s exceed capacity {_rate(capacity)}/s: the queue grows "
            f"without bound; percentiles are of the first {n:,} requests")
