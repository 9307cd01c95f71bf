"""Device cost models: the shared cost core in this folder, then one folder per device class.

Shared core: `core` (the roofline, the contract of a class model), `estimate` (one device, one
workload), `invariants`, `mapping`, `tiling`, `energy`, `dvfs`, `precision`, `sparsity`,
`stack_costs`, `pass_tables`, `registry` (the classes' records); the profile and stack loaders
(`profile*`, `software`, `efficiency`). Classes: `gpu/`, `cpu/`, `systolic/` (profile class
"tpu", with SCALE-Sim's `.cfg` reader and reports in `systolic/scalesim/`), `fpga/`, `npu/`,
and `null.py`. Importing this package registers them (below).

Add a device class: make a folder `accelsim/devices/<name>/` with the cost model (`model.py`: a
function `(profile, work, gemms, precision, software) -> DataFrame` of `core.COST_COLUMNS`)
and, in its `__init__.py`, its peaks `(profile, precision) -> (matrix FLOP/s, vector FLOP/s)`,
its profile-schema rules (`ClassSchema.of(may=..., must=...)`: the class keys of
`device_schema`'s tables it may have and the keys it must have) and one registration:

    register(DeviceClass(name="<profile class>", model=..., peaks=..., schema=SCHEMA,
                         default_stack="<a stack name or a stack .toml>"))

then import the folder below. Nothing else changes: `estimate`, the invariants, the roofline of
`explore.compare`, the profile loader and the stack loader all read the record
(`accelsim.devices.registry`). A plug-in outside the package registers the same way when its
module is imported (tests/null_device/test_device_registry.py registers a toy class).
"""

from accelsim.devices import gpu, cpu, systolic, fpga, npu, null  # noqa: F401, I001 - order: registration
