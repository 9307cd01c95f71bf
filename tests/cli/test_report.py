"""`accelsim report`: one self-contained HTML page; its numbers checked against independent
simulations; opened in a real headless browser (Chromium) when one is installed."""

import base64
import json
import re

import pandas as pd
import pytest

import accelsim
from accelsim.cli import main
from accelsim.plots.breakdown import accelerator_time
from accelsim.plots.timeline import step_window
from accelsim.report import report
from accelsim.report.html import table
from accelsim.report.relief import WHATIF_STEPS, format_metric
from tests.helpers.report_pages import Page, chromium, load_in_chromium

TRAIN = ("resnet50-train", "dgx-a100", {"steps": 12, "prep_workers": 2})


@pytest.fixture(scope="module")
def train_page(tmp_path_factory):
    w, hw, knobs = TRAIN
    path = report(w, hw, out=tmp_path_factory.mktemp("r") / "train.html", **knobs)
    return path, path.read_text()


def test_page_is_self_contained(train_page):
    _, text = train_page
    page = Page(text)
    assert page.srcs and all(s.startswith("data:image/png;base64,") for s in page.srcs)
    assert not any(re.match(r"\s*(https?:)?//", u) for u in page.srcs + page.hrefs)
    assert "<link" not in text and "<script src" not in text and "@import" not in text
    assert "default-src 'none'" in page.csp  # the browser may fetch nothing
    assert int(page.body["data-figures"]) == len(page.srcs) >= 5
    for src in page.srcs:  # every figure is a real PNG
        assert base64.b64decode(src.split(",", 1)[1])[:8] == b"\x89PNG\r\n\x1a\n"


def test_page_names_workload_system_and_sections(train_page):
    _, text = train_page
    for needle in ("resnet50", "dgx-a100", "a100", "imagenet-raw", "nvme-gen4"):
        assert needle in text
    assert Page(text).sections == ["summary", "setup", "bottleneck", "timeline", "stalls",
                                   "energy", "memory", "layers"]


def test_top_layers_are_the_slowest_layer_rows(train_page):
    w, hw, knobs = TRAIN
    rows = Page(train_page[1]).tables["top-layers"][1:]
    layers = accelsim.simulate(w, hw, **knobs).layers
    slowest = layers.sort_values("time_s", ascending=False, kind="stable").head(len(rows))
    assert len(rows) == 15
    assert [(r[0], r[2]) for r in rows] == list(zip(slowest["name"], slowest["phase"], strict=True))
    assert [float(r[5]) for r in rows] == pytest.approx(list(slowest["time_s"] * 1e3),
                                                         abs=1e-4)


def test_relief_after_equals_an_independent_simulation(train_page):
    w, hw, knobs = TRAIN
    page = Page(train_page[1])
    head, best = page.tables["relief"][0], page.tables["relief"][1]
    assert best[0] == "1" and head[2:4] == ["AU before", "AU after"]
    assert "prep workers" in best[1]  # the run is short of prep workers
    changed = json.loads(page.row_attrs["relief"][1]["data-knobs"])
    assert changed["steps"] == knobs["steps"] and changed["prep_workers"] > 2
    before = accelsim.simulate(w, hw, **knobs).record["accelerator_utilization"]
    after = accelsim.simulate(w, hw, **changed).record["accelerator_utilization"]
    assert best[2] == format_metric("accelerator_utilization", before)
    assert best[3] == format_metric("accelerator_utilization", after)
    assert after > before + 0.2


@pytest.mark.slow
def test_long_runs_compare_shortened_what_ifs(tmp_path):
    text = report("resnet50-train", "dgx-a100", out=tmp_path / "long.html", steps=30,
                  prep_workers=2).read_text()
    page = Page(text)
    assert f"simulate {WHATIF_STEPS} steps (the run: 30)" in text
    short = accelsim.simulate("resnet50-train", "dgx-a100", steps=WHATIF_STEPS, prep_workers=2)
    au = short.record["accelerator_utilization"]
    assert page.tables["relief"][1][2] == format_metric("accelerator_utilization", au)


def test_out_of_memory_says_so_first(tmp_path):
    text = report("llama2_7b", "t4", out=tmp_path / "oom.html", batch=8).read_text()
    page = Page(text)
    assert text.index("Does not fit") < text.index('id="summary"')
    assert "timeline" not in page.sections and "memory" in page.sections
    assert int(page.body["data-figures"]) == len(page.srcs) >= 1
    best = page.tables["relief"][1]  # a narrower precision that fits, re-simulated
    changed = json.loads(page.row_attrs["relief"][1]["data-knobs"])
    assert changed["precision"] in ("int8", "fp16") and best[2] == "does not fit"
    assert accelsim.simulate("llama2_7b", "t4", **changed).fits


@pytest.mark.slow
def test_infer_and_serve_pages(tmp_path):
    infer = Page(report("resnet50-infer", "a100", out=tmp_path / "i.html").read_text())
    assert "timeline" in infer.sections and "stalls" not in infer.sections
    serve = Page(report("resnet50-infer", "a100", out=tmp_path / "s.html", mode="serve",
                        rate=3000, requests=2000).read_text())
    assert "latency" in serve.sections
    assert serve.tables["relief"][0][2] == "p99 latency before"


def test_cli_writes_the_default_path_and_errors_are_one_line(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main(["report", "resnet50-infer", "--hw", "a100", "--batch", "8"]) == 0
    assert capsys.readouterr().out.strip() == "resnet50-infer-a100.html"
    assert (tmp_path / "resnet50-infer-a100.html").stat().st_size > 10_000
    assert main(["report", "resnet50-train", "--hw", "a100", "--rate", "5"]) == 2
    err = capsys.readouterr().err
    assert "rate" in err and "Traceback" not in err and len(err.strip().splitlines()) == 1


def test_cells_are_escaped():
    out = table(["<b>"], [["<script>x</script>"]], row_attrs=[{"data-k": '{"a": "<"}'}])
    assert "<script>" not in out and "&lt;script&gt;" in out and "&lt;b&gt;" in out
    assert 'data-k="{&quot;a&quot;: &quot;&lt;&quot;}"' in out


def test_accelerator_time_covers_the_run_and_the_window_the_steps():
    res = accelsim.simulate("resnet50-train", "dgx-a100", steps=6, prep_workers=2)
    split = accelerator_time(res.events)
    assert split.sum(axis=1).to_numpy() == pytest.approx(res.record["run_time_s"])
    assert split["prep"].sum() == pytest.approx(res.record["stalls"]["prep"]["time_s"])
    lo, hi = step_window(res.events, 2)
    comp = res.events[res.events["kind"] == "compute"]
    assert lo == 0.0 and hi == pytest.approx(comp[comp["step"] == 1]["end_s"].max())
    assert step_window(pd.DataFrame(columns=res.events.columns), 2) == (0.0, 0.0)


@pytest.mark.skipif(chromium() is None, reason="Chromium is not installed")
def test_page_loads_in_chromium_with_every_figure_and_no_console_message(train_page, tmp_path):
    path, text = train_page
    dom = load_in_chromium(path, tmp_path / "profile")
    loaded = re.search(r'data-figures-loaded="(\d+)"', dom)
    assert loaded, dom[:500]
    in_dom = len(re.findall(r"<img\b", dom))
    assert int(loaded.group(1)) == in_dom == int(Page(text).body["data-figures"]) >= 5


def test_an_every_node_run_has_its_cluster_section(tmp_path):
    from accelsim.report import report

    text = report("resnet50-train", "dgx-a100", out=tmp_path / "c.html", nodes=4, steps=5,
                  slow_node=1.5).read_text(encoding="utf-8")
    assert 'id="cluster"' in text and "waiting for the slowest node" in text
    assert "slow node x1.5" in text
