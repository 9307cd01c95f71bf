"""Fixtures shared by the test tiers (`write_profile`: a tmp copy of a built-in device profile
with one edit), and the markers each tier's folder gives its tests.

Tiers (one folder each, one marker each, registered in pyproject.toml): unit, null_device,
validation, properties, cli. `python -m pytest -m unit` runs one tier alone;
`python -m pytest -m "not slow"` leaves out the tests marked `slow` in their files. Helpers
that are not fixtures (the in-process CLI runner, the pipeline's fast parts, ...) are in
tests/helpers/, imported by name (`from tests.helpers.cli import run_cli`).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from accelsim.datafiles import builtin_files

TESTS = Path(__file__).resolve().parent
TIERS = ("unit", "null_device", "validation", "properties", "cli")
# No tests in these: data (the ONNX fixtures' export script needs torch) and the modules the
# tests import. Left out so that --doctest-modules (pyproject.toml) does not import them.
collect_ignore = ["fixtures", "reference", "helpers", "fuzzing"]


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark each test with the tier of its folder and run the tiers in the order of TIERS (unit
    first: the quickest feedback; each file's tests keep their order). A test file outside the
    tiers is an error. The API doctests, collected from accelsim/, carry no tier and run last."""
    order = {}
    for item in items:
        try:
            tier = item.path.resolve().relative_to(TESTS).parts[0]
        except ValueError:
            order[item] = len(TIERS)
            continue
        if tier not in TIERS:
            raise pytest.UsageError(f"{item.nodeid}: a test belongs in one of the tier folders "
                                    f"tests/{{{','.join(TIERS)}}}/")
        item.add_marker(getattr(pytest.mark, tier))
        order[item] = TIERS.index(tier)
    items.sort(key=order.__getitem__)


@pytest.fixture(scope="session")
def write_profile(tmp_path_factory: pytest.TempPathFactory) -> Callable[..., Path]:
    """`write_profile(name, old, new, file_name)`: a copy of built-in device profile `name`
    with the text `old` replaced by `new`, written to a fresh temporary folder; its path."""

    def write(name: str, old: str, new: str, file_name: str | None = None) -> Path:
        text = builtin_files("hw_profiles", "devices/*.toml")[name].read_text()
        path = tmp_path_factory.mktemp("profile") / (file_name or f"{name}.toml")
        path.write_text(text.replace(old, new))
        return path

    return write
