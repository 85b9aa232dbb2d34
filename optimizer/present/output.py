"""Output files (``--out``, ``--report``, ``--plot``): checked before any work, written atomically.

``check_destination`` refuses, before anything is solved or written, a path that could not take the
file: a directory, a device or other special file, a missing or read-only folder, a read-only file,
an extension the writer cannot produce, an input file of the same command (writing there would
destroy it), or a place among gpuplan's own files (its code, its bundled catalogs and presets).
``write_text`` and ``atomic_path`` write to a temporary file in the destination's folder, flush it
to disk and only then rename it over the destination, so a full disk, an error or an interrupt leaves
the old file as it was and no partial file behind; inside ``together`` the renames wait until every
file of the command is written, so one failing leaves all destinations as they were.
They refuse to replace any file the command has read (``reader.was_read``: a job file a portfolio
names is an input too), and write through a symbolic link to the file it points at. Every failure is
an ``ArgumentError`` naming the parameter (the CLI shows it as the flag) and the path.
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import stat
from collections.abc import Iterable, Iterator
from pathlib import Path

from ..errors import ArgumentError, printable
from ..inputs.bundled import bundled_dir
from ..inputs.reader import file_kind, link_problem, was_read

PLOT_SUFFIXES = (".png", ".svg", ".pdf")
REPORT_SUFFIXES = (".html", ".htm")

# Temporary files being written now: removed by ``discard_pending`` when the process must stop at once.
_pending: set[str] = set()
# Inside ``together``: the written files waiting to be renamed over their destinations, as
# (temporary, destination, parameter).
_staged: list[tuple[str, Path, str]] | None = None


def shown(path: str | os.PathLike[str]) -> str:
    """A path as a message quotes it: control characters (a newline, an escape) as ``\\xNN``, so that it
    can neither split the one paragraph nor drive the terminal."""
    return printable(str(path))


def own_folders() -> list[Path]:
    """The folders of gpuplan's own files: the package's code, and the bundled catalogs and model presets
    it reads (inside the package once installed, beside it in a source checkout)."""
    package = Path(__file__).resolve().parent.parent
    return list(dict.fromkeys([package, Path(os.path.realpath(bundled_dir("catalogs")))]))


def _own_folder_of(dest: Path) -> Path | None:
    """The folder of gpuplan's own files that ``dest`` (as written: through a link) lies in, if any."""
    try:
        written = Path(os.path.realpath(dest))
    except OSError:  # a relative path in a working folder since deleted: nothing can be written there
        return None
    for folder in own_folders():
        if written == folder or folder in written.parents:
            return folder
    return None


def check_destination(
    path: str | os.PathLike[str],
    parameter: str,
    *,
    suffixes: tuple[str, ...] | None = None,
    inputs: Iterable[str | os.PathLike[str] | None] = (),
    what: str = "file",
) -> Path:
    """``path`` if a ``what`` can be written there; else an ``ArgumentError`` for ``parameter``.

    ``suffixes``: the extensions the writer produces (lower case, with the dot); ``inputs``: files the
    command reads, which must not be overwritten."""
    dest = Path(path)
    try:
        info = os.stat(dest)
    except (FileNotFoundError, NotADirectoryError):  # the folder check below says which
        info = None
    except OSError as exc:  # a link loop, a name too long
        kind = what.removesuffix(" file")
        link = link_problem(dest, kind)
        reason = f": {link.removeprefix(f'this {kind} path ')}" if link else f" ({exc.strerror or exc}); check the path"
        raise ArgumentError(f"cannot write {shown(dest)}{reason}", field=parameter) from None
    if info is not None and stat.S_ISDIR(info.st_mode):
        raise ArgumentError(
            f"{shown(dest)} is a directory; give a file name inside it, e.g. "
            f"{shown(dest / ('out' + (suffixes or ('',))[0]))}",
            field=parameter,
        )
    if suffixes is not None and dest.suffix.lower() not in suffixes:
        ending = f"'{dest.suffix}'" if dest.suffix else "no extension"
        raise ArgumentError(
            f"{shown(dest)} has {printable(ending)}; a {what} is written as {', '.join(suffixes)}: end the file "
            "name in one of these",
            field=parameter,
        )
    if info is not None:
        if not stat.S_ISREG(info.st_mode):
            raise ArgumentError(
                f"{shown(dest)} is {file_kind(info.st_mode)}, not a regular file; give the path of a file to write",
                field=parameter,
            )
        for given in inputs:
            if given is not None and _same_file(dest, Path(given)):
                raise ArgumentError(
                    f"{shown(dest)} is an input file of this command ({shown(given)}); writing there would destroy it: "
                    "choose another file name",
                    field=parameter,
                )
        if not os.access(dest, os.W_OK):
            raise ArgumentError(
                f"{shown(dest)} is read-only; choose another file name or change its permissions", field=parameter
            )
    own = _own_folder_of(dest)
    if own is not None:
        where = "is one of" if info is not None else "would be written among"
        raise ArgumentError(
            f"{shown(dest)} {where} gpuplan's own files (in {shown(own)}: its code and bundled catalogs, which it "
            "reads on every run); write it elsewhere",
            field=parameter,
        )
    folder = dest.parent
    if not folder.is_dir():
        problem = "does not exist" if not folder.exists() else "is not a folder"
        raise ArgumentError(
            f"cannot write {shown(dest)}: the folder {shown(folder)} {problem}; create it first", field=parameter
        )
    if not os.access(folder, os.W_OK | os.X_OK):
        raise ArgumentError(
            f"cannot write {shown(dest)}: no permission to create files in the folder {shown(folder)}; choose "
            "another folder",
            field=parameter,
        )
    return dest


def _same_file(a: Path, b: Path) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


# What to do about a failed write, by its errno (anything else: another path)
_WRITE_FIXES = {
    errno.ENOSPC: "free some space or choose another path",
    errno.EDQUOT: "free some space or choose another path",
    errno.EFBIG: "raise the file-size limit (ulimit -f) or choose another path",
    errno.ENAMETOOLONG: "choose a shorter file name",
}


def _failed(dest: Path, parameter: str, exc: OSError) -> ArgumentError:
    reason = exc.strerror or exc.__class__.__name__
    fix = _WRITE_FIXES.get(exc.errno or 0, "choose another path")
    return ArgumentError(
        f"cannot write {shown(dest)} ({reason}); nothing was written there (an existing file is unchanged): {fix}",
        field=parameter,
    )


def _os_error_in(exc: BaseException) -> OSError | None:
    """The OSError behind an error a writer raised while failing to write (matplotlib's PDF backend, on a
    full disk, raises AttributeError from its clean-up with the OSError as its context)."""
    seen: set[int] = set()
    cause: BaseException | None = exc
    while cause is not None and id(cause) not in seen:
        if isinstance(cause, OSError):
            return cause
        seen.add(id(cause))
        cause = cause.__cause__ or cause.__context__
    return None


def _temporary_affixes(dest: Path) -> tuple[str, str]:
    """mkstemp's prefix and suffix for a temporary file beside ``dest``: ``.stem.`` and ``.tmp`` + its
    extension, the stem shortened so the name (8 random characters between) stays within the folder's
    name limit: a valid 250-byte name must not be refused because its temporary one is longer."""
    suffix = f".tmp{dest.suffix}"
    try:
        name_max = os.pathconf(dest.parent or ".", "PC_NAME_MAX")
    except (OSError, ValueError, AttributeError):
        name_max = 255
    room = name_max - len(os.fsencode(suffix)) - 8 - 2
    stem = os.fsencode(dest.stem)[: max(room, 0)].decode(errors="ignore")
    return f".{stem}.", suffix


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike[str], parameter: str) -> Iterator[Path]:
    """A temporary path beside ``path`` (same extension, so writers that go by it pick the right format)
    for the caller to write; on success it is flushed to disk and renamed over ``path`` (inside
    ``together``: when the block ends). On an error the temporary file is removed and ``path`` is left
    as it was. A symbolic link is written through (the rename would replace the link itself)."""
    dest = Path(os.path.realpath(path)) if os.path.islink(path) else Path(path)
    if was_read(dest):
        raise ArgumentError(
            f"{shown(path)} is a file this command read as input; writing there would destroy it: choose another "
            "file name",
            field=parameter,
        )
    tmp: str | None = None
    staged = False
    try:
        try:
            tmp = _new_temporary(dest)
        except OSError as exc:
            raise _failed(dest, parameter, exc) from None
        with contextlib.suppress(OSError):  # created private; give it the mode a new file would get
            os.chmod(tmp, _mode_for(dest))
        try:
            yield Path(tmp)
            with open(tmp, "rb+") as written:
                os.fsync(written.fileno())
            if _staged is not None:
                _staged.append((tmp, dest, parameter))
                staged = True
            else:
                os.replace(tmp, dest)
        except OSError as exc:
            raise _failed(dest, parameter, exc) from None
        except Exception as exc:
            behind = _os_error_in(exc)
            if behind is None:
                raise
            raise _failed(dest, parameter, behind) from None
        if not staged:
            _sync_folder(dest.parent)
    finally:
        if tmp is not None and not staged:
            _discard(tmp)


def _new_temporary(dest: Path) -> str:
    """A new empty private file beside ``dest`` (``.stem.XXXXXXXX.tmp.ext``), named in ``_pending`` before
    it exists and for as long as it may: a signal that stops the process at any instruction in between
    (``tempfile.mkstemp`` returns the name only after creating the file) cannot leave it behind."""
    prefix, suffix = _temporary_affixes(dest)
    flags = os.O_RDWR | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0)
    for _ in range(100):
        tmp = os.path.join(dest.parent, f"{prefix}{secrets.token_hex(4)}{suffix}")
        _pending.add(tmp)
        try:
            fd = os.open(tmp, flags, 0o600)
        except FileExistsError:  # someone else's: not ours to remove
            _pending.discard(tmp)
            continue
        except OSError:  # not created
            _pending.discard(tmp)
            raise
        except BaseException:  # a signal's KeyboardInterrupt, raised once the file was created
            _discard(tmp)
            raise
        os.close(fd)
        return tmp
    raise FileExistsError(errno.EEXIST, "no free name for a temporary file", str(dest.parent))


@contextlib.contextmanager
def together() -> Iterator[None]:
    """The files written inside (``atomic_path``, ``write_text``) replace their destinations only once the
    whole block has run without error: a later file failing (a full disk) leaves the earlier ones'
    destinations as they were too, and none of the temporary files behind."""
    global _staged
    outer, _staged = _staged, []
    staged = _staged
    try:
        yield
        for tmp, dest, parameter in staged:
            try:
                os.replace(tmp, dest)
            except OSError as exc:
                raise _failed(dest, parameter, exc) from None
        for folder in dict.fromkeys(dest.parent for _, dest, _ in staged):
            _sync_folder(folder)
    finally:
        _staged = outer
        for tmp, _, _ in staged:
            _discard(tmp)


def _discard(tmp: str) -> None:
    """Remove a temporary file if it is still there (not renamed), then forget it (in this order: a signal
    in between leaves a name in ``_pending``, never a file out of it)."""
    with contextlib.suppress(FileNotFoundError):
        os.unlink(tmp)
    _pending.discard(tmp)


def _mode_for(dest: Path) -> int:
    """The existing file's permissions, or those of a new file under the current umask."""
    try:
        return stat.S_IMODE(os.stat(dest).st_mode)
    except OSError:
        umask = os.umask(0)
        os.umask(umask)
        return 0o666 & ~umask


def write_text(path: str | os.PathLike[str], text: str, parameter: str) -> None:
    """``text`` (UTF-8) at ``path``, atomically; see ``atomic_path``."""
    with atomic_path(path, parameter) as tmp, open(tmp, "w", encoding="utf-8") as out:
        out.write(text)


def _sync_folder(folder: Path) -> None:
    """Flush the rename to disk where the system allows opening a folder (POSIX)."""
    with contextlib.suppress(OSError):
        fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def discard_pending() -> None:
    """Remove the temporary files being written now (before the process exits without unwinding)."""
    for tmp in list(_pending):
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        _pending.discard(tmp)
