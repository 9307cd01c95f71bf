"""Packaging glue: ship the top-level data folders inside the wheel.

`hw_profiles/` and `workloads/` live at the top of the repo (they are data, not code), but
after a plain `pip install .` they must be found from any directory, so they are installed
as the data packages `accelsim.hw_profiles` and `accelsim.workloads` (TOML profiles and
scenarios, and the decoder configs `workloads/llm/*.json`).
"""

from setuptools import find_packages, setup

DATA_PACKAGES = {"accelsim.hw_profiles": "hw_profiles", "accelsim.workloads": "workloads"}

setup(
    packages=find_packages(include=["accelsim", "accelsim.*"]) + list(DATA_PACKAGES),
    package_dir=DATA_PACKAGES,
    package_data={name: ["*.toml", "**/*.toml", "**/*.json"] for name in DATA_PACKAGES},
)
