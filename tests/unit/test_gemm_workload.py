"""Issue 27, item 5: a single GEMM as a workload, M, N and K its knobs."""

import json

import pytest

from accelsim.workload.tables import totals
from accelsim.workload.zoo import build_model
from tests.helpers.cli import run_cli


@pytest.mark.parametrize("m,n,k", [(512, 768, 768), (512, 3072, 768), (1, 7, 3), (2048,) * 3])
def test_gemm_flops_are_2mnk_and_its_weights_k_by_n(m, n, k):
    tot = totals(build_model("gemm", m=m, n=n, k=k))
    assert tot["flops_per_sample"] == 2 * m * n * k
    assert tot["params"] == k * n


def test_describe_and_simulate_take_m_n_k(capsys):
    code, out, err = run_cli(capsys, "describe", "gemm", "--set", "m=2048", "--set", "n=1024",
                             "--set", "k=512", "--batch", "3", "--json")
    assert code == 0, err
    assert json.loads(out)["flops"] == 3 * 2 * 2048 * 1024 * 512
    code, out, err = run_cli(capsys, "simulate", "gemm", "--hw", "epyc-7763", "--set", "m=64",
                             "--set", "k=32", "--json")
    assert code == 0, err
    assert json.loads(out)["workload"]["flops_per_sample"] == 2 * 64 * 768 * 32


@pytest.mark.parametrize("item", ["m", "m=", "m=0", "m=x", "q=3", "m=1,2"])
def test_bad_model_inputs_are_one_line_errors(capsys, item):
    code, _, err = run_cli(capsys, "describe", "gemm", "--set", item)
    assert code == 2 and len(err.strip().splitlines()) == 1, err
