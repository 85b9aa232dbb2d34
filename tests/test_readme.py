"""The README's Python examples run as written."""

import os
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_readme_python_examples_run(capsys):
    blocks = re.findall(r"```python\n(.*?)```", (ROOT / "README.md").read_text(), re.S)
    assert blocks
    cwd = os.getcwd()
    os.chdir(ROOT)
    try:
        for block in blocks:
            exec(compile(block, "README.md", "exec"), {})
    finally:
        os.chdir(cwd)
    assert "optimal" in capsys.readouterr().out


def test_readme_file_formats_validate():
    import yaml

    from optimizer.inputs.files import expand_models
    from optimizer.inputs.schema import Portfolio, Problem

    blocks = [yaml.safe_load(b) for b in re.findall(r"```yaml\n(.*?)```", (ROOT / "README.md").read_text(), re.S)]
    jobs = [b for b in blocks if "job" in b]
    portfolios = [b for b in blocks if "jobs" in b]
    assert jobs and portfolios
    for block in jobs:
        Problem.model_validate(expand_models(block))
    for block in portfolios:
        Portfolio.model_validate(expand_models(block))
