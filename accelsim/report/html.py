"""HTML building blocks of a self-contained report: escaped text, tables, figures embedded as
PNG data URIs, and the page shell (inline style and script, no network).

    body = section("Summary", cards(answer)) + section("Timeline", embed_figure(fig))
    text = page("resnet50 on dgx-a100", body)

Every piece of text goes through `html.escape`. The page's Content-Security-Policy allows only
its own inline style and script (by hash) and `data:` images, so a browser fetches nothing.
On load, the script counts the figures that decoded (`img.complete && img.naturalWidth > 0`)
and writes the count to `<body data-figures-loaded="N">`, beside `data-figures` (how many the
page holds), and counts the figures drawn outside their `<figure>` or the page's width
(`data-figures-outside`) and the summary cards that overflow (`data-cards-outside`), for a
headless browser to check. (The text inside each figure lies inside it: see the figure tests.)
"""

from __future__ import annotations

import base64
import hashlib
import html
import io
from collections.abc import Iterable, Sequence
from typing import Any

import matplotlib.pyplot as plt

from accelsim.results.headline import Headline

# NB: 100 dpi keeps an 11-inch Gantt at 1100 px wide, sharp at 100 % zoom, and the page small.
EMBED_DPI = 100
FIGURE_CLASS = "figure"

STYLE = """
body { font-family: system-ui, -apple-system, "Segoe UI", Helvetica, Arial, sans-serif;
  max-width: 1150px; margin: 0 auto; padding: 1em 1.5em 3em; color: #1a1a1a; line-height: 1.4; }
h1 { font-size: 1.6em; margin-bottom: 0.2em; }
h2 { font-size: 1.25em; margin-top: 1.8em; border-bottom: 1px solid #ccc; padding-bottom: 0.2em; }
.subtitle { color: #555; margin-top: 0; }
.alert { background: #fde0dc; border-left: 6px solid #c62828; padding: 0.7em 1em;
  font-weight: 600; }
.relief { background: #e8f5e9; border-left: 6px solid #2e7d32; padding: 0.7em 1em;
  font-weight: 600; }
.cards { display: flex; flex-wrap: wrap; gap: 0.7em; margin: 0.8em 0; }
.card { border: 1px solid #d0d7de; border-radius: 6px; padding: 0.55em 0.9em; min-width: 10em;
  max-width: 100%; background: #f6f8fa; box-sizing: border-box; overflow-wrap: anywhere; }
.card .label { color: #555; font-size: 0.85em; }
.card .value { font-size: 1.45em; font-weight: 600; font-variant-numeric: tabular-nums; }
.card .detail { color: #555; font-size: 0.82em; }
.card.relief { background: #e8f5e9; border-color: #2e7d32; flex-basis: 100%; }
.card.relief .value, .card.bottleneck .value, .card.alert .value { font-size: 1.15em; }
.card.bottleneck { flex-basis: 100%; }
.card.alert { background: #fde0dc; border-color: #c62828; flex-basis: 100%; }
pre { background: #f6f8fa; padding: 0.8em 1em; white-space: pre-wrap; font-size: 0.85em; }
table { border-collapse: collapse; margin: 0.6em 0; font-size: 0.9em; }
th, td { border: 1px solid #ddd; padding: 0.25em 0.6em; text-align: left; vertical-align: top; }
th { background: #f0f0f0; }
tr:nth-child(even) td { background: #fafafa; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
figure { margin: 1em 0; }
figure img { max-width: 100%; height: auto; border: 1px solid #eee; box-sizing: border-box; }
figcaption { color: #555; font-size: 0.9em; }
ul.notes { color: #444; font-size: 0.9em; }
footer { margin-top: 3em; color: #777; font-size: 0.85em; }
"""

SCRIPT = """
window.addEventListener("load", function () {
  var loaded = 0, outside = 0, cards = 0;
  var page = document.documentElement.clientWidth;
  function inside(r, box) {
    return r.left >= box.left - 1 && r.right <= box.right + 1 && r.top >= box.top - 1 &&
      r.bottom <= box.bottom + 1;
  }
  var view = {left: 0, right: page, top: -1e9, bottom: 1e9};
  document.querySelectorAll("img.figure").forEach(function (img) {
    if (img.complete && img.naturalWidth > 0) { loaded += 1; }
    var r = img.getBoundingClientRect();
    if (!inside(r, img.parentElement.getBoundingClientRect()) || !inside(r, view) ||
        r.width < 1) { outside += 1; }
  });
  document.querySelectorAll(".card").forEach(function (card) {
    if (!inside(card.getBoundingClientRect(), view) || card.scrollWidth > card.clientWidth + 1) {
      cards += 1;
    }
  });
  document.body.setAttribute("data-figures-loaded", String(loaded));
  document.body.setAttribute("data-figures-outside", String(outside));
  document.body.setAttribute("data-cards-outside", String(cards));
});
"""


def esc(value: Any) -> str:
    """`value` as text, HTML-escaped (quotes too)."""
    return html.escape(str(value), quote=True)


def _sha256(text: str) -> str:
    return "sha256-" + base64.b64encode(hashlib.sha256(text.encode()).digest()).decode()


def png_bytes(fig: Any, dpi: int = EMBED_DPI) -> bytes:
    """The figure rendered as PNG bytes; the figure is closed."""
    buf = io.BytesIO()
    try:
        fig.savefig(buf, format="png", dpi=dpi)
    finally:
        plt.close(fig)
    return buf.getvalue()


def embed_figure(fig: Any, alt: str, caption: str = "") -> str:
    """A `<figure>` holding `fig` as an embedded PNG (class `FIGURE_CLASS`), with a caption."""
    data = base64.b64encode(png_bytes(fig)).decode("ascii")
    cap = f"<figcaption>{esc(caption)}</figcaption>" if caption else ""
    return (f'<figure><img class="{FIGURE_CLASS}" alt="{esc(alt)}" '
            f'src="data:image/png;base64,{data}">{cap}</figure>\n')


def table(header: Sequence[str], rows: Iterable[Sequence[Any]], table_id: str = "",
          numeric: Sequence[int] = (), row_attrs: Sequence[dict[str, str]] = ()) -> str:
    """A table of escaped cells; columns whose index is in `numeric` align right; row i gets
    the attributes `row_attrs[i]` (e.g. {"data-knobs": "..."}) when given."""
    ident = f' id="{esc(table_id)}"' if table_id else ""
    head = "".join(f"<th>{esc(h)}</th>" for h in header)
    body = []
    for n, row in enumerate(rows):
        cells = "".join(
            f'<td class="num">{esc(c)}</td>' if i in numeric else f"<td>{esc(c)}</td>"
            for i, c in enumerate(row))
        attrs = row_attrs[n] if n < len(row_attrs) else {}
        extra = "".join(f' {esc(k)}="{esc(v)}"' for k, v in attrs.items())
        body.append(f"<tr{extra}>{cells}</tr>")
    return f"<table{ident}><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>\n"


def pairs(rows: Iterable[tuple[str, Any]]) -> str:
    """A two-column table of (name, value) rows."""
    rows = list(rows)
    body = "".join(f"<tr><th>{esc(k)}</th><td>{esc(v)}</td></tr>" for k, v in rows)
    return f"<table><tbody>{body}</tbody></table>\n"


def para(text: str, cls: str = "") -> str:
    return f'<p class="{esc(cls)}">{esc(text)}</p>\n' if cls else f"<p>{esc(text)}</p>\n"


def pre(text: str) -> str:
    return f"<pre>{esc(text)}</pre>\n"


def cards(items: Iterable[Any]) -> str:
    """A row of summary cards (`accelsim.report.cards.Card`: label, value, detail, kind)."""
    body = "".join(
        f'<div class="card {esc(c.kind)}"><div class="label">{esc(c.label)}</div>'
        f'<div class="value">{esc(c.value)}</div>'
        + (f'<div class="detail">{esc(c.detail)}</div>' if c.detail else "") + "</div>"
        for c in items)
    return f'<div class="cards">{body}</div>\n' if body else ""


def bullets(items: Iterable[str], cls: str = "notes") -> str:
    items = list(items)
    if not items:
        return ""
    return f'<ul class="{esc(cls)}">' + "".join(f"<li>{esc(i)}</li>" for i in items) + "</ul>\n"


def section(title: str, *parts: str, section_id: str = "") -> str:
    """An `<h2>` section of already-built parts."""
    ident = f' id="{esc(section_id)}"' if section_id else ""
    return f"<section{ident}><h2>{esc(title)}</h2>\n{''.join(parts)}</section>\n"


def bottleneck_para(rec: dict[str, Any]) -> str:
    """The paragraph naming what bounds a run (its `Headline`)."""
    fig = Headline.of(rec).figures
    return para(f"Bottleneck: {fig.bottleneck}: {fig.bottleneck_detail or ''}")


def opening(rec: dict[str, Any], summary: str, setup: str) -> list[str]:
    """A report's first parts: the alert of a run that does not fit (its first note), then the
    summary (`summary`: HTML, its cards) and the system-and-workload section (`setup`)."""
    parts = []
    if not Headline.of(rec).memory.fits:
        parts.append(para(f"Does not fit: {rec['notes'][0].removeprefix('does not fit: ')}",
                          "alert"))
    return parts + [section("Summary", summary, section_id="summary"),
                    section("System and workload", setup, section_id="setup")]


def page(title: str, body: str, subtitle: str = "", footer: str = "") -> str:
    """The whole document: `body` (built from the pieces above) in the self-contained shell."""
    figures = body.count(f'<img class="{FIGURE_CLASS}"')
    csp = (f"default-src 'none'; img-src data:; style-src '{_sha256(STYLE)}'; "
           f"script-src '{_sha256(SCRIPT)}'; base-uri 'none'; form-action 'none'")
    sub = para(subtitle, "subtitle") if subtitle else ""
    foot = f"<footer>{esc(footer)}</footer>\n" if footer else ""
    return (
        "<!DOCTYPE html>\n"
        '<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        f'<meta http-equiv="Content-Security-Policy" content="{esc(csp)}">\n'
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        f"<title>{esc(title)}</title>\n<style>{STYLE}</style>\n</head>\n"
        f'<body data-figures="{figures}" data-figures-loaded="0" data-figures-outside="-1" '
        'data-cards-outside="-1">\n'
        f"<h1>{esc(title)}</h1>\n{sub}{body}{foot}"
        f"<script>{SCRIPT}</script>\n</body>\n</html>\n")
