"""`--requests-file` reads Vidur's trace format (issue 23 item 7): the header
`arrived_at,num_prefill_tokens,num_decode_tokens` of microsoft/vidur's processed traces. The
shipped file (tests/fixtures/vidur_trace_synthetic.csv, synthetic rows in Vidur's header) is
read back by Python's csv module as the reference, rewritten in the native format with the
columns in another order, and both files must give the same requests and the same run."""

from __future__ import annotations

import csv

import pytest

from accelsim.errors import ConfigError
from accelsim.llm.requests import read_requests
from accelsim.run import run_simulation
from accelsim.sim.knobs import make_config
from tests.helpers.paths import ROOT

VIDUR = ROOT / "tests" / "fixtures" / "vidur_trace_synthetic.csv"


def reference() -> list[tuple[float, int, int]]:
    with VIDUR.open(newline="") as f:
        reader = csv.DictReader(f)
        assert reader.fieldnames == ["arrived_at", "num_prefill_tokens", "num_decode_tokens"]
        return [(float(r["arrived_at"]), int(r["num_prefill_tokens"]),
                 int(r["num_decode_tokens"])) for r in reader]


def native(tmp_path, rows) -> str:
    path = tmp_path / "native.csv"
    path.write_text("output_tokens,arrival_s,prompt_tokens\n" + "".join(
        f"{o},{t!r},{p}\n" for t, p, o in rows), encoding="utf-8")
    return str(path)


def test_the_vidur_file_reads_to_its_rows_and_to_the_native_files_requests(tmp_path):
    rows = reference()
    assert len(rows) >= 30
    theirs = read_requests(VIDUR, 4096)
    assert theirs.arrival_s.tolist() == [t for t, _, _ in rows]
    assert theirs.prompt.tolist() == [p for _, p, _ in rows]
    assert theirs.output.tolist() == [o for _, _, o in rows]
    ours = read_requests(native(tmp_path, rows), 4096)
    for a, b in ((theirs.arrival_s, ours.arrival_s), (theirs.prompt, ours.prompt),
                 (theirs.output, ours.output)):
        assert a.tolist() == b.tolist()


def test_a_serving_run_on_the_vidur_trace_is_the_run_on_the_native_one(tmp_path):
    def record(path: str) -> dict:
        cfg = make_config("llama2_7b", "a100", mode="serve", requests_file=path)
        return run_simulation(cfg).record

    theirs, ours = record(str(VIDUR)), record(native(tmp_path, reference()))
    assert theirs["requests"] == len(reference())
    for key in ("ttft_p50_s", "ttft_p99_s", "tpot_p50_s", "latency_p99_s",
                "throughput_samples_per_s"):
        assert theirs[key] == ours[key], key
    assert theirs["ttft_p50_s"] > 0


def test_a_bad_value_in_a_vidur_file_is_named_by_vidurs_column(tmp_path):
    path = tmp_path / "vidur.csv"
    path.write_text("arrived_at,num_prefill_tokens,num_decode_tokens\n0.0,100,5\n0.5,20,x\n")
    with pytest.raises(ConfigError, match="line 3 num_decode_tokens"):
        read_requests(path, 4096)
    path.write_text("arrived_at,num_prefill_tokens,num_decode_tokens\n1.0,100,5\n0.5,20,3\n")
    with pytest.raises(ConfigError, match="line 3 arrived_at"):
        read_requests(path, 4096)


def test_a_header_mixing_the_two_formats_is_refused_naming_both(tmp_path):
    path = tmp_path / "mixed.csv"
    path.write_text("arrived_at,prompt_tokens,output_tokens\n0.0,100,5\n")
    with pytest.raises(ConfigError, match="arrival_s.*Vidur's arrived_at"):
        read_requests(path, 4096)
