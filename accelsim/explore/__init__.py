"""Many simulations at once (design-space exploration): `compare` (one row per device, the
same knobs) and `run.sweep` (the grid of any knobs, in processes or on a Dask cluster,
resumable), each into one DataFrame of flat rows (`accelsim.results.summary`); and
`convert`, what packing a dataset into record shards costs and saves per epoch.

Named `explore`, not `sweep`, so that the package never shadows the function
`accelsim.sweep`.
"""
