"""Refuse, at `calibrate` time, a pair of written files that `simulate` could not run.

    check_simulates(Path("calib/host-cpu.toml"), Path("calib/pytorch-host.toml"))

The stack loader refuses a fraction of the FLOP peak above 1 (`profiles.software`), and
`write.measured_stack` clamps one; this runs the estimates a new user runs first (ResNet-50,
BERT-base, a GEMM; inference and training, every precision the stack was fitted at) on the
files as written, and turns a broken invariant (a bug to `simulate`: exit 70) into a one-line
error of `calibrate` naming the file and what broke (exit 2).
"""

from __future__ import annotations

from pathlib import Path

from accelsim.devices.estimate import estimate
from accelsim.devices.invariants import InvariantError
from accelsim.errors import AccelsimError, ConfigError
from accelsim.profiles.devices import load_profile
from accelsim.profiles.software import load_stack
from accelsim.workload.zoo import build_model

# (model, batch, mode): NB: a few seconds of estimates, not every network of the zoo
CHECKED = (("resnet50", 1, "infer"), ("resnet50", 8, "train"), ("bert_base", 1, "infer"),
           ("gemm", 1, "infer"))


def check_simulates(profile_path: Path, stack_path: Path,
                    precisions: tuple[str, ...] = ("fp32",)) -> None:
    """Raise AccelsimError (one line: the file, the workload, the invariant) where `simulate`
    would stop on the written `profile_path` and `stack_path` for a workload of `CHECKED`."""
    try:
        profile, stack = load_profile(profile_path), load_stack(stack_path)
    except ConfigError as err:
        raise AccelsimError(f"calibrate: refused to keep {stack_path.name}: {err}") from None
    for name, batch, mode in CHECKED:
        graph = build_model(name)
        for precision in precisions:
            try:
                estimate(graph, profile, batch, precision, mode, software=stack)
            except InvariantError as err:
                detail = str(err).split("; inputs:")[0]
                raise AccelsimError(f"calibrate: refused to keep {stack_path.name}: simulate "
                                    f"{name} --batch {batch} --precision {precision} "
                                    f"({mode}) on {profile_path.name} would break the "
                                    f"{detail}") from None
