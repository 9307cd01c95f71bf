"""The per-process caches of the estimate's hot path (issue 22): what they return is the
caller's own, and a cached look-up answers as the uncached one does."""

from __future__ import annotations

from accelsim.profiles.hardware import host_clock_hz, host_cpu, host_cpu_profile
from accelsim.profiles.systems import available_systems, load_system
from accelsim.workload.tables import totals
from accelsim.workload.work import gemms_for, work_table
from accelsim.workload.zoo import build_model


def test_host_cpu_is_the_clock_and_the_profile():
    for name in available_systems():
        system = load_system(name)
        assert host_cpu(system) == (host_clock_hz(system), host_cpu_profile(system)), name


def test_cached_tables_are_the_callers_own():
    graph = build_model("resnet18")
    work, gemms = work_table(graph, 4, "bf16", "train"), gemms_for(graph, 4)
    work["flops"] = 0.0
    gemms.loc[0, "m"] = -1
    work["extra"] = 1
    again, gemms_again = work_table(graph, 4, "bf16", "train"), gemms_for(graph, 4)
    assert "extra" not in again and (again["flops"] > 0).any()
    assert gemms_again.loc[0, "m"] > 0
    tot = totals(graph)
    tot["params"] = -1
    assert totals(graph)["params"] == graph.params


def test_kept_tables_are_bounded_by_rows():
    import pandas as pd

    from accelsim.workload.work import _KeptTables

    kept = _KeptTables(max_rows=5)
    built = []

    def frame(n: int):
        def build():
            built.append(n)
            return pd.DataFrame({"x": range(n)})
        return build

    assert len(kept.get("a", frame(3))) == 3 and len(kept.get("a", frame(3))) == 3
    assert built == [3]  # the second is the kept one
    kept.get("b", frame(2))
    kept.get("c", frame(2))  # 7 rows: "a", the least recently used, goes
    kept.get("a", frame(3))
    assert built == [3, 2, 2, 3]
    assert len(kept.get("big", frame(9))) == 9  # larger than the bound: kept alone
