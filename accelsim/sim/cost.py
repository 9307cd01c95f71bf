"""What a run costs in US dollars: the accelerators' rent (`accelsim.profiles.prices`, or the
run's own `usd_per_device_hour`) and, where an electricity price is given, the energy at the
wall (average power x PUE x $/kWh). A figure with no price behind it is None, with a note;
never 0.

    record["cost"] = cost_block(record, usd_per_kwh=0.12, pue=1.3)

Figures: usd_per_hour (rent of the devices the run uses), energy_usd_per_hour,
usd_per_1000_samples (at the run's throughput, rent plus energy where both are known),
usd_per_million_tokens (decoders), usd_per_run (a training run's or a server run's simulated
time). NB: a cloud price bills power and host with the accelerator, so the energy figure is
reported beside the rent, not added to it; with no price, the $ per work figures are the
energy's alone.
"""

from __future__ import annotations

from typing import Any

from accelsim.profiles.prices import Price, device_price

SECONDS_PER_HOUR = 3600.0


def _rate(per_hour: float | None, per_s: float | None, units: float) -> float | None:
    """Dollars per `units` of work done at `per_s` a second, at `per_hour` dollars an hour."""
    if per_hour is None or not per_s:
        return None
    return per_hour / SECONDS_PER_HOUR / per_s * units


def cost_block(record: dict[str, Any], usd_per_kwh: float | None = None, pue: float = 1.0,
               usd_per_device_hour: float | None = None) -> dict[str, Any]:
    """The `cost` block of a record, its `notes` saying where a figure is missing or
    unverified (see the module docstring)."""
    device = record["hardware"]["name"]
    devices = int(record.get("devices") or 1)
    price: Price | None = None if usd_per_device_hour is not None else device_price(device)
    notes: list[str] = []
    if usd_per_device_hour is not None:
        each, offer = usd_per_device_hour, "given by the run"
    elif price is not None:
        each, offer = price.usd_per_device_hour, f"{price.offer}, as of {price.as_of}"
        if price.flagged_fields:
            notes.append(f"the price of {device} (hw_profiles/prices/{device}.toml) is "
                         "unverified: check it before relying on costs")
    else:
        each, offer = None, None
        notes.append(f"no price for {device} (hw_profiles/prices/): costs in $ are null; give "
                     "--usd-per-device-hour")
    rent_h = None if each is None else each * devices
    power_w = record.get("average_power_w")
    energy_h = (None if usd_per_kwh is None or power_w is None
                else power_w * pue / 1000.0 * usd_per_kwh)
    total_h = rent_h if rent_h is not None else energy_h
    if rent_h is None and energy_h is not None:
        notes.append("with no price for the devices, the $ per work figures are the energy's "
                     "alone")
    samples_s = record.get("throughput_samples_per_s")
    tokens_s = record.get("tokens_per_s")
    run_s = record.get("run_time_s")
    block = {
        "devices": devices, "usd_per_device_hour": each, "price_offer": offer,
        "usd_per_hour": rent_h, "energy_usd_per_hour": energy_h,
        "usd_per_kwh": usd_per_kwh, "pue": pue if usd_per_kwh is not None else None,
        "usd_per_1000_samples": _rate(total_h, samples_s, 1000.0),
        "usd_per_million_tokens": _rate(total_h, tokens_s, 1e6),
        "usd_per_run": (None if total_h is None or run_s is None
                        else total_h * run_s / SECONDS_PER_HOUR),
    }
    block["notes"] = notes
    return block
