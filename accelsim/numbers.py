"""The one parser of numbers written as text: command-line lists, `--set` values, CSV cells
(request traces, measurements) and the Python API's string arguments.

    parse_int("128", "batch")          # 128
    parse_float("2.5e-3", "rate")      # 0.0025
    parse_int("1_0", "batch")          # AccelsimError: not a whole number

The rules are `simulate`'s for its options: ASCII digits only (no full-width or Arabic-Indic
digits, which Python's int() takes), no `_` separators, a sign, and for floats a decimal point
and `e` notation; no inf or nan. A value too long to be a sane number is refused, and an
error message shows at most its first 40 characters.
"""

from __future__ import annotations

import re

from accelsim.errors import AccelsimError

_INT = re.compile(r"[+-]?[0-9]+", re.ASCII)
_FLOAT = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?", re.ASCII)
# NB: 40 characters hold any int64 and any float's digits; longer is not a number we take.
MAX_NUMBER_CHARS = 40


def shown(value: object) -> str:
    """`value` as an error message quotes it (its repr): at most 40 characters of it, then an
    ellipsis, so that a 5,000-digit value is not echoed whole."""
    if isinstance(value, str):
        cut = value if len(value) <= MAX_NUMBER_CHARS else value[:MAX_NUMBER_CHARS] + "..."
        return repr(cut)
    try:
        text = repr(value)
    except ValueError:  # an int of more digits than Python converts (4,300)
        if isinstance(value, int):
            return f"<a number of about {value.bit_length() * 0.30103:,.0f} digits>"
        return f"<a {type(value).__name__}>"
    return text if len(text) <= MAX_NUMBER_CHARS else text[:MAX_NUMBER_CHARS] + "..."


def is_int_text(text: str) -> bool:
    """Whether `text` (spaces around it aside) is a whole number by these rules."""
    s = text.strip()
    return len(s) <= MAX_NUMBER_CHARS and _INT.fullmatch(s) is not None


def is_float_text(text: str) -> bool:
    """Whether `text` (spaces around it aside) is a number by these rules."""
    s = text.strip()
    return len(s) <= MAX_NUMBER_CHARS and _FLOAT.fullmatch(s) is not None


def parse_int(text: str, what: str) -> int:
    """`text` as a whole number; AccelsimError naming `what` and the value if it is not one."""
    if not isinstance(text, str) or not is_int_text(text):
        raise AccelsimError(f"{what} = {shown(text)}: not a whole number (ASCII digits, "
                            "no '_')")
    return int(text.strip())


def parse_float(text: str, what: str) -> float:
    """`text` as a finite number; AccelsimError naming `what` and the value if it is not."""
    if not isinstance(text, str) or not is_float_text(text):
        raise AccelsimError(f"{what} = {shown(text)}: not a number (ASCII digits, a point, "
                            "e notation; no '_')")
    value = float(text.strip())
    if value in (float("inf"), float("-inf")):
        raise AccelsimError(f"{what} = {shown(text)}: too large")
    return value
