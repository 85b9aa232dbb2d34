"""The one exception family of gpuplan.

Every error a user can cause is a ``GpuplanError`` whose message names the file, the field and
the fix. Only the CLI turns these into exit code 2; library callers catch them as exceptions.
"""

from __future__ import annotations

import difflib

_CONTROL = {c: f"\\x{c:02x}" for c in [*range(0x20), *range(0x7F, 0xA0)]}


def printable(text: str, keep: str = "") -> str:
    """``text`` with its control characters (C0, DEL, C1; those in ``keep`` excepted) written as ``\\xNN``:
    a file name or key quoted in a message can neither break it into lines nor send escape sequences to
    the terminal."""
    return text.translate({c: e for c, e in _CONTROL.items() if chr(c) not in keep})


class GpuplanError(Exception):
    """Bad input: the message says where (file, field) and how to fix it."""

    def __init__(self, message: str, *, source: str | None = None, field: str | None = None):
        self.source = source
        self.field = field
        self.reason = message
        super().__init__(self._compose())

    def _compose(self) -> str:
        where = []
        if self.source:
            where.append(printable(str(self.source)))
        if self.field:
            where.append(f"field '{printable(self.field)}'")
        prefix = ", ".join(where)
        return f"{prefix}: {self.reason}" if prefix else self.reason

    def located(self, source: str | None = None, field: str | None = None) -> GpuplanError:
        """The same error with its location filled in where it was missing."""
        return type(self)(self.reason, source=self.source or source, field=self.field or field)


class UnitError(GpuplanError, ValueError):
    """A value could not be read in the unit its field expects."""


class CatalogError(GpuplanError):
    """Unknown catalog, SKU or offer, or a malformed catalog file."""


class JobError(GpuplanError):
    """A job, portfolio or hand-picked configuration that cannot be planned as written."""


class ArgumentError(JobError):
    """A bad argument of a library call: ``field`` is the parameter's name (``gpus``, ``deadline``).

    The library never names a command-line flag; the CLI shows the parameter as the flag it maps to."""

    def __init__(self, message: str, *, field: str, source: str | None = None):
        super().__init__(message, source=source, field=field)

    def located(self, source: str | None = None, field: str | None = None) -> ArgumentError:
        return ArgumentError(self.reason, source=self.source or source, field=self.field or field or "")


def did_you_mean(name: str, choices: list[str]) -> str:
    close = difflib.get_close_matches(name.lower(), [c.lower() for c in choices], n=3, cutoff=0.5)
    lookup = {c.lower(): c for c in choices}
    if close:
        return " Did you mean " + " or ".join(repr(lookup[c]) for c in close) + "?"
    return ""
