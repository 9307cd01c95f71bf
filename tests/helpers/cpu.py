"""One linear layer's row on the CPU class model, as the CPU tests price it."""

from __future__ import annotations

from accelsim.devices.cpu.model import cpu_costs
from accelsim.profiles.devices import load_profile
from accelsim.workload.graph import GraphBuilder
from accelsim.workload.work import gemms_for, work_table


def row(m, k, n, precision, stack, profile="xeon-8380"):
    """The cost row of one M x K x N linear (no bias) on `profile` under software `stack`."""
    g = GraphBuilder("g")
    g.linear(g.input("x", (k,)), out_features=n, bias=False, name="fc")
    graph = g.build()
    work, gemms = work_table(graph, m, precision), gemms_for(graph, m)
    return cpu_costs(load_profile(profile), work, gemms, precision, stack).to_frame().iloc[0]
