import pytest

from testbed.errors import UnitError
from testbed.units import format_rate, parse_duration_s, parse_rate_bps, parse_size_bytes


@pytest.mark.parametrize("text, bps", [("100Gbps", 100e9), ("9Mbps", 9e6), ("1.5Gb/s", 1.5e9), ("10 kbps", 1e4),
                                       ("3e2bps", 300)])
def test_rates(text, bps):
    assert parse_rate_bps(text) == pytest.approx(bps)


@pytest.mark.parametrize("text, nbytes", [("98MB", 98e6), ("44.6MiB", 44.6 * 2**20), ("256B", 256), ("2KB", 2000),
                                          ("1GiB", 2**30)])
def test_sizes(text, nbytes):
    assert parse_size_bytes(text) == pytest.approx(nbytes)


@pytest.mark.parametrize("text, seconds", [("200ms", 0.2), ("1.5s", 1.5), ("10us", 1e-5), ("2min", 120)])
def test_durations(text, seconds):
    assert parse_duration_s(text) == pytest.approx(seconds)


@pytest.mark.parametrize("parser, text, fragment", [
    (parse_rate_bps, "100", "with a unit"),
    (parse_rate_bps, "100Gbpx", "unknown unit"),
    (parse_size_bytes, "98Mb", "sizes are in bytes"),
    (parse_duration_s, "fast", "expected a duration"),
    (parse_rate_bps, True, "expected a rate"),
])
def test_bad_quantities_name_the_problem(parser, text, fragment):
    with pytest.raises(UnitError, match=fragment):
        parser(text)


def test_bare_numbers_only_when_allowed():
    assert parse_rate_bps(5, allow_bare=True) == 5.0
    with pytest.raises(UnitError):
        parse_rate_bps(5)


def test_format_rate():
    assert format_rate(2.5e9) == "2.5Gbps"
    assert format_rate(900) == "900bps"
