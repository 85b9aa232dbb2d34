"""A Hub that never answers holds no solver (issue 47): requests whose model comes from the Hub are read on
threads of their own, so an ordinary question behind two of them is answered at once, not after the Hub's
deadline."""

from __future__ import annotations

import json
import time

import pytest
from silent_hub import silent_endpoint

pytest.importorskip("fastapi")

from optimizer.errors import GpuplanError  # noqa: E402
from optimizer.server.service import Limits, Service  # noqa: E402

JSON = "application/json"


@pytest.fixture
def silent_hub(tmp_path, monkeypatch):
    """An empty Hugging Face home, online, whose Hub accepts connections and never sends a byte."""
    import huggingface_hub.constants as constants

    home = tmp_path / "hf"
    home.mkdir()
    monkeypatch.setenv("HF_HOME", str(home))
    monkeypatch.delenv("HF_HUB_CACHE", raising=False)
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(home / "hub"))
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setenv("HF_HUB_ETAG_TIMEOUT", "12")  # a slow Hub given its time: each request waits 12 s
    with silent_endpoint() as endpoint:
        monkeypatch.setenv("HF_ENDPOINT", endpoint)
        yield


def _body(model: object) -> bytes:
    return json.dumps({"job": {"name": "j", "model": model, "method": "lora", "tokens": "1B"}}).encode()


@pytest.mark.parametrize("readers", [8, pytest.param(0, marks=pytest.mark.xfail(strict=True))])
def test_two_requests_waiting_on_the_hub_leave_an_ordinary_solve_its_solver(silent_hub, readers):
    """(With no reader threads, as before, the ordinary solve waits for the Hub: the test fails.)"""
    service = Service(limits=Limits(readers=readers))  # two solver threads
    try:
        waiting = [service.submit(service.solve, _body("silent-org/silent-model"), JSON) for _ in range(2)]
        time.sleep(0.5)  # both are asking the Hub by now
        started = time.perf_counter()
        answer = service.submit(service.solve, _body("llama-3.1-8b"), JSON).result(timeout=60)
        elapsed_s = time.perf_counter() - started
        assert answer["best"] is not None
        assert elapsed_s < 5, elapsed_s  # (held behind the Hub's 10 s deadline, it had taken 7.3 s)
        for future in waiting:
            with pytest.raises(GpuplanError):
                future.result(timeout=60)
    finally:
        service.close()


def test_a_model_not_cached_is_answered_without_the_servers_cache_path(tmp_path, monkeypatch):
    """Offline, a Hub id not in the cache is a 4xx whose message named the cache folder's absolute path: a
    path of the server's machine, answered to whoever asked. It names the variable that places it."""
    import huggingface_hub.constants as constants

    home = tmp_path / "secret-home" / "hf"
    home.mkdir(parents=True)
    monkeypatch.setenv("HF_HOME", str(home))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.delenv("HF_HUB_CACHE", raising=False)
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(home / "hub"))
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    service = Service()
    try:
        with pytest.raises(GpuplanError) as refused:
            service.submit(service.solve, _body("some-org/not-cached"), JSON).result(timeout=30)
        assert "not in the Hugging Face cache (HF_HOME/hub)" in str(refused.value)
        assert "secret-home" not in str(refused.value)
    finally:
        service.close()
