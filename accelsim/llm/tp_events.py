"""One pipeline stage of a tensor-parallel group as SimPy events, layer by layer: each layer's
compute on the GPUs, then its TP collectives (two all-reduces: after attention and after the
FFN, Megatron-LM) on the device-to-device link held as a `simpy.Resource`.

    stage_layers_s([c] * 32, [a] * 32, collectives_per_layer=2, overlap=False)  # 32 (c + a)
    stage_layers_s([c] * 32, [a] * 32, 2, overlap=True)       # 32 c + a when a < c

Without overlap the next layer's compute waits for this layer's collectives (Megatron inference:
the all-reduce sits on the critical path). With overlap it starts as soon as this layer's
compute ends, beside the collectives (NB: the upper bound of schemes that chunk a layer's GEMMs
so the all-reduce of one chunk hides behind the next, e.g. async TP, TensorRT-LLM's fused
GEMM + all-reduce: a layer's data dependence is not modelled); the link carries one collective
at a time, so collectives longer than the compute queue behind each other. One device: no
collective events, the layers' compute in sequence.

Inference steps (`accelsim.llm.steps`) and training passes (`accelsim.llm.train`: forward, then
backward with its own collectives) run the same events, so `overlap_tp` means the same in both.

`ExposedCache` keeps the exposed collective time (the timeline past the compute) of a step by
(collective time, compute bucket), the only inputs it depends on, so an engine that costs many
steps runs the events once per bucket, not once per step.
"""

from __future__ import annotations

import math
from collections.abc import Generator, Sequence

from accelsim.errors import AccelsimError

# NB: steps whose per-layer compute falls in the same 1 % band share one event simulation
# (its result taken at the band's lower edge): the exposed time moves by at most the layers x
# the band width, under 1 % of the step.
BUCKET_RATIO = 1.01
# the buckets' exposed seconds, shared by every `ExposedCache` of the process (a pure function
# of layers, collectives per layer, overlap, collective seconds and band); emptied at the cap
_SHARED_EXPOSED_S: dict[tuple[int, int, bool, float, int], float] = {}
SHARED_CAP = 200_000


def stage_layers_s(compute_s: Sequence[float], collectives_s: Sequence[float],
                   collectives_per_layer: int, overlap: bool) -> float:
    """Seconds from the first layer's compute to the last layer's last collective
    (`stage_events`)."""
    return stage_events(compute_s, collectives_s, collectives_per_layer, overlap)[0]


def stage_events(compute_s: Sequence[float], collectives_s: Sequence[float],
                 collectives_per_layer: int, overlap: bool) -> tuple[float, int]:
    """(seconds of the stage's layers, collective events run). Layer i
    computes for compute_s[i] s, then runs `collectives_per_layer` equal collectives of
    collectives_s[i] s in all, one at a time on the link (NB: both after the whole layer's
    compute; only their sum moves the timeline). No events when every collective takes 0 s."""
    if len(compute_s) != len(collectives_s):
        raise AccelsimError(f"{len(compute_s)} layer compute times but {len(collectives_s)} "
                            "collective times: one of each per layer")
    if any(c < 0 for c in compute_s) or any(a < 0 for a in collectives_s):
        raise AccelsimError("layer compute and collective times must be >= 0 s")
    if not any(a > 0 for a in collectives_s):
        return float(sum(compute_s)), 0
    import simpy  # only when a stage is simulated: a single-device run never imports it

    env = simpy.Environment()
    gpu, link = simpy.Resource(env, capacity=1), simpy.Resource(env, capacity=1)
    may_start = [env.event() for _ in compute_s]
    events = {"collectives": 0}

    def layer(i: int) -> Generator[simpy.Event, None, None]:
        yield may_start[i]
        with gpu.request() as req:
            yield req
            yield env.timeout(compute_s[i])
        last = i + 1 == len(compute_s)
        if overlap and not last:
            may_start[i + 1].succeed()
        if collectives_s[i] > 0:
            for _ in range(collectives_per_layer):
                with link.request() as req:
                    yield req
                    yield env.timeout(collectives_s[i] / collectives_per_layer)
                    events["collectives"] += 1
        if not overlap and not last:
            may_start[i + 1].succeed()

    for i in range(len(compute_s)):
        env.process(layer(i))
    may_start[0].succeed()
    env.run()
    return float(env.now), events["collectives"]


class ExposedCache:
    """Exposed collective seconds of a stage of `layers` equal layers, memoised by (collective
    time, compute bucket); see the module docstring."""

    def __init__(self, layers: int, collectives_per_layer: int, overlap: bool) -> None:
        self.layers, self.per_layer, self.overlap = layers, collectives_per_layer, overlap
        self._seen: dict[tuple[float, int], float] = {}

    @property
    def simulated(self) -> int:
        """Buckets this instance has used (each an event simulation, run once a process)."""
        return len(self._seen)

    def layers_s(self, compute_s: float, collectives_s: float) -> float:
        """The stage's layers with their collectives, s: layers x compute_s (exact) plus the
        exposed collective time of the bucket (each layer's collectives take
        `collectives_s` in all)."""
        exact = self.layers * compute_s
        if collectives_s <= 0:
            return exact
        band = (math.floor(math.log(compute_s) / math.log(BUCKET_RATIO))
                if compute_s > 0 else -(10 ** 9))
        key = (float(collectives_s), band)
        if key not in self._seen:
            # a bucket's figure depends on its key alone (taken at the band's lower edge), so
            # every instance of the process shares it: a plan or sweep over batch caps,
            # rates and stacks simulates each bucket once
            shared = (self.layers, self.per_layer, self.overlap, *key)
            if shared not in _SHARED_EXPOSED_S:
                if len(_SHARED_EXPOSED_S) >= SHARED_CAP:
                    _SHARED_EXPOSED_S.clear()
                rep_s = BUCKET_RATIO ** band if compute_s > 0 else 0.0
                total = stage_layers_s([rep_s] * self.layers, [collectives_s] * self.layers,
                                       self.per_layer, self.overlap)
                _SHARED_EXPOSED_S[shared] = total - self.layers * rep_s
            self._seen[key] = _SHARED_EXPOSED_S[shared]
        return exact + self._seen[key]
