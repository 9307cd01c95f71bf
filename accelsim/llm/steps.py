"""Whole-model prefill and decode steps on a TP x PP split: the shard costs of
`accelsim.llm.costs` summed over a stage's layers, plus the TP all-reduces (two per layer, as
events on the link: `accelsim.llm.tp_events`) and the stage boundary, through the pipeline.

    model = StepModel(plat, lay)
    pre = model.prefill(batch=8, prompt=512)        # one batch's prefill: the TTFT
    table = model.decode_table(max_batch=64, max_context_tokens=64 * 4096)
    table.step_s(8, 8 * 600)                        # one decode step of 8 sequences

A step of `seqs` sequences runs as m = min(seqs, pp) microbatches. A decode step in steady
state takes pp stage times of one microbatch (every sequence passes every stage once; with
m < pp stages idle: bubble 1 - m/pp). A single batch's prefill fills and drains the pipeline:
(m + pp - 1) stage times (GPipe). Energy counts every GPU of the split.
"""

from __future__ import annotations

import bisect
import math
from dataclasses import dataclass

import numpy as np

from accelsim.llm.costs import Platform, ShapeCost, shape_costs
from accelsim.llm.interp import interp1, table
from accelsim.llm.parallel import Layout
from accelsim.llm.tp_events import ExposedCache
from accelsim.llm.work import SKINNY_ROW_MULTIPLE, Step

ALLREDUCES_PER_LAYER = 2  # after attention and after the FFN (Megatron-LM)
CONTEXT_GRID_POINTS = 33  # NB: decode attention is interpolated linearly between these
EXACT_BATCH = 512  # decode steps of up to this many sequences are costed at their own size
ATTENTION_BATCH_STRIDE = 3  # decode attention: every third node of the sequence-count grid


@dataclass(frozen=True)
class PhaseCost:
    """One phase of one batch through the whole split: seconds, joules (all GPUs), model
    FLOPs (matmul rows, every shard), DRAM bytes per GPU of the largest stage, the pipeline
    bubble share and the TP communication time."""

    time_s: float
    energy_j: float
    flops: float
    dram_bytes_per_gpu: float
    bubble: float
    comm_s: float


def prefill_step(seqs: int, prompt: float) -> Step:
    """`seqs` prompts of `prompt` tokens: causal, p (p + 1) / 2 pairs each."""
    return Step(int(round(seqs * prompt)), seqs, seqs * prompt * (prompt + 1) / 2,
                seqs * prompt)


def decode_step(seqs: int, context_tokens: float) -> Step:
    """One new token for each of `seqs` sequences holding `context_tokens` in all (the new
    ones included): each query meets its whole context."""
    return Step(seqs, seqs, context_tokens, context_tokens)


class StepModel:
    """Costs of steps on one split; see the module docstring."""

    def __init__(self, plat: Platform, lay: Layout) -> None:
        self.plat, self.lay = plat, lay
        # the stack's host time per step (scheduling, sampling), serial with the GPUs
        self.step_overhead_s = float(plat.stack.host_per_step_s)
        # the layer's collectives as events: two all-reduces, or with expert parallelism the
        # attention's all-reduce and the experts' dispatch and combine all-to-alls
        per_layer = 3 if plat.expert_parallel else ALLREDUCES_PER_LAYER
        self.events = ExposedCache(lay.layers_per_stage, per_layer, lay.overlap_tp)

    def _parts(self, steps: list[Step], layer_part: str = "layer") -> dict[str, ShapeCost]:
        return {part: shape_costs(self.plat, steps, part)
                for part in (layer_part, "embed", "head")}

    def layer_comm_s(self, tokens: float) -> tuple[float, float]:
        """(TP collectives of one layer, one stage boundary) for `tokens` hidden states, s
        (`_comm_s`; training runs the same collectives each way)."""
        return self._comm_s(tokens)

    def _comm_s(self, tokens: float) -> tuple[float, float]:
        """(TP collectives of one layer, one stage boundary) for `tokens` hidden states: two
        all-reduces, or with expert parallelism the attention's all-reduce and the experts'
        dispatch and combine all-to-alls (each of the tokens' k copies)."""
        msg = tokens * self.plat.cfg.d_model * self.plat.formats.act_bytes
        # the stack's own time per collective call (launch, base latency), none without TP
        call_s = self.plat.stack.per_collective_s if self.lay.tp > 1 else 0.0
        if self.plat.expert_parallel:
            routed = msg * self.plat.cfg.experts_per_token
            layer_s = (self.lay.allreduce_s(msg) + 2 * self.lay.alltoall_s(routed)
                       + 3 * call_s)
        else:
            layer_s = ALLREDUCES_PER_LAYER * (self.lay.allreduce_s(msg) + call_s)
        return layer_s, self.lay.p2p_s(msg)

    def _stage_s(self, layer_s: float, embed_s: float, head_s: float, tokens: float,
                 comm: tuple[float, float] | None = None) -> float:
        """The largest stage: its layers with their all-reduces as events (after each layer's
        compute, or beside the next layer's when the layout overlaps them:
        `accelsim.llm.tp_events`), the ends it holds, and the hand-over to the next stage.
        `comm`: (a layer's collectives, hand-over) if already known."""
        ar_s, p2p_s = self._comm_s(tokens) if comm is None else comm
        ends = embed_s + head_s if self.lay.pp == 1 else max(embed_s, head_s)
        return self.events.layers_s(layer_s, ar_s) + ends + p2p_s

    def _energy_j(self, parts: dict[str, ShapeCost], key: str, i: int, micro: int) -> float:
        """Every GPU's energy for all microbatches: each TP rank runs one shard of every
        layer. NB: idle GPUs in the bubble draw no static power here."""
        per = self.plat.cfg.n_layers * parts[key].energy_j[i] + parts["embed"].energy_j[i] + \
            parts["head"].energy_j[i]
        return float(self.plat.tp * micro * per)

    def prefill(self, batch: int, prompt: int) -> PhaseCost:
        """One batch of `batch` prompts of `prompt` tokens, from empty caches."""
        m = self.lay.microbatches(batch)
        step = prefill_step(-(-batch // m), prompt)
        parts = self._parts([step])
        comm = self._comm_s(step.tokens)
        stage_s = self._stage_s(parts["layer"].time_s[0], parts["embed"].time_s[0],
                                parts["head"].time_s[0], step.tokens, comm)
        pp = self.lay.pp
        flops = self.plat.tp * m * (self.plat.cfg.n_layers * parts["layer"].matmul_flops[0]
                                    + parts["head"].matmul_flops[0])
        dram = m * (self.lay.layers_per_stage * parts["layer"].dram_bytes[0]
                    + parts["head"].dram_bytes[0] + parts["embed"].dram_bytes[0])
        ar_s = comm[0]
        return PhaseCost((m + pp - 1) * stage_s + self.step_overhead_s,
                         self._energy_j(parts, "layer", 0, m), flops, dram,
                         (pp - 1) / (m + pp - 1), (m + pp - 1) * self.lay.layers_per_stage * ar_s)

    def prefill_table(self, max_tokens: int, max_seqs: int) -> PrefillTable:
        """Prefill step costs for up to `max_tokens` prompt tokens of up to `max_seqs`."""
        return PrefillTable(self, max_tokens, max_seqs)

    def decode_table(self, max_batch: int, max_context_tokens: float) -> DecodeTable:
        """Decode step costs for 1..max_batch sequences holding up to `max_context_tokens`."""
        return DecodeTable(self, max_batch, max_context_tokens)


class DecodeTable:
    """Decode-step time and energy of b sequences holding C tokens, for any b <= max_batch and
    C <= max_context_tokens: the layers without attention costed at every microbatch size up
    to `EXACT_BATCH`, then where their GEMMs' padded size changes (`_token_grid`); attention on
    a grid of (sequences, tokens per sequence), interpolated linearly in each: a step's keys
    split into many short sequences do not cost what one long sequence of as many keys does
    (its GEMM operands outgrow the L2). NB: sequences of one step are taken at their mean
    length."""

    def __init__(self, model: StepModel, max_batch: int, max_context_tokens: float) -> None:
        self.model = model
        self.tile = model.plat.tiles.m
        nodes = _token_grid(max_batch, self.tile)
        self.batches = np.unique(np.concatenate([
            np.arange(1, min(max_batch, EXACT_BATCH) + 1, dtype=float),
            nodes[nodes > EXACT_BATCH]]))
        parts = model._parts([decode_step(int(b), float(b)) for b in self.batches], "linear")
        top = max(float(max_context_tokens), 2.0)
        self.grid = np.unique(np.geomspace(1.0, top, CONTEXT_GRID_POINTS))  # >= 1 key each
        self.att_seqs = _grid(max_batch)[::ATTENTION_BATCH_STRIDE]
        if self.att_seqs[-1] < max_batch:
            self.att_seqs = np.append(self.att_seqs, float(max_batch))
        att = shape_costs(model.plat, [decode_step(int(b), b * c) for b in self.att_seqs
                                       for c in self.grid], "attention")
        lin, embed, head = parts["linear"], parts["embed"], parts["head"]
        shape = (len(self.att_seqs), len(self.grid))
        self._att_rows: dict[tuple[str, float], list[float]] = {}  # rows blended per count
        self._grid_list = table(self.grid, self.grid)[0]
        self._at_cache: dict[tuple[int, float], float] = {}  # (table, batch node) -> value
        self.att = {key: values.reshape(shape) for key, values in (
            ("s", att.time_s), ("j", att.energy_j), ("flops", att.matmul_flops),
            ("dram", att.dram_bytes))}
        self.lin = {"s": lin.time_s, "j": lin.energy_j, "flops": lin.matmul_flops,
                    "dram": lin.dram_bytes}
        self.ends = {"embed_s": embed.time_s, "head_s": head.time_s,
                     "j": embed.energy_j + head.energy_j, "flops": head.matmul_flops,
                     "dram": embed.dram_bytes + head.dram_bytes}
        comm = np.array([model._comm_s(float(b)) for b in self.batches])
        self.comm = {"ar": comm[:, 0], "p2p": comm[:, 1]}
        self.layers = model.lay.layers_per_stage

    def attention(self, key: str, seqs: float, context_tokens: float) -> float:
        """Attention of one layer shard ("s", "j", "flops", "dram") for `seqs` sequences
        holding `context_tokens` in all: bilinear in (sequences, tokens per sequence)."""
        row = self._att_rows.get((key, seqs))
        if row is None:
            row = self._att_rows[(key, seqs)] = table(self.grid, self._att_row(key, seqs))[1]
        return interp1(context_tokens / max(seqs, 1.0), self._grid_list, row)

    def _att_row(self, key: str, seqs: float) -> np.ndarray:
        """The attention table's row for `seqs` sequences: linear between the nodes (the last
        is the table's largest batch)."""
        nodes, table = self.att_seqs, self.att[key]
        if seqs <= nodes[0] or len(nodes) == 1:
            return table[0] * (max(seqs, 1.0) / nodes[0] if seqs > nodes[0] else 1.0)
        i = min(bisect.bisect_left(nodes.tolist(), seqs), len(nodes) - 1)
        w = (min(seqs, nodes[i]) - nodes[i - 1]) / (nodes[i] - nodes[i - 1])
        return table[i - 1] + w * (table[i] - table[i - 1])

    def _micro(self, seqs: int) -> tuple[int, float]:
        """(microbatches, the batch node a microbatch of the step is costed at)."""
        m = self.model.lay.microbatches(seqs)
        b = -(-seqs // m)
        return m, float(b if b <= EXACT_BATCH else _padded(b, self.tile))

    def _at(self, values: np.ndarray, b: float) -> float:
        """`values` (one of this table's per-batch arrays) at batch node `b`, kept: a run
        asks for a few hundred distinct nodes, millions of times."""
        key = (id(values), b)
        got = self._at_cache.get(key)
        if got is None:
            got = self._at_cache[key] = float(np.interp(b, self.batches, values))
        return got

    def step_s(self, seqs: int, context_tokens: float) -> float:
        """Seconds of one decode step (one token for each of `seqs` sequences)."""
        m, b = self._micro(seqs)
        layer_s = self._at(self.lin["s"], b) + self.attention("s", seqs / m,
                                                              context_tokens / m)
        stage_s = self.model._stage_s(
            layer_s, self._at(self.ends["embed_s"], b),
            self._at(self.ends["head_s"], b), b,
            (self._at(self.comm["ar"], b), self._at(self.comm["p2p"], b)))
        return self.model.lay.pp * stage_s + self.model.step_overhead_s

    def _total(self, key: str, seqs: int, context_tokens: float) -> float:
        """Joules ("j"), model FLOPs ("flops": every GPU) or DRAM bytes ("dram": one GPU of
        the largest stage) of one decode step."""
        m, b = self._micro(seqs)
        att = self.attention(key, seqs / m, context_tokens / m)
        layer = self._at(self.lin[key], b) + att
        if key == "dram":
            return m * (self.layers * layer + self._at(self.ends[key], b))
        n_layers, tp = self.model.plat.cfg.n_layers, self.model.plat.tp
        return tp * m * (n_layers * layer + self._at(self.ends[key], b))

    def step_j(self, seqs: int, context_tokens: float) -> float:
        """Joules of one decode step, every GPU of the split."""
        return self._total("j", seqs, context_tokens)

    def step(self, seqs: int, context_tokens: float) -> PhaseCost:
        """The same step with energy (all GPUs), model FLOPs and per-GPU DRAM bytes."""
        m, b = self._micro(seqs)
        pp = self.model.lay.pp
        return PhaseCost(self.step_s(seqs, context_tokens),
                         self._total("j", seqs, context_tokens),
                         self._total("flops", seqs, context_tokens),
                         self._total("dram", seqs, context_tokens), 1.0 - m / pp,
                         pp * self.layers * self._at(self.comm["ar"], b))


def _grid(top: float) -> np.ndarray:
    """Whole numbers from 1 to `top`, geometrically spaced (interpolation nodes)."""
    return np.unique(np.round(np.geomspace(1.0, max(float(top), 1.0), CONTEXT_GRID_POINTS)))


def _token_grid(top: float, tile: int) -> np.ndarray:
    """Token counts where a GEMM's padded size changes: multiples of the small-M padding up to
    a CTA tile's rows, then multiples of the tile, through `top` (`_padded` maps onto them)."""
    small = np.arange(SKINNY_ROW_MULTIPLE, tile, SKINNY_ROW_MULTIPLE, dtype=float)
    big = np.arange(tile, math.ceil(max(top, 1) / tile) * tile + 1, tile, dtype=float)
    return np.unique(np.concatenate([[1.0], small, big]))


def _padded(tokens: float, tile: int) -> float:
    """`tokens` rounded up to the node of `_token_grid` whose GEMMs pad to the same size (the
    GEMM rows' cost steps there; elementwise rows are charged for the padded rows: NB)."""
    step = SKINNY_ROW_MULTIPLE if tokens < tile else tile
    return max(math.ceil(tokens / step) * step, 1.0) if tokens > 1 else 1.0


class PrefillTable:
    """Prefill-step time of any set of prompts: the layers without attention at every token
    count where their GEMMs' padded size changes (exact), attention on a grid of causal pairs
    and the head on a grid of sequence counts, interpolated linearly between nodes. NB:
    prompts of different lengths in one step are costed as one prompt with the same query-key
    pairs (varlen FlashAttention runs them as one kernel; its K/V traffic, which scales with
    tokens, is taken at that prompt's length)."""

    def __init__(self, model: StepModel, max_tokens: int, max_seqs: int) -> None:
        self.model = model
        plat = model.plat
        self.tile = plat.tiles.m
        self.tokens = _token_grid(max_tokens, self.tile)
        lin = shape_costs(plat, [Step(int(t), 1, 0.0, 0.0) for t in self.tokens], "linear")
        embed = shape_costs(plat, [Step(int(t), 1, 0.0, 0.0) for t in self.tokens], "embed")
        self.seqs = _grid(max_seqs)
        head = shape_costs(plat, [Step(int(s), int(s), 0.0, 0.0) for s in self.seqs], "head")
        lengths = _grid(max_tokens)
        self.pairs = lengths * (lengths + 1) / 2
        att = shape_costs(plat, [prefill_step(1, float(p)) for p in lengths], "attention")
        # per kind ("s": seconds, "j": joules of one shard): the part tables
        self.parts = {kind: {name: [float(v) for v in
                                    getattr(cost, "time_s" if kind == "s" else "energy_j")]
                             for name, cost in (("lin", lin), ("embed", embed), ("head", head),
                                                ("att", att))}
                      for kind in ("s", "j")}
        self._lists = ([float(x) for x in self.tokens], [float(x) for x in self.pairs],
                       [float(x) for x in self.seqs])

    def _cost(self, kind: str, tokens: float, seqs: float, pairs: float,
              dec: DecodeTable | None = None, decoding: int = 0, held: float = 0.0) -> float:
        """Seconds ("s") or joules of all GPUs ("j") of a step prefilling `tokens` of `seqs`
        prompts (`pairs` causal pairs), beside `decoding` sequences holding `held` tokens."""
        model, part = self.model, self.parts[kind]
        m = model.lay.microbatches(seqs + decoding)
        t = _padded((tokens + decoding) / m, self.tile)
        tokens_at, pairs_at, seqs_at = self._lists
        layer = (interp1(t, tokens_at, part["lin"]) + interp1(pairs / m, pairs_at, part["att"]))
        if decoding and dec is not None:
            layer += dec.attention(kind, decoding / m, held / m)
        embed = interp1(t, tokens_at, part["embed"])
        head = interp1((seqs + decoding) / m, seqs_at, part["head"])
        if kind == "j":
            return model.plat.tp * m * (model.plat.cfg.n_layers * layer + embed + head)
        stage_s = model._stage_s(layer, embed, head, (tokens + decoding) / m)
        return model.lay.pp * stage_s + model.step_overhead_s

    def step_s(self, tokens: int, seqs: int, pairs: float) -> float:
        """Seconds of one prefill step of `seqs` prompts, `tokens` in all."""
        return self._cost("s", tokens, seqs, pairs)

    def step_j(self, tokens: int, seqs: int, pairs: float) -> float:
        """Joules of the same step, every GPU of the split."""
        return self._cost("j", tokens, seqs, pairs)

    def mixed_s(self, dec: DecodeTable, seqs: int, held: float, tokens: int, pieces: int,
                pairs: float) -> float:
        """Seconds of a decode step of `seqs` sequences (`held` tokens in all) that also
        prefills `tokens` prompt tokens of `pieces` prompts (chunked prefill, Agrawal et al.
        2024, "Sarathi-Serve", OSDI, arXiv:2403.02310): the linear layers run once over all
        the step's tokens, each weight read once; attention is the decode's plus the chunks'."""
        return self._cost("s", tokens, pieces, pairs, dec, seqs, held)

    def mixed_j(self, dec: DecodeTable, seqs: int, held: float, tokens: int, pieces: int,
                pairs: float) -> float:
        """Joules of the same step, every GPU of the split."""
        return self._cost("j", tokens, pieces, pairs, dec, seqs, held)
