"""The repository's folders, for tests at any depth of tests/ (which conftest.py puts on sys.path)."""

from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PROBLEMS = ROOT / "problems"
DATA = ROOT / "tests" / "data"
