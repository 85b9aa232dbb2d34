"""Shared fixtures: paths to the bundled problems and catalogs."""

from pathlib import Path

# bench/ has a consistency.py too, and the bench modules some tests import put bench/ first on sys.path; imported
# here, before any test module, the name stays the shared helper tests/consistency.py whatever is collected first.
import consistency  # noqa: F401
import pytest
from paths import PROBLEMS


@pytest.fixture
def problems() -> Path:
    return PROBLEMS
