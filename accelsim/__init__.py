"""accelsim: simulate deep-learning workloads on hardware accelerators.

    import accelsim
    accelsim.simulate("resnet50", hw="a100", batch=64, precision="bf16")   # a Result
    accelsim.compare("resnet50", hw="a100,tpu-v3,edge-tpu", precision="int8")  # a DataFrame
    accelsim.sweep("resnet50", hw="a100", batch=[1, 8, 64])                # a DataFrame
    accelsim.write_report("resnet50-train", hw="dgx-a100", out="r.html")  # an HTML page

Data flow, in pipeline order (the folders of the same names; README "Layout" gives each
floor): formats (numeric format metadata) -> workload (op graph, the op -> cost table) ->
kernels (numpy, rounding to each format) and profiles (the only readers of hw_profiles/) ->
devices (the cost core and one folder per class) -> interconnect (links, collectives) ->
sim (the SimPy pipeline and server) and llm (decoders at the token level), picked by run
(the dispatcher) -> results (event records, metrics, the rendered record) -> calibrate (this
host), validation (a user's measurements), explore (compare, sweep grids) -> plots, report,
cli, api.
"""

from __future__ import annotations

from typing import Any

__version__ = "0.1.0"
__all__ = ["simulate", "compare", "sweep", "write_report", "Result"]


def __getattr__(name: str) -> Any:
    # The API imports pandas and the models; loaded on first use so `accelsim --help` is quick.
    if name in __all__:
        from accelsim import api

        return getattr(api, name)
    raise AttributeError(f"module 'accelsim' has no attribute {name!r}")
