"""Starting the real ``gpuplan serve`` in a subprocess on a loopback port, for the service's tests."""

from __future__ import annotations

import json
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

URL_LINE = "gpuplan serve: http://"

# What the service's tests send: content types, the page's own origin (a Host the service answers; TestClient's
# own is refused), and a job small enough to solve in a second
YAML = {"Content-Type": "application/yaml"}
JSON = {"Content-Type": "application/json"}
LOCAL = "http://127.0.0.1:8000"
SMALL_JOB = """
catalog: nodus-2026-11
job:
  name: small
  model: llama-3.1-8b
  method: lora
  tokens: 200M
"""


def post_json(url: str, body: str | bytes, headers: dict[str, str], timeout: float = 120) -> tuple[int, dict]:
    """POST ``body`` to a running service: (status, the JSON answer), an error's too."""
    data = body.encode() if isinstance(body, str) else body
    request = urllib.request.Request(url, data=data, method="POST", headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def get_json(url: str, timeout: float = 30) -> tuple[int, dict]:
    with urllib.request.urlopen(url, timeout=timeout) as response:
        return response.status, json.loads(response.read())


def app_post(path: str, document: dict):
    """POST ``document`` as JSON to ``path`` of the service's app in this process (the page's own origin), and
    close the service: the response."""
    from fastapi.testclient import TestClient

    from optimizer.server.app import create_app
    from optimizer.server.service import Service

    service = Service()
    try:
        with TestClient(create_app(service), base_url=LOCAL) as client:
            return client.post(path, content=json.dumps(document), headers=JSON)
    finally:
        service.close()


def start_serve(
    log: Path, *args: str, seconds: float = 60.0, env: dict[str, str] | None = None
) -> tuple[subprocess.Popen, str | None]:
    """``python -m optimizer serve --port 0 ARGS`` with its stderr in ``log``, and the URL it says it serves at,
    without the page's ``#token=`` (None if it did not within ``seconds`` or it exited); the caller terminates
    the process. ``env``: its environment (default this one's)."""
    with log.open("w") as err:
        proc = subprocess.Popen(
            [sys.executable, "-m", "optimizer", "serve", "--port", "0", *args],
            stdout=subprocess.DEVNULL,
            stderr=err,
            env=env,
        )
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and proc.poll() is None:
        for line in log.read_text().splitlines():
            if line.startswith(URL_LINE):
                return proc, line.split()[2].split("#")[0].rstrip("/")
        time.sleep(0.1)
    return proc, None
