"""Models named by their Hugging Face Hub id, read through huggingface_hub from a cache this test lays out
as the library does (``models--OWNER--NAME/{refs,snapshots,blobs}``): the library's own code path, no
network and no mock of it. Gated, uncached and unreachable models get a message that says which.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import pytest
from typer.testing import CliRunner

from optimizer import cli, load_job, plan

ROOT = Path(__file__).resolve().parent.parent
CONFIG = ROOT / "tests" / "data" / "llama-3.1-8b-config.json"
COMMIT = "0e9e39f249a16976918f6564b8830bc894c89659"  # any 40-hex commit: the cache only names it
runner = CliRunner()


def lay_out_cache(hf_home: Path, repo_id: str, config: Path, commit: str = COMMIT, ref: str | None = "main") -> Path:
    """huggingface_hub's cache layout (huggingface_hub/file_download.py, _create_symlink and _cache_commit_hash_for_specific_revision):
    the file under blobs/ by its hash, snapshots/COMMIT/config.json a relative link to it, refs/REF the commit."""
    repo = hf_home / "hub" / f"models--{repo_id.replace('/', '--')}"
    data = config.read_bytes()
    blob = repo / "blobs" / hashlib.sha256(data).hexdigest()
    blob.parent.mkdir(parents=True, exist_ok=True)
    blob.write_bytes(data)
    snapshot = repo / "snapshots" / commit / "config.json"
    snapshot.parent.mkdir(parents=True, exist_ok=True)
    os.symlink(os.path.relpath(blob, snapshot.parent), snapshot)
    if ref:
        (repo / "refs").mkdir(exist_ok=True)
        (repo / "refs" / ref).write_text(commit)
    return snapshot


@pytest.fixture
def hub(tmp_path, monkeypatch):
    """An empty Hugging Face home, offline, with the library's constants read from it."""
    import huggingface_hub.constants as constants

    home = tmp_path / "hf"
    home.mkdir()
    monkeypatch.setenv("HF_HOME", str(home))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.delenv("HF_HUB_CACHE", raising=False)
    # the library reads its environment once, at import: point its constants at this home as it would have
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(home / "hub"))
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    return home


def test_a_hub_id_is_the_model_its_cached_config_describes(hub):
    lay_out_cache(hub, "meta-llama/Llama-3.1-8B", CONFIG)
    by_id = runner.invoke(cli.app, ["model", "meta-llama/Llama-3.1-8B", "-f", "json"])
    preset = runner.invoke(cli.app, ["model", "llama-3.1-8b", "-f", "json"])
    assert by_id.exit_code == 0, by_id.output
    ours, theirs = json.loads(by_id.stdout), json.loads(preset.stdout)
    # the preset is that same config.json (catalogs/models.yaml), so every size agrees
    for key in ("params", "layers", "hidden", "heads", "kv_heads", "ffn_hidden", "vocab"):
        assert ours[key] == theirs[key], key
    assert ours["name"] == "meta-llama/Llama-3.1-8B"


def test_a_job_file_names_its_model_by_hub_id(hub, tmp_path):
    lay_out_cache(hub, "meta-llama/Llama-3.1-8B", CONFIG)
    text = "catalog: nodus-2026-11\njob:\n  model: {model}\n  method: lora\n  tokens: 1B\n"
    (tmp_path / "hub.yaml").write_text(text.format(model="meta-llama/Llama-3.1-8B"))
    (tmp_path / "preset.yaml").write_text(text.format(model="llama-3.1-8b"))
    by_id, preset = (plan(load_job(tmp_path / f"{n}.yaml"), runners_up=False).best for n in ("hub", "preset"))
    assert (by_id.offer, by_id.gpus, by_id.cost_usd.p50) == (preset.offer, preset.gpus, preset.cost_usd.p50)
    # the cached config is an input: no output may overwrite it
    job = load_job(tmp_path / "hub.yaml")
    assert "models--meta-llama--Llama-3.1-8B" in job.job.model.config_path


def test_a_pinned_revision_reads_that_commit(hub, tmp_path):
    other = tmp_path / "wider.json"
    cfg = json.loads(CONFIG.read_text())
    other.write_text(json.dumps({**cfg, "num_hidden_layers": 40}))
    lay_out_cache(hub, "meta-llama/Llama-3.1-8B", CONFIG)
    pinned = "1" * 40
    lay_out_cache(hub, "meta-llama/Llama-3.1-8B", other, commit=pinned, ref=None)
    job = tmp_path / "job.yaml"
    job.write_text(f"job:\n  model: {{hub: meta-llama/Llama-3.1-8B, revision: '{pinned}'}}\n  tokens: 1B\n")
    assert load_job(job).job.model.layers == 40
    job.write_text("job:\n  model: {hub: meta-llama/Llama-3.1-8B}\n  tokens: 1B\n")
    assert load_job(job).job.model.layers == 32


def test_a_model_not_in_the_cache_offline_says_what_to_run(hub):
    r = runner.invoke(cli.app, ["model", "meta-llama/Llama-3.1-70B"])
    assert r.exit_code == 2, r.output
    assert "not in the Hugging Face cache" in r.stderr and "HF_HUB_OFFLINE" in r.stderr
    assert "hf download meta-llama/Llama-3.1-70B config.json" in r.stderr
    assert "Traceback" not in r.output


def test_a_model_not_in_the_cache_without_a_network_says_so_at_once(hub, monkeypatch):
    import time

    import huggingface_hub.constants as constants

    monkeypatch.delenv("HF_HUB_OFFLINE")
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")  # the discard port on loopback: nothing listens
    started = time.perf_counter()
    r = runner.invoke(cli.app, ["model", "Qwen/Qwen3-8B"])
    assert r.exit_code == 2, r.output
    assert "127.0.0.1 cannot be reached" in r.stderr
    assert time.perf_counter() - started < 10  # not huggingface_hub's five retries with back-off


def test_a_hub_id_that_is_not_one_is_refused_with_the_form(tmp_path):
    job = tmp_path / "job.yaml"
    job.write_text("job:\n  model: {hub: 'not an id'}\n  tokens: 1B\n")
    r = runner.invoke(cli.app, ["solve", str(job)])
    assert r.exit_code == 2 and "job.model.hub" in r.stderr and "owner/name" in r.stderr, r.output
    job.write_text("job:\n  model: {preset: llama-3.1-8b, revision: main}\n  tokens: 1B\n")
    r = runner.invoke(cli.app, ["solve", str(job)])
    assert r.exit_code == 2 and "job.model.revision" in r.stderr, r.output


def test_a_preset_name_never_asks_the_hub(hub):
    # the cache is empty and the Hub offline: a preset answers all the same
    r = runner.invoke(cli.app, ["model", "llama-3.1-8b"])
    assert r.exit_code == 0, r.output
