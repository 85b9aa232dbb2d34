"""ruff (lint and format) and mypy stay clean: the test command a contributor runs checks what CI checks."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SOURCES = ["optimizer", "tests", "bench"]


def _run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(args, cwd=ROOT, capture_output=True, text=True, timeout=600)


@pytest.mark.skipif(shutil.which("ruff", path=str(Path(sys.executable).parent)) is None, reason="ruff not installed")
def test_ruff_lint_and_format_are_clean():
    ruff = shutil.which("ruff", path=str(Path(sys.executable).parent))
    lint = _run(ruff, "check", *SOURCES)
    assert lint.returncode == 0, lint.stdout + lint.stderr
    fmt = _run(ruff, "format", "--check", *SOURCES)
    assert fmt.returncode == 0, fmt.stdout + fmt.stderr


def test_mypy_is_clean():
    pytest.importorskip("mypy")
    result = _run(sys.executable, "-m", "mypy")
    assert result.returncode == 0, result.stdout + result.stderr
