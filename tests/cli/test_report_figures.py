"""Every figure of every report page, and the compare and sweep figures, draw their legends
and labels inside the figure: each text's extent as the renderer lays it out (matplotlib, Agg;
no browser) lies inside the figure's box. The check itself is tested on a legend known to be
too wide. Where Chromium is installed, each page is opened in it and every figure must show
whole inside its box and the page, every card without overflow. Collectives of an LLM training
step get one colour each."""

import matplotlib.pyplot as plt
import pandas as pd
import pytest
from matplotlib.patches import Patch

import accelsim
import accelsim.report.html as report_html
from accelsim.plots import style as figure_style
from accelsim.plots import sweep as sweep_plot
from accelsim.plots.breakdown import accelerator_time_figure, memory_figure
from accelsim.plots.style import new_figure
from accelsim.plots.timeline import gantt
from accelsim.report.page import build_page
from accelsim.results.metrics import STALL_NAMES
from tests.helpers.cli import run_cli
from tests.helpers.figure_text import text_outside
from tests.helpers.report_pages import Page, chromium, load_in_chromium

PAGES = {
    "train": ("resnet50-train", "dgx-a100", {"steps": 12, "prep_workers": 2}),
    "serve": ("resnet50", "a100", {"mode": "serve", "rate": 500, "requests": 300}),
    "infer": ("resnet50", "a100", {"batch": 8}),
    "llm-infer": ("llama2_7b", "a100", {"prompt_tokens": 512, "output_tokens": 64, "batch": 4}),
    "llm-serve": ("llama2_7b", "a100", {"mode": "serve", "prompt_tokens": 128,
                                        "output_tokens": 32, "rate": 4, "requests": 100}),
    "llm-train": ("llama2_7b", "dgx-a100", {"mode": "train", "seq_len": 1024, "batch": 1,
                                            "precision": "bf16", "tp": 2, "zero": 1}),
}
# The memory parts of a served decoder and the parts a training run lists, long names and all.
MEMORY_PARTS = pd.Series({"weights": 13.5e9, "kv_cache": 52e9, "activations": 1.2e9,
                          "optimizer_state": 0.1e9, "gradients": 0.1e9, "workspace": 0.5e9,
                          "reserve": 8e9})


def test_the_check_finds_a_legend_wider_than_its_figure():
    fig, ax = new_figure(width_in=4.0, height_in=2.0)
    fig.legend(handles=[Patch(label=f"a long legend entry {i}") for i in range(6)],
               loc="outside lower center", ncol=6)
    bad = text_outside(fig)
    plt.close(fig)
    assert len(bad) == 1 and "Legend" in bad[0]


@pytest.mark.parametrize("name", PAGES)
def test_every_figure_of_a_report_page_holds_its_text(monkeypatch, name):
    checked: list[list[str]] = []
    draw = report_html.png_bytes

    def checking(fig, dpi=report_html.EMBED_DPI):
        checked.append(text_outside(fig))
        return draw(fig, dpi)

    monkeypatch.setattr(report_html, "png_bytes", checking)
    workload, hw, knobs = PAGES[name]
    text = build_page(workload, hw, knobs)
    assert len(checked) == int(Page(text).body["data-figures"]) >= 2
    assert [bad for bad in checked if bad] == []


def test_stalls_and_memory_legends_fit_at_every_cause_and_part():
    table = pd.DataFrame({"compute": [5.0, 4.0], **{n: [1.0, 2.0] for n in STALL_NAMES.values()},
                          "other": [0.5, 0.5]}, index=["accel0", "accel1"])
    for fig, entries in ((accelerator_time_figure(table, "Accelerator time"), len(table.columns)),
                         (memory_figure(MEMORY_PARTS, 80e9, "per GPU"), len(MEMORY_PARTS) + 1)):
        bad = text_outside(fig)
        labels = [t.get_text() for leg in fig.legends for t in leg.texts]
        plt.close(fig)
        assert bad == []
        assert len(labels) == entries  # every part and the capacity line, none dropped


def test_compare_and_sweep_figures_hold_their_text(monkeypatch, capsys, tmp_path):
    checked: list[list[str]] = []
    save = figure_style.save_figure

    def checking(fig, path):
        checked.append(text_outside(fig))
        return save(fig, path)

    monkeypatch.setattr(figure_style, "save_figure", checking)  # compare's and roofline's
    monkeypatch.setattr(sweep_plot, "save_figure", checking)
    code, _, err = run_cli(capsys, "compare", "resnet50", "--hw", "a100,edge-tpu,xeon-8480",
                           "--precision", "int8", "--batch", "8", "--plot",
                           str(tmp_path / "c.png"), "--roofline", str(tmp_path / "r.png"))
    assert code == 0, err
    code, _, err = run_cli(capsys, "sweep", "resnet50", "--hw", "a100,t4", "--batch", "1,8,64",
                           "--precision", "fp16", "--plot", str(tmp_path / "s.png"))
    assert code == 0, err
    assert len(checked) == 3 and [bad for bad in checked if bad] == []


def test_each_collective_of_a_training_step_has_its_own_colour():
    _, hw, knobs = PAGES["llm-train"]
    events = accelsim.simulate("llama2_7b", hw, **knobs).events
    fig = gantt(events)
    handles = fig.legends[0].legend_handles
    colours = {h.get_label(): tuple(h.get_facecolor()) for h in handles}
    plt.close(fig)
    assert {"reducescatter", "allgather"} <= set(colours)
    assert len(set(colours.values())) == len(colours), colours


@pytest.mark.skipif(chromium() is None, reason="Chromium is not installed")
@pytest.mark.parametrize("window", ["1280,900", "700,900"])
@pytest.mark.parametrize("name", PAGES)
def test_every_page_shows_its_figures_and_cards_whole_in_chromium(tmp_path, name, window):
    import re

    workload, hw, knobs = PAGES[name]
    path = tmp_path / f"{name}.html"
    path.write_text(build_page(workload, hw, knobs))
    dom = load_in_chromium(path, tmp_path / "profile", window)
    attrs = dict(re.findall(r'(data-[a-z-]+)="(-?\d+)"', dom[dom.index("<body"):][:400]))
    assert attrs["data-figures-loaded"] == attrs["data-figures"], attrs
    assert attrs["data-figures-outside"] == "0" and attrs["data-cards-outside"] == "0", attrs
