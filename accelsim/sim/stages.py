"""The loader stages of the training pipeline whose order depends on where samples are
decoded (`accelsim.sim.decode`): on the host, read -> prepare -> copy; on the device, read ->
copy (of the compressed bytes, or none with GPUDirect Storage) -> decode. A mixin of
`accelsim.sim.train.TrainModel`, whose events, times and recorder it uses: the device decode
process, and the residence and stall records cut along the stages in the order they run.
"""

from __future__ import annotations

from collections.abc import Generator
from typing import Any


class LoaderStages:
    """Device decode and the stage order of `TrainModel` (a mixin; no state of its own)."""

    env: Any
    plan: Any
    reads: Any
    recorder: Any

    def _decoder(self, d: int) -> Generator[Any, Any, None]:
        """Decodes each batch on the device once it is there (`accelsim.sim.decode`)."""
        env, dec = self.env, self.plan.decode
        res = f"accel{d}" if dec.place == "gpu" else f"jpeg{d}"
        for g in range(self.reads.steps):
            yield self.xfer_ev[d][g]
            samples = int(self.batch_samples[g, d])
            busy_s = samples * dec.s_per_sample
            if busy_s > 0:
                with self.decoder[d].request() as req:
                    yield req
                    t0 = env.now
                    yield env.timeout(busy_s)
                    self.recorder.add(res, "decode", t0, env.now, g, d, samples,
                                      float(self.reads.bytes[g, d].sum()),
                                      busy_s * (dec.power_w or 0.0), dec.place)
            self._finish(self.ready_at, self.ready_ev, d, g)

    def _stages(self, d: int, g: int) -> tuple[tuple[str, str, float], ...]:
        """(residence kind, stall kind, end) of each loader stage of batch g of device d, in
        the order they run: preparation is on the host before the copy, or on the device
        (decode) after it."""
        read = ("batch_read", "stall_fetch", self.read_done[d, g])
        if self.host_prep:
            return (read, ("batch_prep", "stall_prep", self.prep_done[d, g]),
                    ("batch_transfer", "stall_transfer", self.ready_at[d, g]))
        return (read, ("batch_transfer", "stall_transfer", self.xfer_done[d, g]),
                ("batch_prep", "stall_prep", self.ready_at[d, g]))

    def _residence(self, d: int, g: int) -> None:
        """Where batch g of device d spent its time before it was ready: waiting for and in
        each loader stage (the stage a queue builds in front of is the pipeline's limit)."""
        a, res, samples = self.read_start[d, g], f"loader{d}", int(self.batch_samples[g, d])
        for kind, _, b in self._stages(d, g):
            if b > a or kind == "batch_read":
                self.recorder.add(res, kind, a, b, g, d, samples)
            a = b

    def _stall(self, d: int, g: int, t0: float, t1: float) -> None:
        a = t0
        for _, kind, end in self._stages(d, g):
            b = min(end, t1)
            if b > a:
                self.recorder.add(f"accel{d}", kind, a, b, g, d)
            a = max(a, b)
