"""The serving engine of a decoder: requests arrive (Poisson, a trace or closed-loop clients:
`accelsim.llm.arrivals`), a scheduler batches them, each engine iteration is one prefill or
decode step costed by `accelsim.llm.steps`. One SimPy event per iteration (never per token per
request); the running batch is kept in numpy arrays.

    eng = Engine(costs, requests, max_batch=256, kv_blocks=4000, block_tokens=16,
                 batching="continuous")
    out = eng.run()        # per-request first-token, last-token and finish times, counters

Engines sharing one `simpy.Environment` (closed-loop clients over replicas) are each `start`ed,
then the environment is run once.

Continuous batching (Orca, Yu et al. 2022, OSDI; vLLM's scheduler, Kwon et al. 2023): between
decode steps, waiting requests join while the running batch is under `max_batch` and their
prompts' KV blocks fit; a step that admits requests runs their prefill (prefill first, as
vLLM's default scheduler: no chunked prefill), else every running sequence decodes one token.
When a sequence needs a new KV block and none is free, the most recently admitted sequence is
preempted: its blocks are freed and it waits at the head of the queue, to be prefilled again
over its prompt and the tokens it had made (vLLM's recompute preemption).
Static batching: a batch forms when `max_batch` requests wait or the oldest has waited
`max_wait_s` (closed loop: whichever comes first of the next arrival and the deadline is
looked at again), its KV is reserved for every sequence's prompt and output, it prefills, and
it decodes until its longest output is done; every request returns when the batch ends.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Generator
from dataclasses import dataclass

import numpy as np
import simpy

from accelsim.errors import AccelsimError
from accelsim.llm.arrivals import Arrivals, OpenArrivals

BATCHING = ("continuous", "static")
# NB: the most prompt tokens one prefill step takes (vLLM's max_num_batched_tokens when
# chunked prefill is off is at least the model's context; 8192 keeps a step's activations
# bounded); a longer prompt still runs, alone.
MAX_PREFILL_TOKENS = 8192


@dataclass(frozen=True)
class Requests:
    """The workload: arrival time (s; inf while a closed-loop request is not sent yet), prompt
    and output tokens of each request, in arrival order."""

    arrival_s: np.ndarray
    prompt: np.ndarray
    output: np.ndarray


@dataclass(frozen=True)
class StepCosts:
    """Seconds of a prefill (tokens, sequences, causal query-key pairs) and of a decode step
    (sequences, tokens held in all); joules of the same (None: not costed)."""

    prefill_s: Callable[[int, int, float], float]
    decode_s: Callable[[int, float], float]
    prefill_j: Callable[[int, int, float], float] | None = None
    decode_j: Callable[[int, float], float] | None = None
    mixed_s: Callable[[int, float, int, int, float], float] | None = None
    mixed_j: Callable[[int, float, int, int, float], float] | None = None

    def prefill(self, tokens: int, seqs: int, pairs: float) -> tuple[float, float]:
        j = 0.0 if self.prefill_j is None else self.prefill_j(tokens, seqs, pairs)
        return self.prefill_s(tokens, seqs, pairs), j

    def mixed(self, seqs: int, held: float, tokens: int, pieces: int,
              pairs: float) -> tuple[float, float]:
        """A decode step that also prefills chunks (chunked prefill)."""
        if self.mixed_s is None:
            raise ValueError("chunked prefill needs mixed-step costs")
        j = 0.0 if self.mixed_j is None else self.mixed_j(seqs, held, tokens, pieces, pairs)
        return self.mixed_s(seqs, held, tokens, pieces, pairs), j

    def decode(self, seqs: int, held: float) -> tuple[float, float]:
        return self.decode_s(seqs, held), 0.0 if self.decode_j is None else self.decode_j(
            seqs, held)


@dataclass
class Outcome:
    """Per request: first token, last token and return times (s); engine counters."""

    first_s: np.ndarray
    last_s: np.ndarray
    done_s: np.ndarray
    steps: int = 0
    prefill_steps: int = 0
    preemptions: int = 0
    batch_sum: float = 0.0  # running sequences summed over decode steps
    busy_s: float = 0.0
    prefill_busy_s: float = 0.0
    energy_j: float = 0.0  # all GPUs of the replica, over its steps (not while idle)
    peak_blocks: int = 0


def _prefill_shape(pieces: list[tuple[list[int], int, int]]) -> tuple[int, int, float]:
    """(tokens, sequences, causal pairs) of prefill pieces: a piece of c tokens after s
    prefilled ones meets s + 1 ... s + c keys per query."""
    tokens = sum(c for _, _, c in pieces)
    pairs = sum(c * s + c * (c + 1) / 2 for _, s, c in pieces)
    return tokens, len(pieces), pairs


def _advance(pieces: list[tuple[list[int], int, int]], partial: list[list[int]]) -> list[int]:
    """Count the pieces as prefilled; the requests whose prompts are now whole (they leave
    `partial`)."""
    ready = []
    for entry, _, c in pieces:
        entry[1] += c
        if entry[1] >= entry[2]:
            partial.remove(entry)
            ready.append(entry[0])
    return ready


class Engine:
    """One model replica serving `requests`; see the module docstring. `arrivals`: where they
    come from (default: every arrival time known up front, in an environment of its own)."""

    def __init__(self, costs: StepCosts, requests: Requests, max_batch: int, kv_blocks: int,
                 block_tokens: int, batching: str = "continuous", max_wait_s: float = 0.0,
                 chunk_tokens: int | None = None, arrivals: Arrivals | None = None,
                 prefill_tokens: int = MAX_PREFILL_TOKENS) -> None:
        self.costs, self.req = costs, requests
        self.chunk_tokens = chunk_tokens  # None: whole prompts in prefill-only steps
        self.prefill_tokens = prefill_tokens  # the most prompt tokens a prefill-only step takes
        self.max_batch, self.kv_blocks = max_batch, kv_blocks
        self.block_tokens = block_tokens  # tokens per KV block (the stack's)
        self.batching, self.max_wait_s = batching, max_wait_s
        n = len(requests.arrival_s)
        self.out = Outcome(np.full(n, np.nan), np.full(n, np.nan), np.full(n, np.nan))
        self.arrivals = arrivals if arrivals is not None else OpenArrivals()
        self.env = self.arrivals.env

    def _blocks(self, tokens: np.ndarray | int) -> np.ndarray | int:
        """KV blocks that `tokens` tokens take."""
        return -(-tokens // self.block_tokens)

    def start(self) -> None:
        """Put the engine's process in its environment (`run` runs it)."""
        body = self._continuous if self.batching == "continuous" else self._static
        self.env.process(body())

    def run(self) -> Outcome:
        self.start()
        self.env.run()
        return self.out

    def _step(self, cost: tuple[float, float], prefill: bool = False) -> simpy.Timeout:
        seconds, joules = cost
        self.out.steps += 1
        self.out.busy_s += seconds
        self.out.energy_j += joules
        if prefill:
            self.out.prefill_steps += 1
            self.out.prefill_busy_s += seconds
        return self.env.timeout(seconds)

    def _continuous(self) -> Generator[simpy.Event, None, None]:
        req, out, env = self.req, self.out, self.env
        n = len(req.arrival_s)
        waiting: deque[int] = deque()
        partial: list[list[int]] = []  # [request, tokens prefilled, tokens to prefill]
        redo: dict[int, int] = {}  # preempted request -> tokens it had made
        ids = np.zeros(0, dtype=int)  # decoding, in admission order
        held = np.zeros(0, dtype=int)  # tokens in each decoding sequence's cache
        made = np.zeros(0, dtype=int)  # output tokens made so far
        # kept beside the arrays (the loop's per-step cost): held.sum(), and a lower bound on
        # the decode steps before any running sequence is done (<= 0: look)
        held_sum, steps_left = 0, 0
        nxt, finished, used = 0, 0, 0
        while finished < n:
            while nxt < n and req.arrival_s[nxt] <= env.now:
                waiting.append(nxt)
                nxt += 1
            if not waiting and not partial and len(ids) == 0:
                yield self.arrivals.until(req.arrival_s[nxt])
                continue
            pieces, used = self._admit(waiting, partial, redo, len(ids), used)
            if not pieces and len(ids) == 0:
                # nothing runs and nothing frees blocks: the head of the queue never fits
                r = waiting[0]
                need = self._blocks(int(req.prompt[r]) + redo.get(r, 0) + 1)
                raise AccelsimError(f"request {r} needs {need} KV blocks; the engine has "
                                    f"{self.kv_blocks}")
            shape = _prefill_shape(pieces)
            decoding = len(ids) > 0 and (self.chunk_tokens is not None or not pieces)
            if decoding:
                # a sequence whose cache fills its last block needs another to decode
                grow = int(np.count_nonzero(held % self.block_tokens == 0))
                while used + grow > self.kv_blocks and len(ids) > 1:
                    r, h, m = ids[-1], held[-1], made[-1]
                    used -= int(self._blocks(h))
                    grow -= int(h % self.block_tokens == 0)
                    redo[int(r)] = int(m)
                    waiting.appendleft(int(r))
                    ids, held, made = ids[:-1], held[:-1], made[:-1]
                    held_sum -= int(h)
                    out.preemptions += 1
                used += grow
                out.batch_sum += len(ids)
                cache = float(held_sum + len(ids))
                cost = (self.costs.mixed(len(ids), cache, *shape) if pieces
                        else self.costs.decode(len(ids), cache))
            else:
                cost = self.costs.prefill(*shape)
            yield self._step(cost, prefill=not decoding)
            if decoding:
                held, made = held + 1, made + 1
                held_sum += len(ids)
                steps_left -= 1
            ready = _advance(pieces, partial)
            if ready:
                arr = np.array(ready)
                fresh = np.isnan(out.first_s[arr])
                out.first_s[arr[fresh]] = env.now
                had = np.array([redo.pop(r, 0) for r in ready])
                ids = np.concatenate([ids, arr])
                held = np.concatenate([held, req.prompt[arr] + had])
                made = np.concatenate([made, had + 1])  # prefill yields a token
                held_sum += int(np.sum(req.prompt[arr] + had))
                steps_left = 0  # a newcomer may be done at once: look
            out.peak_blocks = max(out.peak_blocks, used)
            if steps_left > 0 or len(ids) == 0:
                continue
            left = req.output[ids] - made
            done = left <= 0
            if done.any():
                gone = ids[done]
                out.last_s[gone] = env.now
                out.done_s[gone] = env.now
                used -= int(np.sum(self._blocks(held[done])))
                held_sum -= int(np.sum(held[done]))
                finished += len(gone)
                ids, held, made, left = ids[~done], held[~done], made[~done], left[~done]
                settle = self.arrivals.returned(gone)
                if settle is not None:
                    yield settle
            steps_left = int(left.min()) if len(left) else 0

    def _admit(self, waiting: deque[int], partial: list[list[int]], redo: dict[int, int],
               decoding: int, used: int) -> tuple[list[tuple[list[int], int, int]], int]:
        """This step's prefill pieces (entry, first token, tokens): whole prompts up to
        `prefill_tokens`, or with chunking the step's token budget left by the decodes,
        unfinished prompts first; waiting requests join while the batch and the KV blocks
        (their whole prompt, allocated at once) allow."""
        chunked = self.chunk_tokens is not None
        budget = self.chunk_tokens - decoding if chunked else self.prefill_tokens
        pieces = []
        for entry in partial:
            if budget <= 0:
                break
            c = min(entry[2] - entry[1], budget)
            pieces.append((entry, entry[1], c))
            budget -= c
        while waiting and decoding + len(partial) < self.max_batch and budget > 0:
            r = waiting[0]
            length = int(self.req.prompt[r]) + redo.get(r, 0)
            # room for the prompt and the first decoded token
            if used + int(self._blocks(length + 1)) > self.kv_blocks or (
                    not chunked and pieces and length > budget):
                break
            waiting.popleft()
            entry = [r, 0, length]
            partial.append(entry)
            used += int(self._blocks(length))
            c = min(length, budget) if chunked else length
            pieces.append((entry, 0, c))
            budget -= c
        return pieces, used

    def _static(self) -> Generator[simpy.Event, None, None]:
        req, out, env = self.req, self.out, self.env
        n = len(req.arrival_s)
        ahead = self.arrivals.ahead
        start = 0
        while start < n:
            full = min(start + self.max_batch, n)
            ready_s = max(req.arrival_s[full - 1], env.now)
            deadline_s = max(req.arrival_s[start] + self.max_wait_s, env.now)
            if ready_s > deadline_s:  # not full in time: take what arrived by the deadline
                full = max(int(np.searchsorted(req.arrival_s, deadline_s, "right")), start + 1)
                ready_s = max(req.arrival_s[full - 1], deadline_s)
            if not ahead and ready_s > env.now:  # requests not sent yet may come sooner
                yield self.arrivals.until(ready_s)
                continue
            end = self._fit(start, full)
            if ready_s > env.now:
                yield env.timeout(ready_s - env.now)
            batch = np.arange(start, end)
            # NB: prompts padded to the longest (one dense batch, as a static server runs it)
            p, o = int(req.prompt[batch].max()), req.output[batch]
            b = len(batch)
            yield self._step(self.costs.prefill(b * p, b, b * p * (p + 1) / 2), True)
            out.first_s[batch] = env.now
            for i in range(1, int(o.max())):
                out.batch_sum += b
                yield self._step(self.costs.decode(b, b * (p + i)))
                out.last_s[batch[o == i + 1]] = env.now
            out.last_s[batch[o == 1]] = out.first_s[batch[o == 1]]
            out.done_s[batch] = env.now
            out.peak_blocks = max(out.peak_blocks, b * int(self._blocks(p + int(o.max()))))
            start = end
            settle = self.arrivals.returned(batch)
            if settle is not None:
                yield settle

    def _fit(self, start: int, end: int) -> int:
        """The end of the longest batch from `start` whose padded KV fits the blocks."""
        while end > start + 1:
            p = int(self.req.prompt[start:end].max())
            o = int(self.req.output[start:end].max())
            if (end - start) * self._blocks(p + o) <= self.kv_blocks:
                break
            end -= 1
        return end
