"""The terminal output fits 100 columns (wrapped with a hanging indent, tables split into blocks
when they must), loses no word doing so, and says what a reader needs first: a decoder's TTFT,
TPOT and tokens/s, an overload, goodput only against an SLO, a host-bound run in one line."""

import json
import re

import pytest
from click.testing import CliRunner

from accelsim.cli.common import cli
from accelsim.results.textfit import text_table, wrap_line, wrap_lines

WIDTH = 100
COMMANDS = {
    "train": ["simulate", "resnet50-train", "--hw", "dgx-a100", "--steps", "8"],
    "bert-multinode": ["simulate", "bert-large-train", "--hw", "dgx-2", "--nodes", "32",
                       "--accumulate", "2", "--steps", "6"],
    "list": ["list"],
    "compare": ["compare", "resnet50", "--hw", "a100,tpu-v3,alveo-u250,edge-tpu,xeon-8480",
                "--precision", "int8", "--batch", "32"],
    "compare-train": ["compare", "resnet50-train", "--hw", "dgx-a100,dgx-h100", "--steps", "6"],
    "llm-serve": ["simulate", "llama2_7b", "--hw", "a100", "--mode", "serve", "--rate", "4",
                  "--requests", "60"],
    "llm-train": ["simulate", "llama2_7b", "--hw", "dgx-a100", "--mode", "train", "--seq-len",
                  "1024", "--batch", "1", "--precision", "bf16", "--tp", "2", "--zero", "1"],
    "batch-1": ["simulate", "resnet50", "--hw", "a100", "--batch", "1"],
    "describe": ["describe", "bert_base"],
    "collective": ["collective", "--hw", "dgx-a100", "--nodes", "4", "--sizes", "8B:8GB"],
}


def _run(args: list[str]) -> str:
    result = CliRunner().invoke(cli, args, catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result.output


@pytest.mark.parametrize("name", COMMANDS)
def test_every_line_fits_100_columns(name):
    lines = _run(COMMANDS[name]).splitlines()
    widest = max(lines, key=len)
    assert len(widest) <= WIDTH, widest


def test_wrapping_keeps_every_word_and_hangs_under_the_value():
    line = ("  all-reduce   " + " ".join(f"word{i}" for i in range(60)))
    out = wrap_line(line, WIDTH)
    assert len(out) > 1 and all(len(x) <= WIDTH for x in out)
    assert " ".join(x.strip() for x in out).split() == line.split()
    assert all(x.startswith(" " * 15) and x[15] != " " for x in out[1:])
    assert wrap_lines(["short", "a\nb"]) == ["short", "a", "b"]


def test_a_table_too_wide_splits_into_blocks_keeping_every_cell():
    headers = ["name"] + [f"column_number_{i}" for i in range(12)]
    rows = [[f"row{r}"] + [f"{r * i:,}" for i in range(12)] for r in range(4)]
    out = text_table(headers, rows, right=set(range(1, 13)))
    assert max(map(len, out)) <= WIDTH
    cells = " ".join(out).split()
    for row in rows:
        for cell in row[1:]:
            assert cell in cells
    assert sum(line.startswith("row1 ") for line in out) >= 2  # the first column repeats


def test_a_decoder_leads_with_ttft_tpot_and_tokens_and_no_goodput_without_slo():
    out = _run(COMMANDS["llm-serve"]).splitlines()
    assert out[1].lstrip().startswith("tokens") and "TTFT p50" in out[1]
    assert "TPOT" in " ".join(out[1:3]) and "tokens/s" in " ".join(out[1:3])
    assert "goodput" not in "\n".join(out).lower()
    with_slo = _run(COMMANDS["llm-serve"] + ["--slo-ttft-ms", "500"])
    assert "goodput" in with_slo and "TTFT <= 500 ms" in with_slo


def test_an_overloaded_decoder_server_is_called_overloaded():
    args = ["simulate", "llama2_7b", "--hw", "a100", "--mode", "serve", "--rate", "50",
            "--requests", "200", "--prompt-tokens", "512"]
    text = " ".join(_run(args).split())
    rec = json.loads(_run(args + ["--json"]))
    found = re.search(r"OVERLOADED arrivals ([\d.,]+)/s exceed capacity ([\d.,]+)/s", text)
    assert found, text[:400]
    assert float(found.group(1)) == 50  # the rate asked for
    capacity = float(found.group(2).replace(",", ""))
    assert capacity < 50 and capacity == pytest.approx(rec["requests_per_s"], rel=0.01)
    assert "first 200 requests" in text


def test_a_host_bound_run_says_so_in_one_line_with_the_host_time():
    out = _run(COMMANDS["batch-1"])
    rec = json.loads(_run(COMMANDS["batch-1"] + ["--json"]))
    assert "Top 10 of" not in out  # not ten rows of the same time
    text = " ".join(out.split())
    found = re.search(r"Host-bound: .* sets (\d+) of (\d+) layer rows .*?, ([\d.]+) ms of the "
                      r"([\d.]+) ms per batch", text)
    assert found, text[-500:]
    overhead = [r for r in rec["layers"] if r["bound"] == "overhead"]
    assert int(found.group(1)) == len(overhead) and int(found.group(2)) == len(rec["layers"])
    assert float(found.group(3)) == pytest.approx(sum(r["time_s"] for r in overhead) * 1e3,
                                                  abs=1e-3)


def test_a_run_with_a_slowest_layer_keeps_its_table():
    out = _run(COMMANDS["bert-multinode"])
    assert "Top 10 of" in out and "Host-bound" not in out


def test_a_decoders_repr_leads_with_its_token_figures():
    import accelsim
    from accelsim.results.render import duration_text

    r = accelsim.simulate("llama2_7b", "a100", prompt_tokens=128, output_tokens=32, batch=2)
    rec = r.record
    what = repr(r).split(": ", 1)[1]
    assert what.startswith(f"TTFT {duration_text(rec['ttft_s'], 1)}, TPOT "
                           f"{duration_text(rec['tpot_s'], 2)}, "
                           f"{rec['tokens_per_s']:,.0f} tokens/s")
    assert "tokens/s" not in repr(accelsim.simulate("resnet50", "a100"))


def test_a_decoder_trained_from_fp32_is_not_told_about_inference_stacks():
    import accelsim

    train = accelsim.simulate("llama2_7b", "dgx-a100", mode="train", seq_len=512, batch=1,
                              tp=2, zero=1)
    assert train.record["workload"]["precision"] == "fp16"
    assert not any("inference" in n for n in train.notes)
    assert any("trains in fp16" in n for n in train.notes)
    infer = accelsim.simulate("llama2_7b", "a100", prompt_tokens=64, output_tokens=8, batch=1)
    assert any("LLM inference stacks" in n for n in infer.notes)


def test_energy_power_and_performance_per_watt_read_in_their_magnitudes_unit():
    from accelsim.results.render import energy_text, per_energy_text, power_text

    assert energy_text(0.196015) == "196.015 mJ" and energy_text(9.086285) == "9.086 J"
    assert energy_text(822.44) == "822.4 J"
    assert power_text(193.2) == "193 W" and power_text(108_929.0) == "108.9 kW"
    assert per_energy_text(0.55) == "0.55 samples/J"
    assert per_energy_text(0.00122) == "1.22 samples/kJ"  # 0.00122 x 1000
    assert per_energy_text(7.72e-05) == "77.2 samples/MJ"  # 7.72e-05 x 1e6


def test_bytes_in_one_base_the_all_reduce_buckets_in_mb_as_the_gradients():
    text = " ".join(_run(COMMANDS["train"]).split())
    rec = json.loads(_run(COMMANDS["train"] + ["--json"]))
    assert "MiB" not in text
    found = re.search(r"buckets of ([\d.]+)MB", text)
    assert found and float(found.group(1)) == pytest.approx(rec["bucket_bytes"] / 1e6, abs=0.01)


def test_au_short_of_target_says_when_the_input_is_not_why():
    text = " ".join(_run(COMMANDS["bert-multinode"]).split())
    rec = json.loads(_run(COMMANDS["bert-multinode"] + ["--json"]))
    fed = sum(rec["stalls"][k]["fraction"] for k in ("fetch", "prep", "transfer"))
    rest = rec["stalls"]["communication"]["fraction"] + rec["stalls"]["slowest_device"]["fraction"]
    assert not rec["meets_au_target"] and rest > fed
    assert (f"misses the 90% target, not for its input: input stalls {fed:.1%}, communication "
            f"and slowest device {rest:.1%}") in text
    starved = " ".join(_run(["simulate", "resnet50-train", "--hw", "dgx-a100", "--steps", "8",
                             "--prep-workers", "2"]).split())
    assert "misses the 90% target)" in starved and "not for its input" not in starved
