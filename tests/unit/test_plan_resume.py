"""Plans on the sweep's machinery (accelsim.explore.evaluate): a plan searched in worker
processes, or resumed from its store after an interruption, gives the same best rows as one
run straight through in one process; a resumed plan simulates only what the store lacks; a
damaged stored record is run again; bad settings are one line."""

from __future__ import annotations

import sqlite3

import pytest

from accelsim.errors import AccelsimError
from accelsim.explore.evaluate import Evaluator, Failure
from accelsim.explore.plan import make_plan
from accelsim.explore.plan_train import make_train_plan
from tests.helpers.cli import one_line_error
from tests.unit.test_plan_train import BATCHES, DEVICES, EPOCHS, HW, NODES, FakeCluster


class StoredCluster(FakeCluster):
    """FakeCluster whose records carry a hardware section, as real records do (the store
    takes only records that look like a run's)."""

    def __call__(self, cfg, detail=False):
        out = super().__call__(cfg, detail)
        out.record["hardware"] = {"name": cfg.hardware}
        return out


class Interrupted(Exception):
    """What the fake raises to stand for a plan killed part-way."""


class DiesAfter(StoredCluster):
    """StoredCluster that stops the plan at its `n`-th run."""

    def __init__(self, n: int) -> None:
        super().__init__()
        self.n = n

    def __call__(self, cfg, detail=False):
        if self.calls + 1 >= self.n:
            raise Interrupted
        return super().__call__(cfg, detail)


def _keys(plan) -> list[tuple]:
    return [(r["hardware"], r["batch"], r["devices"], r["nodes"], r["throughput_samples_per_s"])
            for r in plan.best[:3]]


def _train(run, **kw):
    return make_train_plan("resnet50-train", HW, BATCHES, ["bf16"], DEVICES, NODES, "cost",
                           EPOCHS, top=3, run=run, **kw)


def test_workers_give_the_one_process_answer() -> None:
    one = _train(StoredCluster())
    two = _train(StoredCluster(), workers=2)
    assert _keys(two) == _keys(one)
    # a wave may simulate what one at a time pruned, never less
    assert one.simulated <= two.simulated


def test_a_killed_plan_resumes_where_it_stopped(tmp_path) -> None:
    store = tmp_path / "plan.sqlite"
    whole = _train(StoredCluster())
    with pytest.raises(Interrupted):
        _train(DiesAfter(4), resume=store)
    kept = sqlite3.connect(store).execute("SELECT COUNT(*) FROM records").fetchone()[0]
    assert kept == 3  # every run finished before the kill, each stored as it finished
    rerun = StoredCluster()
    resumed = _train(rerun, resume=store)
    assert _keys(resumed) == _keys(whole)
    assert resumed.resumed == 3 and rerun.calls == whole.simulated - 3
    assert any("read back from the resume store" in n for n in resumed.notes)
    again = StoredCluster()
    assert _keys(_train(again, resume=store)) == _keys(whole) and again.calls == 0


def test_inference_plan_in_workers_and_resumed_is_the_same(tmp_path) -> None:
    args = ("resnet50", ["a100", "t4"], [1, 2, 4, 8, 16, 32], ["fp16", "int8"], [1, 2],
            "samples-per-dollar")
    one = make_plan(*args, p99_ms=10)
    two = make_plan(*args, p99_ms=10, workers=2, resume=tmp_path / "p.sqlite")
    back = make_plan(*args, p99_ms=10, resume=tmp_path / "p.sqlite")
    assert [r for r in two.rows] == [r for r in one.rows]
    assert back.rows == one.rows and back.simulated == one.simulated
    # every simulated record was stored but the ones that raised (a format the device lacks)
    assert 0 < back.resumed <= one.simulated


def test_a_damaged_stored_record_is_run_again(tmp_path) -> None:
    store = tmp_path / "p.sqlite"
    ev = Evaluator(StoredCluster(), resume=store)
    knobs = {"mode": "train", "batch": 128, "precision": "bf16", "devices": 8, "nodes": 2,
             "steps": 5}
    first = ev.record("resnet50-train", "dgx-h100", knobs)
    ev.close()
    db = sqlite3.connect(store)
    with db:
        db.execute("UPDATE records SET row = 'null'")
    ev = Evaluator(StoredCluster(), resume=store)
    assert ev.record("resnet50-train", "dgx-h100", knobs) == first
    assert ev.simulated == 1 and ev.resumed == 0
    ev.close()


def test_failures_are_outcomes_not_exceptions() -> None:
    def refuses(cfg, detail=False):
        raise AccelsimError("does not fit: 3 GB over")

    out = Evaluator(refuses).records([("resnet50", "a100", {"batch": 1})])
    assert out == [Failure("does not fit: 3 GB over")]


@pytest.mark.parametrize("kw, says", [
    ({"workers": 0}, "workers 0"),
    ({"workers": True}, "workers True"),
    ({"resume": 3}, "resume 3"),
])
def test_bad_settings_are_one_line(kw, says) -> None:
    with pytest.raises(AccelsimError, match=says):
        Evaluator(**kw)


def test_unpicklable_run_with_workers_is_refused() -> None:
    fake = StoredCluster()
    with pytest.raises(AccelsimError, match="does not pickle"):
        _train(lambda cfg, detail=False: fake(cfg, detail), workers=2)


def test_cli_refuses_workers_for_a_serving_plan(capsys) -> None:
    line = one_line_error(capsys, "plan", "llama-3.1-8b", "--hw", "dgx-h100", "--rate", "5",
                          "--ttft-ms", "500", "--minimize", "cost", "--workers", "2")
    assert "--workers 2" in line and "one process" in line


def test_cli_resume_that_is_not_a_store(tmp_path, capsys) -> None:
    bad = tmp_path / "notes.sqlite"
    bad.write_text("not a database, just text\n" * 40)
    line = one_line_error(capsys, "plan", "resnet50", "--hw", "t4", "--batch", "1,2",
                          "--maximize", "throughput", "--resume", str(bad))
    assert "--resume" in line and str(bad) in line

