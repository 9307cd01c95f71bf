"""User-facing errors. Anything raised as an `AccelsimError` is printed as one line by the CLI,
never as a traceback: it is the user's input that is wrong, not the program."""

from __future__ import annotations

from collections.abc import Iterable


class AccelsimError(Exception):
    """Base of every error caused by user input (a bad profile, workload, flag or shape)."""


class ConfigError(AccelsimError):
    """A data file (profile, scenario) is invalid. The message names file, field and value."""

    def __init__(self, source: str, field: str, value: object, problem: str) -> None:
        self.source, self.field, self.value, self.problem = source, field, value, problem
        super().__init__(f"{source}: field '{field}' = {value!r}: {problem}")


class DataFileError(ConfigError):
    """A data file that cannot be read as one (missing, a directory, not UTF-8, not TOML).
    Its field is "<file>" and its value the path."""

    def __init__(self, path: str, problem: str) -> None:
        self.source, self.field, self.value, self.problem = path, "<file>", path, problem
        AccelsimError.__init__(self, f"{path}: {problem}")


class ShapeError(AccelsimError):
    """An op was given inputs whose shapes it cannot take. The message names op and shapes."""


class UnknownNameError(AccelsimError):
    """A name (model, profile, precision, ...) that is not known; the message lists the choices."""

    def __init__(self, what: str, name: str, choices: list[str]) -> None:
        super().__init__(f"unknown {what} {quoted(name)}; {did_you_mean(name, choices)}choose one "
                         f"of: {', '.join(sorted(choices))}")


def quoted(name: object) -> str:
    """`name` in quotes as a message shows it: 'name' as it is when printable and short,
    else its repr cut to 40 characters (a newline or NUL in a name cannot break the line)."""
    name = name if isinstance(name, str) else str(name)
    if name.isprintable() and len(name) <= 100:
        return f"'{name}'"
    return repr(name[:40] + ("..." if len(name) > 40 else ""))


def did_you_mean(name: str, choices: Iterable[object]) -> str:
    """'did you mean X? ' (or 'X or Y? ') for the choices closest to a mistyped `name`
    (difflib's ratio, the usual cut-off), else ''."""
    import difflib

    if not isinstance(name, str):
        return ""
    close = difflib.get_close_matches(name, [str(c) for c in choices], n=2)
    return f"did you mean {' or '.join(close)}? " if close else ""


class PrecisionError(AccelsimError):
    """A device cannot run the requested numeric format. `runs` lists the formats it can, so
    a caller that compares devices can pick one and say so."""

    def __init__(self, device: str, precision: str, runs: list[str] | tuple[str, ...],
                 message: str) -> None:
        self.device, self.precision, self.runs = device, precision, tuple(runs)
        super().__init__(message)
