"""The profiles floor: the only readers of `hw_profiles/`, one module per data folder, each
turning a name or a path into a typed, validated profile (an error names the file, the field
and the value), parsed once per process for each text of a file.

- `devices` (with `device_schema`, `device_types`): device profiles, the schema assembled from
  the registered device classes (`accelsim.devices.registry` fills it; the built-in classes
  are loaded on first use, the one import of a higher floor, inside `load_builtin_classes`)
- `links`, `storage`, `datasets`, `systems`: links, storage media, training datasets, whole
  systems (host, accelerators, links, storage)
- `software` (with `pass_tables`) and `stack_choice`: software stacks, and which one a run uses
- `decoders`, `emulation`, `efficiency`, `energy`: JPEG decode rates, MLPerf Storage's emulated
  accelerators, the class efficiency factors, the energy constants
- `hardware`: the front door, a name or path -> (system, device profile)
"""
