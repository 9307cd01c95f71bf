"""Which software stack a run uses: the knob's value (a built-in stack's name or alias, a
stack file's path, or "default": the device class's registered default) resolved once, at the
edge, into a `SoftwareStack` for the class models (a stack that does not run on the class
gives way to the class's default, with a note). Stack files are loaded once per path and
modification time.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Any

from accelsim.errors import ConfigError, UnknownNameError
from accelsim.profiles.software import (
    DEFAULT,
    SoftwareStack,
    builtin_stacks,
    class_default_name,
    load_stack,
    stack_names,
)


def is_stack_file(value: str | Path) -> bool:
    """Whether a software knob value names a stack file rather than a built-in stack."""
    return isinstance(value, Path) or str(value).endswith(".toml")


def _user_stack(path: str) -> SoftwareStack:
    """A stack file, loaded once per path and modification time (ConfigError naming the file
    when it is missing or invalid)."""
    try:
        mtime_ns = Path(path).stat().st_mtime_ns
    except OSError as err:
        raise ConfigError(path, "software", path, f"cannot read the stack file: "
                          f"{err.strerror or err}") from None
    return _cached_user_stack(path, mtime_ns)


@lru_cache(maxsize=16)
def _cached_user_stack(path: str, mtime_ns: int) -> SoftwareStack:
    del mtime_ns  # part of the cache key only
    return load_stack(Path(path))


def _alias_table() -> dict[str, str]:
    return {a: s.name for s in builtin_stacks().values() for a in s.aliases}


def software_choices() -> list[str]:
    """Every value the software knob accepts: "default", stack names and aliases."""
    return [DEFAULT, *stack_names(), *sorted(_alias_table())]


def check_software(name: str) -> str:
    """The stack name `name` selects ("default" stays "default"; a stack file's path stays the
    path, once the file loads); else UnknownNameError listing the stacks."""
    if is_stack_file(name):
        _user_stack(str(name))
        return str(name)
    if name == DEFAULT or name in builtin_stacks():
        return name
    alias = _alias_table().get(name)
    if alias is None:
        raise UnknownNameError("software stack", name, software_choices())
    return alias


def default_stack(device_class: str) -> SoftwareStack:
    """The stack a device class runs when none is asked for: the one it registered with."""
    name = class_default_name(device_class)
    if name is None:
        raise ConfigError("hw_profiles/software", "default_for", device_class,
                          "no stack is the default for this device class")
    return _user_stack(name) if is_stack_file(name) else builtin_stacks()[name]


def resolve_software(software: str | SoftwareStack, device_class: str,
                     host_single_thread_hz: float | None = None
                     ) -> tuple[SoftwareStack, str | None]:
    """(the stack a `device_class` device runs for the knob value `software`, on that host;
    a note when it is not the one asked for). A stack that does not run on the class gives
    way to the class's default, with a note naming both."""
    if isinstance(software, SoftwareStack):
        stack = software
    else:
        name = check_software(software)
        stack = (default_stack(device_class) if name == DEFAULT else _user_stack(name)
                 if is_stack_file(name) else builtin_stacks()[name])
    stack, note = for_class(stack, device_class)
    if host_single_thread_hz is not None:
        stack = stack.on_host(host_single_thread_hz)
    return stack, note


def for_class(stack: SoftwareStack, device_class: str) -> tuple[SoftwareStack, str | None]:
    """(the stack a `device_class` device runs when `stack` is asked for: itself, or the
    class's default where it does not run on the class; a note then, naming both)."""
    if device_class in stack.classes:
        return stack, None
    used = default_stack(device_class)
    return used, (f"software '{stack.name}' does not run on a {device_class.upper()}; it ran "
                  f"'{used.name}', the class's default stack")


def host_single_thread_hz(cpu_profile: Any) -> float | None:
    """The single-thread clock of a CPU profile (None where it publishes none)."""
    compute = getattr(cpu_profile, "compute", None)
    return getattr(compute, "single_thread_equiv_clock_hz", None)
