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
from paths import DATA
from typer.testing import CliRunner

from optimizer import cli, load_job, plan

CONFIG = DATA / "llama-3.1-8b-config.json"
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


# --- hostile revisions and caches (issue 47): no file outside the cache is read, and none is echoed ---

SECRET = "/top-secret-line: hunter2"  # a secret whose first line starts with '/': not a commit, not a path


def _job_with_revision(tmp_path: Path, revision: str) -> Path:
    job = tmp_path / "job.yaml"
    job.write_text(
        "job:\n  model: {hub: meta-llama/Llama-3.1-8B, revision: " + json.dumps(revision) + "}\n  tokens: 1B\n"
    )
    return job


@pytest.mark.parametrize(
    "revision",
    [
        "/etc/passwd",
        "/proc/self/cmdline",
        "../../../../../../../../etc/hostname",
        "main/../../../../secret.txt",
        "..",
        "main\nsecret",
        "a\\b",
        "x" * 300,
        "refs/heads/main.lock",
    ],
)
def test_a_revision_that_is_not_a_git_ref_is_refused_before_any_file_is_read(hub, tmp_path, revision):
    secret = tmp_path / "secret.txt"
    secret.write_text(SECRET)
    lay_out_cache(hub, "meta-llama/Llama-3.1-8B", CONFIG)
    if revision == "main/../../../../secret.txt":
        pass  # the walk lands on tmp_path/secret.txt from refs/main/: refused all the same
    r = runner.invoke(cli.app, ["solve", str(_job_with_revision(tmp_path, revision))])
    assert r.exit_code == 2, r.output
    assert "job.model.revision" in r.stderr and "Traceback" not in r.output
    assert "hunter2" not in r.output and "top-secret" not in r.output


def test_an_absolute_revision_naming_a_secret_never_echoes_it(hub, tmp_path):
    secret = tmp_path / "secret.txt"
    secret.write_text(SECRET)
    lay_out_cache(hub, "meta-llama/Llama-3.1-8B", CONFIG)
    r = runner.invoke(cli.app, ["solve", str(_job_with_revision(tmp_path, str(secret)))])
    assert r.exit_code == 2 and "hunter2" not in r.output and "job.model.revision" in r.stderr, r.output


@pytest.mark.parametrize("content", [SECRET, "../../../../../../etc", "0" * 39, "0" * 40 + "/../../../x"])
def test_a_cached_ref_that_is_not_a_commit_is_refused_without_its_content(hub, tmp_path, content):
    lay_out_cache(hub, "meta-llama/Llama-3.1-8B", CONFIG, ref=None)
    refs = hub / "hub" / "models--meta-llama--Llama-3.1-8B" / "refs"
    refs.mkdir()
    (refs / "main").write_text(content)
    r = runner.invoke(cli.app, ["model", "meta-llama/Llama-3.1-8B"])
    assert r.exit_code == 2, r.output
    assert "Traceback" not in r.output and content not in r.output and "hunter2" not in r.output
    assert str(hub) not in r.output  # nor the cache's path on this machine (the service answers this text)


def test_a_cached_ref_that_links_out_of_the_cache_is_not_read(hub, tmp_path):
    secret = tmp_path / "secret.txt"
    secret.write_text(COMMIT)  # even a commit: a ref outside refs/ is not the cache's
    lay_out_cache(hub, "meta-llama/Llama-3.1-8B", CONFIG, ref=None)
    refs = hub / "hub" / "models--meta-llama--Llama-3.1-8B" / "refs"
    refs.mkdir()
    os.symlink(secret, refs / "main")
    r = runner.invoke(cli.app, ["model", "meta-llama/Llama-3.1-8B"])
    assert r.exit_code == 2 and "Traceback" not in r.output, r.output


def test_a_cached_snapshot_that_links_outside_snapshots_is_refused(hub, tmp_path):
    outside = tmp_path / "elsewhere" / COMMIT
    outside.mkdir(parents=True)
    (outside / "config.json").write_text(CONFIG.read_text())
    repo = hub / "hub" / "models--meta-llama--Llama-3.1-8B"
    (repo / "snapshots").mkdir(parents=True)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(COMMIT)
    os.symlink(outside, repo / "snapshots" / COMMIT)
    r = runner.invoke(cli.app, ["model", "meta-llama/Llama-3.1-8B"])
    assert r.exit_code == 2 and "Traceback" not in r.output, r.output


def test_a_branch_name_with_a_slash_reads_its_cached_ref(hub, tmp_path):
    # refs/pr/1 is a Hub revision (a pull request): a ref below refs/ is the cache's own
    lay_out_cache(hub, "meta-llama/Llama-3.1-8B", CONFIG, ref="main")
    (hub / "hub" / "models--meta-llama--Llama-3.1-8B" / "refs" / "refs" / "pr").mkdir(parents=True)
    (hub / "hub" / "models--meta-llama--Llama-3.1-8B" / "refs" / "refs" / "pr" / "1").write_text(COMMIT)
    job = _job_with_revision(tmp_path, "refs/pr/1")
    assert load_job(job).job.model.layers == 32


@pytest.mark.parametrize("variable", ["HF_HOME", "HF_HUB_CACHE", "XDG_CACHE_HOME"])
def test_a_cache_variable_that_is_a_file_is_refused_by_name(hub, tmp_path, monkeypatch, variable):
    afile = tmp_path / "a-file"
    afile.write_text("not a folder")
    monkeypatch.setenv(variable, str(afile))
    r = runner.invoke(cli.app, ["model", "meta-llama/Llama-3.1-8B"])
    assert r.exit_code == 2, r.output
    assert f"point {variable} at a folder" in r.stderr and "Traceback" not in r.output
    assert str(afile) not in r.output  # a server's own paths are not answered to a request


def test_a_hub_that_never_answers_is_an_error_within_seconds(hub, monkeypatch):
    import time

    import huggingface_hub.constants as constants
    from silent_hub import silent_endpoint

    monkeypatch.delenv("HF_HUB_OFFLINE")
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    with silent_endpoint() as endpoint:
        monkeypatch.setenv("HF_ENDPOINT", endpoint)
        started = time.perf_counter()
        r = runner.invoke(cli.app, ["model", "Qwen/Qwen3-8B"])
        elapsed_s = time.perf_counter() - started
    assert r.exit_code == 2, r.output
    assert "ReadTimeout" in r.stderr and "Traceback" not in r.output  # asked, and no answer: not a refusal
    assert elapsed_s < 15, elapsed_s  # not huggingface_hub's retries of a silent Hub (90 s)


@pytest.mark.parametrize("revision", ["/etc/passwd", "../../../../../../proc/self/cmdline", "main", "SECRET"])
def test_the_service_answers_a_hostile_revision_with_a_4xx_that_holds_no_file(hub, tmp_path, revision):
    """The HTTP service had answered 500 with the named file's content (issue 47); a cached refs/main
    holding a secret whose first line starts with '/' included."""
    pytest.importorskip("fastapi")
    pytest.importorskip("httpx")
    from serving import app_post

    lay_out_cache(hub, "meta-llama/Llama-3.1-8B", CONFIG, ref=None)
    refs = hub / "hub" / "models--meta-llama--Llama-3.1-8B" / "refs"
    refs.mkdir()
    (refs / "main").write_text(SECRET)
    if revision == "SECRET":  # a file of the server's whose first line starts with '/'
        revision = str(tmp_path / "secret.txt")
        Path(revision).write_text(SECRET)
    body = {"job": {"model": {"hub": "meta-llama/Llama-3.1-8B", "revision": revision}, "tokens": "1B"}}
    r = app_post("/v1/solve", body)
    assert 400 <= r.status_code < 500, r.text
    assert "hunter2" not in r.text and "top-secret" not in r.text and "root:" not in r.text
    assert "revision" in r.text


def test_a_hub_that_answers_the_metadata_and_never_sends_the_file_is_cut_at_the_deadline(hub, monkeypatch):
    """The lookup's deadline (hub.HUB_DEADLINE_S, shortened by HF_HUB_DOWNLOAD_TIMEOUT here) holds whatever the
    library does: a Hub that answers HEAD and then sends no byte of the file."""
    import http.server
    import threading
    import time

    import huggingface_hub.constants as constants

    stop = threading.Event()

    class Stalling(http.server.BaseHTTPRequestHandler):
        def do_HEAD(self):  # noqa: N802 - http.server's name
            self.send_response(200)
            self.send_header("X-Repo-Commit", COMMIT)
            self.send_header("ETag", '"' + "a" * 40 + '"')
            self.send_header("Content-Length", "10")
            self.end_headers()

        def do_GET(self):  # noqa: N802
            stop.wait(30)  # never answers while the test runs

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Stalling)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    endpoint = f"http://127.0.0.1:{server.server_address[1]}"
    monkeypatch.delenv("HF_HUB_OFFLINE")
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setenv("HF_ENDPOINT", endpoint)
    monkeypatch.setenv("HF_HUB_ETAG_TIMEOUT", "2")
    monkeypatch.setenv("HF_HUB_DOWNLOAD_TIMEOUT", "2")
    started = time.perf_counter()
    try:
        r = runner.invoke(cli.app, ["model", "Qwen/Qwen3-8B"])
    finally:
        stop.set()
        server.shutdown()
    elapsed_s = time.perf_counter() - started
    assert r.exit_code == 2 and "Traceback" not in r.output, r.output
    assert "did not answer within" in r.stderr  # the deadline's words: not a failure to connect
    assert elapsed_s < 8, elapsed_s  # HF_HUB_ETAG_TIMEOUT + HF_HUB_DOWNLOAD_TIMEOUT, not the library's retries
