"""Variable sequence lengths (`--seq-len-dist`, accelsim.sim.seq_mix): checked against plain
runs at one length each (the independent reference) and closed forms of padding and packing."""

from __future__ import annotations

import numpy as np
import pytest

from accelsim.errors import AccelsimError
from accelsim.run import run_simulation
from accelsim.sim.knobs import make_config
from accelsim.workload.seq_lens import batches, length_grid, read_seq_lens

HW = "a100"


def _plain(seq_len: int, batch: int, software: str = "pytorch-eager") -> dict:
    cfg = make_config("bert_base", HW, batch=batch, precision="fp16", software=software,
                      seq_len=seq_len)
    return run_simulation(cfg).record


def _mixed(path, lengths, batch: int, software: str = "pytorch-eager", **kw) -> dict:
    path.write_text("\n".join(str(n) for n in lengths) + "\n", encoding="utf-8")
    cfg = make_config("bert_base", HW, batch=batch, precision="fp16", software=software,
                      seq_len_dist=str(path), **kw)
    return run_simulation(cfg).record


def test_one_length_is_the_plain_run(tmp_path):
    plain = _plain(96, 4)
    for padding in ("batch-max", "removed"):
        mix = _mixed(tmp_path / "l.txt", [96] * 8, 4, padding=padding)
        assert mix["latency_s"] == pytest.approx(plain["latency_s"], rel=1e-12)
        assert mix["throughput_samples_per_s"] == pytest.approx(
            plain["throughput_samples_per_s"], rel=1e-12)
        assert mix["energy_j_per_sample"] == pytest.approx(plain["energy_j_per_sample"],
                                                           rel=1e-12)
        assert mix["sequence_lengths"]["padding_share"] == 0.0


def test_padded_batches_cost_their_longest(tmp_path):
    short, long = _plain(64, 2), _plain(384, 2)
    # two batches in file order: (64, 64) then (384, 384)
    mix = _mixed(tmp_path / "a.txt", [64, 64, 384, 384], 2, padding="batch-max")
    mean_s = (short["latency_s"] + long["latency_s"]) / 2
    assert mix["latency_s"] == pytest.approx(mean_s, rel=1e-9)
    assert mix["throughput_samples_per_s"] == pytest.approx(4 / (2 * mean_s), rel=1e-9)
    # interleaved: both batches (64, 384) are padded to 384
    mix = _mixed(tmp_path / "b.txt", [64, 384, 64, 384], 2)  # pytorch-eager pads by default
    assert mix["sequence_lengths"]["padding"] == "batch-max"
    assert mix["latency_s"] == pytest.approx(long["latency_s"], rel=1e-9)
    assert mix["sequence_lengths"]["padding_share"] == pytest.approx(1 - 448 / 768)
    assert mix["sequence_lengths"]["tokens_computed"] == 4 * 384


def test_packed_batch_closed_form(tmp_path):
    # one batch (64, 192): tokens at the mean 128, attention scaled by E[L^2] / 128^2
    ref = _plain(128, 2, "tensorrt")
    attention_s = sum(r["time_s"] for r in ref["layers"] if r["op"] == "attention")
    assert attention_s > 0
    want_s = ref["latency_s"] + attention_s * ((64**2 + 192**2) / 2 / 128**2 - 1)
    mix = _mixed(tmp_path / "p.txt", [64, 192], 2, "tensorrt")  # tensorrt packs by default
    assert mix["sequence_lengths"]["padding"] == "removed"
    assert "tensorrt" in mix["sequence_lengths"]["padding_choice"]
    assert mix["latency_s"] == pytest.approx(want_s, rel=1e-9)
    padded = _mixed(tmp_path / "q.txt", [64, 192], 2, "tensorrt", padding="batch-max")
    assert mix["latency_s"] < padded["latency_s"]
    assert padded["latency_s"] == pytest.approx(_plain(192, 2, "tensorrt")["latency_s"],
                                                rel=1e-9)


def test_interpolated_lengths_between_grid_points(tmp_path):
    # 40 distinct batch maxima: estimated on a grid and interpolated, within 1% of exact runs
    lengths = list(range(10, 410, 10))
    mix = _mixed(tmp_path / "g.txt", lengths, 1)
    grid = mix["sequence_lengths"]["lengths_estimated"]
    assert len(grid) < len(lengths)
    exact = np.mean([_plain(n, 1)["latency_s"] for n in lengths[::7]])
    approx = np.mean([np.interp(n, grid, [_plain(g, 1)["latency_s"] for g in grid])
                      for n in lengths[::7]])
    assert approx == pytest.approx(exact, rel=0.01)


def test_reader_forms(tmp_path):
    f = tmp_path / "l.csv"
    f.write_text("id,num_tokens\na,12\nb,40\n", encoding="utf-8")
    assert read_seq_lens(str(f)).lengths == (12, 40)
    g = tmp_path / "l.txt"
    g.write_text("# lengths\n7\n\n9\n", encoding="utf-8")
    assert read_seq_lens(str(g)).lengths == (7, 9)
    u = read_seq_lens("uniform:10:20:11")
    assert sorted(u.lengths) == list(range(10, 21))
    assert u.lengths != tuple(range(10, 21))  # shuffled: a loader's order, not sorted
    assert read_seq_lens("uniform:10:20:11") == u  # and the same every time
    assert len(read_seq_lens("uniform:1:512").lengths) == 1000
    assert batches((1, 2, 3), 2).tolist() == [[1, 2], [3, 1]]
    grid = length_grid(np.array([3, 500]))
    assert grid[0] == 3 and grid[-1] == 500 and len(grid) <= 26
    assert all(b - a <= 24 for a, b in zip(grid, grid[1:], strict=False))


@pytest.mark.parametrize("text, words", [
    ("12\nabc\n", "'abc' is not a whole number"),
    ("0\n", "a length of 0 tokens"),
    ("a,b\n1,2\n", "needs a column named"),
    ("", "no lengths"),
])
def test_reader_errors(tmp_path, text, words):
    f = tmp_path / "bad.txt"
    f.write_text(text, encoding="utf-8")
    with pytest.raises(AccelsimError, match=words):
        read_seq_lens(str(f))


@pytest.mark.parametrize("spec", ["uniform:5", "uniform:9:3", "uniform:a:b"])
def test_bad_spreads(spec):
    with pytest.raises(AccelsimError, match="seq_len_dist"):
        read_seq_lens(spec)


def test_refused_where_it_does_not_apply(tmp_path):
    f = tmp_path / "l.txt"
    f.write_text("600\n", encoding="utf-8")
    with pytest.raises(AccelsimError, match="seq_len 600 out of range"):
        run_simulation(make_config("bert_base", HW, seq_len_dist=str(f)))
    with pytest.raises(AccelsimError, match="applies to mode infer"):
        make_config("bert-large-train", "dgx-a100", seq_len_dist="uniform:8:16")
    with pytest.raises(AccelsimError, match="takes no seq_len input"):
        run_simulation(make_config("resnet50", HW, seq_len_dist="uniform:8:16"))
    with pytest.raises(AccelsimError, match="keep one"):
        make_config("bert_base", HW, seq_len=64, seq_len_dist="uniform:8:16")
    with pytest.raises(AccelsimError, match="needs 'seq_len_dist'"):
        make_config("bert_base", HW, padding="removed")
    with pytest.raises(AccelsimError, match="choose one of"):
        run_simulation(make_config("bert_base", HW, seq_len_dist="uniform:8:16",
                                   padding="sideways"))
