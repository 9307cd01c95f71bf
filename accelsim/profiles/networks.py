"""Client networks of federated learning: the link a phone or an edge board reaches its
server over (LTE, Wi-Fi, ...), as measured, with its radio's power model.

Data: one TOML per network in `hw_profiles/networks/`, name = file stem. Schema:

    description                 str   one line
    downlink_mbps, uplink_mbps  > 0   sustained throughput a client gets, Mbit/s (10^6 bit/s)
    rtt_ms                      >= 0  round-trip time to the server's side of the network
    radio_base_w                >= 0  optional: the radio's draw while active, W
    radio_w_per_uplink_mbps     >= 0  optional: added per Mbit/s sent
    radio_w_per_downlink_mbps   >= 0  optional: added per Mbit/s received
                                      (absent: the radio's energy is unknown, reported null)

plus `[sources]`. NB: the power model is Huang et al.'s (MobiSys 2012) linear one; the radio's
tail (it stays in a high-power state for seconds after a transfer) is not modelled.

    net = load_network("lte")
    net.uplink_bytes_per_s, net.radio_power_w(uplink_bytes_per_s=net.uplink_bytes_per_s)
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from accelsim.datafiles import builtin_files
from accelsim.physical import BANDWIDTH, DURATION, POWER
from accelsim.schema import flagged_fields, non_negative, parse_profile, positive, text
from accelsim.tomlfiles import find_profile, read_toml

MBIT = 1e6 / 8  # bytes per second in one Mbit/s
_W_PER_MBPS = 1.0 / MBIT  # W per Mbit/s -> W per byte/s

FIELDS = (
    text("description"),
    positive("downlink_mbps", MBIT, "downlink_bytes_per_s", span=BANDWIDTH),
    positive("uplink_mbps", MBIT, "uplink_bytes_per_s", span=BANDWIDTH),
    non_negative("rtt_ms", 1e-3, "rtt_s", span=DURATION),
    non_negative("radio_base_w", required=False, span=POWER),
    non_negative("radio_w_per_uplink_mbps", _W_PER_MBPS, "radio_w_per_uplink_byte_s",
                 required=False),
    non_negative("radio_w_per_downlink_mbps", _W_PER_MBPS, "radio_w_per_downlink_byte_s",
                 required=False),
)


@dataclass(frozen=True)
class Network:
    """A client network in SI units (bytes/s, s, W)."""

    name: str
    description: str
    downlink_bytes_per_s: float
    uplink_bytes_per_s: float
    rtt_s: float
    radio_base_w: float | None = None
    radio_w_per_uplink_byte_s: float | None = None
    radio_w_per_downlink_byte_s: float | None = None
    sources: dict[str, str] = field(default_factory=dict, compare=False, repr=False)

    @property
    def has_power_model(self) -> bool:
        return None not in (self.radio_base_w, self.radio_w_per_uplink_byte_s,
                            self.radio_w_per_downlink_byte_s)

    def radio_power_w(self, uplink_bytes_per_s: float = 0.0,
                      downlink_bytes_per_s: float = 0.0) -> float | None:
        """The radio's draw at these rates, W (None: no power model in the profile)."""
        if not self.has_power_model:
            return None
        return (self.radio_base_w + self.radio_w_per_uplink_byte_s * uplink_bytes_per_s
                + self.radio_w_per_downlink_byte_s * downlink_bytes_per_s)

    @property
    def flagged_fields(self) -> tuple[str, ...]:
        return flagged_fields(self.sources)


def load_network(name_or_path: str | Path) -> Network:
    """A built-in network by name (`available_networks()`) or a user TOML by path."""
    path = find_profile(name_or_path, "networks/*.toml", "network")
    values, sources = parse_profile(read_toml(path), FIELDS, str(path))
    return Network(name=path.stem, sources=sources, **values)


def available_networks() -> list[str]:
    return sorted(builtin_files("hw_profiles", "networks/*.toml"))
