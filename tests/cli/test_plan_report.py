"""`accelsim plan ... --report FILE` (issue 25 item 3): one self-contained page per plan kind
(inference, training, decoder serving) holding the chosen configuration, the question, the
best rows, the plan's figure and why the rest were not chosen; it is written
beside the terminal text, and the page's numbers are the plan's."""

from __future__ import annotations

import json
from html.parser import HTMLParser
from pathlib import Path

from tests.helpers.cli import run_cli


class Page(HTMLParser):
    """Section titles, table ids, image count and every cell's text of a page."""

    def __init__(self) -> None:
        super().__init__()
        self.h2: list[str] = []
        self.tables: list[str] = []
        self.images = 0
        self.cells: list[str] = []
        self._tag = ""

    def handle_starttag(self, tag, attrs):
        self._tag = tag
        attrs = dict(attrs)
        if tag == "table" and attrs.get("id"):
            self.tables.append(attrs["id"])
        if tag == "img" and attrs.get("src", "").startswith("data:image/png;base64,"):
            self.images += 1

    def handle_data(self, data):
        if self._tag == "h2" and data.strip():
            self.h2.append(data.strip())
        if self._tag in ("td", "div") and data.strip():
            self.cells.append(data.strip())


def read(path: Path) -> Page:
    page = Page()
    page.feed(path.read_text(encoding="utf-8"))
    return page


def test_a_training_plan_report_holds_its_answer_and_figure(tmp_path: Path, capsys) -> None:
    out = tmp_path / "plan.html"
    args = ("plan", "resnet50-train", "--hw", "dgx-h100", "--nodes", "1,2", "--steps", "5",
            "--minimize", "time-to-train")
    code, text, _ = run_cli(capsys, *args, "--report", str(out))
    assert code == 0 and f"report: {out}" in text
    page = read(out)
    assert page.h2[:3] == ["Answer", "The question", "Best 2"]
    assert "best" in page.tables and "Not chosen" in page.h2 and page.images == 1
    # the chosen card is the plan's best row
    code, text, _ = run_cli(capsys, *args, "--json")
    best = json.loads(text)["best"][0]
    assert f"{best['hardware']} {best['precision']} batch {best['batch']}, " \
           f"{best['devices']} GPUs x {best['nodes']} nodes" in page.cells


def test_an_inference_plan_report(tmp_path: Path, capsys) -> None:
    out = tmp_path / "plan.html"
    code, _, _ = run_cli(capsys, "plan", "resnet50", "--hw", "t4,l4", "--batch", "1,8",
                         "--precision", "int8", "--devices", "1", "--maximize",
                         "samples-per-dollar", "--report", str(out))
    assert code == 0
    page = read(out)
    assert "Answer" in page.h2 and "best" in page.tables and page.images == 1


def test_a_serving_plan_report(tmp_path: Path, capsys, monkeypatch) -> None:
    from accelsim.explore import plan_llm
    from tests.unit.test_plan_llm import FakeServer

    real = plan_llm.make_serving_plan
    monkeypatch.setattr(plan_llm, "make_serving_plan",
                        lambda *a, **k: real(*a, **k, run=FakeServer()))
    out = tmp_path / "serve.html"
    code, text, _ = run_cli(capsys, "plan", "llama-3.1-8b", "--hw", "dgx-h100,hgx-h200",
                            "--tp", "1,2", "--max-batch", "64,128", "--rate", "30",
                            "--ttft-ms", "500", "--tpot-ms", "50", "--minimize", "cost",
                            "--report", str(out))
    assert code == 0, text
    page = read(out)
    assert "Answer" in page.h2 and "best" in page.tables and page.images == 1


def test_a_serving_plan_figure_draws_every_priced_searched_row(tmp_path: Path) -> None:
    from accelsim.explore.plan_llm import make_serving_plan
    from accelsim.plots.plan_llm import serving_plan_figure
    from accelsim.plots.style import save_figure
    from tests.unit.test_plan_llm import FakeServer

    p = make_serving_plan("llama-3.1-8b", ["dgx-h100", "hgx-h200"], ["vllm"], ["fp16"],
                          [1, 2], [1], [64, 128], 30.0, 512, 128, 500.0, 50.0, "cost",
                          run=FakeServer())
    rows = [r for r in p.rows if r["usd_per_hour"] is not None
            and r["tokens_per_s_per_gpu"] is not None]
    fig = serving_plan_figure(p)
    points = sum(len(c.get_offsets()) for c in fig.axes[0].collections)
    assert rows and points == len(rows) + 1  # every searched row, and the chosen one ringed
    assert save_figure(fig, tmp_path / "s.png").read_bytes()[:4] == b"\x89PNG"
