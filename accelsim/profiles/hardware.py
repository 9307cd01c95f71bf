"""What `--hw` names: a whole system, or one device that then runs inside a default host.

    system, device = resolve_hardware("dgx-a100")   # the system and its device profile
    system, device = resolve_hardware("tpu-v1")     # the default host, its device replaced

A plain device profile runs inside `DEFAULT_HOST_SYSTEM` (one accelerator, a PCIe host, local
storage), its host link taken from the device profile's `host_link.kind` when that names a
link profile; its host CPU (`host_clock_hz`) drives the software stack's host time.
"""

from __future__ import annotations

import dataclasses
import importlib
from functools import lru_cache
from pathlib import Path
from typing import Any

from accelsim.errors import ConfigError, UnknownNameError
from accelsim.profiles.devices import builtin_profile_names, load_profile
from accelsim.profiles.links import available_links, load_link
from accelsim.profiles.systems import System, available_systems, load_system
from accelsim.tomlfiles import read_toml

DEFAULT_HOST_SYSTEM = "workstation"


def _is_system_file(path: Path) -> bool:
    return "accelerator" in read_toml(path)


def host_system_for(profile: Any) -> System:
    """The default single-accelerator host around `profile`."""
    base = load_system(DEFAULT_HOST_SYSTEM)
    link = base.host_to_device
    kind = getattr(getattr(profile, "host_link", None), "kind", None)
    if kind in available_links():
        link = load_link(kind)
    return dataclasses.replace(base, name=f"{DEFAULT_HOST_SYSTEM}+{profile.name}",
                               device=profile.name, device_count=1, host_to_device=link)


def host_clock_hz(system: System) -> float | None:
    """The single-thread clock of `system`'s host CPU, which scales a software stack's host
    time (`accelsim.profiles.software`); None where the host is not a built-in CPU profile
    (an inline CPU) or its profile publishes none: the stack's reference host then."""
    from accelsim.profiles.stack_choice import host_single_thread_hz

    if system.host.cpu not in builtin_profile_names():
        return None
    return host_single_thread_hz(load_profile(system.host.cpu))


def host_cpu(system: System) -> tuple[float | None, Any]:
    """(`host_clock_hz(system)`, `host_cpu_profile(system)`), the host's profile looked up
    once."""
    from accelsim.profiles.stack_choice import host_single_thread_hz

    if system.host.cpu not in builtin_profile_names():
        return None, None
    cpu = load_profile(system.host.cpu)
    return host_single_thread_hz(cpu), None if system.host.cpu_inline is not None else cpu


def host_cpu_profile(system: System) -> Any:
    """`system`'s host CPU profile (it runs the ops an NPU falls back on), or None where the
    host CPU is defined inline in the system file (no profile of its own)."""
    if system.host.cpu_inline is not None or system.host.cpu not in builtin_profile_names():
        return None
    return load_profile(system.host.cpu)


def system_device(system: System, path: Path | None = None) -> Any:
    """The device profile `system` names: a built-in name, or a .toml path read relative to
    the system file at `path`. An unknown name is an error naming the system file's field."""
    ref: str | Path = system.device
    if path is not None and system.device.endswith(".toml"):
        ref = path.parent / system.device  # an absolute path stays as it is
    try:
        return load_profile(ref)
    except UnknownNameError as exc:
        raise ConfigError(str(path or system.name), "accelerator.device", system.device,
                          str(exc)) from None


# Other hardware-file formats: suffix -> module with `read_profile(path: Path) -> DeviceProfile`
# (the device then runs inside the default host, as a device profile does).
HARDWARE_READERS = {".cfg": "accelsim.devices.systolic.scalesim.config"}


def resolve_hardware(spec: str) -> tuple[System, Any]:
    """(system, device profile) for a system or device name, or a path to either's TOML (or a
    file a `HARDWARE_READERS` module reads, such as a SCALE-Sim .cfg). Built-in names are
    loaded once per process (the results are frozen: do not mutate); files are read on every
    call, so an edited file is seen."""
    suffix = Path(spec).suffix.lower()
    if suffix in HARDWARE_READERS:
        profile = importlib.import_module(HARDWARE_READERS[suffix]).read_profile(Path(spec))
        return host_system_for(profile), profile
    if spec.endswith(".toml"):
        path = Path(spec)
        if _is_system_file(path):  # read_toml: one clear line for any unreadable file
            system = load_system(path)
            return system, system_device(system, path)
        profile = load_profile(path)
        return host_system_for(profile), profile
    return _resolve_builtin(spec)


@lru_cache(maxsize=64)
def _resolve_builtin(spec: str) -> tuple[System, Any]:
    if spec in available_systems():
        system = load_system(spec)
        return system, system_device(system)
    if spec in builtin_profile_names():
        profile = load_profile(spec)
        return host_system_for(profile), profile
    raise UnknownNameError("hardware (system or device profile)", spec,
                           available_systems() + builtin_profile_names())
