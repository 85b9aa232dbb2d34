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

The YAML and JSON readers live in ``reader_yaml`` and ``reader_json``, the bounds in ``reader_bounds``;
their names are importable from here.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path
from typing import Any

import yaml

from ..errors import GpuplanError, printable
from .reader_bounds import (
    MAX_DEPTH,
    MAX_FILE_BYTES,
    MAX_INT_DIGITS,
    MAX_NODES,
    MAX_TEXT_CHARS,
    PathPart,
    StrPath,
    _size,
)
from .reader_json import load_json
from .reader_yaml import load_yaml

__all__ = [
    "MAX_DEPTH",
    "MAX_FILE_BYTES",
    "MAX_INT_DIGITS",
    "MAX_NODES",
    "MAX_TEXT_CHARS",
    "PathPart",
    "StrPath",
    "file_kind",
    "forget_reads",
    "link_problem",
    "load_json",
    "load_yaml",
    "read_bundled_yaml",
    "read_json_file",
    "read_text",
    "read_yaml_file",
    "resolved",
    "was_read",
]

# ---------------------------------------------------------------------------------------------------
# Files
# ---------------------------------------------------------------------------------------------------


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
