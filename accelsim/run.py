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
from accelsim.sim.spec import SimulationConfig, SimulationResult, check_mode_knobs, check_tf32

__all__ = ["SimulationConfig", "SimulationResult", "run_simulation"]


def run_simulation(cfg: SimulationConfig, detail: bool = True) -> SimulationResult:
    """Run the simulation `cfg` describes on its engine; bad settings raise `AccelsimError`.
    With `detail` False the record's `layers` list is empty and an inference run has no event
    records (sweeps, which keep one flat row per point, skip that work); every figure is the
    same."""
    mode = cfg.mode or cfg.scenario.mode
    check_mode_knobs(cfg, mode)
    check_tf32(cfg)
    if cfg.prune_2_4 and not cfg.execute:
        raise AccelsimError("--prune-2-4 prunes the weights the kernels run with: add --execute")
    if routes_to_llm(cfg):
        if cfg.tf32 is not None:
            raise AccelsimError("--tf32 does not apply to a token-level decoder run (its fp32 "
                                "runs as fp16): drop it")
        return run_llm(cfg)
    return run_pipeline(cfg, detail)
