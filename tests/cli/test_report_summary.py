"""A report's summary is cards, not terminal text: the answer (AU, throughput; TTFT, TPOT,
tokens/s for a decoder) and the relief first, each value that of an independent simulation;
an overloaded server is called overloaded; goodput shows only where an SLO is given."""

import json
import re
from html.parser import HTMLParser

import accelsim
from accelsim.report.page import build_page
from accelsim.report.relief import format_metric
from accelsim.results.render import duration_text
from tests.helpers.report_pages import Page


class Cards(HTMLParser):
    """The summary section's cards: (kind, label, value, detail), in page order."""

    def __init__(self, text: str) -> None:
        super().__init__()
        self.cards: list[dict[str, str]] = []
        self._in_summary = False
        self._part: str | None = None
        self.feed(text)

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "section":
            self._in_summary = a.get("id") == "summary"
        classes = (a.get("class") or "").split()
        if self._in_summary and tag == "div" and "card" in classes:
            self.cards.append({"kind": classes[-1]})
        elif self._in_summary and tag == "div" and classes and classes[0] in (
                "label", "value", "detail"):
            self._part = classes[0]

    def handle_endtag(self, tag):
        if tag == "section":
            self._in_summary = False
        self._part = None if tag == "div" else self._part

    def handle_data(self, data):
        if self._part:
            self.cards[-1][self._part] = self.cards[-1].get(self._part, "") + data

    def by_label(self) -> dict[str, dict[str, str]]:
        return {c["label"]: c for c in self.cards}


def _summary(text: str) -> str:
    return text[text.index('id="summary"'):text.index('id="setup"')]


def test_training_summary_leads_with_au_and_the_relief_of_an_independent_run():
    knobs = {"steps": 12, "prep_workers": 2}
    text = build_page("resnet50-train", "dgx-a100", knobs)
    assert "<pre" not in _summary(text)  # no terminal text pasted in
    cards = Cards(text).cards
    assert cards[0]["label"] == "accelerator utilisation"
    rec = accelsim.simulate("resnet50-train", "dgx-a100", **knobs).record
    assert cards[0]["value"] == f"{rec['accelerator_utilization']:.1%}"
    relief = next(c for c in cards if c["kind"] == "relief")
    assert cards.index(relief) < len(cards) - 1  # before the bottleneck, in the first section
    changed = json.loads(Page(text).row_attrs["relief"][1]["data-knobs"])
    after = accelsim.simulate("resnet50-train", "dgx-a100", **changed).record
    assert relief["value"].endswith(
        "to " + format_metric("accelerator_utilization", after["accelerator_utilization"]))
    assert "prep workers" in relief["value"]


def test_decoder_summary_leads_with_ttft_tpot_and_tokens_per_s_without_goodput():
    knobs = {"mode": "serve", "prompt_tokens": 128, "output_tokens": 32, "rate": 4,
             "requests": 100}
    text = build_page("llama2_7b", "a100", knobs)
    cards = Cards(text).cards
    assert [c["label"] for c in cards[:3]] == ["TTFT", "TPOT", "tokens/s"]
    rec = accelsim.simulate("llama2_7b", "a100", **knobs).record
    assert cards[0]["value"] == duration_text(rec["ttft_p50_s"], 1)
    assert cards[1]["value"] == duration_text(rec["tpot_p50_s"], 2)
    assert cards[2]["value"] == f"{rec['tokens_per_s']:,.0f}"
    assert "goodput" not in text.lower() and "overloaded" not in _summary(text)


def test_goodput_shows_with_an_slo():
    text = build_page("llama2_7b", "a100", {"mode": "serve", "prompt_tokens": 128,
                                            "output_tokens": 32, "rate": 4, "requests": 100,
                                            "slo_ttft_ms": 500, "slo_tpot_ms": 50})
    card = Cards(text).by_label()["goodput"]
    assert "TTFT <= 500 ms and TPOT <= 50 ms" in card["detail"]


def test_an_overloaded_batch_server_is_called_overloaded():
    rate = 8000.0
    knobs = {"mode": "serve", "precision": "fp16", "rate": rate, "max_batch": 16,
             "requests": 2000}
    text = build_page("resnet50", "t4", knobs)
    alert = Cards(text).by_label()["overloaded"]
    arrivals, capacity = (float(x.replace(",", "")) for x in
                          re.findall(r"arrivals ([\d,.]+)/s exceed capacity ([\d,.]+)/s",
                                     alert["value"])[0])
    served = accelsim.simulate("resnet50", "t4", **knobs).record["throughput_samples_per_s"]
    assert arrivals == rate  # the rate asked for
    assert served <= capacity * 1.001 and capacity < rate  # a saturated server serves ~capacity
    assert capacity <= served * 1.05
    assert "first 2,000 requests" in alert["value"]


def test_an_underloaded_server_is_not_called_overloaded():
    text = build_page("resnet50", "t4", {"mode": "serve", "precision": "fp16", "rate": 100,
                                         "max_batch": 16, "requests": 500})
    assert "overloaded" not in {c["label"] for c in Cards(text).cards}
