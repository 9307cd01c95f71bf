"""A storage-system TOML for tests: every number sourced "defined: test"."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def system_toml(fs_class: str, servers: dict[str, Any] | None,
                clients: dict[str, Any]) -> str:
    """The text of a storage-system file of class `fs_class` with these tables."""
    lines = ['description = "a test system"', f'fs_class = "{fs_class}"', ""]
    sources = []
    for table, fields in (("servers", servers), ("clients", clients)):
        if fields is None:
            continue
        lines.append(f"[{table}]")
        for key, value in fields.items():
            lines.append(f"{key} = {value!r}".replace("'", '"'))
            if isinstance(value, int | float):
                sources.append(f'"{table}.{key}" = "defined: test"')
        lines.append("")
    return "\n".join([*lines, "[sources]", *sources]) + "\n"


def write_system(folder: Path, name: str, fs_class: str, servers: dict[str, Any] | None,
                 clients: dict[str, Any]) -> Path:
    path = folder / f"{name}.toml"
    path.write_text(system_toml(fs_class, servers, clients))
    return path
