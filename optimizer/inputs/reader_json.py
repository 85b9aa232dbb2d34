"""JSON text to plain Python data (``load_json``): duplicate keys, ``NaN``/``Infinity``, integers too long
to mean anything and excessive nesting refused, each naming its line, column and field (``inputs.reader``)."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Iterator
from typing import Any, NoReturn

from ..errors import GpuplanError
from .reader_bounds import (
    MAX_DEPTH,
    MAX_INT_DIGITS,
    PathPart,
    _dotted,
    _int_too_long,
    _line_col,
    _refuse_surrogates,
    _short,
    _under,
)

# A JSON string (escapes included) or one bracket: enough to measure depth outside strings.
_JSON_NESTING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"|[\[\]{}]', re.DOTALL)
# A JSON string, a punctuation mark, or a bare literal (number, true, false, null, NaN, -Infinity).
_JSON_TOKEN = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"|[\[\]{}:,]|[^\s\[\]{}:,"]+', re.DOTALL)
_JSON_INT = re.compile(r"-?[0-9]+")


class _JsonRefusal(Exception):
    """Raised from a ``json.loads`` hook; ``load_json`` then finds where and says it properly."""

    def __init__(self, kind: str, token: str) -> None:
        super().__init__(kind, token)
        self.kind = kind
        self.token = token


def _check_json_depth(text: str, source: str) -> None:
    depth = 0
    for match in _JSON_NESTING.finditer(text):
        char = text[match.start()]
        if char in "[{":
            depth += 1
            if depth > MAX_DEPTH:
                line, column = _line_col(text, match.start())
                raise GpuplanError(
                    f"the JSON nests more than {MAX_DEPTH} levels of objects and arrays (at line {line}, "
                    f"column {column}); check that this is the right file",
                    source=source,
                )
        elif char in "]}":
            depth -= 1


def _json_pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise _JsonRefusal("duplicate", key)
        out[key] = value
    return out


def _json_constant(name: str) -> NoReturn:
    raise _JsonRefusal("constant", name)


def _json_int(text: str) -> int:
    if _int_too_long(text):
        raise _JsonRefusal("long int", text)
    return int(text)


def _json_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise _JsonRefusal("overflow", text)
    return value


def _json_events(text: str) -> Iterator[tuple[str, int, list[PathPart], str, int]]:
    """Walk JSON tokens keeping the field path: ``("duplicate", pos, path, key, first_pos)`` and
    ``("literal", pos, path, token, 0)``. Only used once a hook has refused something, to say where."""
    frames: list[dict[str, Any]] = []
    for match in _JSON_TOKEN.finditer(text):
        token, pos = match.group(), match.start()
        top = frames[-1] if frames else None
        if token in "{[":
            frames.append({"keys": {}, "key": None, "want_key": True} if token == "{" else {"index": 0})
        elif token in "}]":
            if not frames:
                return
            frames.pop()
        elif token == ":":
            if top is not None and "keys" in top:
                top["want_key"] = False
        elif token == ",":
            if top is not None:
                if "keys" in top:
                    top["want_key"] = True
                else:
                    top["index"] += 1
        elif token.startswith('"'):
            if top is not None and "keys" in top and top["want_key"]:
                try:
                    key = json.loads(token)
                except ValueError:
                    key = token[1:-1]
                path = [f["key"] if "keys" in f else f["index"] for f in frames[:-1]]
                if key in top["keys"]:
                    yield "duplicate", pos, path, key, top["keys"][key]
                else:
                    top["keys"][key] = pos
                top["key"] = key
        else:
            path = [f["key"] if "keys" in f else f["index"] for f in frames]
            yield "literal", pos, path, token, 0


def _json_refusal(refusal: _JsonRefusal, text: str, source: str) -> GpuplanError:
    matches: Callable[[str], bool]
    if refusal.kind == "duplicate":
        for kind, pos, path, key, first in _json_events(text):
            if kind == "duplicate":
                line, _ = _line_col(text, pos)
                return GpuplanError(
                    f"duplicate key '{_short(key)}'{_under(path)} at line {line} "
                    f"(first at line {_line_col(text, first)[0]}); keep one (JSON readers silently keep the "
                    f"last, which hides mistakes)",
                    source=source,
                    field=_dotted([*path, key]),
                )
        return GpuplanError(f"duplicate key '{_short(refusal.token)}' in a JSON object; keep one", source=source)
    if refusal.kind == "constant":

        def matches(token: str) -> bool:
            return token == refusal.token

        reason = f"{refusal.token} is not valid JSON and not a usable number; write a finite number"
    elif refusal.kind == "long int":

        def matches(token: str) -> bool:
            return _JSON_INT.fullmatch(token) is not None and _int_too_long(token)

        reason = (
            f"the integer {_short(refusal.token, 40)} has more than {MAX_INT_DIGITS} digits, more than any "
            f"real quantity needs; check for a typo"
        )
    else:

        def matches(token: str) -> bool:
            try:
                return not math.isfinite(float(token))
            except ValueError:
                return False

        reason = f"the number {_short(refusal.token, 40)} is too large to represent; check for a typo"
    for kind, pos, path, token, _ in _json_events(text):
        if kind == "literal" and matches(token):
            line, column = _line_col(text, pos)
            return GpuplanError(
                f"{reason} (at line {line}, column {column})", source=source, field=_dotted(path) or None
            )
    return GpuplanError(reason, source=source)


def load_json(text: str, source: str) -> Any:
    """The data of a JSON document, read strictly (see the module docstring).

    ``source`` is the file path (or a label) used in error messages.
    """
    _check_json_depth(text, source)  # before parsing: the C parser recurses once per level
    try:
        data = json.loads(
            text,
            object_pairs_hook=_json_pairs,
            parse_constant=_json_constant,
            parse_int=_json_int,
            parse_float=_json_float,
        )
    except _JsonRefusal as refusal:
        raise _json_refusal(refusal, text, source) from None
    except json.JSONDecodeError as exc:
        raise GpuplanError(
            f"malformed JSON at line {exc.lineno}, column {exc.colno}: {exc.msg}; fix the syntax there "
            f"(a missing comma, quote or bracket is the usual cause)",
            source=source,
        ) from None
    except RecursionError:  # a backstop: the depth check above should refuse this first
        raise GpuplanError(f"the JSON nests too deeply to read (limit {MAX_DEPTH} levels)", source=source) from None
    _refuse_surrogates(data, text, source)
    return data
