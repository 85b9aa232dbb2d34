"""Safe, bounded reading of every input file: the one place that touches raw bytes and raw YAML/JSON.

What lives here:

* ``read_text`` -- bytes from disk to ``str``. Only regular files are read (a FIFO, a device such as
  ``/dev/zero``, a socket or a directory is refused before it is opened for reading), at most
  ``max_bytes`` are read even if the file grows meanwhile, and the text must be UTF-8. Each file read
  is remembered (``was_read``), so that no output of the same command can replace it.
* ``load_yaml`` -- YAML text to plain Python data with a strict SafeLoader: duplicate keys are errors,
  scalars follow the YAML 1.2 core schema (``1:30``, ``yes`` and ``off`` stay strings, ``0755`` is
  755), aliases cannot expand the document past ``MAX_NODES`` values or ``MAX_TEXT_CHARS`` of text
  (the "billion laughs" pattern fails while composing, before anything is materialised), nesting is
  capped at ``MAX_DEPTH``, and merge keys (``<<: *defaults``) keep working.
* ``load_json`` -- JSON text (Hugging Face ``config.json``) with duplicate keys, ``NaN``/``Infinity``,
  numbers too large to mean anything, and excessive nesting refused.
* ``read_yaml_file`` / ``read_json_file`` -- the two combined.

Every problem is a ``GpuplanError`` whose ``source`` is the file path, whose ``field`` is the dotted
field path where one is known, and whose message says where (line, column) and how to fix it. The
schema layer above validates meaning; this layer only guarantees that what reaches it is a finite,
reasonably sized tree of dicts, lists, strings, numbers, booleans, dates and ``None``.
"""

from __future__ import annotations

import errno
import json
import math
import os
import re
import stat
from collections.abc import Callable, Hashable, Iterator
from pathlib import Path
from typing import Any, NoReturn

import yaml
from yaml.constructor import ConstructorError
from yaml.events import (
    AliasEvent,
    MappingEndEvent,
    MappingStartEvent,
    SequenceEndEvent,
    SequenceStartEvent,
)
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from ..errors import GpuplanError, printable

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

# ---------------------------------------------------------------------------------------------------
# Files
# ---------------------------------------------------------------------------------------------------


def _size(n: int) -> str:
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= scale:
            return f"{n / scale:.3g} {unit}"
    return f"{n} byte" if n == 1 else f"{n} bytes"


def file_kind(mode: int) -> str:
    """What a path that is not a regular file is, in words (from its ``st_mode``)."""
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISFIFO(mode):
        return "a named pipe (FIFO)"
    if stat.S_ISCHR(mode):
        return "a character device"
    if stat.S_ISBLK(mode):
        return "a block device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "a special file"


def _not_regular(what: str, mode: int, source: str) -> GpuplanError:
    return GpuplanError(
        f"this {what} path is {file_kind(mode)}, not a regular file; give the path of the {what} file itself",
        source=source,
    )


def link_problem(path: StrPath, what: str) -> str | None:
    """What is wrong with ``path`` as a symbolic link that cannot be followed to a file (a loop, a dangling
    link), in words; None where it is no link, or one that leads somewhere."""
    try:
        if not os.path.islink(path) or os.path.exists(path):
            return None
        os.stat(path)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            return (
                f"this {what} path is a symbolic link loop (a link that leads back to itself, directly or through "
                f"other links); point the link at the {what} file"
            )
        target = printable(os.readlink(path)) if os.path.islink(path) else "?"
        return f"this {what} path is a symbolic link to {target!r}, which does not exist; fix the link or the path"
    except ValueError:
        return None
    return None


def resolved(path: StrPath, what: str) -> Path:
    """``path`` with every link followed, as files are compared by (the one place gpuplan resolves a path it
    reads): a link loop, a dangling link, a name too long or one holding a NUL byte is bad input naming the
    file, never Python's ``RuntimeError: Symlink loop``."""
    source = os.fspath(path)
    if "\0" in source:
        raise GpuplanError(
            f"this {what} path holds a NUL byte (\\0), which no file name can; check the path", source=source
        )
    try:
        return Path(os.path.realpath(source, strict=True))
    except OSError as exc:
        raise _os_error(exc, what, source) from None


def _os_error(exc: OSError, what: str, source: str) -> GpuplanError:
    link = link_problem(source, what) if exc.errno in (errno.ENOENT, errno.ELOOP) else None
    if link is not None:
        return GpuplanError(link, source=source)
    if exc.errno == errno.ELOOP:  # a folder on the way is a link loop
        return GpuplanError(
            f"a folder on this {what} path is a symbolic link loop (a link that leads back to itself); fix the "
            "link or the path",
            source=source,
        )
    if exc.errno == errno.ENAMETOOLONG:
        return GpuplanError(
            f"this {what} path is longer than the system allows for a file name (ENAMETOOLONG); check the path",
            source=source,
        )
    if isinstance(exc, (FileNotFoundError, NotADirectoryError)):
        return GpuplanError(f"{what} file not found; check the path", source=source)
    if isinstance(exc, PermissionError):
        return GpuplanError(
            f"permission denied reading this {what} file; check the permissions of the file and its folder",
            source=source,
        )
    if isinstance(exc, IsADirectoryError):
        return _not_regular(what, stat.S_IFDIR, source)
    reason = exc.strerror or exc.__class__.__name__
    return GpuplanError(f"cannot read this {what} file ({reason}); check the path", source=source)


def _too_big(what: str, max_bytes: int, size: int | None, source: str) -> GpuplanError:
    actual = f"it is {_size(size)}" if size is not None else "it holds more than that"
    return GpuplanError(
        f"this {what} file is larger than the {_size(max_bytes)} limit ({actual}); "
        f"{what} files are small text files, so check that this is the right file",
        source=source,
    )


# (device, inode) of every file this process has read: no output may replace one (``present.output``),
# whatever path named it (a job file a portfolio names, a catalog's include, a symlink to either).
_read: set[tuple[int, int]] = set()


def forget_reads() -> None:
    """Start a new command's record of files read: in a long-lived process (tests, a service running
    commands) a file's inode is reused once it is deleted, and an old record would refuse a new file."""
    _read.clear()


def was_read(path: StrPath) -> bool:
    """Whether ``path`` is (a link to) a file this process has read as input."""
    try:
        info = os.stat(path)
    except (OSError, ValueError):
        return False
    return (info.st_dev, info.st_ino) in _read


def read_text(path: StrPath, what: str, *, max_bytes: int = MAX_FILE_BYTES) -> str:
    """The UTF-8 text of the regular file at ``path``, at most ``max_bytes`` long.

    ``what`` names the file in messages ("job", "catalog", "portfolio", "config.json"). The file type
    is checked with ``os.stat`` before the file is opened (opening a FIFO for reading would wait for a
    writer forever), again on the open descriptor (the path may have been swapped in between), and at
    most ``max_bytes + 1`` bytes are ever read, so neither ``/dev/zero``, a ``/proc`` file whose size
    reads as 0, nor a file growing while read can exhaust memory. A leading byte-order mark is dropped.
    """
    source = os.fspath(path)
    if "\0" in source:  # os.stat would raise ValueError: no file name holds a NUL byte
        raise GpuplanError(
            f"this {what} path holds a NUL byte (\\0), which no file name can; check the path", source=source
        )
    try:
        info = os.stat(source)
    except OSError as exc:
        raise _os_error(exc, what, source) from None
    if not stat.S_ISREG(info.st_mode):
        raise _not_regular(what, info.st_mode, source)
    if info.st_size > max_bytes:
        raise _too_big(what, max_bytes, info.st_size, source)

    # O_NONBLOCK: should the path have become a FIFO since the stat, open returns instead of waiting.
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_BINARY", 0)
    try:
        fd = os.open(source, flags)
    except OSError as exc:
        raise _os_error(exc, what, source) from None
    try:
        opened = os.fstat(fd)
        mode = opened.st_mode
        if not stat.S_ISREG(mode):
            raise _not_regular(what, mode, source)
        _read.add((opened.st_dev, opened.st_ino))
        chunks: list[bytes] = []
        left = max_bytes + 1
        while left > 0:
            chunk = os.read(fd, min(left, 2**20))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
    except OSError as exc:
        raise _os_error(exc, what, source) from None
    finally:
        os.close(fd)
    data = b"".join(chunks)
    if len(data) > max_bytes:
        raise _too_big(what, max_bytes, None, source)

    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        byte = data[exc.start : exc.start + 1].hex()
        raise GpuplanError(
            f"this {what} file is not UTF-8 text: byte 0x{byte} at byte offset {exc.start} (line {line}) "
            f"is not valid UTF-8; save the file as UTF-8, or check that this is the right file",
            source=source,
        ) from None
    return text.removeprefix("\ufeff")  # a byte-order mark some editors add


def read_yaml_file(path: StrPath, what: str) -> Any:
    """``read_text`` then ``load_yaml``: the data of a job, catalog or portfolio file."""
    return load_yaml(read_text(path, what), os.fspath(path))


def read_bundled_yaml(path: StrPath, what: str) -> Any:
    """A YAML file shipped with gpuplan (its catalogs and model presets), read with libyaml's C loader where
    PyYAML has it: the pure-Python strict loader took about 0.2 s of every command on the bundled catalogs.
    The files are gpuplan's own, and a test reads each with ``load_yaml`` too and finds the same data, so
    the strict checks still hold for them; a user's file always takes ``read_yaml_file``."""
    loader = getattr(yaml, "CSafeLoader", None)
    if loader is None:  # a PyYAML built without libyaml
        return read_yaml_file(path, what)
    return yaml.load(read_text(path, what), Loader=loader)  # noqa: S506 - a safe loader


def read_json_file(path: StrPath, what: str) -> Any:
    """``read_text`` then ``load_json``: the data of a ``config.json`` or other JSON input."""
    return load_json(read_text(path, what), os.fspath(path))


# ---------------------------------------------------------------------------------------------------
# Shared helpers
# ---------------------------------------------------------------------------------------------------

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


# ---------------------------------------------------------------------------------------------------
# YAML
# ---------------------------------------------------------------------------------------------------

_NULL = "tag:yaml.org,2002:null"
_BOOL = "tag:yaml.org,2002:bool"
_INT = "tag:yaml.org,2002:int"
_FLOAT = "tag:yaml.org,2002:float"
_MERGE = "tag:yaml.org,2002:merge"
_VALUE_TAGS = frozenset({_NULL, _BOOL, _INT, _FLOAT})
# Replaced by the YAML 1.2 core rules below; ``value`` (a bare ``=``) has no safe constructor and
# ``yaml`` is documentation-only, so both simply become strings.
_DROPPED_TAGS = _VALUE_TAGS | {"tag:yaml.org,2002:value", "tag:yaml.org,2002:yaml"}

_CORE_NULL = re.compile(r"^(?:~|null|Null|NULL|)$")
_CORE_BOOL = re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$")
_CORE_INT = re.compile(r"^(?:[-+]?[0-9]+|0o[0-7]+|0x[0-9a-fA-F]+)$")
_CORE_FLOAT = re.compile(
    r"^(?:[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?"
    r"|[-+]?\.(?:inf|Inf|INF)"
    r"|\.(?:nan|NaN|NAN))$"
)


class _Size:
    """How big a node is once every alias in it is expanded: values, characters, nesting levels."""

    __slots__ = ("chars", "height", "nodes")

    def __init__(self, nodes: int, chars: int, height: int) -> None:
        self.nodes = nodes
        self.chars = chars
        self.height = height


class _StrictLoader(yaml.SafeLoader):
    """SafeLoader with YAML 1.2 core scalars, no duplicate keys, and bounded expansion and depth.

    Composition is overridden to keep, for every finished mapping/list, its expanded size (values
    and characters counting each alias use in full) and height, memoised per node. Because aliased
    nodes are finished before they can be referenced, each size is a sum over already-known
    children, so a tiny file of nested anchors is refused after a few dozen additions.
    """

    def __init__(self, stream: str, source: str) -> None:
        super().__init__(stream)
        self.source = source
        self._path: list[PathPart] = []
        self._open: set[Node] = set()  # collections being composed, i.e. ancestors of the cursor
        self._sizes: dict[Node, _Size] = {}

    # -- errors ------------------------------------------------------------------------------------

    def _fail(self, message: str, field: list[PathPart] | None = None) -> NoReturn:
        path = self._path if field is None else field
        raise GpuplanError(message, source=self.source, field=_dotted(path) or None)

    # -- composition ---------------------------------------------------------------------------------

    def compose_node(self, parent: Node | None, index: Any) -> Node | None:
        if self.check_event(AliasEvent):
            event = self.peek_event()
            target = self.anchors.get(event.anchor)
            if target is not None and target in self._open:
                self._fail(
                    f"alias '*{event.anchor}' at line {event.start_mark.line + 1} refers to a mapping or list "
                    f"that contains it, which makes an endless structure; replace the alias with the values it needs"
                )
        elif self.check_event(SequenceStartEvent, MappingStartEvent) and len(self._open) >= MAX_DEPTH:
            self._fail(self._too_deep_message(self.peek_event().start_mark.line + 1), field=[])
        return super().compose_node(parent, index)

    def _too_deep_message(self, line: int) -> str:
        return (
            f"the YAML nests more than {MAX_DEPTH} levels of mappings and lists (at line {line}); "
            f"gpuplan files need only a few levels, so check for a runaway of '[', '{{' or indentation"
        )

    def _size_of(self, node: Node) -> _Size:
        if isinstance(node, ScalarNode):
            return _Size(1, len(node.value), 0)
        return self._sizes[node]  # finished: open nodes are refused as recursive aliases above

    def _add_child(self, total: _Size, child: Node, line: int) -> None:
        size = self._size_of(child)
        total.nodes += size.nodes
        total.chars += size.chars
        total.height = max(total.height, size.height + 1)
        if total.nodes > MAX_NODES:
            self._fail(
                f"the YAML expands to more than {MAX_NODES:,} values (reached at line {line}); anchors and "
                f"aliases (&name, *name) repeat their whole content at every use, so use fewer aliases "
                f"or split the file"
            )
        if total.chars > MAX_TEXT_CHARS:
            self._fail(
                f"the YAML expands to more than {_size(MAX_TEXT_CHARS)} of text (reached at line {line}); "
                f"aliases (*name) repeat their whole content at every use, so use fewer aliases"
            )
        # Ancestors still open, plus this collection, plus the child's own levels (an alias brings
        # its whole height along).
        if len(self._open) - 1 + total.height > MAX_DEPTH:
            self._fail(self._too_deep_message(line), field=[])

    def compose_sequence_node(self, anchor: Any) -> SequenceNode:
        # Built as PyYAML's Composer does, with path and size bookkeeping around each item.
        start = self.get_event()
        tag = start.tag
        if tag is None or tag == "!":
            tag = self.resolve(SequenceNode, None, start.implicit)
        node = SequenceNode(tag, [], start.start_mark, None, flow_style=start.flow_style)
        if anchor is not None:
            self.anchors[anchor] = node
        self._open.add(node)
        total = _Size(1, 0, 1)
        index = 0
        while not self.check_event(SequenceEndEvent):
            line = self.peek_event().start_mark.line + 1
            self._path.append(index)
            item = self.compose_node(node, index)
            assert item is not None
            node.value.append(item)
            self._add_child(total, item, line)
            self._path.pop()
            index += 1
        node.end_mark = self.get_event().end_mark
        self._open.discard(node)
        self._sizes[node] = total
        return node

    def compose_mapping_node(self, anchor: Any) -> MappingNode:
        start = self.get_event()
        tag = start.tag
        if tag is None or tag == "!":
            tag = self.resolve(MappingNode, None, start.implicit)
        node = MappingNode(tag, [], start.start_mark, None, flow_style=start.flow_style)
        if anchor is not None:
            self.anchors[anchor] = node
        self._open.add(node)
        total = _Size(1, 0, 1)
        seen: dict[Hashable, Node] = {}
        while not self.check_event(MappingEndEvent):
            line = self.peek_event().start_mark.line + 1
            key = self.compose_node(node, None)
            assert key is not None
            self._add_child(total, key, line)
            part: PathPart = key.value if isinstance(key, ScalarNode) else "?"
            identity = self._key_identity(key)
            if identity is not None:
                first = seen.get(identity)
                if first is not None:
                    merge_hint = " (merge several with one key: <<: [*a, *b])" if key.tag == _MERGE else ""
                    self._fail(
                        f"duplicate key '{_short(str(part))}'{_under(self._path)} at line {line} "
                        f"(first at line {first.start_mark.line + 1}); keep one{merge_hint}",
                        field=[*self._path, part],
                    )
                seen[identity] = key
            line = self.peek_event().start_mark.line + 1
            self._path.append(part)
            value = self.compose_node(node, key)
            assert value is not None
            node.value.append((key, value))
            self._add_child(total, value, line)
            self._path.pop()
        node.end_mark = self.get_event().end_mark
        self._open.discard(node)
        self._sizes[node] = total
        return node

    def _key_identity(self, key: Node) -> Hashable | None:
        """What a key becomes in the dict, so that ``1``/``01`` or ``null``/``~`` count as the same."""
        if not isinstance(key, ScalarNode):
            return None  # a mapping or list as a key is refused at construction (unhashable)
        if key.tag in _VALUE_TAGS:
            return ("value", self.yaml_constructors[key.tag](self, key))
        return ("text", key.tag, key.value)

    # -- construction: YAML 1.2 core numbers ---------------------------------------------------------

    def construct_core_int(self, node: ScalarNode) -> int:
        text = self.construct_scalar(node).replace("_", "")
        try:
            if text.startswith("0o"):
                digits, base = text[2:], 8
            elif text.startswith("0x"):
                digits, base = text[2:], 16
            else:
                digits, base = text, 10
            if _int_too_long(digits):
                self._fail(
                    f"the integer at line {node.start_mark.line + 1} has more than {MAX_INT_DIGITS} digits, "
                    f"more than any real quantity needs; check for a typo"
                )
            return int(digits, base)
        except ValueError:
            raise ConstructorError(None, None, f"{text!r} is not an integer", node.start_mark) from None

    def construct_core_bool(self, node: ScalarNode) -> bool:
        text = self.construct_scalar(node)
        if text.lower() not in ("true", "false"):  # reachable only through an explicit !!bool tag
            raise ConstructorError(None, None, f"{text!r} is not true or false", node.start_mark)
        return text.lower() == "true"

    def construct_checked_timestamp(self, node: ScalarNode) -> Any:
        """A date or time, or a one-line refusal for text shaped like one that is not (2027-02-30)."""
        try:
            return self.construct_yaml_timestamp(node)
        except (ValueError, OverflowError) as exc:
            raise ConstructorError(
                None,
                None,
                f"{self.construct_scalar(node)!r} is written like a date but is not one ({exc}); write a real "
                "date such as 2027-01-04, or put the text in quotes if it is not meant as a date",
                node.start_mark,
            ) from None

    def construct_core_float(self, node: ScalarNode) -> float:
        text = self.construct_scalar(node).replace("_", "")
        lowered = text.lower()
        sign = -1.0 if lowered.startswith("-") else 1.0
        if lowered.lstrip("+-") == ".inf":
            return sign * math.inf
        if lowered == ".nan":
            return math.nan
        try:
            return float(text)
        except ValueError:
            raise ConstructorError(None, None, f"{text!r} is not a number", node.start_mark) from None


# YAML 1.2 core schema: start from SafeLoader's resolvers (keeping merge ``<<`` and timestamps, which
# job files use for ``start: 2027-01-04``) and replace the YAML 1.1 null/bool/int/float rules, whose
# sexagesimal ``1:30`` = 90, ``yes``/``on`` = True and ``0755`` = 493 surprise people.
_StrictLoader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag not in _DROPPED_TAGS]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}
_StrictLoader.add_implicit_resolver(_BOOL, _CORE_BOOL, list("tTfF"))
_StrictLoader.add_implicit_resolver(_INT, _CORE_INT, list("-+0123456789"))  # before float: "1" is both
_StrictLoader.add_implicit_resolver(_FLOAT, _CORE_FLOAT, list("-+.0123456789"))
_StrictLoader.add_implicit_resolver(_NULL, _CORE_NULL, ["~", "n", "N", ""])
_StrictLoader.add_constructor(_BOOL, _StrictLoader.construct_core_bool)
_StrictLoader.add_constructor(_INT, _StrictLoader.construct_core_int)
_StrictLoader.add_constructor(_FLOAT, _StrictLoader.construct_core_float)
_StrictLoader.add_constructor("tag:yaml.org,2002:timestamp", _StrictLoader.construct_checked_timestamp)


def _yaml_error(exc: yaml.YAMLError, text: str, source: str) -> GpuplanError:
    if isinstance(exc, yaml.reader.ReaderError):
        line, column = _line_col(text, exc.position)
        char = exc.character if isinstance(exc.character, int) else ord(exc.character)
        return GpuplanError(
            f"the YAML contains a control character (#x{char:04x}) at line {line}, column {column}, which "
            f"YAML does not allow; remove it, or write it as an escape inside a double-quoted string",
            source=source,
        )
    if isinstance(exc, yaml.MarkedYAMLError):
        mark = exc.problem_mark or exc.context_mark
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = exc.problem or exc.context or "invalid YAML"
        if exc.context and exc.problem:
            # PyYAML's pairs read either "expected X" + "but found Y" or "while parsing X" + a problem.
            if exc.problem.startswith("but "):
                problem = f"{exc.context}, {exc.problem}"
            else:
                problem = f"{exc.problem} ({exc.context})"
        if problem.startswith("could not determine a constructor for the tag"):
            tag = problem.split("tag", 1)[1].strip().replace("tag:yaml.org,2002:", "!!")
            problem = f"the tag {tag} is not allowed in gpuplan files"
            fix = "remove the tag and write a plain value"
        elif "single document" in problem:
            fix = "keep one document (remove the extra '---' and what follows, or split the file)"
        elif isinstance(exc, (yaml.scanner.ScannerError, yaml.parser.ParserError)):
            fix = "fix the indentation or quoting there"
        else:
            fix = "check the YAML there"
        return GpuplanError(f"malformed YAML{where}: {problem}; {fix}", source=source)
    return GpuplanError(f"malformed YAML: {exc}; check the file", source=source)


def load_yaml(text: str, source: str) -> Any:
    """The data of one YAML document, read strictly (see the module docstring); ``None`` if empty.

    ``source`` is the file path (or a label) used in error messages.
    """
    try:
        loader = _StrictLoader(text, source)
    except yaml.YAMLError as exc:
        raise _yaml_error(exc, text, source) from None
    try:
        data = loader.get_single_data()
    except yaml.YAMLError as exc:
        raise _yaml_error(exc, text, source) from None
    except RecursionError:  # a backstop: MAX_DEPTH should stop any nesting long before this
        raise GpuplanError(
            f"the YAML nests too deeply to read; gpuplan files need only a few levels (limit {MAX_DEPTH})",
            source=source,
        ) from None
    finally:
        loader.dispose()
    _refuse_surrogates(data, text, source)
    return data


# ---------------------------------------------------------------------------------------------------
# JSON
# ---------------------------------------------------------------------------------------------------

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
