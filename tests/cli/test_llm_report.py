"""`accelsim report` on token-level LLM runs: inference, serving and a training step; the page's
numbers against an independent simulation of the same run, a step's time parts summing to the
step, and the page opened in headless Chromium when one is installed."""

import re

import pytest

import accelsim
from accelsim.report import report
from accelsim.report.llm_page import step_parts
from tests.helpers.report_pages import Page, chromium, load_in_chromium

INFER = ("llama2_7b", "a100", {"prompt_tokens": 512, "output_tokens": 64, "batch": 4})
TRAIN = ("llama2_7b", "dgx-a100", {"mode": "train", "seq_len": 1024, "batch": 1,
                                   "precision": "bf16", "tp": 2, "zero": 1})


def _cells(page: Page, table_id: str) -> dict[str, str]:
    return {row[0]: row[1] for row in page.tables[table_id][1:]}


@pytest.fixture(scope="module")
def train_page(tmp_path_factory):
    name, hw, knobs = TRAIN
    path = report(name, hw, out=tmp_path_factory.mktemp("r") / "train.html", **knobs)
    return path, path.read_text()


def test_inference_page_shows_the_token_figures_of_an_independent_run(tmp_path):
    name, hw, knobs = INFER
    text = report(name, hw, out=tmp_path / "i.html", **knobs).read_text()
    page = Page(text)
    assert page.sections == ["summary", "setup", "tokens", "bottleneck", "memory", "notes"]
    rec = accelsim.simulate(name, hw, **knobs).record
    cells = _cells(page, "tokens")
    assert cells["TTFT (ms)"] == f"{rec['ttft_s'] * 1e3:,.2f}"
    assert cells["TPOT (ms)"] == f"{rec['tpot_s'] * 1e3:,.2f}"
    for phase, time_ms, limit_ms, _ in page.tables["limits"][1:]:
        assert float(limit_ms.replace(",", "")) <= float(time_ms.replace(",", "")), phase
    assert int(page.body["data-figures"]) == len(page.srcs) == 2
    assert all(s.startswith("data:image/png;base64,") for s in page.srcs)


def test_serving_page_shows_percentiles(tmp_path):
    page = Page(report("llama2_7b", "a100", out=tmp_path / "s.html", mode="serve",
                       prompt_tokens=128, output_tokens=32, rate=4, requests=100).read_text())
    cells = _cells(page, "tokens")
    p50, p99 = (float(cells[f"ttft {p} (ms)"].replace(",", "")) for p in ("p50", "p99"))
    assert 0 < p50 <= p99 and "continuous" in cells["batching"]


def test_training_page_splits_the_step_and_shows_the_exchange(train_page):
    _, text = train_page
    page = Page(text)
    for sid in ("tokens", "bottleneck", "energy", "timeline", "memory"):
        assert sid in page.sections
    name, hw, knobs = TRAIN
    rec = accelsim.simulate(name, hw, **knobs).record
    parts = step_parts(rec)
    assert (parts >= 0).all() and parts.sum() == pytest.approx(rec["step_time_s"])
    energy = _cells(page, "energy")
    assert set(energy) == {"accelerators", "links", "switches", "nics"}
    assert float(energy["accelerators"].replace(",", "")) == pytest.approx(
        rec["energy_breakdown_j"]["accelerators"], rel=1e-3)
    assert int(page.body["data-figures"]) == len(page.srcs) == 4


def test_a_training_split_that_does_not_fit_says_so_first(tmp_path):
    text = report("llama2_70b", "dgx-a100", out=tmp_path / "oom.html", mode="train",
                  seq_len=4096, batch=1, precision="bf16", tp=8, zero=1).read_text()
    page = Page(text)
    assert text.index("Does not fit") < text.index('id="summary"')
    assert "tokens" not in page.sections and "memory" in page.sections
    # the summary is not empty: it says what the split needs against what the GPU has
    import accelsim

    rec = accelsim.simulate("llama2_70b", "dgx-a100", mode="train", seq_len=4096, batch=1,
                            precision="bf16", tp=8, zero=1).record
    summary = text[text.index('id="summary"'):text.index('id="setup"')]
    assert "does not fit" in summary
    assert f"{rec['memory']['required_bytes'] / 1e9:.2f}GB per device" in summary


@pytest.mark.skipif(chromium() is None, reason="Chromium is not installed")
def test_training_page_loads_in_chromium_with_every_figure(train_page, tmp_path):
    path, text = train_page
    dom = load_in_chromium(path, tmp_path / "profile")
    loaded = re.search(r'data-figures-loaded="(\d+)"', dom)
    assert loaded, dom[:500]
    assert int(loaded.group(1)) == int(Page(text).body["data-figures"]) == 4
