"""What would relieve the bottleneck, found by re-simulating, not by a rule of thumb.

    found = find_relief("resnet50-train", "dgx-a100", result.record, {"prep_workers": 1})
    found.best[0].sentence()   # "8 prep workers per accelerator (1 -> 8) lifts AU from ..."
    accelsim.simulate("resnet50-train", "dgx-a100", **found.best[0].knobs)   # the same run

The bottleneck picks the candidate changes (`candidates`); each is simulated with every other
knob as given, and the few that improve the metric that matters most are kept, best first:
accelerator utilisation (AU) when training waits for its input or its all-reduce, throughput
when it computes (and for inference), p99 latency when serving. Candidates that are refused
or do not fit are skipped with a note. Training what-ifs run `WHATIF_STEPS` steps, and the
"before" figure is then the same run shortened alike, so that before and after compare.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from accelsim.errors import AccelsimError
from accelsim.formats import get_format

# NB: 20 steps (the first, the pipeline filling, excluded from AU) settle a pipeline's steady
# state in every built-in scenario; a what-if is a comparison, not a full run.
WHATIF_STEPS = 20
TOP = 3
# NB: a change must move its metric by more than this (relative) to count as relief.
MIN_GAIN = 0.005
INPUT_STAGES = ("io", "prepare", "transfer")
METRIC_NAMES = {"accelerator_utilization": "AU", "throughput_samples_per_s": "throughput",
                "latency_p99_s": "p99 latency"}


@dataclass(frozen=True)
class Relief:
    """One simulated change: `knobs` re-run it (`accelsim.simulate(workload, hw, **knobs)`);
    `before`/`after` are on `metric` (None before: the run did not fit)."""

    change: str
    knobs: dict[str, Any]
    metric: str
    before: float | None
    after: float
    throughput_before: float | None
    throughput_after: float
    bottleneck_after: str

    @property
    def gain(self) -> float:
        """Relative improvement on the metric (lower is better for latency); inf from none."""
        if self.before is None or self.before == 0:
            return float("inf")
        delta = self.after - self.before
        return (-delta if self.metric == "latency_p99_s" else delta) / abs(self.before)

    def sentence(self) -> str:
        """"2 more prep workers per accelerator (16 -> 18) lift AU from 78% to 96%"."""
        name = METRIC_NAMES[self.metric]
        if self.before is None:
            return f"{self.change}: fits, {name} {format_metric(self.metric, self.after)}"
        verb = "cuts" if self.metric == "latency_p99_s" else "lifts"
        return (f"{self.change} {verb} {name} from {format_metric(self.metric, self.before)} "
                f"to {format_metric(self.metric, self.after)}")


@dataclass
class Finding:
    """The outcome of `find_relief`: the best changes, all tried, and why some were skipped."""

    bottleneck: str
    metric: str
    before: float | None
    best: list[Relief] = field(default_factory=list)
    tried: list[Relief] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def format_metric(metric: str, value: float | None) -> str:
    """AU as a percentage, throughput in samples/s, latency in ms."""
    if value is None:
        return "does not fit"
    if metric == "accelerator_utilization":
        return f"{value:.0%}"
    if metric == "latency_p99_s":
        return f"{value * 1e3:,.2f} ms"
    return f"{value:,.0f} samples/s" if value >= 100 else f"{value:.3g} samples/s"


def metric_for(mode: str, bottleneck: str) -> str:
    """The record key the relief is judged on."""
    if mode == "serve":
        return "latency_p99_s"
    if mode == "train" and bottleneck in INPUT_STAGES + ("communication",):
        return "accelerator_utilization"
    return "throughput_samples_per_s"


@dataclass(frozen=True)
class Context:
    """What the candidates are chosen from: the run's mode, settings and hardware."""

    mode: str
    bottleneck: str
    record: dict[str, Any]
    profile: Any
    system: Any
    plan: Any = None  # training: the resolved `TrainPlan` (every default filled in)
    serve_devices: int = 1


def run_context(workload: Any, hw: str, record: dict[str, Any], knobs: dict[str, Any]
                ) -> Context:
    """The `Context` of the run of `workload` on `hw` with `knobs` that gave `record`."""
    from accelsim.profiles.hardware import resolve_hardware
    from accelsim.sim.knobs import DEFAULT_MAX_EVENTS, make_config

    cfg = make_config(workload, hw, **knobs)
    system, profile = resolve_hardware(cfg.hardware)
    mode = record["workload"]["mode"]
    plan = None
    if mode == "train" and record["memory"]["fits"]:
        from accelsim.sim.config import TrainConfig, resolve_config

        plan = resolve_config(TrainConfig(
            cfg.scenario, system, devices=cfg.devices, seed=cfg.seed or 0,
            software=cfg.software, device_profile=profile,
            max_events=cfg.max_events or DEFAULT_MAX_EVENTS, **cfg.train))
    return Context(mode, record["bottleneck"], record, profile, system, plan,
                   serve_devices=int(record.get("devices") or 1))


Candidate = tuple[str, dict[str, Any]]  # (what changes, in words; the knobs it sets)


def _more(name: str, what: str, now: int, plus_two: bool = True) -> list[Candidate]:
    """(+2,) x2 and x4 of a per-accelerator count, without repeats."""
    out: list[Candidate] = []
    steps = ((now + 2, "2 more"),) if plus_two else ()
    for new, words in steps + ((now * 2, "twice the"), (now * 4, "4x the")):
        if all(k[name] != new for _, k in out):
            out.append((f"{words} {what} ({now} -> {new})", {name: new}))
    return out


def _prefetch(plan: Any) -> list[Candidate]:
    if plan.prefetch_batches > 0:
        return []
    return [("prefetch 2 batches (now none: the stages run one after another)",
             {"prefetch": 2})]


def _gpudirect(plan: Any) -> list[Candidate]:
    from accelsim.profiles.systems import GDS_STORAGE_KINDS

    sysm = plan.system
    if plan.gpudirect or not sysm.gpudirect_storage or sysm.storage.kind not in GDS_STORAGE_KINDS:
        return []
    # GPUDirect puts the compressed bytes in device memory: the device decodes them.
    decode = "gpu" if plan.decode.place == "cpu" else plan.decode.place
    return [(f"GPUDirect Storage (storage straight to device memory, decoded on the device: "
             f"{decode})", {"gpudirect": True, "decode": decode})]


def _decode_on_device(plan: Any) -> list[Candidate]:
    """Decoding on the GPU's JPEG engine, then on its SMs, instead of host cores."""
    from accelsim.profiles.decoders import available_decoders, load_decoder

    name = plan.device_profile.name
    if plan.decode.place != "cpu" or name not in available_decoders():
        return []
    out = []
    if load_decoder(name).hw_images_per_s is not None:
        out.append(("decode on the GPUs' hardware JPEG decoder instead of host cores",
                    {"decode": "hw"}))
    return out + [("decode on the GPUs' SMs instead of host cores", {"decode": "gpu"})]


def _faster_media(plan: Any) -> list[Candidate]:
    """The medium with the most bandwidth and the one with the lowest request latency, among
    those this system can reach, when they beat the current one."""
    from accelsim.profiles.storage import available_storage, load_storage

    now = plan.system.storage
    media = [load_storage(n) for n in available_storage() if n != now.name]
    media = [m for m in media if m.read_bandwidth_bytes_per_s < float("inf")
             and (not m.over_network or plan.system.network is not None)]
    picks = []
    wider = [m for m in media if m.read_bandwidth_bytes_per_s > now.read_bandwidth_bytes_per_s]
    if wider:
        picks.append(max(wider, key=lambda m: (m.read_bandwidth_bytes_per_s,
                                               -m.request_latency_s)))
    quicker = [m for m in media if m.request_latency_s < now.request_latency_s]
    if quicker:
        picks.append(min(quicker, key=lambda m: (m.request_latency_s,
                                                 -m.read_bandwidth_bytes_per_s)))
    return [(f"{m.name} storage ({_medium(m)}) instead of {now.name} ({_medium(now)})",
             {"storage": m.name}) for m in dict.fromkeys(picks)]


def _medium(m: Any) -> str:
    return (f"{m.read_bandwidth_bytes_per_s / 1e9:.1f} GB/s, "
            f"{m.request_latency_s * 1e6:,.0f} us per request")


def _narrower_precisions(ctx: Context) -> list[Candidate]:
    """Up to two formats the device's matrix units run that are narrower than the current one
    (floats only for training); the widest of them first."""
    now = ctx.record["workload"]["precision"]
    width = get_format(now).bytes_per_element
    runs = [p for p in ctx.profile.supported_precisions(True)
            if get_format(p).bytes_per_element < width
            and not (ctx.mode == "train" and p.startswith("int"))]
    runs.sort(key=lambda p: -get_format(p).bytes_per_element)
    return [(f"{p} instead of {now}", {"precision": p}) for p in runs[:2]]


def _compiled(ctx: Context) -> list[Candidate]:
    hw = ctx.record["hardware"]
    if hw["software"] != "pytorch-eager" or hw["class"] not in ("gpu", "cpu"):
        return []
    return [("compiled software (pytorch-compiled) instead of eager (fused, a graph replay's "
             "host time per kernel)", {"software": "pytorch-compiled"})]


def _batch_knob(ctx: Context) -> str:
    return "max_batch" if ctx.mode == "serve" else "batch"


def _larger_batch(ctx: Context) -> list[Candidate]:
    now = ctx.record["workload"]["batch_size"]
    largest = ctx.record["memory"].get("largest_batch_that_fits") or 0
    if now * 2 > largest:
        return []
    what = "largest batch" if ctx.mode == "serve" else "batch"
    return [(f"{what} {now * 2} instead of {now} (up to {largest} fits)",
             {_batch_knob(ctx): now * 2})]


def candidates(ctx: Context) -> list[Candidate]:
    """The changes worth simulating for this bottleneck, in the order they are tried."""
    if not ctx.record["memory"]["fits"]:
        largest = ctx.record["memory"].get("largest_batch_that_fits") or 0
        fit = [(f"the largest batch that fits, {largest}", {_batch_knob(ctx): largest})]
        return (fit if largest > 0 else []) + _narrower_precisions(ctx)
    plan, b = ctx.plan, ctx.bottleneck
    if b == "prepare":
        return _more("prep_workers", "prep workers per accelerator", plan.prep_workers) + \
            _decode_on_device(plan) + _prefetch(plan)
    if b == "io":
        return (_more("io_threads", "IO threads per accelerator", plan.io_threads, False)
                + [(f"twice the storage devices ({plan.system.storage_count} -> "
                    f"{plan.system.storage_count * 2} {plan.system.storage.name})",
                    {"storage_count": plan.system.storage_count * 2})]
                + _faster_media(plan) + _gpudirect(plan) + _prefetch(plan))
    if b == "transfer":
        pinned = [] if plan.pinned_memory else [("pinned host memory", {"pinned_memory": True})]
        return pinned + _gpudirect(plan) + _prefetch(plan)
    if b == "communication":
        other = "tree" if plan.allreduce == "ring" else "ring"
        overlap = [] if plan.overlap_allreduce else [
            ("overlap the all-reduce with backward", {"overlap_allreduce": True})]
        return overlap + [(f"{other} all-reduce instead of {plan.allreduce}",
                           {"allreduce": other})] + _larger_batch(ctx)
    if b == "queueing":
        most = ctx.system.device_count
        more = [] if ctx.serve_devices >= most else [
            (f"{most} devices instead of {ctx.serve_devices}", {"devices": most})]
        return more + _larger_batch(ctx) + _compiled(ctx)
    # the device itself: compute, memory (bandwidth), overhead or power
    return _compiled(ctx) + _narrower_precisions(ctx) + _larger_batch(ctx)


def find_relief(workload: Any, hw: str, record: dict[str, Any], knobs: dict[str, Any],
                top: int = TOP, ctx: Context | None = None) -> Finding:
    """Simulate the candidate changes for `record`'s bottleneck (the run of `workload` on `hw`
    with `knobs`) and keep the `top` that improve the metric that matters, best first."""
    import accelsim

    mode = record["workload"]["mode"]
    metric = metric_for(mode, record["bottleneck"])
    base = dict(knobs)
    found = Finding(record["bottleneck"], metric, None)
    before = record
    steps = record.get("steps") if record["memory"]["fits"] else None
    if mode == "train" and (steps is None or steps > WHATIF_STEPS):
        base = {k: v for k, v in knobs.items() if k != "epochs"} | {"steps": WHATIF_STEPS}
        if record["memory"]["fits"]:
            before = accelsim.simulate(workload, hw, **base).record
        found.notes.append(f"training what-ifs simulate {WHATIF_STEPS} steps"
                           + ("" if steps is None else f" (the run: {steps:,}); 'before' is "
                              "the same run shortened alike"))
    elif mode == "train":
        found.notes.append(f"training what-ifs simulate the run's {steps} steps")
    found.before = before.get(metric) if before["memory"]["fits"] else None
    ctx = ctx or run_context(workload, hw, record, knobs)
    if ctx.bottleneck == "queueing" and ctx.serve_devices >= ctx.system.device_count:
        found.skipped.append(f"more devices: system '{ctx.system.name}' has "
                             f"{ctx.system.device_count} accelerator(s), all serving")
    for change, overrides in candidates(ctx):
        try:
            after = accelsim.simulate(workload, hw, **(base | overrides)).record
        except AccelsimError as err:
            found.skipped.append(f"{change}: refused ({err})")
            continue
        if not after["memory"]["fits"]:
            found.skipped.append(f"{change}: does not fit in device memory")
            continue
        found.tried.append(Relief(
            change, base | overrides, metric, found.before, float(after[metric]),
            before["throughput_samples_per_s"], float(after["throughput_samples_per_s"]),
            str(after["bottleneck"])))
    gaining = [r for r in found.tried if r.gain > MIN_GAIN]
    sign = -1.0 if metric == "latency_p99_s" else 1.0
    # Ties (to 1e-9) keep the candidates' order: the simpler change first.
    found.best = sorted(gaining, key=lambda r: (-round(r.gain, 9),
                                                -round(sign * r.after, 9)))[:top]
    if not found.tried and not found.skipped:
        found.notes.append(f"no knob change to try for bottleneck '{record['bottleneck']}' on "
                           "this hardware")
    return found
