"""A sweep of hostile and careless inputs, a class per test (what tests/test_hostile.py and test_range_ends.py do
not hold already): every case is bad input (exit 2, one paragraph naming the flag, file or field) or a
correct answer, never exit 1, a traceback or a 500. Each class was found by a driver that ran many such inputs
and fixed where the rule lives (units' parsers and ranges, the service's header checks), not for one value.
"""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from optimizer import cli
from optimizer.inputs import units

runner = CliRunner()

CHECK = ["check", "--model", "llama-3.1-8b", "--tokens", "1B", "--sku", "B200", "--gpus", "8", "--no-compare"]
SOLVE = ["solve", "--model", "llama-3.1-8b", "--tokens", "1B", "--time-limit", "2"]
ROLES = ["check", "problems/seed-003-drafter-roles.yaml", "--no-compare"]

# more digits than a float holds (int -> float overflows), and more than int() reads from text (4,300)
PAST_A_FLOAT = "1" * 400
PAST_INT_TEXT = "9" * 5000


def refused(args: list[str], *expect: str) -> str:
    """Exit 2 with one paragraph holding every ``expect``; never a traceback or an internal error."""
    result = runner.invoke(cli.app, args)
    text = result.output
    assert "Traceback" not in text and "internal error" not in text, text[-2000:]
    assert result.exit_code == 2, (result.exit_code, text[-2000:])
    for fragment in expect:
        assert fragment in text, (fragment, text[-2000:])
    return text


# --------------------------------------------------------------------------- 1. integers past a float's range

HUGE_INTEGER_FLAGS = [
    (CHECK, "--nodes"),
    (CHECK, "--tp"),
    (CHECK, "--micro-batch"),
    (SOLVE, "--seq-len"),
    (SOLVE, "--max-gpus"),
    (SOLVE, "--global-batch"),
    (SOLVE, "--time-limit"),
]


@pytest.mark.parametrize("digits", [PAST_A_FLOAT, PAST_INT_TEXT], ids=["400-digits", "5000-digits"])
@pytest.mark.parametrize(("base", "flag"), HUGE_INTEGER_FLAGS, ids=[f for _, f in HUGE_INTEGER_FLAGS])
def test_an_integer_past_a_float_is_refused_naming_its_flag(base, flag, digits):
    """``--seq-len 111...`` (400 digits) overflowed float() in the range check (exit 1)."""
    refused([*base, flag, digits], flag)


@pytest.mark.parametrize("digits", [PAST_A_FLOAT, PAST_INT_TEXT], ids=["400-digits", "5000-digits"])
@pytest.mark.parametrize(
    ("args", "flag"),
    [
        ([*SOLVE, "--measured", "{n}xB200:14k tok/s"], "--measured"),
        ([*SOLVE, "--measured", "8xB200@{n}:14k tok/s"], "--measured"),
        ([*CHECK[:-4], "--gpus", "{n}"], "--gpus"),
        ([*ROLES, "--role", "target={n}xRTX-PRO-6000", "--role", "drafter=1xRTX-PRO-6000"], "--role"),
    ],
    ids=["measured-gpus", "measured-nodes", "check-gpus", "role-gpus"],
)
def test_a_gpu_or_node_count_past_a_float_is_refused(args, flag, digits):
    """A count inside a flag's text (``NxSKU``, ``@N``) overflowed float() or int() (exit 1)."""
    refused([a.replace("{n}", digits) for a in args], flag)


def test_the_range_check_takes_any_integer():
    """Every range (``units.LIMITS``) refuses an integer past a float rather than raising OverflowError, and
    says a shortened form of what it got."""
    for kind, limit in units.LIMITS.items():
        assert not limit.allows(10**400), kind
        assert not limit.allows(-(10**400)), kind
    with pytest.raises(units.UnitError, match=r"\(got 1111111111.*\.\.\.\)$"):
        units.check_range(int(PAST_A_FLOAT), "gpus")


# --------------------------------------------------------------------------- 2. digits of other scripts

# int() and float() read '١٢' (Arabic-Indic) as 12 and str.isdigit takes '²', while every unit reads 0-9 only:
# --tokens refused what --seq-len took, and '--recompute layers:²' ended in a ValueError (exit 1)
OTHER_DIGITS = [
    (SOLVE, "--seq-len", "١٢"),
    (SOLVE, "--seq-len", "٨k"),
    (SOLVE, "--time-limit", "١٢"),
    (SOLVE, "--tokens", "١B"),
    (SOLVE, "--headroom", "١٠%"),
    (SOLVE, "--headroom", "٠.٥"),
    (SOLVE, "--measured", "٨xB200:14k tok/s"),
    (SOLVE, "--measured", "8xB200@٢:14k tok/s"),
    (CHECK, "--recompute", "layers:²"),
    (CHECK, "--recompute", "layers:٣"),
    (CHECK, "--recompute", "layers:①"),
]


@pytest.mark.parametrize(("base", "flag", "value"), OTHER_DIGITS, ids=[f"{f}={v}" for _, f, v in OTHER_DIGITS])
def test_digits_of_other_scripts_are_refused_as_every_unit_refuses_them(base, flag, value):
    refused([*base, flag, value], flag, repr(value)[1:-1] if flag != "--measured" else flag)


@pytest.mark.parametrize(
    "parse",
    [
        units.parse_time_limit_s,
        units.parse_bytes_or_fraction,
        units.parse_price_per_hour,
        units.parse_count,
        units.parse_usd,
        units.parse_duration_s,
        units.parse_bytes,
        units.parse_recompute,
    ],
    ids=lambda f: f.__name__,
)
@pytest.mark.parametrize("text", ["١٢", "٠.٥", "５", "²"])
def test_every_unit_parser_reads_ascii_digits_only(parse, text):
    with pytest.raises(units.UnitError):
        parse(text)


def test_a_catalog_price_in_other_digits_names_the_field(tmp_path):
    (tmp_path / "cat.yaml").write_text(
        "name: c\nhardware: hardware\noffers:\n  - {name: o, sku: B200, price: '$٥/h', gpus_per_node: 8}\n"
    )
    refused(["catalog", str(tmp_path / "cat.yaml")], "cat.yaml", "offers[0].price")


# --------------------------------------------------------------------------- 3. the service's headers


@pytest.mark.parametrize("port", ["²", "٨٠٠٠", "9" * 5000, "+80", " 80"])
def test_a_host_port_that_is_no_port_is_no_name_of_the_server(port):
    """A Host port int() cannot read ('²' passed str.isdigit; 5,000 digits pass it and exceed int()'s limit)
    answered 500 through the access check; it is no name of the server, so 421 as any other."""
    from optimizer.server.access import split_host

    assert split_host(f"127.0.0.1:{port}") == (None, None)
    assert split_host(f"[::1]:{port}") == (None, None)
    assert split_host("127.0.0.1:8000") == ("127.0.0.1", 8000)


@pytest.fixture(scope="module")
def client():
    pytest.importorskip("fastapi")
    pytest.importorskip("httpx")
    from fastapi.testclient import TestClient

    from optimizer.server.access import Access
    from optimizer.server.app import create_app
    from optimizer.server.service import Service

    service = Service()
    with TestClient(create_app(service, Access(port=8000)), base_url="http://127.0.0.1:8000") as c:
        yield c
    service.close()


@pytest.mark.parametrize(
    ("headers", "status", "said"),
    [
        ({"Host": "127.0.0.1:" + "9" * 5000}, 421, "header 'Host'"),
        ({"Content-Length": "9" * 5000}, 413, "past the 1,048,576"),
        ({"Content-Length": "9" * 19}, 413, "past the 1,048,576"),
    ],
    ids=["host-port-5000-digits", "content-length-5000-digits", "content-length-19-digits"],
)
def test_odd_digits_in_headers_are_refused_not_a_500(client, headers, status, said):
    r = client.post("/v1/solve", content=b'{"job": {}}', headers={"Content-Type": "application/json", **headers})
    assert r.status_code == status, r.text
    assert said in r.json()["detail"], r.text
