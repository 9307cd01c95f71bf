"""Calibrate on the machine you have: `accelsim calibrate` times the project's own numpy kernels
here and writes this host's CPU profile, software stack and storage medium.

Modules in pipeline order: `host` (what the OS says about the CPU), `cases` (one-op graphs,
timed through `accelsim.kernels`), `torch_cases` (the same ops in PyTorch), `io_bench` (disk
and JPEG decode), `fit` (efficiencies and GEMM tile in closed form), `write` (the TOML files),
`run` (one calibration, with a progress bar), `timing` (a real run beside the prediction, for
`describe --execute --time` and `benchmarks/fidelity/calibrate_host.py`).
"""
