"""Decoder config files on the command line: a config path or `--model-config` runs as the same
model by name does, the file is read when the run is set up (not during it), a bad file is one
line (exit 2), and `list` shows the shipped configs."""

from __future__ import annotations

import json
from pathlib import Path

from accelsim.run import run_simulation
from accelsim.sim.knobs import make_config
from tests.helpers.cli import one_line_error, run_cli

LLAMA = str(Path(__file__).resolve().parents[2] / "workloads" / "llm" / "llama-2-7b.json")
INFER = ("--hw", "a100", "--prompt-tokens", "512", "--output-tokens", "128", "--batch", "8",
         "--json")


def _record(capsys, *args: str) -> dict:
    code, out, err = run_cli(capsys, "simulate", *args)
    assert code == 0, err
    return json.loads(out)


def test_a_config_path_runs_as_the_same_model_by_name(capsys):
    by_name = _record(capsys, "llama2_7b", *INFER)
    by_path = _record(capsys, LLAMA, *INFER)
    by_option = _record(capsys, "llama2_7b", "--model-config", LLAMA, *INFER)
    assert by_path["ttft_s"] == by_name["ttft_s"] == by_option["ttft_s"]
    assert by_path["tpot_s"] == by_name["tpot_s"]
    assert by_path["workload"]["params"] == by_name["workload"]["params"] == 6_738_415_616


def test_a_shipped_name_without_llm_knobs_runs_token_by_token(capsys):
    rec = _record(capsys, "gpt-j-6b", "--hw", "h100", "--json")
    assert rec["ttft_s"] > 0 and rec["workload"]["params"] == 6_050_882_784


def test_a_config_path_serves(capsys):
    rec = _record(capsys, LLAMA, "--hw", "h100", "--mode", "serve", "--rate", "5",
                  "--requests", "40", "--json")
    assert rec["workload"]["mode"] == "serve" and rec["ttft_p50_s"] > 0


def test_the_run_reads_no_file_its_config_carries_the_shapes(tmp_path):
    path = tmp_path / "mine.json"
    path.write_text(Path(LLAMA).read_text(encoding="utf-8"), encoding="utf-8")
    cfg = make_config(str(path), "a100", prompt_tokens=64, output_tokens=8)
    path.unlink()  # gone before the run
    assert cfg.decoder is not None and cfg.decoder.n_layers == 32
    assert run_simulation(cfg).record["ttft_s"] > 0


def test_an_unknown_architecture_field_is_one_line_exit_2(capsys, tmp_path):
    raw = json.loads(Path(LLAMA).read_text(encoding="utf-8")) | {"use_flux_capacitor": True}
    path = tmp_path / "odd.json"
    path.write_text(json.dumps(raw), encoding="utf-8")
    err = one_line_error(capsys, "simulate", str(path), "--hw", "a100")
    assert "use_flux_capacitor" in err and str(path) in err
    err = one_line_error(capsys, "simulate", "llama2_7b", "--hw", "a100", "--model-config",
                         str(path))
    assert "use_flux_capacitor" in err


def test_a_config_has_no_layer_graph_to_describe(capsys):
    err = one_line_error(capsys, "describe", LLAMA)
    assert "token by token" in err


def test_list_shows_the_shipped_configs(capsys):
    code, out, _ = run_cli(capsys, "list")
    assert code == 0 and "llama-3.1-405b" in out and "falcon-180b" in out
    code, out, _ = run_cli(capsys, "list", "--json")
    assert {"llama-3.1-8b", "gpt-j-6b", "nemotron-4-340b"} <= set(json.loads(out)["decoders"])
