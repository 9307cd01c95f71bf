"""Prices as data: what one accelerator-hour costs, with the offer, its date and its source.

Data: one TOML per priced device profile in `hw_profiles/prices/`, name = the device's name.
Schema:

    device               str   the device profile it prices (the file's stem)
    usd_per_device_hour  > 0   US dollars for one accelerator for one hour, its share of the
                               host, network and power included as the offer bills them
    offer                str   what was priced (the instance, region, purchase model)
    as_of                str   when the price was read ("YYYY-MM", or "unknown")

plus `[sources]`. A device with no file has no price: costs in $ are then null, never 0.

    price = device_price("h100")      # Price or None
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from accelsim.datafiles import builtin_files
from accelsim.errors import ConfigError
from accelsim.schema import flagged_fields, parse_profile, positive, text
from accelsim.tomlfiles import read_toml

MAX_USD_PER_HOUR = 1e6  # NB: above any accelerator's rent; a larger figure is a typo
FIELDS = (
    text("device"),
    positive("usd_per_device_hour", high=MAX_USD_PER_HOUR),
    text("offer"),
    text("as_of", sourced=False),
)


@dataclass(frozen=True)
class Price:
    """One accelerator-hour's price (US dollars) and where it came from."""

    device: str
    usd_per_device_hour: float
    offer: str
    as_of: str
    sources: dict[str, str] = field(default_factory=dict, compare=False, repr=False)

    @property
    def flagged_fields(self) -> tuple[str, ...]:
        return flagged_fields(self.sources)


def load_price(path: str | Path) -> Price:
    """A price file by path; its `device` must be its stem."""
    path = Path(path)
    values, sources = parse_profile(read_toml(path), FIELDS, str(path))
    if values["device"] != path.stem:
        raise ConfigError(str(path), "device", values["device"],
                          f"must name the file's device, {path.stem!r}")
    return Price(sources=sources, **values)


def device_price(device: str) -> Price | None:
    """The built-in price of device profile `device`, or None where none is known."""
    files = builtin_files("hw_profiles", "prices/*.toml")
    return load_price(files[device]) if device in files else None


def priced_devices() -> list[str]:
    return sorted(builtin_files("hw_profiles", "prices/*.toml"))
