"""Model importers: one module per file format (see `accelsim.workload.sources.IMPORTERS`)."""
