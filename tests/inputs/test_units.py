"""Units: what people type becomes bytes, seconds, USD and counts; decimal and binary stay apart."""

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from optimizer.errors import UnitError
from optimizer.inputs.units import (
    fmt_budget,
    parse_bytes,
    parse_bytes_or_fraction,
    parse_count,
    parse_duration_s,
    parse_price_per_hour,
    parse_rate,
    parse_usd,
)
from optimizer.money import CENTS_PER_USD, usd_to_cents


@pytest.mark.parametrize(
    "text, expected",
    [
        ("180GB", 180e9),
        ("160Gi", 160 * 2**30),
        ("167.6GiB", 167.6 * 2**30),
        ("2.1TB", 2.1e12),
        ("183359MiB", 183359 * 2**20),
        ("40 GB", 40e9),
        (2**30, 2.0**30),  # a bare number is bytes
        (0, 0.0),
        ("1,440GB", 1440e9),
    ],
)
def test_sizes(text, expected):
    assert parse_bytes(text) == pytest.approx(expected)


def test_b200_label_is_167_6_gib():
    # seed 000: "B200's 180 GB is about 167.6 GiB"
    assert parse_bytes("180GB") / 2**30 == pytest.approx(167.64, abs=0.01)


@pytest.mark.parametrize(
    "text, seconds",
    [("5d", 432000), ("36h", 129600), ("90m", 5400), ("1d12h", 129600), ("1w", 604800), (2, 7200), ("45s", 45)],
)
def test_durations(text, seconds):
    assert parse_duration_s(text) == pytest.approx(seconds)


@pytest.mark.parametrize(
    "text, usd",
    [("$5.50/h", 5.5), ("5.50", 5.5), ("$132/day", 5.5), ("$6.943/hr", 6.943), (3.593, 3.593), ("$0.0916667/m", 5.5)],
)
def test_prices(text, usd):
    assert parse_price_per_hour(text) == pytest.approx(usd, rel=1e-5)


@pytest.mark.parametrize(
    "text, n", [("70B", 70e9), ("14e9", 14e9), ("500M", 5e8), ("2B tokens", 2e9), ("1.5T", 1.5e12)]
)
def test_counts(text, n):
    assert parse_count(text) == pytest.approx(n)


def test_money_and_rates():
    assert parse_usd("$20,000") == 20000
    assert parse_usd("20k") == 20000
    assert parse_rate("14.8k tok/s") == pytest.approx(14800)


@pytest.mark.parametrize("bad", ["180XB", "lots", "5 parsecs", "", "GB"])
def test_unreadable_sizes_say_how_to_write_them(bad):
    with pytest.raises(UnitError, match="GB|GiB|write it like"):
        parse_bytes(bad)


@pytest.mark.parametrize("bare", [40, 1, 160.0, "40", " 80 ", "1000000"])
def test_a_bare_number_too_small_for_bytes_asks_for_its_unit(bare):
    """ "activation_reserve: 40" or "--min-memory 160" meant GB; read as bytes, the reserve was nothing and
    the filter let every GPU through."""
    with pytest.raises(UnitError, match="has no unit.*GB or .*GiB"):
        parse_bytes(bare)


@pytest.mark.parametrize(("value", "expected"), [(0.2, 0.2), ("0.5", 0.5), (0, 0.0), ("40GB", 40e9), (2**30, 2**30)])
def test_a_reserve_is_a_fraction_below_one_else_a_size(value, expected):
    assert parse_bytes_or_fraction(value) == pytest.approx(expected)


@pytest.mark.parametrize("bad", ["5 fortnights", "soon", "1.2.3h", "x5h", "5h garbage", "5 h 5", "1d12", "5h!"])
def test_unreadable_durations(bad):
    """Stray text is a typo, never part of the number: "1.2.3h" is not 1.5 h, nor "5 h 5" 10 h."""
    with pytest.raises(UnitError):
        parse_duration_s(bad)


@pytest.mark.parametrize("text, seconds", [("1d 12h", 129600), ("5 days", 432000), (".5d", 43200), ("1w2d", 777600)])
def test_durations_in_parts(text, seconds):
    assert parse_duration_s(text) == pytest.approx(seconds)


@pytest.mark.parametrize("text, usd", [("$1,234.50", 1234.5), ("1,000,000", 1e6), ("$2,000k", 2e6)])
def test_commas_group_thousands(text, usd):
    assert parse_usd(text) == pytest.approx(usd)


@pytest.mark.parametrize(
    "parse, bad",
    [
        (parse_usd, "1,5"),
        (parse_usd, "12,3456"),
        (parse_usd, "1,,000"),
        (parse_price_per_hour, "$5,50/h"),
        (parse_count, "7,0B"),
        (parse_bytes, "1,80GB"),
    ],
)
def test_a_comma_that_does_not_group_thousands_is_refused(parse, bad):
    """A decimal comma is refused, not dropped: "$5,50/h" is not $550 per hour."""
    with pytest.raises(UnitError, match="comma only groups thousands"):
        parse(bad)


@pytest.mark.parametrize("text", ["$5.50/parsec", "$5.50/gpu-hours-extra", "$5.50/hourly-ish", "$5.50/gpu-hx"])
def test_unreadable_price(text):
    """A unit is read whole: '$5.50/gpu-hours-extra' is not $5.50/h for starting 'gpu-hour'."""
    with pytest.raises(UnitError, match=r"\$5.50/h"):
        parse_price_per_hour(text)


@pytest.mark.parametrize("text", ["$5.50/gpu-hour", "$5.50/GPU-hours", "$5.50/gpu-hr", "$5.50/hours", "$5.50/hrs"])
def test_price_per_gpu_hour_spellings(text):
    assert parse_price_per_hour(text) == pytest.approx(5.5)


@example(539.915)
@given(st.floats(0, 1e7) | st.integers(0, 10**10).map(lambda mills: mills / 1000))
def test_the_cents_the_solver_counts_are_the_cents_every_result_shows(usd):
    # Costs, budgets and bounds are integer cents in the models; results print dollars with two decimals.
    # $539.915 is stored just below the half cent: shown $539.91, so it must count 53,991 cents, else a
    # bound proven in cents reads a cent above the cost it bounds.
    assert f"{usd_to_cents(usd) / CENTS_PER_USD:.2f}" == f"{usd:.2f}"


@pytest.mark.parametrize(
    ("usd", "text"), [(1.499, "$1.499"), (0.0049, "$0.0049"), (500, "$500.00"), (1.15, "$1.15"), (None, "n/a")]
)
def test_a_budget_prints_as_written_where_it_is_not_whole_cents(usd, text):
    """A $1.499 budget printed as '$1.50' beside the $1.50 schedule it refused, and $0.0049 as '$0.00'."""
    assert fmt_budget(usd) == text
