"""The SCALE-Sim parity harness (entry: `python benchmarks/scalesim/run.py SUBCOMMAND`; see
README.md). Two sides: `common`, `parity`, `per_layer`, `layers`, `random_layers` and
`equivalence` run with accelsim; `jobs` and the runtime patch `fast` (`fast_compute`,
`fast_loop`) run in SCALE-Sim's own Python, which has no accelsim. Nothing is imported here.
"""
