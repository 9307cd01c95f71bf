"""accelsim's tests, in tiers: unit/, null_device/, validation/, properties/, cli/.

A package so that tests import what they share by rootdir-based absolute names, with no
sys.path edits: `from tests.helpers.cli import run_cli`, `from tests.fuzzing.run import
run_case`. Fixtures live in tests/conftest.py; tier and `slow` markers: pyproject.toml.
"""
