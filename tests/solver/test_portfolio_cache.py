"""Issue 53: the on-disk table cache (``GPUPLAN_TABLE_CACHE``) gives the options a fresh build gives, is read
only for the same problem, catalog and code, survives a file cut short, and is off by default."""

from __future__ import annotations

from test_portfolio_scale import _finetunes

from optimizer import load_catalog
from optimizer.solver.portfolio import cache, tables
from optimizer.solver.portfolio.data import prepare, whole_steps

CATALOG = load_catalog("default")
# two shapes whose layouts do not depend on tokens (one table each, the third job retimed) and one free batch
SPECS = [
    {"method": "lora", "tokens": "1B", "seq_len": 2048},
    {"method": "qlora", "tokens": "1B", "seq_len": 4096},
    {"method": "lora", "tokens": "3B", "seq_len": 2048},
    {"method": "lora", "tokens": "2B", "seq_len": 2048, "global_batch": "free"},
]


def _options(prepared) -> list:
    return [[(o.row.key, o.index, o.time_s, o.cost_usd) for o in job.options] + job.durations for job in prepared.jobs]


def _prepare(workers: int = 1):
    pf = _finetunes(SPECS)
    return prepare(pf, CATALOG, whole_steps(pf.horizon_s, pf.time_step_s), workers=workers)


def _hits(monkeypatch) -> list[int]:
    """The cache hits of every ``Tables`` built from now on."""
    seen: list[int] = []
    close = tables.Tables.close

    def counted(self) -> None:
        seen.append(self.cache.hits if self.cache else -1)
        close(self)

    monkeypatch.setattr(tables.Tables, "close", counted)
    return seen


def test_the_cache_is_off_by_default_and_a_second_run_reads_what_the_first_stored(tmp_path, monkeypatch):
    monkeypatch.delenv(cache.ENV, raising=False)
    hits = _hits(monkeypatch)
    fresh = _prepare()
    assert hits == [-1] and fresh.tables == 4
    monkeypatch.setenv(cache.ENV, str(tmp_path))
    first = _prepare(workers=2)
    stored = sorted(p.name for p in tmp_path.iterdir())
    assert len(stored) == 3 and all(name.endswith(".pickle") for name in stored)  # (no temporary file left)
    second = _prepare(workers=2)
    assert hits == [-1, 0, 3]
    assert _options(first) == _options(second) == _options(fresh)
    assert all(job.table.ctx is not None for job in second.jobs)


def test_a_table_from_other_code_or_cut_short_is_built_again(tmp_path, monkeypatch):
    monkeypatch.setenv(cache.ENV, str(tmp_path))
    hits = _hits(monkeypatch)
    fresh = _prepare()
    monkeypatch.setattr(cache, "code_version", lambda: "another version")
    assert _options(_prepare()) == _options(fresh) and hits == [0, 0]
    assert len(list(tmp_path.iterdir())) == 6  # the other version's tables beside the first's
    for path in tmp_path.iterdir():
        path.write_bytes(path.read_bytes()[:100])  # cut short, as by a run killed while writing in place
    assert _options(_prepare()) == _options(fresh) and hits == [0, 0, 0]
    assert _options(_prepare()) == _options(fresh) and hits == [0, 0, 0, 3]  # stored whole again
