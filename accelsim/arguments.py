"""Checks of the arguments of the Python entries (`accelsim.api`, the plans): each returns the
value in the form the code below takes, or raises `AccelsimError` with one line naming the
argument and the value it was given (a wrong type included: a number, None or a list where a
name is expected). A `pathlib.Path` (any `os.PathLike` of text) is taken wherever a path is.

    name_or_path(Path("dev.toml"), "hw", "a profile name or a .toml path")   # 'dev.toml'
    whole_numbers([1, 2], "batches", 1)                                      # [1, 2]
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from typing import Any

from accelsim.errors import AccelsimError
from accelsim.numbers import shown


def plain_scalar(value: Any) -> Any:
    """A numpy scalar (np.int64(8), np.float32(0.5), np.bool_(True), np.str_("a")) as the
    Python scalar it holds; anything else unchanged. The API takes what numpy hands out."""
    if type(value).__module__ == "numpy" and getattr(value, "ndim", None) == 0:
        return value.item()
    return value


def plain_list(value: Any) -> Any:
    """A one-dimensional numpy array as a list of Python scalars; anything else unchanged."""
    if type(value).__module__ == "numpy" and getattr(value, "ndim", None) == 1:
        return value.tolist()
    return value


def what(value: Any) -> str:
    """A value as an error quotes it: its type, then its repr cut short ("None" for None)."""
    return "None" if value is None else f"{type(value).__name__} {shown(value)}"


def name_or_path(value: Any, name: str, expected: str) -> str:
    """A name or path argument as the text the loaders take (a Path becomes its text); not
    empty, and encodable as a file name (no lone surrogate)."""
    if isinstance(value, os.PathLike):
        value = os.fspath(value)
        if not isinstance(value, str):
            raise AccelsimError(f"{name}: give a text path, not the bytes path {shown(value)}")
    if not isinstance(value, str) or not value.strip():
        got = "''" if value == "" else what(value)
        raise AccelsimError(f"{name}: give {expected}, not {got}")
    try:
        os.fsencode(value)
    except UnicodeEncodeError:
        raise AccelsimError(f"{name}: {shown(value)} cannot be a file name (a lone surrogate "
                            "character)") from None
    return value


def out_path(value: Any, name: str, expected: str) -> str:
    """A path to write: as `name_or_path`, and without a NUL character."""
    text = name_or_path(value, name, expected)
    if "\x00" in text:
        raise AccelsimError(f"{name}: {shown(text)} cannot be a file name (a NUL character)")
    return text


def names_or_paths(value: Any, name: str, expected: str) -> list[str]:
    """A non-empty list, tuple or numpy array of names or paths (each as `name_or_path`)."""
    value = plain_list(value)
    if not isinstance(value, list | tuple) or not value:
        raise AccelsimError(f"{name}: give a non-empty list of {expected}, not {what(value)}")
    return [name_or_path(v, f"{name}[{i}]", expected) for i, v in enumerate(value)]


def whole_number(value: Any, name: str, low: int, high: float | None = None) -> int:
    """An int (not a bool; a numpy integer taken as one) in [low, high]."""
    value = plain_scalar(value)
    if not isinstance(value, int) or isinstance(value, bool):
        raise AccelsimError(f"{name}: give a whole number, not {what(value)}")
    if value < low or (high is not None and value > high):
        top = f" to {high:,}" if high is not None else " or more"
        raise AccelsimError(f"{name} = {shown(value)}: give {low:,}{top}")
    return value


def whole_numbers(value: Any, name: str, low: int, high: float | None = None) -> list[int]:
    """A non-empty list, tuple or numpy array of whole numbers, each in [low, high]."""
    value = plain_list(value)
    if not isinstance(value, list | tuple) or not value:
        raise AccelsimError(f"{name}: give a non-empty list of whole numbers, not {what(value)}")
    return [whole_number(v, f"{name}[{i}]", low, high) for i, v in enumerate(value)]


def positive(value: Any, name: str, optional: bool = False) -> float | None:
    """A finite number above 0 (an int or float, not a bool); None when `optional`."""
    if value is None and optional:
        return None
    value = plain_scalar(value)
    ok = isinstance(value, int | float) and not isinstance(value, bool)
    if not ok or not math.isfinite(value) or value <= 0:
        raise AccelsimError(f"{name}: give a finite number above 0"
                            f"{' (or None)' if optional else ''}, not {what(value)}")
    return float(value)


def keywords(value: Any, name: str, taken: tuple[str, ...] = ()) -> dict[str, Any]:
    """None or a mapping of knob names to values, as a dict; a key of `taken` (set by the
    caller itself) is an error."""
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise AccelsimError(f"{name}: give a dict of knob names to values, not {what(value)}")
    for key in value:
        if not isinstance(key, str):
            raise AccelsimError(f"{name}: a knob name is text, not {what(key)}")
        if key in taken:
            raise AccelsimError(f"{name}: knob {key!r} is set by the call itself; give it "
                                "there")
    return dict(value)


def flag(value: Any, name: str, optional: bool = False) -> bool | None:
    """True or False (a bool, not 1 or "no"); None when `optional`."""
    if value is None and optional:
        return None
    if not isinstance(value, bool):
        raise AccelsimError(f"{name}: give True or False{' (or None)' if optional else ''}, "
                            f"not {what(value)}")
    return value
