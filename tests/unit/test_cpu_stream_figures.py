"""An attention row's operands stream at the stack's stream figures, whatever its math's own
figure (`attention_<p>`, a key that is also the op's name): found as a calibration whose
round trip through `simulate` missed by 1.2-3.2x when one slow attention timing made its
fitted figure small."""

from __future__ import annotations

from pathlib import Path

import pytest

from accelsim.calibrate.cases import kernel_cases
from accelsim.devices.cpu.model import cpu_costs
from accelsim.profiles.devices import load_profile
from accelsim.profiles.software import load_stack
from accelsim.workload.work import gemms_for, work_table

CALIB = Path(__file__).resolve().parents[2] / "benchmarks" / "results" / "calibrate_host"


def _attention_costs(stack_path: Path):
    profile = load_profile(CALIB / "host-cpu.toml")
    case = next(c for c in kernel_cases("tiny") if c.kernel == "attention")
    work = work_table(case.graph, case.batch, "fp32").iloc[[-1]]
    return cpu_costs(profile, work, gemms_for(case.graph, case.batch), "fp32",
                     load_stack(stack_path)).to_frame().iloc[0]


def test_the_attention_figure_moves_its_math_not_its_streams(tmp_path: Path):
    # as a calibration writes it when its joint fit drops the packing term: no `pack_fp32`,
    # so the operands and the packing stream at the row's stream figure
    lines = [line for line in (CALIB / "numpy-host.toml").read_text().splitlines(True)
             if not line.startswith(("pack_fp32 =", '"cpu_efficiency.pack_fp32"'))]
    text = "".join(lines)
    assert "\nattention_fp32 = 0.2201\n" in text and "pack_fp32 =" not in text
    base_path, slow = tmp_path / "base.toml", tmp_path / "slow-attention.toml"
    base_path.write_text(text)
    slow.write_text(text.replace("\nattention_fp32 = 0.2201\n", "\nattention_fp32 = 0.02201\n"))
    base, tenth = _attention_costs(base_path), _attention_costs(slow)
    assert tenth["memory_s"] == pytest.approx(base["memory_s"], rel=1e-12)
    # the math at a tenth of the figure takes ten times as long; the serial passes do not move
    serial_s = (10 * base["compute_s"] - tenth["compute_s"]) / 9
    assert serial_s >= 0
    assert tenth["compute_s"] - serial_s == pytest.approx(10 * (base["compute_s"] - serial_s))
