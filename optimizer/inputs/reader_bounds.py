"""The bounds every input file is read within (size, nesting, expanded values and text, integer digits),
and the helpers the YAML and JSON readers share to name where in a file a problem sits (``inputs.reader``)."""

from __future__ import annotations

import os
import re
from typing import Any

from ..errors import GpuplanError

# The largest input file read, in bytes. A catalog or portfolio of thousands of jobs is a few MiB at
# most (the bundled ones are under 10 KiB), so 16 MiB only ever refuses the wrong file: a checkpoint,
# a log or a dataset passed by mistake, which would otherwise be read whole into memory.
MAX_FILE_BYTES = 16 * 2**20

# The deepest nesting of mappings/lists accepted, in YAML and JSON. gpuplan files use under ten
# levels; 64 leaves room for any hand-written structure while staying far below Python's recursion
# limit for every later step (composition, pydantic validation, dumping) that walks the tree.
MAX_DEPTH = 64

# The most values (every key, value and list item, counted once per alias use) a YAML document may
# expand to. A 5,000-job portfolio at ~50 values per job is 250,000; past 500,000 the document is an
# alias bomb or not a gpuplan file. The nested-anchor "billion laughs" pattern passes this at its 7th
# level (9**6 = 531,441), while the nodes actually held in memory are a few dozen.
MAX_NODES = 500_000

# The most text a YAML document may expand to through aliases: no more than the largest file we
# read could hold written out in full, so a long string repeated by ``*alias`` cannot become gigabytes
# when something later serialises it.
MAX_TEXT_CHARS = MAX_FILE_BYTES

# The most digits an integer may have. No gpuplan quantity (tokens, FLOPs, bytes, dollars) comes near
# 10**30; longer integers are typos or hostile, and Python refuses to parse ints past 4,300 digits.
MAX_INT_DIGITS = 30

StrPath = str | os.PathLike[str]


def _size(n: int) -> str:
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= scale:
            return f"{n / scale:.3g} {unit}"
    return f"{n} byte" if n == 1 else f"{n} bytes"


PathPart = str | int


def _dotted(parts: list[PathPart]) -> str:
    """``['jobs', 0, 'name']`` -> ``jobs[0].name``, the field notation of the schema errors."""
    out = ""
    for part in parts:
        out += f"[{part}]" if isinstance(part, int) else f".{part}"
    return out.lstrip(".")


def _under(parts: list[PathPart]) -> str:
    return f" under '{_dotted(parts)}'" if parts else ""


def _short(value: str, limit: int = 60) -> str:
    return value if len(value) <= limit else value[: limit - 3] + "..."


def _line_col(text: str, pos: int) -> tuple[int, int]:
    line = text.count("\n", 0, pos) + 1
    return line, pos - (text.rfind("\n", 0, pos) + 1) + 1


_SURROGATE = re.compile("[\ud800-\udfff]")


def _refuse_surrogates(data: Any, text: str, source: str, path: list[PathPart] | None = None) -> None:
    """A string of the data holding half a character: a ``\\ud800``-style escape (YAML or JSON) that is not
    one of a pair, which no file, terminal or JSON output can write. Only escapes make one, so data
    whose text has none is not walked."""
    if path is None and "\\u" not in text.lower():
        return
    path = path or []
    items = data.items() if isinstance(data, dict) else enumerate(data) if isinstance(data, list) else ()
    for key, value in items:
        where = [*path, key]
        if isinstance(key, str) and _SURROGATE.search(key) or isinstance(value, str) and _SURROGATE.search(value):
            raise GpuplanError(
                f"'{_dotted(where)}' holds a \\u escape of half a character (a lone surrogate, \\ud800-\\udfff), "
                "which is not text; write the character itself (in JSON, or both halves of its pair; in YAML, "
                "or its \\U0001f600-style escape)",
                source=source,
                field=_dotted(where),
            )
        _refuse_surrogates(value, text, source, where)


def _int_too_long(digits: str) -> bool:
    return len(digits.lstrip("+-")) > MAX_INT_DIGITS
