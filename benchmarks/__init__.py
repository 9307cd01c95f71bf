"""accelsim's benchmarks (not part of the installed package): `speed/`, `fidelity/`,
`scalesim/` and `identity/`, with their recorded results in `results/`; see README.md.

A package only so that the scripts share helpers (`benchmarks.report_io`) one way: each script
puts the repo root first on `sys.path` and imports `benchmarks.<folder>.<module>`. Nothing here
is imported at package import time (the SCALE-Sim job runner imports `benchmarks.scalesim` in a
Python that has neither accelsim nor pandas).
"""
