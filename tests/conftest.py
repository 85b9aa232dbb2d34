"""Shared fixtures: paths to the bundled problems and catalogs."""

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PROBLEMS = ROOT / "problems"


@pytest.fixture
def problems() -> Path:
    return PROBLEMS
