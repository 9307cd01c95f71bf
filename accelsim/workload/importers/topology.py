"""Read a SCALE-Sim topology CSV (conv form or GEMM form) into a per-sample `Graph`.

    graph = read_graph(Path("resnet50.csv"))   # accelsim simulate resnet50.csv --hw scale.cfg

Conv form (header "Layer name, IFMAP Height, IFMAP Width, Filter Height, Filter Width,
Channels, Num Filter, Strides,"): one `conv2d` per row, named as the row, on its own input
(SCALE-Sim's layers do not chain: a topology leaves pooling out, and its ifmaps are already
padded). The output is SCALE-Sim's ceil((H - R + stride) / stride), which rounds a strided
window that runs past the edge up where PyTorch rounds down; the conv gets the padding that
makes the usual floor formula give that size (NB: padding read as zeros, so the layer's GEMM is
SCALE-Sim's, M = output pixels, K = R x S x C, N = filters). A row whose name holds "DP" is a
depthwise layer, which SCALE-Sim splits into one single-channel layer per channel, named
"<name>Channel_<i>"; so does this reader.

GEMM form (header "Layer, M, N, K,"): one `linear` (no bias) per row on an (M, K) input, N
outputs: SCALE-Sim's (M x K) @ (K x N). NB: SCALE-Sim's second operand is always a filter, so
an activation x activation GEMM (attention scores) is read as a layer with K x N weights.

Either form may end rows with a comma and carry an "N:M" sparsity column, which SCALE-Sim uses
only with sparsity support on: it is ignored here. Bad rows raise ConfigError naming the file,
the row and column, and the value.
"""

from __future__ import annotations

import math
from pathlib import Path

from accelsim.errors import ConfigError, DataFileError, ShapeError
from accelsim.numbers import is_int_text, shown
from accelsim.physical import MAX_COUNT, MAX_LAYERS
from accelsim.tomlfiles import read_text_file
from accelsim.workload.graph import Graph, GraphBuilder

KNOBS: dict[str, int] = {}  # a topology fixes every shape: no input knobs
CONV_COLUMNS = ("IFMAP Height", "IFMAP Width", "Filter Height", "Filter Width", "Channels",
                "Num Filter", "Strides")
GEMM_COLUMNS = ("M", "N", "K")
# NB: the largest operand of one layer, in SCALE-Sim's one-byte words: 1 TiB, far above any
# real layer (GPT-3's largest weight is 0.6 GB at one byte); a row within MAX_COUNT per number
# could otherwise ask for an operand of 2^48 words.
MAX_OPERAND_WORDS = 1 << 40


def read_graph(path: Path, **knobs: int) -> Graph:
    """The per-sample graph of the topology at `path`; raises AccelsimError (one line)."""
    src = str(path)
    if knobs:
        raise ConfigError(src, "knobs", sorted(knobs), "a SCALE-Sim topology takes no "
                          "input knobs (its shapes are fixed)")
    rows = [_fields(line) for line in read_text_file(path).splitlines()]
    rows = [r for r in rows if r]
    if len(rows) < 2:
        raise DataFileError(src, "not a SCALE-Sim topology: a header and at least one layer "
                            "row are needed")
    gemm = _is_gemm_header(rows[0])
    columns = GEMM_COLUMNS if gemm else CONV_COLUMNS
    g = GraphBuilder(path.stem, source_format="scalesim-topology")
    outputs: list[str] = []
    for number, row in enumerate(rows[1:], start=2):
        name = row[0]
        values = _values(src, number, name, row[1:], columns)
        _check_operands(src, number, name, values, gemm)
        try:
            if gemm:
                outputs.append(_gemm_layer(g, name, *values))
            elif "DP" in name:
                h, w, r, s, c, f, stride = values
                if c > MAX_LAYERS:  # one layer per channel: bound the graph it builds
                    raise ConfigError(src, f"row {number} ({name}).Channels", c,
                                      f"a depthwise row builds one layer per channel: at "
                                      f"most {MAX_LAYERS:,}")
                outputs += [_conv_layer(g, f"{name}Channel_{ch}", h, w, r, s, 1, f, stride)
                            for ch in range(c)]
            else:
                outputs.append(_conv_layer(g, name, *values))
        except ShapeError as err:
            raise ConfigError(src, f"row {number} ({name})", ",".join(row), str(err)) from None
    return g.build(outputs=tuple(outputs))


def topology_form(path: Path) -> str:
    """"gemm" for a topology in GEMM form (header "Layer, M, N, K,"), else "conv" (SCALE-Sim's
    -i conv|gemm)."""
    rows = [r for r in (_fields(line) for line in read_text_file(path).splitlines()) if r]
    return "gemm" if rows and _is_gemm_header(rows[0]) else "conv"


def _is_gemm_header(header: list[str]) -> bool:
    return len(header) > 1 and header[1].strip().upper() == "M"


def _fields(line: str) -> list[str]:
    """The comma-separated fields of a line, trailing empty ones dropped."""
    fields = [f.strip() for f in line.split(",")]
    while fields and not fields[-1]:
        fields.pop()
    return fields


def _values(src: str, number: int, name: str, cells: list[str], columns: tuple[str, ...]
            ) -> list[int]:
    if not name:
        raise ConfigError(src, f"row {number}", "", "the layer has no name")
    if len(cells) < len(columns):
        raise ConfigError(src, f"row {number} ({name})", ",".join(cells),
                          f"needs {len(columns)} numbers: {', '.join(columns)}")
    out = []
    for column, cell in zip(columns, cells, strict=False):
        if not is_int_text(cell):
            raise ConfigError(src, f"row {number} ({name}).{column}", shown(cell)[1:-1],
                              "must be a whole number")
        value = int(cell)
        if not 1 <= value <= MAX_COUNT:
            raise ConfigError(src, f"row {number} ({name}).{column}", cell,
                              f"must be from 1 to {MAX_COUNT:,}")
        out.append(value)
    return out


def _check_operands(src: str, number: int, name: str, values: list[int], gemm: bool) -> None:
    """Each operand of the layer (ifmap, filter, ofmap) within MAX_OPERAND_WORDS."""
    if gemm:
        m, n, k = values
        operands = {"ifmap M x K": m * k, "filter K x N": k * n, "ofmap M x N": m * n}
    else:
        h, w, r, s, c, f, _ = values
        operands = {"ifmap H x W x C": h * w * c, "filter R x S x C x F": r * s * c * f,
                    "ofmap H x W x F": h * w * f}
    for what, words in operands.items():
        if words > MAX_OPERAND_WORDS:
            raise ConfigError(src, f"row {number} ({name})", ",".join(map(str, values)),
                              f"its {what} is {words:.3g} words ({words / 2**40:.3g} TiB); "
                              f"a layer operand is at most {MAX_OPERAND_WORDS:.3g} words")


def _padding_for(size: int, kernel: int, stride: int) -> int:
    """Symmetric padding p with floor((size + 2p - kernel) / stride) + 1 equal to SCALE-Sim's
    output size: the window that runs past the edge reads p <= stride / 2 zeros."""
    short = (-(size - kernel)) % stride  # inputs missing from the last window
    return math.ceil(short / 2)


def _conv_layer(g: GraphBuilder, name: str, h: int, w: int, r: int, s: int, c: int, f: int,
                stride: int) -> str:
    if r > h or s > w:
        raise ShapeError(f"filter {r} x {s} is larger than the ifmap {h} x {w}")
    x = g.input(f"{name}.ifmap", (c, h, w))
    return g.conv2d(x, name=name, out_channels=f, kernel=(r, s), stride=stride,
             padding=(_padding_for(h, r, stride), _padding_for(w, s, stride)), bias=False)


def _gemm_layer(g: GraphBuilder, name: str, m: int, n: int, k: int) -> str:
    x = g.input(f"{name}.ifmap", (m, k))
    return g.linear(x, name=name, out_features=n, bias=False)
