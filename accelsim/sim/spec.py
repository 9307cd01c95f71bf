"""A simulation's contract: the picklable config in (`SimulationConfig`), the result out
(`SimulationResult`), and the checks every engine shares. Both engines (the pipeline in
`accelsim.sim.api`, the token-level decoder runs in `accelsim.llm.run`) and the dispatcher above
them (`accelsim.run`) import these types from here, downward.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pandas as pd

from accelsim.errors import AccelsimError
from accelsim.profiles.software import DEFAULT
from accelsim.results.headline import Headline
from accelsim.workload.scenario import Scenario

if TYPE_CHECKING:
    from accelsim.workload.decoder import DecoderConfig
    from accelsim.workload.seq_lens import SeqLens

MODES = ("infer", "train", "serve", "federated")
DEFAULT_MAX_EVENTS = 2_000_000  # the most events a run may schedule unless told


@dataclass(frozen=True)
class SimulationConfig:
    """Everything one simulation depends on. `train` holds `accelsim.sim.config.TrainConfig`
    fields (dataset, storage, storage_count, io_threads, prep_workers, prefetch_batches,
    gpudirect, pinned_memory, allreduce, overlap_allreduce, steps, epochs), `serve` holds
    `accelsim.sim.serve.ServeConfig` fields (rate_per_s, concurrency, think_time_s, max_batch,
    max_wait_s, requests); those classes validate them. Unset: the scenario's or the system's
    value. `devices` and `seed` apply to train and serve; knobs of another mode are an error.
    `decoder` holds the shapes of a decoder without a layer graph (a config file, or a
    decoder name the zoo has not), read when the config is made, so that a run reads no model
    file. `accelsim.sim.knobs.make_config` builds one from flat knob names."""

    scenario: Scenario
    hardware: str  # a system or device profile name, or a .toml path
    mode: str | None = None
    software: str = DEFAULT  # a stack in hw_profiles/software/; "default": the class's
    dataflow: str | None = None
    seed: int | None = None
    devices: int | None = None
    max_events: int | None = None  # None: `accelsim.sim.knobs.DEFAULT_MAX_EVENTS`
    train: dict[str, Any] = field(default_factory=dict)
    serve: dict[str, Any] = field(default_factory=dict)
    llm: dict[str, Any] = field(default_factory=dict)  # token-level decoder knobs (accelsim.llm)
    federated: dict[str, Any] = field(default_factory=dict)  # `sim.federated.FederatedConfig`
    execute: bool = False  # infer: run the kernels, feed their error and sparsity in (execution)
    prune_2_4: bool = False  # with execute: the device runs conv/linear weights pruned to 2:4
    tf32: bool | None = None  # fp32 GEMMs as TF32 on tensor cores (None: the stack's default)
    decoder: DecoderConfig | None = None  # the token-level model (None: a zoo name's)
    seq_lens: SeqLens | None = None  # infer, transformers: the batches' sequence lengths
    padding: str | None = None  # with seq_lens: "batch-max" or "removed" (None: the stack's)
    usd_per_kwh: float | None = None  # electricity price (None: energy cost not reported)
    pue: float | None = None  # facility power / device and host power (None: 1, with usd_per_kwh)
    usd_per_device_hour: float | None = None  # rent (None: hw_profiles/prices/)


@dataclass
class SimulationResult:
    record: dict[str, Any]  # JSON-ready; its headline keys placed by `Figures.place`
    records: pd.DataFrame = field(default_factory=pd.DataFrame)  # flat events

    @property
    def headline(self) -> Headline:
        """The summary figures of `record`, typed."""
        return Headline.of(self.record)


def check_mode_knobs(cfg: SimulationConfig, mode: str) -> None:
    """Knobs that do not apply to `mode` are an error, never silently dropped."""
    if mode not in MODES:
        raise AccelsimError(f"mode '{mode}': choose one of {', '.join(MODES)}")
    misplaced = [(k, "train") for k in cfg.train if mode != "train"]
    misplaced += [(k, "serve") for k in cfg.serve if mode != "serve"]
    misplaced += [(k, "federated") for k in cfg.federated if mode != "federated"]
    if mode in ("infer", "federated"):  # (a federated run takes a seed: its clients' draws)
        misplaced += [(k, "train or serve") for k in ("devices", "seed", "max_events")
                      if getattr(cfg, k) is not None and (k != "seed" or mode == "infer")]
    if misplaced:
        knobs = ", ".join(f"'{k}' (mode {m})" for k, m in misplaced)
        raise AccelsimError(f"{knobs} do not apply to mode {mode}: drop them or choose that "
                            "mode")


def check_tf32(cfg: SimulationConfig) -> None:
    """The tf32 knob chooses how fp32 GEMMs run: an error on a run at another precision."""
    precision = cfg.scenario.precision
    if cfg.tf32 is not None and precision != "fp32":
        raise AccelsimError(f"tf32 chooses whether fp32 GEMMs run as TF32; this run is "
                            f"{precision}: drop --tf32, or use --precision fp32 (precision "
                            "tf32 runs every GEMM as TF32)")


def max_events(cfg: SimulationConfig) -> int:
    """The event budget of `cfg`: its own, else `DEFAULT_MAX_EVENTS`."""
    return DEFAULT_MAX_EVENTS if cfg.max_events is None else cfg.max_events
