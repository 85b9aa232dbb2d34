"""An on-disk cache of the portfolio's candidate tables (issue 53), off unless ``GPUPLAN_TABLE_CACHE`` names a
directory (``default``: ``$XDG_CACHE_HOME/gpuplan/tables``, else ``~/.cache/gpuplan/tables``).

A table is stored compacted (``compact``) and without its job context, keyed by what it is computed from: the
job's problem as the solver reads it (``portfolio_job_problem``: model, method, batch, sequence, assumptions, GPU
filter, spot policy; the token count left out where the layouts do not depend on it, ``retime`` then gives any
token count's table from it), the catalog, and the code that computes it (every file of the ``optimizer``
package: a table from another version is never read). Concurrent runs are safe: a table is written to a file of
its own and moved into place with ``os.replace`` (atomic on one file system), so a reader sees a whole table or
none; one that cannot be read is built again. The files are pickles: point the variable only at a directory
you alone write to."""

from __future__ import annotations

import functools
import hashlib
import os
import pickle
import tempfile
from pathlib import Path

from ...inputs.files import portfolio_job_problem
from ...inputs.schema import Catalog, Portfolio
from ...planning.candidates import CandidateTable

ENV = "GPUPLAN_TABLE_CACHE"
PACKAGE = Path(__file__).resolve().parents[2]  # optimizer/
# (the job's fields that only the token count depends on: data.py's _TOKEN_FIELDS, repeated to avoid a cycle)
TOKEN_FIELDS = {"tokens", "dataset_tokens", "epochs"}


@functools.cache
def code_version() -> str:
    """A digest of every file of the ``optimizer`` package (its code, catalogs and calibration data), in path
    order: any edit gives tables a new key."""
    digest = hashlib.sha256()
    for path in sorted(p for p in PACKAGE.rglob("*") if p.is_file() and "__pycache__" not in p.parts):
        digest.update(path.relative_to(PACKAGE).as_posix().encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()


def cache_dir() -> Path | None:
    """The directory ``GPUPLAN_TABLE_CACHE`` names, or None (no cache: the default)."""
    value = os.environ.get(ENV, "").strip()
    if not value:
        return None
    if value == "default":
        return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "gpuplan" / "tables"
    return Path(value).expanduser()


class TableCache:
    """Tables by job shape in ``root``, for one portfolio and catalog."""

    def __init__(self, root: Path, pf: Portfolio, catalog: Catalog) -> None:
        self.root, self.pf = root, pf
        self.salt = code_version() + hashlib.sha256(catalog.model_dump_json().encode()).hexdigest()
        self.hits = 0

    def key(self, index: int, tokens: bool) -> str:
        """Job ``index``'s file name: a digest of its problem (without its token count unless ``tokens``), the
        catalog and the code."""
        problem = portfolio_job_problem(self.pf, index)
        exclude = None if tokens else {"job": TOKEN_FIELDS}
        text = problem.model_dump_json(exclude=exclude)  # type: ignore[arg-type]
        return hashlib.sha256((self.salt + text).encode()).hexdigest() + ".pickle"

    def get(self, name: str) -> CandidateTable | None:
        """The table stored under ``name``, or None (not stored, or not readable: it is built again)."""
        try:
            with open(self.root / name, "rb") as f:
                table = pickle.load(f)
        except Exception:  # missing, cut short, or from a Python that cannot read it: build it again
            return None
        if not isinstance(table, CandidateTable):
            return None
        self.hits += 1
        return table

    def put(self, name: str, table: CandidateTable) -> None:
        """Store ``table`` (without its context) under ``name``: written whole to a file of its own, then moved
        into place. A cache that cannot be written is left alone (the run goes on without it)."""
        context, table.ctx = table.ctx, None  # type: ignore[assignment]
        try:
            self.root.mkdir(parents=True, exist_ok=True)
            fd, temp = tempfile.mkstemp(dir=self.root, prefix=".", suffix=".part")
            try:
                with os.fdopen(fd, "wb") as f:
                    pickle.dump(table, f, protocol=pickle.HIGHEST_PROTOCOL)
                os.replace(temp, self.root / name)
            except BaseException:
                Path(temp).unlink(missing_ok=True)
                raise
        except OSError:
            pass
        finally:
            table.ctx = context
