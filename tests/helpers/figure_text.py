"""Whether a matplotlib figure draws any text outside itself (a legend wider than the figure,
a label past its edge): the pieces a PNG would clip, found from the renderer's own extents."""

from __future__ import annotations

from typing import Any

from matplotlib.text import Text

SLACK_PX = 1.0  # NB: sub-pixel overhang from anti-aliasing is not a clipped letter


def _pieces(fig: Any) -> list[Any]:
    """Legends, figure texts, and per drawn panel its titles, axes (tick and axis labels, only
    the ticks drawn) and texts."""
    out: list[Any] = list(fig.legends) + list(fig.texts)
    if getattr(fig, "_suptitle", None) is not None:
        out.append(fig._suptitle)
    for ax in fig.axes:
        out += [ax.title, ax._left_title, ax._right_title, *ax.texts]
        if ax.axison:
            out += [ax.xaxis, ax.yaxis]
        if ax.get_legend() is not None:
            out.append(ax.get_legend())
    return out


def text_outside(fig: Any) -> list[str]:
    """One line per legend or text that reaches past the figure's box, naming it; empty when
    every piece lies inside."""
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    box = fig.bbox
    bad = []
    for piece in _pieces(fig):
        if not piece.get_visible() or (isinstance(piece, Text) and not piece.get_text()):
            continue
        ext = (piece.get_window_extent(renderer) if isinstance(piece, Text)
               else piece.get_tightbbox(renderer))
        if ext is None:
            continue
        if (ext.x0 < box.x0 - SLACK_PX or ext.x1 > box.x1 + SLACK_PX
                or ext.y0 < box.y0 - SLACK_PX or ext.y1 > box.y1 + SLACK_PX):
            what = (repr(piece.get_text()[:50]) if isinstance(piece, Text)
                    else type(piece).__name__ + _legend_texts(piece))
            bad.append(f"{what}: x {ext.x0:.0f}..{ext.x1:.0f}, y {ext.y0:.0f}..{ext.y1:.0f} "
                       f"outside 0..{box.x1:.0f} x 0..{box.y1:.0f} px")
    return bad


def _legend_texts(piece: Any) -> str:
    texts = getattr(piece, "texts", None)
    return f" {[t.get_text() for t in texts]}" if texts else ""
