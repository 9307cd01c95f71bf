"""The conv ifmap walk of the systolic SRAM model (`accelsim.devices.systolic.im2col`) against a
naive re-implementation, written here loop by loop after SCALE-Sim v3's source, of how SCALE-Sim
builds a convolution's ifmap operand (`operand_matrix.calc_ifmap_elem_addr`, its output size
ceil((H - R + stride) / stride)), lays it out for DRAM (`create_ifmap_prefetch_mat` of
`systolic_compute_{ws,os,is}`), demands it fold by fold (`create_ifmap_demand_mat`, `skew_matrix`)
and serves the demands from its read buffer (`read_buffer.prepare_hashed_buffer`,
`active_buffer_hit`, `service_reads`, `new_prefetch`): every window slide and the demand row
(no-stall cycle) that caused it must be the model's."""

from __future__ import annotations

import math

import numpy as np
import pytest

from accelsim.devices.systolic.im2col import Im2col, conv_walk
from accelsim.devices.systolic.model import cycles_per_fold
from accelsim.devices.systolic.sram import gemm_memory, simulate_reads
from accelsim.devices.systolic.streams import read_streams
from accelsim.profiles.device_types import SramSpec


def ofmap_size(size: int, kernel: int, stride: int) -> int:
    return math.ceil((size - kernel + stride) / stride)


def naive_im2col_images(h: int, w: int, c: int, r: int, s: int, sh: int, sw: int, oh: int,
                        ow: int, images: int) -> list[list[int]]:
    """SCALE-Sim's address rule with per-axis strides, any output size (a padded conv's too)
    and `images` images one after another in memory; -1 past the ifmap."""
    rows = []
    for im in range(images):
        for i in range(oh * ow):
            oy, ox = divmod(i, ow)
            row = []
            for j in range(r * s * c):
                ky, rest = divmod(j, s * c)
                kx, ch = divmod(rest, c)
                iy, ix = oy * sh + ky, ox * sw + kx
                row.append(im * h * w * c + (iy * w + ix) * c + ch if iy < h and ix < w else -1)
            rows.append(row)
    return rows


def naive_im2col(h: int, w: int, c: int, r: int, s: int, stride: int) -> list[list[int]]:
    """SCALE-Sim's im2col of one image, windows rounded up past the ifmap (`ofmap_size`)."""
    return naive_im2col_images(h, w, c, r, s, stride, stride, ofmap_size(h, r, stride),
                               ofmap_size(w, s, stride), 1)


def columns(mat: list[list[int]], lo: int, width: int) -> list[list[int]]:
    """Columns [lo, lo + width) of `mat`, padded with -1 past its last column."""
    return [[row[j] if j < len(row) else -1 for j in range(lo, lo + width)] for row in mat]


def transpose(mat: list[list[int]]) -> list[list[int]]:
    return [list(col) for col in zip(*mat, strict=True)]


def diagonal_rollout(mat: list[list[int]]) -> list[int]:
    rows, cols = len(mat), len(mat[0])
    out = []
    for d in range(rows + cols):
        for row in range(min(d, rows - 1), max(0, d - cols + 1) - 1, -1):
            out.append(mat[row][d - row])
    return out


def skew(mat: list[list[int]]) -> list[list[int]]:
    rows, cols = len(mat), len(mat[0])
    out = [[-1] * cols for _ in range(rows + cols - 1)]
    for c in range(cols):
        for t in range(rows):
            out[c + t][c] = mat[t][c]
    return out


def naive_ifmap(op: list[list[int]], n_filters: int, rows: int, cols: int, flow: str
                ) -> tuple[list[int], list[list[int]]]:
    """SCALE-Sim's ifmap prefetch stream and demand rows (one per no-stall cycle)."""
    m, k = len(op), len(op[0])
    blank = [-1] * (rows if flow != "is" else cols)
    if flow == "ws":  # S_R = k, S_C = n, T = m
        fr, fc = math.ceil(k / rows), math.ceil(n_filters / cols)
        blocks = [columns(op, f * rows, rows) for f in range(fr)]
        fetch = diagonal_rollout([row for b in blocks for row in b])
        demand = []
        for _ in range(fc):
            for b in blocks:
                demand += skew([blank] * rows + b + [blank] * (cols - 1))
        return fetch, demand
    trans = transpose(op)
    if flow == "os":  # S_R = m, S_C = n, T = k
        fr, fc = math.ceil(m / rows), math.ceil(n_filters / cols)
        blocks = [columns(trans, f * rows, rows) for f in range(fr)]
        fetch = diagonal_rollout([row for b in blocks for row in b])
        demand = []
        for _ in range(fc):
            for b in blocks:
                demand += skew(b + [blank] * (cols - 1))
        return fetch, demand
    fr, fc = math.ceil(k / rows), math.ceil(m / cols)  # is: S_R = k, S_C = m, T = n
    blocks = [columns(trans, f * cols, cols) for f in range(fc)]
    fetch = [x for b in blocks for row in b for x in row]
    demand = []
    for b in blocks:
        for f in range(fr):
            part = b[f * rows:(f + 1) * rows]
            part = part + [blank] * (rows - len(part))
            demand += part[::-1] + [blank] * (rows + cols + n_filters - 2)
    return fetch, demand


def naive_read_buffer(fetch: list[int], demand: list[list[int]], words: int
                      ) -> list[tuple[int, int]]:
    """(demand row, slide number) of every window slide of SCALE-Sim's read buffer."""
    per_set = math.ceil(words / 100)
    active = math.ceil(words * 0.5)
    sets, line, count = [], set(), 0
    for addr in fetch:
        if addr != -1:
            line.add(addr)
            count += 1
        if count >= per_set:
            sets.append(line)
            line, count = set(), 0
    sets.append(line)
    n = len(sets)
    a = min(math.ceil(active / per_set), n)
    b = min(math.ceil((words - active) / per_set), n - a)
    start, slides = 0, []
    for cycle, row in enumerate(demand):
        for addr in row:
            if addr == -1:
                continue
            while not any(addr in sets[(start + i) % n] for i in range(a)):
                start = (start + b) % n
                slides.append((cycle, len(slides) + 1))
    return slides


LAYERS = [  # (ifmap h = w, channels, filter r = s, stride, filters)
    (10, 3, 3, 2, 8),  # 3 x 3 stride 2, windows past the edge (5 a side, the last one short)
    (7, 4, 3, 1, 6),  # 3 x 3 stride 1: every inner address nine times
    (11, 2, 5, 2, 5),  # 5 x 5 stride 2, past the edge
    (10, 5, 1, 2, 9),  # 1 x 1 stride 2, past the edge: no copies, only -1 addresses
]


@pytest.mark.parametrize("flow", ["ws", "os", "is"])
@pytest.mark.parametrize("layer", LAYERS)
@pytest.mark.parametrize(("rows", "cols", "words"), [(4, 4, 64), (8, 4, 150), (4, 8, 37)])
def test_conv_ifmap_slides_match_a_naive_read_buffer(flow: str, layer: tuple[int, ...],
                                                     rows: int, cols: int, words: int) -> None:
    h, c, r, stride, n = layer
    op = naive_im2col(h, h, c, r, r, stride)
    m, k = len(op), len(op[0])
    oh = ofmap_size(h, r, stride)
    conv = Im2col.of((h, h, c, r, r, stride, stride, oh, oh), m, k)
    assert conv is not None
    assert np.array_equal(conv.addresses(), np.array(op))
    ifmap, _ = read_streams(m, n, k, rows, cols, flow)
    t = {"ws": m, "os": k, "is": n}[flow]
    per_fold = int(cycles_per_fold(rows, cols, t, flow))
    walk = conv_walk(conv, ifmap, per_fold, flow)
    fetch, demand = naive_ifmap(op, n, rows, cols, flow)
    assert walk.valid_words == sum(x != -1 for x in fetch)
    expected = naive_read_buffer(fetch, demand, words)
    got = simulate_reads(ifmap, words, 4, per_fold, walk)
    assert got.slides == len(expected) > 0
    assert list(zip(got.at_cycles.tolist(), got.slide_index.tolist(), strict=True)) == expected


def test_plain_convs_keep_the_address_free_model() -> None:
    # 1 x 1 stride 1, and windows that neither overlap nor run past the ifmap: every address
    # once, so the model's positions are SCALE-Sim's already
    assert Im2col.of((8, 8, 4, 1, 1, 1, 1, 8, 8), 64, 4) is None
    assert Im2col.of((9, 9, 4, 3, 3, 3, 3, 3, 3), 9, 36) is None
    assert Im2col.of((), 64, 4) is None
    # a batch stacks images along m, each its own addresses
    two = Im2col.of((6, 6, 2, 3, 3, 1, 1, 4, 4), 32, 18)
    assert two is not None and two.images == 2
    addr = two.addresses()
    assert addr[16:].min() == 6 * 6 * 2 and np.array_equal(addr[16:] - 72, addr[:16])


@pytest.mark.parametrize("flow", ["ws", "os", "is"])
def test_a_conv_without_copies_or_holes_walks_as_its_gemm(flow: str) -> None:
    # the address walk on a conv whose addresses are all distinct and valid gives the
    # address-free model's slides (windows 3 x 3 at stride 3 tile a 12 x 12 ifmap exactly)
    srams = SramSpec(300, 300, 300, 4, 4, 4)
    conv = Im2col(12, 12, 3, 3, 3, 3, 3, 4, 4)
    ifmap, _ = read_streams(16, 20, 27, 4, 4, flow)
    t = {"ws": 16, "os": 27, "is": 20}[flow]
    per_fold = int(cycles_per_fold(4, 4, t, flow))
    walked = simulate_reads(ifmap, 300, 4, per_fold, conv_walk(conv, ifmap, per_fold, flow))
    plain = simulate_reads(ifmap, 300, 4, per_fold)
    assert walked.slides == plain.slides > 0
    assert gemm_memory(16, 20, 27, 4, 4, flow, srams)["ifmap_slides"] == plain.slides


def test_renumbering_the_sets_changes_no_slide(monkeypatch: pytest.MonkeyPatch) -> None:
    # the window counts sets on across laps in int32 and renumbers them past a bound: forced
    # at every slide here, the walk must be the same slide for slide
    from accelsim.devices.systolic import im2col as systolic_im2col

    conv = Im2col(10, 10, 3, 3, 3, 2, 2, 5, 5)
    ifmap, _ = read_streams(25, 8, 27, 4, 4, "ws")
    per_fold = int(cycles_per_fold(4, 4, 25, "ws"))
    walk = conv_walk(conv, ifmap, per_fold, "ws")
    plain = simulate_reads(ifmap, 64, 4, per_fold, walk)
    monkeypatch.setattr(systolic_im2col, "_REBASE", 1)
    renumbered = simulate_reads(ifmap, 64, 4, per_fold, walk)
    assert renumbered.slides == plain.slides > 10
    assert np.array_equal(renumbered.at_cycles, plain.at_cycles)


def test_sparse_addresses_walk_as_dense_ones() -> None:
    # 1 x 1 windows 5 apart, rounded up past a 23 x 23 ifmap: few of its addresses are read,
    # so the walk numbers them densely; the slides are the naive read buffer's
    h, c, stride, n = 23, 3, 5, 6
    op = naive_im2col(h, h, c, 1, 1, stride)
    oh = ofmap_size(h, 1, stride)
    conv = Im2col.of((h, h, c, 1, 1, stride, stride, oh, oh), len(op), c)
    assert conv is not None
    ifmap, _ = read_streams(len(op), n, c, 4, 4, "os")
    per_fold = int(cycles_per_fold(4, 4, c, "os"))
    fetch, demand = naive_ifmap(op, n, 4, 4, "os")
    got = simulate_reads(ifmap, 20, 4, per_fold, conv_walk(conv, ifmap, per_fold, "os"))
    expected = naive_read_buffer(fetch, demand, 20)
    assert list(zip(got.at_cycles.tolist(), got.slide_index.tolist(), strict=True)) == expected
    assert len(expected) > 0


def test_convs_too_large_to_read_by_address_are_named() -> None:
    """ResNet-50's 7x7 stem and 3x3 layer1 convs pass 2^23 im2col words at batch 8 (by hand:
    conv1 112 x 112 x 8 outputs x 7 x 7 x 3 taps = 14.8 M; layer1 56 x 56 x 8 x 3 x 3 x 64 =
    14.5 M) but not at batch 1 (1.8 M): only the former are named, and only them."""
    from accelsim.devices.mapping import row_gemms
    from accelsim.devices.systolic.memory import address_free_layers
    from accelsim.workload.work import gemms_for, work_table
    from accelsim.workload.zoo import build_model

    graph = build_model("resnet50")
    named = {b: address_free_layers(work_table(graph, b, "int8"),
                                    row_gemms(work_table(graph, b, "int8"), gemms_for(graph, b)))
             for b in (1, 8)}
    assert named[1] == []
    assert named[8] == ["conv1", "layer1.0.conv2", "layer1.1.conv2", "layer1.2.conv2"]
    # under unbounded ports (SCALE-Sim's CALC) no stall is modelled, so nothing to name
    from accelsim.devices.systolic.memory import address_free_note

    work = work_table(graph, 8, "int8")
    g = row_gemms(work, gemms_for(graph, 8)).to_frame()
    inf = float("inf")
    assert "conv1" in address_free_note(work, g, SramSpec(1024, 1024, 1024, 10.0, 10.0, 10.0))
    assert address_free_note(work, g, SramSpec(1024, 1024, 1024, inf, inf, inf)) is None


ODD_LAYERS = [  # (h, w, c, r, s, stride h, stride w, ofmap h, ofmap w, images)
    (9, 6, 2, 3, 1, 2, 1, 4, 6, 1),  # non-square, strides differ by axis
    (7, 11, 3, 1, 3, 1, 2, 7, 5, 1),
    (6, 6, 2, 3, 3, 1, 1, 6, 6, 2),  # a zoo-style padded conv (ofmap = ifmap), two images
    (5, 8, 2, 3, 3, 2, 1, 3, 8, 3),
    (1, 1, 8, 3, 3, 1, 1, 1, 1, 4),  # a 3 x 3 filter over a 1 x 1 ifmap: taps past the edge
]


@pytest.mark.parametrize("flow", ["ws", "os", "is"])
@pytest.mark.parametrize("layer", ODD_LAYERS)
def test_odd_conv_shapes_slide_as_a_naive_read_buffer(flow: str, layer: tuple[int, ...]) -> None:
    op = naive_im2col_images(*layer)
    m, k = len(op), len(op[0])
    conv = Im2col.of(layer[:9], m, k)
    assert conv is not None
    assert np.array_equal(conv.addresses(), np.array(op))
    rows, cols, words, n = 4, 8, 37, 5
    ifmap, _ = read_streams(m, n, k, rows, cols, flow)
    per_fold = int(cycles_per_fold(rows, cols, {"ws": m, "os": k, "is": n}[flow], flow))
    walk = conv_walk(conv, ifmap, per_fold, flow)
    fetch, demand = naive_ifmap(op, n, rows, cols, flow)
    assert walk.valid_words == sum(x != -1 for x in fetch)
    got = simulate_reads(ifmap, words, 4, per_fold, walk)
    assert list(zip(got.at_cycles.tolist(), got.slide_index.tolist(), strict=True)) == \
        naive_read_buffer(fetch, demand, words)


def test_skew_first_line_closed_form_matches_a_line_by_line_count() -> None:
    """A skewed depth x width block writes, on line j, the columns c with 0 <= j - c < depth
    (c < width); the first line by whose end n words are written, counted line by line."""
    from accelsim.devices.systolic.streams import skew_first_line

    rng = np.random.default_rng(7)
    for depth, width in [(1, 1), (1, 9), (9, 1), (4, 4), (3, 17), (32, 5), (64, 64), (200, 37)]:
        per_line = [sum(1 for c in range(width) if 0 <= j - c < depth)
                    for j in range(depth + width - 1)]
        written = np.cumsum(per_line)
        counts = np.concatenate([np.arange(1, depth * width + 1),
                                 rng.uniform(0, depth * width + 3, 50)])
        for n in counts:
            expected = min(int(np.searchsorted(written, n, side="left")), depth + width - 2)
            assert skew_first_line(float(n), depth, width) == expected, (depth, width, n)
