"""Costs in US dollars (accelsim.sim.cost, hw_profiles/prices/): closed forms from the
price files and the run's own figures; a missing price is null with a note, never 0."""

from __future__ import annotations

import pytest

from accelsim.errors import AccelsimError
from accelsim.profiles.devices import list_profiles
from accelsim.profiles.prices import device_price, load_price, priced_devices
from accelsim.run import run_simulation
from accelsim.sim.knobs import make_config


def test_every_price_file_loads_with_a_source():
    names = {p.name for p in list_profiles()}
    assert priced_devices()
    for device in priced_devices():
        price = device_price(device)
        assert price.device in names
        assert price.usd_per_device_hour > 0 and price.sources["usd_per_device_hour"]


def test_rent_per_work_closed_form():
    rec = run_simulation(make_config("resnet50-train", "dgx-h100", steps=10)).record
    each = device_price("h100").usd_per_device_hour
    c = rec["cost"]
    assert c["devices"] == rec["devices"] == 8
    assert c["usd_per_hour"] == pytest.approx(8 * each)
    assert c["usd_per_1000_samples"] == pytest.approx(
        8 * each / 3600 / rec["throughput_samples_per_s"] * 1000)
    assert c["usd_per_run"] == pytest.approx(8 * each * rec["run_time_s"] / 3600)
    assert c["energy_usd_per_hour"] is None and c["usd_per_kwh"] is None


def test_energy_cost_and_a_given_price():
    rec = run_simulation(make_config("resnet50", "a100", batch=32, usd_per_kwh=0.2, pue=1.5,
                                     usd_per_device_hour=2.5)).record
    c = rec["cost"]
    assert c["energy_usd_per_hour"] == pytest.approx(rec["average_power_w"] * 1.5 / 1000 * 0.2)
    assert c["usd_per_hour"] == 2.5 and c["price_offer"] == "given by the run"


def test_tokens_priced_for_decoders():
    rec = run_simulation(make_config("llama3_8b", "h100", mode="serve", rate=2,
                                     requests=20)).record
    each = device_price("h100").usd_per_device_hour
    assert rec["cost"]["usd_per_million_tokens"] == pytest.approx(
        each / 3600 / rec["tokens_per_s"] * 1e6)


def test_no_price_is_null_with_a_note():
    assert device_price("a100") is None  # the 80 GB SXM: no sourced price in the files
    c = run_simulation(make_config("resnet50", "a100")).record["cost"]
    assert c["usd_per_hour"] is None and c["usd_per_1000_samples"] is None
    assert any("no price for a100" in n for n in c["notes"])
    e = run_simulation(make_config("resnet50", "a100", usd_per_kwh=0.1)).record["cost"]
    assert e["usd_per_1000_samples"] is not None  # the energy's alone, and said so
    assert any("energy's alone" in n for n in e["notes"])


def test_bad_prices(tmp_path):
    with pytest.raises(AccelsimError, match="pue"):
        make_config("resnet50", "a100", pue=0.5)
    f = tmp_path / "h100.toml"
    f.write_text('device = "a100"\nusd_per_device_hour = 1.0\noffer = "x"\nas_of = "2025-01"'
                 '\n[sources]\nusd_per_device_hour = "assumed: test"\n', encoding="utf-8")
    with pytest.raises(AccelsimError, match="device"):
        load_price(f)


def test_cost_line_only_where_a_price_stands():
    from accelsim.results.render import summary_lines

    priced = run_simulation(make_config("resnet50", "t4")).record
    line = [x for x in summary_lines(priced) if x.lstrip().startswith("cost")]
    assert line and "$0.526/h" in line[0]
    unpriced = run_simulation(make_config("resnet50", "a100")).record
    assert not [x for x in summary_lines(unpriced) if x.lstrip().startswith("cost")]


def test_cost_knobs_never_silently_dropped():
    with pytest.raises(AccelsimError, match="give usd_per_kwh"):
        run_simulation(make_config("resnet50", "t4", pue=1.4))
    with pytest.raises(AccelsimError, match="do not apply to mode federated"):
        run_simulation(make_config("mobilenet_v2", "jetson-orin", mode="federated",
                                   usd_per_kwh=0.1))
