"""Shared output step of the benchmark scripts: print the report, write it with --write."""

from __future__ import annotations

import platform
from pathlib import Path


def emit(text: str, results: Path, argv: list[str]) -> None:
    """Print `text`; with `--write` in `argv`, also write it to `results` and say so."""
    print(text)
    if "--write" in argv:
        results.parent.mkdir(parents=True, exist_ok=True)
        results.write_text(text, encoding="utf-8")
        print(f"wrote {results}")


def cpu_name() -> str:
    """The CPU's model name (/proc/cpuinfo), else what `platform` says."""
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as fh:
            names = [line.split(":", 1)[1].strip() for line in fh
                     if line.startswith("model name")]
    except OSError:
        return cpu
    return names[0] if names else cpu
