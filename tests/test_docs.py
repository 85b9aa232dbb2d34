"""The repository explains itself: code, data and documents cite docs/design.md, whose sections exist,
and nothing points at a file outside the repository."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TEXT_FILES = [
    p
    for folder in ("optimizer", "catalogs", "problems", "validation", "bench", "docs", "tests")
    for p in (ROOT / folder).rglob("*")
    if p.suffix in {".py", ".yaml", ".yml", ".md", ".json"} and "_bundled" not in p.parts
] + [ROOT / "README.md", ROOT / "BENCHMARKS.md"]


# What a citation of the project's starting documents (kept beside the repository, not in it) looks like.
# Spelled in pieces so that this file does not itself read as such a citation.
_SHARED, _DESIGN = "shared", "DESIGN"
OUTSIDE = re.compile(
    "|".join([r"\.\./" + _SHARED, _SHARED + r"/(seeds|reference)", _DESIGN + r"\.md", _DESIGN + " section"])
)


def test_nothing_points_outside_the_repository():
    outside = OUTSIDE
    hits = [
        f"{p.relative_to(ROOT)}:{i}"
        for p in TEXT_FILES
        for i, line in enumerate(p.read_text().splitlines(), 1)
        if outside.search(line)
    ]
    assert not hits, hits


def test_every_cited_design_section_exists():
    design = (ROOT / "docs" / "design.md").read_text()
    headings = set(re.findall(r"^#{2,3} (\d+(?:\.\d+)?)[. ]", design, re.M))
    cited = {
        (p.relative_to(ROOT), n)
        for p in TEXT_FILES
        for n in re.findall(r"docs/design\.md section (\d+(?:\.\d+)?)", p.read_text())
    }
    assert cited, "nothing cites the design document"
    missing = sorted(f"{p}: section {n}" for p, n in cited if n not in headings)
    assert not missing, missing
