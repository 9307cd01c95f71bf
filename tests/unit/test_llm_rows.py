"""The rows of llm_calibration_measurements.csv as runs (accelsim.calibrate.llm_rows): every row
accounted for, the benchmark tools' settings as their sources state them."""

import re
from pathlib import Path

import pandas as pd
import pytest

from accelsim.calibrate.llm_rows import llm_cases, trtllm_bench_settings
from accelsim.sim.knobs import make_config

CSV = Path(__file__).resolve().parents[1] / "reference" / "llm_calibration_measurements.csv"


@pytest.fixture(scope="module")
def mapped():
    return llm_cases(CSV)


def test_every_row_is_a_run_or_says_why_not(mapped):
    cases, skipped = mapped
    ids = [c.id for c in cases] + [s.id for s in skipped]
    assert sorted(ids) == sorted(pd.read_csv(CSV)["id"])
    assert all(s.why for s in skipped)
    assert len(cases) >= 64  # 80% of the 80 rows, as issue 20 asks


def test_every_run_makes_a_config(mapped):
    for case in mapped[0]:
        make_config(case.model, case.hardware, **case.knobs)  # raises on a bad knob


def test_training_rows_split_the_global_batch_into_micro_batches_over_data_parallel(mapped):
    table = pd.read_csv(CSV).set_index("id")
    for case in (c for c in mapped[0] if c.metric == "train_tokens_per_s_per_gpu"):
        k = case.knobs
        dp = case.gpus // (k["tp"] * k["pp"] * k.get("cp", 1))  # CP ranks share a sequence
        assert k["batch"] * k["accumulate"] * dp == table.loc[case.id, "batch_global"]
        cp = re.search(r"CP=(\d+)", table.loc[case.id, "notes"])
        assert k.get("cp", 1) == (int(cp.group(1)) if cp else 1)


def test_max_load_rows_use_the_rows_request_count_up_to_the_cap(mapped):
    table = pd.read_csv(CSV).set_index("id")
    for case in (c for c in mapped[0] if c.source == "trtllm-0.17"):
        n = int(re.search(r"num_requests=(\d+)", table.loc[case.id, "notes"]).group(1))
        assert case.knobs["requests"] == min(n, 3000)


def test_trtllm_bench_tuning_by_hand():
    """TensorRT-LLM's calc_engine_setting as its source states it, worked by hand.
    Llama-3.1-8B fp8 on one H100 (80 GB), 128/128: 8,030,261,248 B of engine; 2 x 32 layers x
    8 kv heads x 128 x 1 B = 65,536 B a token; (80e9 - 8.03e9) x 0.95 / 65,536 / 256 = 4,076
    requests -> batch 4,096 (a multiple of 256); 4,076 x (1 + 1) = 8,152 tokens -> 8,192 (a
    multiple of 512 below 8,192)."""
    assert trtllm_bench_settings("llama-3.1-8b", "h100", 128, 128, 1, 1, True, True) == (
        4096, 8192)
    # Llama-3.1-70B fp16 on 4 A100-80GB, 1000/1000: 141.1e9 B of engine; 2 x 80 x 8 x 128 x 2
    # = 327,680 B a token; (320e9 - 141.1e9) x 0.95 / 327,680 / 2000 = 259 -> 384 (a multiple
    # of 128 from 256); 259 x 2 = 519 tokens -> the floor of 2,048
    assert trtllm_bench_settings("llama-3.1-70b", "a100", 1000, 1000, 4, 1, False, False) == (
        384, 2048)


def test_the_b200_preview_runs_nvfp4_at_trtllm_bench_settings_of_its_180_gb(mapped):
    """Llama-2-70B (68,976,648,192 parameters) at 0.5625 B: 38.80e9 B of engine; fp8 KV
    2 x 80 x 8 x 128 = 163,840 B a token; (180e9 - 38.80e9) x 0.95 / 163,840 / (222 + 294)
    = 1,586.6 requests -> 1,792 (a multiple of 256 from 1,024); 1,586.6 x (1 + 222 / 294)
    = 2,784.7 tokens -> 2,816 (a multiple of 256 below 4,096)."""
    case = next(c for c in mapped[0] if c.id == "LLM-MLPERF-INF41-011")
    assert (case.knobs["precision"], case.knobs["kv_precision"]) == ("fp4", "fp8")
    assert (case.knobs["max_batch"], case.knobs["chunked_prefill"]) == (1792, 2816)
    assert any("FP4" in n for n in case.notes)


def test_training_replicas_over_nodes_keep_tp_in_a_node_and_take_the_rows_vp(mapped):
    table = pd.read_csv(CSV).set_index("id")
    spanning = [c for c in mapped[0]
                if c.metric == "train_tokens_per_s_per_gpu" and c.knobs["tp"] * c.knobs["pp"] > 8]
    assert len(spanning) >= 5
    for case in spanning:
        notes = table.loc[case.id, "notes"]
        vp = re.search(r"VP=(\d+)", notes)
        assert case.knobs.get("vp", 1) == (int(vp.group(1)) if vp else 1)
        assert case.knobs["tp"] <= 8 and case.knobs["nodes"] * 8 == case.gpus
    # FasterTransformer's TP 16 and TP 32 rows: tensor parallelism over whole nodes
    cases = {c.id: c for c in mapped[0]}
    for rid, tp in (("LLM-FT-017", 16), ("LLM-FT-018", 32)):
        assert cases[rid].knobs["tp"] == tp and cases[rid].knobs["nodes"] * 8 == tp
