"""The dispatcher: one entry point for every simulation, above both engines. A picklable
`SimulationConfig` in, a `SimulationResult` out.

    >>> from accelsim.workload.scenario import resolve_workload
    >>> cfg = SimulationConfig(resolve_workload("resnet50-train"), "dgx-a100",
    ...                        train={"steps": 20})
    >>> res = run_simulation(cfg)
    >>> res.record["throughput_samples_per_s"] > 0, len(res.records) > 0
    (True, True)

A decoder at the token level (an LLM knob is set, or a decoder is served) runs on the LLM
engine (`accelsim.llm.run`: prefill, decode, KV cache, TP/PP); everything else on the pipeline
engine (`accelsim.sim.api`: one batch on the device, the training pipeline, the server).
"""

from __future__ import annotations

from accelsim.errors import AccelsimError
from accelsim.llm.run import routes_to_llm, run_llm
from accelsim.sim.api import run_pipeline
from accelsim.sim.cost import cost_block
from accelsim.sim.seq_mix import run_seq_mix
from accelsim.sim.spec import SimulationConfig, SimulationResult, check_mode_knobs, check_tf32
from accelsim.workload.sources import model_knob_defaults

__all__ = ["SimulationConfig", "SimulationResult", "run_simulation"]


def run_simulation(cfg: SimulationConfig, detail: bool = True) -> SimulationResult:
    """Run the simulation `cfg` describes on its engine; bad settings raise `AccelsimError`.
    With `detail` False the record's `layers` list is empty and an inference run has no event
    records (sweeps, which keep one flat row per point, skip that work); every figure is the
    same. Every record ends with its `cost` (`accelsim.sim.cost`)."""
    federated = (cfg.mode or cfg.scenario.mode) == "federated"
    priced = {k: v for k, v in (("usd_per_kwh", cfg.usd_per_kwh), ("pue", cfg.pue),
                                ("usd_per_device_hour", cfg.usd_per_device_hour)) if v is not None}
    if federated and priced:
        raise AccelsimError(f"{', '.join(priced)} do not apply to mode federated (its clients' "
                            "devices are not rented): drop them")
    if cfg.pue is not None and cfg.usd_per_kwh is None:
        raise AccelsimError("knob 'pue' scales the energy bill: give usd_per_kwh with it")
    res = _run(cfg, detail)
    if not federated:
        res.record["cost"] = cost_block(res.record, cfg.usd_per_kwh, cfg.pue or 1.0,
                                        cfg.usd_per_device_hour)
    return res


def _run(cfg: SimulationConfig, detail: bool) -> SimulationResult:
    """`cfg` on the engine its mode and model choose."""
    mode = cfg.mode or cfg.scenario.mode
    check_mode_knobs(cfg, mode)
    check_tf32(cfg)
    if cfg.prune_2_4 and not cfg.execute:
        raise AccelsimError("--prune-2-4 prunes the weights the kernels run with: add --execute")
    if cfg.seq_lens is not None:
        _check_seq_lens(cfg, mode)
    elif cfg.padding is not None:
        raise AccelsimError("padding needs seq_lens (--seq-len-dist): the lengths to pad")
    if mode == "federated":
        if routes_to_llm(cfg) or cfg.decoder is not None:
            raise AccelsimError("mode federated trains a layer-graph model on each client; a "
                                "token-level decoder is not one (choose a zoo CNN or encoder)")
        if cfg.execute:  # (it was ignored: the clients' kernels are never run)
            raise AccelsimError("--execute applies to mode infer (one batch on the device), "
                                "not federated: drop it")
        from accelsim.sim.federated import simulate_federated  # (SimPy: only when asked)

        return simulate_federated(cfg)
    if routes_to_llm(cfg):
        if cfg.scenario.trainable != "all" or cfg.scenario.freeze:
            raise AccelsimError("--trainable and --freeze freeze layers of a layer graph; a "
                                "decoder at the token level trains adapters instead: "
                                "--lora-rank")
        if cfg.tf32 is not None:
            raise AccelsimError("--tf32 does not apply to a token-level decoder run (its fp32 "
                                "runs as fp16): drop it")
        return run_llm(cfg)
    if cfg.seq_lens is not None:
        return run_seq_mix(cfg, detail)
    return run_pipeline(cfg, detail)


def _check_seq_lens(cfg: SimulationConfig, mode: str) -> None:
    """Sequence lengths apply to one-batch inference of a model with a seq_len input."""
    model = cfg.scenario.model
    if mode != "infer":
        raise AccelsimError(f"--seq-len-dist applies to mode infer, and this run is mode {mode}"
                            " (decoder serving: --length-dist or --requests-file)")
    if routes_to_llm(cfg) or "seq_len" not in model_knob_defaults(model):
        raise AccelsimError(f"--seq-len-dist: model '{model}' takes no seq_len input (an "
                            "encoder such as bert_base; a decoder: --prompt-tokens)")
    cfg.scenario.with_overrides(input={"seq_len": max(cfg.seq_lens.lengths)}).graph()
