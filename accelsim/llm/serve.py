"""Serving a decoder: requests (drawn or from a trace, `accelsim.llm.requests`; or sent by
closed-loop clients, `accelsim.llm.arrivals`) through the engine of `accelsim.llm.engine` on
one or more model replicas, and the figures servers are judged by.

    res = run_llm(make_config("llama2_7b", "a100", mode="serve", rate=5.0, requests=10_000,
                              prompt_tokens=512, output_tokens=128, batching="continuous"))
    res.record["ttft_p99_s"], res.record["tpot_p50_s"], res.record["goodput_requests_per_s"]
    run_llm(make_config("llama2_7b", "a100", mode="serve", concurrency=32, think_time_ms=500))

Arrivals: Poisson at `rate_per_s`, a trace (`requests_file`), or `concurrency` clients, each
sending its next request when its last returns, after an exponential think time of mean
`think_time_s` (0: at once), `requests` in all; the lengths are drawn as the open loop's.

TTFT: arrival to first token; TPOT: first to last token over the tokens after the first;
latency: arrival to the request's return. Goodput: requests per second meeting the TTFT and
TPOT targets given (slo_ttft_s, slo_tpot_s); without targets, every request counts. With a
target, `max_rate_meeting_slo_per_s` is the highest Poisson rate whose p99 TTFT and p99 TPOT
meet them (searched with shorter open-loop runs, for a closed-loop run too). The KV-cache
budget is the paged blocks left beside the weights, the reserve and the activations of the
largest prefill step (`accelsim.llm.memory`). `devices` (a multiple of tp x pp) sets
data-parallel replicas.
"""

from __future__ import annotations

import re
from functools import partial
from typing import Any

import numpy as np
import pandas as pd
import simpy

from accelsim.devices.estimate import power_limits_w
from accelsim.errors import AccelsimError
from accelsim.llm.arrivals import Clients
from accelsim.llm.costs import Platform
from accelsim.llm.engine import (
    BATCHING,
    MAX_PREFILL_TOKENS,
    Engine,
    Outcome,
    Requests,
    StepCosts,
)
from accelsim.llm.memory import MemoryPlan
from accelsim.llm.parallel import Layout
from accelsim.llm.parallel import replicas as replicas_of
from accelsim.llm.record import base_record, does_not_fit, memory_record
from accelsim.llm.requests import draw_requests, read_requests
from accelsim.llm.slo import SEARCH_REQUESTS, max_rate_meeting_slo, meets_targets, serving_figures
from accelsim.llm.steps import StepModel
from accelsim.results.headline import RATE_KEYS, Figures
from accelsim.results.records import Recorder
from accelsim.sim.spec import SimulationResult

DEFAULT_REQUESTS = 1000
def serve_record(cfg: Any, plat: Platform, lay: Layout, mem: MemoryPlan, system: Any,
                 prompt: int, output: int, notes: list[str]) -> Any:
    """Run the server `cfg` describes; the record of `accelsim.llm.run`."""

    llm, serve = cfg.llm, cfg.serve
    trace = llm.get("requests_file")
    _check_arrivals(serve, trace)
    if "max_wait_s" in serve:
        raise AccelsimError("max_wait_ms applies to the request-level batcher; a decoder is "
                            "served token by token (--batching continuous|static, "
                            "--max-batch): drop it")
    batching = llm.get("batching", "continuous")
    if batching not in BATCHING:
        raise AccelsimError(f"knob 'batching' = {batching!r}: choose one of "
                            f"{', '.join(BATCHING)}")
    chunk = llm.get("chunked_prefill")
    if chunk and batching != "continuous":
        raise AccelsimError("chunked_prefill applies to continuous batching only")
    if chunk is None and batching == "continuous" and plat.stack.chunked_prefill_tokens:
        chunk = plat.stack.chunked_prefill_tokens
        notes.append(f"chunked prefill: {plat.stack.name}'s default, {chunk:,} tokens a step "
                     "(--chunked-prefill 0 turns it off)")
    chunk = chunk or None  # 0: off, whole prompts in prefill-only steps
    prefill = llm.get("prefill_tokens")
    if prefill is not None and batching != "continuous":
        raise AccelsimError("prefill_tokens caps a prefill step of continuous batching; a "
                            "static batch prefills all its prompts at once: drop it")
    if prefill is not None and chunk is not None:
        raise AccelsimError("prefill_tokens caps a prefill-only step; with chunked prefill "
                            "the step's budget is chunked_prefill's: drop one (or give "
                            "--chunked-prefill 0)")
    if prefill is not None:
        notes.append(f"prefill-only steps of at most {prefill:,} prompt tokens (as given; "
                     f"default {MAX_PREFILL_TOKENS:,})")
    prefill = prefill or MAX_PREFILL_TOKENS
    replicas = replicas_of(cfg.devices, lay, system, nodes=cfg.llm.get("nodes", 1))
    max_batch = serve.get("max_batch") or (
        cfg.scenario.batch_size if cfg.scenario.batch_size > 1
        else plat.stack.figure("llm.max_running_sequences", plat.profile.device_class))
    if not serve.get("max_batch"):
        # NB: a batch of 1 is every bare model's default, so it is taken as unset.
        notes.append(f"largest running batch {max_batch} (" + (
            "the scenario's batch size" if cfg.scenario.batch_size > 1
            else "the software stack's llm.max_running_sequences")
            + "; --max-batch sets it)")
    dist = llm.get("length_dist", "fixed")
    seed = cfg.seed or 0
    concurrency, think_s = serve.get("concurrency"), serve.get("think_time_s", 0.0)
    clients = None
    if trace:
        req = read_requests(trace, plat.cfg.context)
    else:
        req = draw_requests(serve.get("requests", DEFAULT_REQUESTS), serve.get("rate_per_s"),
                            prompt, output, dist, plat.cfg.context, seed)
    if concurrency is not None:
        clients = Clients(simpy.Environment(), len(req.prompt), concurrency, think_s, replicas,
                          seed)
        req = Requests(clients.arrival_s, req.prompt, req.output)
        notes.append(f"closed loop: {concurrency:,} client{'s' if concurrency > 1 else ''}, "
                     "each sending its next request when its last returns" + (
                         f", after an exponential think time of mean {think_s * 1e3:g} ms"
                         if think_s > 0 else "") + (
                         f"; the requests are dealt to the {replicas} replicas in turn"
                         if replicas > 1 else ""))
    n = len(req.arrival_s)
    record = base_record(cfg, plat, lay, system, max_batch, "serve")
    record["notes"] = notes
    record["devices"] = lay.gpus * replicas
    step_tokens = max(prefill, int(req.prompt.max()))
    block_tokens = plat.stack.figure("llm.kv_block_tokens", plat.profile.device_class)
    blocks = mem.kv_blocks(step_tokens, max_batch, block_tokens)
    longest = int((req.prompt + req.output).max())
    need = mem.need_bytes(1, longest, step_tokens) + (
        max_batch - 1) * mem.logit_bytes_per_seq
    record["memory"] = memory_record(mem, need, 1, step_tokens, longest - step_tokens) | {
        "kv_cache_blocks": blocks, "kv_block_tokens": block_tokens,
        "kv_cache_budget_bytes": blocks * block_tokens * mem.kv_bytes_per_token}
    # the running batch's fp32 logits (a row for each sequence beyond the one the prefill
    # holds) are activations too: listed there, so the parts add up to what is required
    record["memory"]["activations_bytes"] += (max_batch - 1) * mem.logit_bytes_per_seq
    record["memory"]["fits"] = bool(need <= mem.capacity_bytes and
                                    -(-longest // block_tokens) <= blocks)
    record["kv_cache_bytes"] = record["memory"]["kv_cache_budget_bytes"] * lay.gpus * replicas
    if not record["memory"]["fits"]:
        return SimulationResult(does_not_fit(record, mem, plat, lay, system, need),
                                pd.DataFrame())
    costs = step_costs(StepModel(plat, lay), step_tokens, max_batch, blocks * block_tokens)
    shape = (max_batch, blocks, block_tokens, batching, serve.get("max_wait_s", 0.0), chunk)
    out = serve_requests(costs, req, replicas, *shape, clients=clients,
                         prefill_tokens=prefill)
    slo = (llm.get("slo_ttft_s"), llm.get("slo_tpot_s"))
    figures = serving_figures(req, out, *slo)
    figures["engine_busy_fraction"] /= replicas
    record.update(figures)
    run_s = figures["run_time_s"]
    # the steps' energy, and the static power of every GPU while its replica idles
    idle_s = max(run_s * replicas - out.busy_s, 0.0)
    energy_j = out.energy_j + power_limits_w(plat.profile)[1] * lay.gpus * idle_s
    # the record's layout: the headline's keys (placed below) around energy per token
    record.update(dict.fromkeys(RATE_KEYS[:3]),
                  energy_j_per_token=energy_j / float(req.output.sum()),
                  average_power_w=None, offered_load=None, batching=batching,
                  chunked_prefill=chunk, length_dist=None if trace else dist,
                  rate_per_s=serve.get("rate_per_s"), replicas=replicas,
                  max_rate_meeting_slo_per_s=None)
    if not trace and any(x is not None for x in slo):
        def trial(rate: float) -> tuple[Requests, Outcome]:
            drawn = draw_requests(min(n, SEARCH_REQUESTS), rate, prompt, output, dist,
                                  plat.cfg.context, seed)
            return drawn, serve_requests(costs, drawn, replicas, *shape,
                                         prefill_tokens=prefill)

        if clients is None:
            record["max_rate_meeting_slo_per_s"] = max_rate_meeting_slo(
                trial, serve["rate_per_s"], *slo,
                meets_at_rate=meets_targets(req, out, *slo))
        else:  # the search starts at the clients' throughput
            record["max_rate_meeting_slo_per_s"] = max_rate_meeting_slo(
                trial, figures["requests_per_s"], *slo)
    plural = "s" if (concurrency or 0) > 1 else ""
    load = "" if clients is None else f"{concurrency:,} closed-loop client{plural}, "
    Figures(figures["requests_per_s"], figures["latency_mean_s"], energy_j / n,
            energy_j / run_s, _bottleneck(req, out), (
                f"{load}engine busy {figures['engine_busy_fraction']:.0%} of the run ("
                f"{out.prefill_busy_s / max(out.busy_s, 1e-30):.0%} of it prefill), mean "
                f"running batch {figures['batch_size_mean']:.1f} of {max_batch}, "
                f"{out.preemptions} preemptions, KV blocks peak {out.peak_blocks:,} of "
                f"{blocks:,} per replica")).place(record)
    notes.append("energy: the GPUs' over the engine's steps, and their static power while "
                 "idle (the host is not counted)")
    return SimulationResult(record, _events(req, out))


def _check_arrivals(serve: dict[str, Any], trace: str | None) -> None:
    """One source of arrivals, and only its knobs."""
    rate, clients = serve.get("rate_per_s"), serve.get("concurrency")
    if trace:
        given = [flag for flag, key in (("--rate", "rate_per_s"), ("--concurrency", "concurrency"),
                                        ("--think-time-ms", "think_time_s"),
                                        ("--requests", "requests")) if key in serve]
        if given:
            raise AccelsimError("--requests-file gives the arrivals and the requests: drop "
                                + " and ".join(given))
    elif rate is not None and clients is not None:
        raise AccelsimError("--rate (Poisson arrivals) and --concurrency (closed-loop clients) "
                            "are two ways to load the server: give one")
    elif rate is None and clients is None:
        raise AccelsimError("decoder serving takes Poisson arrivals at a rate (--rate), "
                            "closed-loop clients (--concurrency) or a request trace "
                            "(--requests-file)")
    if clients is None and "think_time_s" in serve:
        raise AccelsimError("--think-time-ms applies to closed-loop clients (--concurrency): "
                            "drop it or give --concurrency instead of --rate")


def step_costs(model: StepModel, step_tokens: int, max_batch: int,
               kv_tokens: int) -> StepCosts:
    """The engine's step costs, tabulated once for the run (`kv_tokens`: the most tokens its
    KV blocks hold)."""
    pre = model.prefill_table(step_tokens, max_batch)
    dec = model.decode_table(max_batch, float(kv_tokens))
    return StepCosts(pre.step_s, dec.step_s, pre.step_j, dec.step_j,
                     partial(pre.mixed_s, dec), partial(pre.mixed_j, dec))


def serve_requests(costs: StepCosts, req: Requests, replicas: int, max_batch: int,
                   blocks: int, block_tokens: int, batching: str, max_wait_s: float,
                   chunk: int | None, clients: Clients | None = None,
                   prefill_tokens: int = MAX_PREFILL_TOKENS) -> Outcome:
    """Every replica's engine on its share of the requests, merged. NB: the load balancer
    deals requests to replicas in turn (round robin), not to the least loaded. Open loop, each
    replica runs alone; closed loop (`clients`, whose `arrival_s` is `req.arrival_s`), the
    replicas run together, in the clients' environment."""
    n = len(req.arrival_s)
    merged = Outcome(np.full(n, np.nan), np.full(n, np.nan), np.full(n, np.nan))

    def merge(mine: np.ndarray, out: Outcome) -> None:
        merged.first_s[mine], merged.last_s[mine], merged.done_s[mine] = (
            out.first_s, out.last_s, out.done_s)
        for name in ("steps", "prefill_steps", "preemptions", "batch_sum", "busy_s",
                     "prefill_busy_s", "energy_j"):
            setattr(merged, name, getattr(merged, name) + getattr(out, name))
        merged.peak_blocks = max(merged.peak_blocks, out.peak_blocks)

    engines = []
    for k in range(replicas):
        mine = np.arange(k, n, replicas)
        if not len(mine):
            continue
        shape = (max_batch, blocks, block_tokens, batching, max_wait_s, chunk)
        if clients is None:
            part = Requests(req.arrival_s[mine], req.prompt[mine], req.output[mine])
            merge(mine, Engine(costs, part, *shape, prefill_tokens=prefill_tokens).run())
            continue
        # a view: the clients write each arrival time as the request is dealt
        part = Requests(clients.arrival_s[k::replicas], req.prompt[mine], req.output[mine])
        engine = Engine(costs, part, *shape, arrivals=clients.replica(k),
                        prefill_tokens=prefill_tokens)
        engine.start()
        engines.append((mine, engine))
    if clients is not None:
        clients.env.run()
        for mine, engine in engines:
            merge(mine, engine.out)
    return merged


def _bottleneck(req: Requests, out: Outcome) -> str:
    """"queueing" when waits grow through the run (arrivals outpace the engine: the last
    tenth of requests waits for its first token over twice as long as the first tenth, and
    over a second), else the phase that kept the engine busiest. NB: a heuristic."""
    ttft = out.first_s - req.arrival_s
    tenth = max(len(ttft) // 10, 1)
    if ttft[-tenth:].mean() > 2 * ttft[:tenth].mean() + 1.0:
        return "queueing"
    return "compute" if out.prefill_busy_s > out.busy_s / 2 else "memory"


def _events(req: Requests, out: Outcome) -> pd.DataFrame:
    """One record per request (arrival to return); its first and last token times and its
    output tokens in `detail` (`request_times` reads them back)."""
    rec = Recorder()
    for i in range(len(req.arrival_s)):
        rec.add("server", "request", float(req.arrival_s[i]), float(out.done_s[i]), step=i,
                samples=1, detail=f"first token at {out.first_s[i]:.6f} s, last at "
                                  f"{out.last_s[i]:.6f} s, {int(req.output[i])} output tokens")
    return rec.frame()


_DETAIL = re.compile(r"first token at ([\d.e+-]+) s, last at ([\d.e+-]+) s, (\d+) output tokens")


def request_times(events: pd.DataFrame) -> pd.DataFrame:
    """Per served request (the `request` records of a decoder server): arrival, first token,
    last token and return times (s), output tokens, and its TTFT, TPOT (NaN for a one-token
    request) and latency (s), as `serving_figures` defines them."""
    reqs = events[events["kind"] == "request"]
    parsed = reqs["detail"].astype(str).str.extract(_DETAIL)
    out = pd.DataFrame({"arrival_s": reqs["start_s"].to_numpy(float),
                        "first_s": parsed[0].astype(float).to_numpy(),
                        "last_s": parsed[1].astype(float).to_numpy(),
                        "done_s": reqs["end_s"].to_numpy(float),
                        "output_tokens": parsed[2].astype(float).to_numpy()})
    later = out["output_tokens"] - 1
    out["ttft_s"] = out["first_s"] - out["arrival_s"]
    out["tpot_s"] = ((out["last_s"] - out["first_s"]) / later.clip(lower=1)).where(later > 0)
    out["latency_s"] = out["done_s"] - out["arrival_s"]
    return out
