"""Mutations of data files, as a hostile user (or a bad editor) would make them.

Every choice goes through a `Picker`, so the same code runs under hypothesis (`DrawPicker`:
shrinkable) and from a seed (`RandomPicker`: the benchmark's 10,000 reproducible cases).

    doc = tomllib.loads(text)
    mutate_doc(picker, doc)                  # drop, add, retype or push a value to an extreme
    text = damage_text(picker, text)         # truncate, bad bytes, invalid TOML, bad literals
"""

from __future__ import annotations

import math
import random
import re
from collections.abc import Sequence
from typing import Any, Protocol, TypeVar

T = TypeVar("T")


class Picker(Protocol):
    """Where every random choice comes from."""

    def choice(self, options: Sequence[T]) -> T: ...

    def integer(self, low: int, high: int) -> int: ...

    def chance(self, p: float) -> bool: ...


class RandomPicker:
    """Choices from a seeded `random.Random` (deterministic under the seed)."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng

    def choice(self, options: Sequence[T]) -> T:
        return options[self.rng.randrange(len(options))]

    def integer(self, low: int, high: int) -> int:
        return self.rng.randint(low, high)

    def chance(self, p: float) -> bool:
        return self.rng.random() < p


# Numbers at and beyond every edge: zero, negatives, the float limits, denormals, integers
# past int64, and NaN/inf. Strings, lists, booleans and tables stand for the wrong type.
EXTREME_NUMBERS: tuple[Any, ...] = (
    0, -1, 0.0, -0.0, 1, -1e-9, float("nan"), float("inf"), float("-inf"), 1e308, -1e308,
    5e-324, 1e-10, 1e-300, 1.5, 2**31, 2**53 + 1, 2**63 - 1, 2**63, 2**64, 10**30, 1e18, 1e12,
)
WRONG_TYPES: tuple[Any, ...] = (
    "", " ", "x", "1", "nan", "a" * 300, "../../../etc/passwd", "no-such-thing.toml", "/",
    "\u00e9\u20ac", "\u0000", [], [1, 2], ["fp16", "fp16"], True, False, {}, {"x": 1},
)
SCALES = (1e-300, 1e-12, 1e-6, 1e-3, 10.0, 1e3, 1e6, 1e12, 1e300)
NUMBER_LITERALS = (
    "nan", "inf", "-inf", "+inf", "0", "-0", "-1", "1e308", "1e309", "5e-324", "1e-10",
    "99999999999999999999", "9223372036854775807", "-9223372036854775808", "1.5", "0.0",
    "true", '"12"', "[]", "{}", "0x7fffffffffffffff", "1e-400", "9" * 5000,
)
BAD_BYTES = (b"\xff", b"\xfe\xff", b"\xc3", b"\x00", b"\xed\xa0\x80", b"\x80abc", b"\xef\xbb\xbf")
BAD_LINES = (
    "x = = 1", "[[", "[compute", "= 3", "key = ", 'a = "unterminated', "a.b.c = 1\na = 2",
    "[sources]", "[[sources]]", "\t\t\t", "a = 1\na = 1", "[a]\n[a]", "b = [1, 2", "c = {",
    "d = 1979-05-27T07:32:00Z", "e = '''\n",
)
UNKNOWN_KEYS = ("bogus", "clock_thz", "tdp_kw", "capacity_pb", "peak_tflops_fp6_dense",
                "bandwidth_mb_s", "sources", "class", "count", "latency_ms", "x" * 200)


def leaves(doc: dict[str, Any], path: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    """Every key path in `doc`, tables included (depth first)."""
    out: list[tuple[str, ...]] = []
    for key, value in doc.items():
        out.append((*path, key))
        if isinstance(value, dict):
            out.extend(leaves(value, (*path, key)))
    return out


def _parent(doc: dict[str, Any], path: tuple[str, ...]) -> dict[str, Any]:
    node = doc
    for key in path[:-1]:
        node = node[key]
    return node


def extreme_for(picker: Picker, value: Any) -> Any:
    """A replacement for `value`: a scaled copy of a number (plausible-looking but far off),
    an extreme number, or a value of the wrong type."""
    is_number = isinstance(value, int | float) and not isinstance(value, bool)
    roll = picker.integer(0, 9)
    if is_number and roll < 4 and math.isfinite(value):
        scaled = value * picker.choice(SCALES)
        return int(scaled) if isinstance(value, int) and abs(scaled) < 1e30 else scaled
    if is_number and roll < 5:
        return -value
    if roll < 8:
        return picker.choice(EXTREME_NUMBERS)
    return picker.choice(WRONG_TYPES)


def mutate_doc(picker: Picker, doc: dict[str, Any], rounds: int | None = None) -> list[str]:
    """Apply 1-3 mutations to `doc` in place; returns what was done, for reproducers."""
    done: list[str] = []
    for _ in range(rounds or picker.integer(1, 3)):
        paths = leaves(doc)
        op = picker.choice(("extreme", "extreme", "extreme", "drop", "add", "retable"))
        if not paths:
            op = "add"
        if op == "add":
            where = picker.choice([(), *[p for p in paths if isinstance(_lookup(doc, p), dict)]])
            key = picker.choice(UNKNOWN_KEYS)
            value = picker.choice((1, 1.0, "x", True, {}, float("nan")))
            _lookup(doc, where)[key] = value
            done.append(f"add {'.'.join((*where, key))} = {value!r}")
            continue
        path = picker.choice(paths)
        parent, key = _parent(doc, path), path[-1]
        if op == "drop":
            del parent[key]
            done.append(f"drop {'.'.join(path)}")
        elif op == "retable":
            parent[key] = {} if not isinstance(parent[key], dict) else picker.choice((1, "x"))
            done.append(f"retable {'.'.join(path)} = {parent[key]!r}")
        else:
            parent[key] = extreme_for(picker, parent[key])
            done.append(f"set {'.'.join(path)} = {parent[key]!r}"[:200])
    return done


PLAUSIBLE_SCALES = (1e-6, 1e-3, 0.01, 0.1, 0.5, 2.0, 10.0, 100.0, 1e3, 1e6)
# Absolute values near the floors and ceilings of the physical ranges in common units.
EDGE_VALUES = (1e-9, 1e-6, 1e-3, 1, 1e3, 1e6, 1e9, 1e12)


def scale_numbers(picker: Picker, doc: dict[str, Any]) -> list[str]:
    """Multiply 1-3 numbers of `doc` (not its sources) by factors a loader may well accept,
    so that the run goes on: valid but unusual hardware, where nonsense answers hide."""
    paths = [p for p in leaves(doc) if p[0] != "sources"
             and isinstance(_lookup(doc, p), int | float)
             and not isinstance(_lookup(doc, p), bool)]
    done: list[str] = []
    for _ in range(min(len(paths), picker.integer(1, 3))):
        path = picker.choice(paths)
        parent, key = _parent(doc, path), path[-1]
        value = (picker.choice(EDGE_VALUES) if picker.chance(0.3)
                 else parent[key] * picker.choice(PLAUSIBLE_SCALES))
        parent[key] = max(1, round(value)) if isinstance(parent[key], int) else value
        done.append(f"set {'.'.join(path)} = {parent[key]!r}")
    return done


def _lookup(doc: dict[str, Any], path: tuple[str, ...]) -> Any:
    node: Any = doc
    for key in path:
        node = node[key]
    return node


_NUMBER = re.compile(r"(?<=[=\[,]\s)-?\d[\d_]*(\.\d+)?([eE][-+]?\d+)?(?=\s*[\],\n#])")


def replace_number_literal(picker: Picker, text: str) -> str:
    """`text` with one number literal replaced by an extreme literal (structure untouched)."""
    spots = list(_NUMBER.finditer(text))
    if not spots:
        return text
    m = picker.choice(spots)
    return text[:m.start()] + picker.choice(NUMBER_LITERALS) + text[m.end():]


def damage_text(picker: Picker, text: str) -> bytes:
    """`text` damaged as bytes: truncated, with bytes that are not UTF-8, a line that is not
    TOML, a line duplicated, or a number literal replaced."""
    data = text.encode()
    op = picker.choice(("truncate", "bytes", "line", "duplicate", "number", "number", "empty"))
    if op == "truncate":
        return data[:picker.integer(0, max(len(data) - 1, 0))]
    if op == "bytes":
        at = picker.integer(0, len(data))
        return data[:at] + picker.choice(BAD_BYTES) + data[at:]
    lines = text.split("\n")
    if op == "line":
        lines.insert(picker.integer(0, len(lines)), picker.choice(BAD_LINES))
    elif op == "duplicate" and lines:
        at = picker.integer(0, len(lines) - 1)
        lines.insert(at, lines[at])
    elif op == "number":
        return replace_number_literal(picker, text).encode()
    else:
        return picker.choice((b"", b"\n", b"# only a comment\n", b"\xef\xbb\xbf"))
    return "\n".join(lines).encode()
