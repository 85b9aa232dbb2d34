"""The candidate tables a portfolio's jobs need, built on every core: one forked process per worker builds
the tables in the order the jobs need them, each cut to the layouts a row can pick (``compact``), and sends
it back without its job context (the caller has that). Where processes cannot be forked (not Linux), with
one worker, or for a few tables, they are built in line."""

from __future__ import annotations

import multiprocessing
import signal
import sys
from collections.abc import Iterator

from ...inputs.files import portfolio_job_problem
from ...inputs.schema import Catalog, Portfolio
from ...planning.calibration import job_context
from ...planning.candidates import CandidateTable, build_table
from ...planning.context import JobContext
from .cache import TableCache, cache_dir
from .compact import compact, retime

# Fewer tables than this are built in line: forking and sending them back would cost more than it saves.
PARALLEL_TABLES = 4

# What the forked builders read (set before they fork, so they inherit it instead of each being sent it).
_SHARED: tuple[Portfolio, Catalog] | None = None


def _quiet() -> None:
    """A builder leaves signals to the parent: it ignores an interrupt, ends at ``terminate``'s SIGTERM, and
    writes nothing to the wakeup descriptor it inherited (the CLI's watcher would read the parent's exit)."""
    signal.set_wakeup_fd(-1)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    for number in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(number, signal.SIG_DFL)


def _build(index: int) -> CandidateTable:
    """Job ``index``'s table, compacted, without its context (a forked builder's task)."""
    assert _SHARED is not None
    pf, catalog = _SHARED
    table = compact(build_table(job_context(portfolio_job_problem(pf, index), catalog)))
    table.ctx = None  # type: ignore[assignment]  # the parent gives it its own (``Tables.next``)
    return table


class Tables:
    """The tables of the jobs at ``indices`` (each the first of its shape), handed out in that order by
    ``next``; ``close`` stops the builders (the tables not taken are not needed). With the on-disk cache on
    (``cache.cache_dir``), tables stored by an earlier run are read, not built, and those built are stored
    (``with_tokens``: the indices whose layouts depend on their token count, keyed with it)."""

    def __init__(
        self,
        pf: Portfolio,
        catalog: Catalog,
        indices: list[int],
        workers: int,
        with_tokens: frozenset[int] = frozenset(),
    ) -> None:
        global _SHARED
        self._pool = None
        self._results: Iterator[CandidateTable] | None = None
        root = cache_dir()
        self.cache = None if root is None else TableCache(root, pf, catalog)
        self._names = {i: self.cache.key(i, i in with_tokens) for i in indices} if self.cache else {}
        self._stored = {i: t for i, name in self._names.items() if self.cache and (t := self.cache.get(name))}
        self._order = iter(indices)
        build = [i for i in indices if i not in self._stored]
        if workers >= 2 and len(build) >= PARALLEL_TABLES and sys.platform == "linux":
            _SHARED = (pf, catalog)
            self._pool = multiprocessing.get_context("fork").Pool(min(workers, len(build)), initializer=_quiet)
            _SHARED = None
            self._results = self._pool.imap(_build, build)

    def next(self, ctx: JobContext) -> CandidateTable:
        """The next job's table, for ``ctx`` (that job's context)."""
        index = next(self._order)
        if index in self._stored:
            return retime(self._stored.pop(index), ctx)  # (retimed for this job's tokens and context)
        table = compact(build_table(ctx)) if self._results is None else retime(next(self._results), ctx)
        if self.cache is not None:
            self.cache.put(self._names[index], table)
        return table

    def close(self) -> None:
        if self._pool is not None:
            self._pool.terminate()
            self._pool.join()
            self._pool = None
