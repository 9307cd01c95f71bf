"""Shared output step of the benchmark scripts: print the report, write it with --write."""

from __future__ import annotations

from pathlib import Path


def emit(text: str, results: Path, argv: list[str]) -> None:
    """Print `text`; with `--write` in `argv`, also write it to `results` and say so."""
    print(text)
    if "--write" in argv:
        results.parent.mkdir(parents=True, exist_ok=True)
        results.write_text(text, encoding="utf-8")
        print(f"wrote {results}")
