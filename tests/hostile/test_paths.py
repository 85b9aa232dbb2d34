"""Paths that cannot be followed: every file gpuplan reads or writes, named through a symbolic link loop, a
dangling link, a folder that is a link loop or a name longer than the system allows, is bad input (exit 2, one
paragraph naming the file or flag), never ``internal error: RuntimeError: Symlink loop`` (exit 1).

Python 3.11's ``Path.resolve`` raises RuntimeError on a link loop; ``inputs.reader.resolved`` is the one place
an input path is resolved, and ``reader.link_problem`` says what is wrong with a link in words."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from typer.testing import CliRunner

from optimizer import cli
from optimizer.errors import GpuplanError
from optimizer.inputs.reader import link_problem, resolved

runner = CliRunner()

LONG_NAME = "n" * 300  # past NAME_MAX (255 on Linux and macOS)
QUESTION = ["--model", "llama-3.1-8b", "--method", "lora", "--tokens", "100M"]


def bad_input(args: list[str], *names: str) -> str:
    """The command's error, checked: exit 2, not a traceback, naming each of ``names``."""
    r = runner.invoke(cli.app, args)
    assert r.exit_code == 2, (r.exit_code, r.output)
    assert "internal error" not in r.output and "Traceback" not in r.output, r.output
    for name in names:
        assert name in r.stderr, (name, r.stderr)
    return r.stderr


@pytest.fixture
def links(tmp_path, monkeypatch):
    """A folder holding a self-link (loop.yaml), a two-link loop (a.yaml <-> b.yaml), a dangling link
    (gone.yaml -> missing.yaml) and a folder that is a link loop (loopdir)."""
    monkeypatch.chdir(tmp_path)
    os.symlink("loop.yaml", "loop.yaml")
    os.symlink("b.yaml", "a.yaml")
    os.symlink("a.yaml", "b.yaml")
    os.symlink("missing.yaml", "gone.yaml")
    os.symlink("loopdir", "loopdir")
    return tmp_path


@pytest.mark.parametrize("command", ["solve", "options"])
@pytest.mark.parametrize("name", ["loop.yaml", "a.yaml", "gone.yaml", "loopdir/job.yaml", f"{LONG_NAME}.yaml"])
def test_a_job_file_that_cannot_be_followed_is_bad_input(links, command, name):
    err = bad_input([command, name], name[:40])
    if name in ("loop.yaml", "a.yaml"):
        assert "symbolic link loop" in err
    if name == "gone.yaml":
        assert "missing.yaml" in err and "does not exist" in err


def test_check_and_portfolio_read_their_files_the_same_way(links):
    bad_input(["check", "loop.yaml", "--sku", "B200", "--gpus", "8"], "loop.yaml", "symbolic link loop")
    bad_input(["portfolio", "loop.yaml"], "loop.yaml", "symbolic link loop")


@pytest.mark.parametrize("catalog", ["loop.yaml", "gone.yaml", f"{LONG_NAME}.yaml"])
def test_a_catalog_that_cannot_be_followed_is_bad_input(links, catalog):
    # by flag, by a job file's catalog: and by a catalog's include:
    bad_input(["solve", *QUESTION, "--catalog", catalog], "--catalog", catalog[:40])
    Path("job.yaml").write_text(f"catalog: {catalog}\njob: {{name: j, model: llama-3.1-8b, tokens: 100M}}\n")
    bad_input(["solve", "job.yaml"], "job.yaml", "catalog", catalog[:40])
    Path("outer.yaml").write_text(f"include: [{catalog}]\n")
    Path("job.yaml").write_text("catalog: outer.yaml\njob: {name: j, model: llama-3.1-8b, tokens: 100M}\n")
    bad_input(["solve", "job.yaml"], "outer.yaml", "include[0]", catalog[:40])


def test_a_model_config_that_cannot_be_followed_is_bad_input(links):
    os.symlink("config.json", "config.json")
    Path("job.yaml").write_text("job: {name: j, model: {hf_config: config.json}, tokens: 100M}\n")
    bad_input(["solve", "job.yaml"], "config.json", "symbolic link loop")


@pytest.mark.parametrize(
    ("flag", "name"),
    [
        ("--save", "loop.yaml"),
        ("--save", "loopdir/job.yaml"),
        ("--save", f"{LONG_NAME}.yaml"),
        ("--report", "loop.html"),
        ("--report", f"{LONG_NAME}.html"),
        ("--plot", f"{LONG_NAME}.svg"),
    ],
)
def test_an_output_that_cannot_be_followed_is_bad_input_before_any_work(links, flag, name):
    if name == "loop.html":
        os.symlink("loop.html", "loop.html")
    bad_input(["solve", *QUESTION, flag, name, "--time-limit", "5"], flag, name[:40])


def test_resolved_names_the_file_where_path_resolve_raises_runtime_error(links):
    with pytest.raises(GpuplanError) as loop:
        resolved("loop.yaml", "job")
    assert loop.value.source == "loop.yaml" and "symbolic link loop" in loop.value.reason
    with pytest.raises(GpuplanError, match="longer than the system allows"):
        resolved(f"{LONG_NAME}.yaml", "job")
    with pytest.raises(GpuplanError, match="NUL byte"):
        resolved("job\0.yaml", "job")
    Path("real.yaml").write_text("x: 1\n")
    os.symlink("real.yaml", "link.yaml")
    assert resolved("link.yaml", "job") == (links / "real.yaml").resolve()
    assert link_problem("link.yaml", "job") is None and link_problem("real.yaml", "job") is None
    assert "missing.yaml" in (link_problem("gone.yaml", "job") or "")


@pytest.mark.parametrize("name", ["loop.yaml", "gone.yaml", "loopdir"])
def test_a_model_named_by_a_link_that_leads_nowhere_is_that_link_not_an_unknown_preset(links, name):
    # 'gpuplan model' and solve --model read a name in one order: a path first (a link counts, followed or not)
    said = bad_input(["model", name], name)
    assert "symbolic link" in said and "unknown model preset" not in said
    said = bad_input(["solve", "--model", name, "--tokens", "1B"], "--model")
    assert "symbolic link" in said and "unknown model preset" not in said


@pytest.mark.parametrize("name", ["loop.yaml", "gone.yaml", "loopdir/vms.csv", LONG_NAME])
def test_a_skypilot_folder_that_cannot_be_followed_is_bad_input(links, name):
    said = bad_input(["catalog", "import", "skypilot", "--from", name, "--out", "out.yaml"], "--from")
    assert "symbolic link" in said or "longer than the system allows" in said
    assert not Path("out.yaml").exists()
