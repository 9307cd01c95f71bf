"""accelsim: simulate deep-learning workloads on hardware accelerators.

Data flow, in pipeline order (see the folders of the same names):
workload (op graph) -> kernels (numpy, numeric formats) -> devices (cost models)
-> interconnect / storage -> sim (SimPy pipeline) -> results (DataFrames).
"""

__version__ = "0.1.0"
