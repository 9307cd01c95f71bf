"""A served decoder's requests one by one (`request_times`) agree with the record's percentiles,
and the occupancy over time (`occupancy`) with a naive count of the requests in each state;
the LLM serving page shows both figures."""

import numpy as np
import pytest

import accelsim
from accelsim.llm.serve import request_times
from accelsim.plots.serving import occupancy
from accelsim.report.page import build_page
from tests.helpers.report_pages import Page

KNOBS = {"mode": "serve", "prompt_tokens": 128, "output_tokens": 32, "rate": 6,
         "requests": 120, "length_dist": "uniform"}


@pytest.fixture(scope="module")
def served():
    return accelsim.simulate("llama2_7b", "a100", **KNOBS)


def test_request_times_give_the_records_percentiles(served):
    times = request_times(served.events)
    rec = served.record
    assert len(times) == rec["requests"]
    for name in ("ttft", "tpot", "latency"):
        values = times[f"{name}_s"].dropna().to_numpy()
        for q in (50, 99):  # the record's figures, within the 1 us the events are written at
            assert np.percentile(values, q) == pytest.approx(rec[f"{name}_p{q}_s"], abs=2e-6)
    assert times["output_tokens"].sum() / rec["run_time_s"] == pytest.approx(
        rec["tokens_per_s"], rel=1e-9)
    assert (times["arrival_s"] <= times["first_s"]).all()
    assert (times["first_s"] <= times["last_s"]).all()
    assert (times["last_s"] <= times["done_s"] + 1e-6).all()  # written to 1 us


def test_occupancy_matches_a_naive_count(served):
    times = request_times(served.events)
    occ = occupancy(times)
    rng = np.random.default_rng(3)
    for t in rng.uniform(times["arrival_s"].min(), times["done_s"].max(), 200):
        waiting = int(((times["arrival_s"] <= t) & (t < times["first_s"])).sum())
        decoding = int(((times["first_s"] <= t) & (t < times["done_s"])).sum())
        row = occ[occ["t_s"] <= t].iloc[-1]
        assert (row["waiting"], row["decoding"]) == (waiting, decoding), t
    assert occ.iloc[-1][["waiting", "decoding"]].tolist() == [0, 0]  # everyone served


def test_the_serving_page_shows_the_distributions_and_the_requests_over_time():
    page = Page(build_page("llama2_7b", "a100", KNOBS))
    assert "requests" in page.sections
    assert int(page.body["data-figures"]) == 3  # distributions, occupancy, memory
