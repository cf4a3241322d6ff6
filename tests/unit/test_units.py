import pytest

from testbed.errors import UnitError
from testbed.units import (format_number, parse_duration_s, parse_rate_bps, parse_size_bytes,
                           readable_unit)


@pytest.mark.parametrize("text, bps", [("100Gbps", 100e9), ("9Mbps", 9e6), ("1.5Gb/s", 1.5e9), ("10 kbps", 1e4),
                                       ("3e2bps", 300)])
def test_rates(text, bps):
    assert parse_rate_bps(text) == pytest.approx(bps)


@pytest.mark.parametrize("text, bps", [
    # bits: a lower-case b, the prefix in either case
    ("100bps", 100), ("100b/s", 100), ("100kbps", 1e5), ("100Kbps", 1e5), ("100kb/s", 1e5), ("100Kb/s", 1e5),
    ("100mbps", 1e8), ("100Mbps", 1e8), ("100Mb/s", 1e8), ("100gbps", 1e11), ("100Gbps", 1e11),
    ("100Gb/s", 1e11), ("100tbps", 1e14), ("100Tbps", 1e14), ("100Tb/s", 1e14),
    # bytes: an upper-case B, eight bits each
    ("100Bps", 800), ("100B/s", 800), ("100kBps", 8e5), ("100KBps", 8e5), ("100KB/s", 8e5),
    ("100mBps", 8e8), ("100MBps", 8e8), ("100MB/s", 8e8), ("100gBps", 8e11), ("100GBps", 8e11),
    ("100GB/s", 8e11), ("100TBps", 8e14), ("100TB/s", 8e14), ("12.5GBps", 1e11),
])
def test_rate_units_are_bits_with_a_lower_case_b_and_bytes_with_an_upper_case_b_exactly(text, bps):
    assert parse_rate_bps(text) == bps          # exact: decimal prefixes times 8 lose nothing


@pytest.mark.parametrize("number", ["1", "10", "100", "2.5", "400"])
@pytest.mark.parametrize("prefix", ["", "k", "K", "M", "G", "T"])
def test_a_byte_rate_is_eight_times_the_bit_rate_of_the_same_spelling(number, prefix):
    bits = parse_rate_bps(f"{number}{prefix}bps")
    assert parse_rate_bps(f"{number}{prefix}Bps") == 8 * bits
    assert parse_rate_bps(f"{number}{prefix}B/s") == 8 * bits == 8 * parse_rate_bps(f"{number}{prefix}b/s")


@pytest.mark.parametrize("text", ["100GBPS", "100GBPs", "100Gbit/s", "100Gbit", "100G", "100gb", "100GB",
                                  "100Mib/s", "100GiBps", "100bps/s"])
def test_a_rate_unit_that_says_neither_bits_nor_bytes_is_refused_naming_both(text):
    with pytest.raises(UnitError, match=r"unknown unit .*Gbps.*bits per second.*GBps.*bytes per second"):
        parse_rate_bps(text)


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


@pytest.mark.parametrize("number, text", [
    (0.0405, "0.0405"), (40.5, "40.5"), (12.345, "12.3"), (0.00123456, "0.00123"), (241920, "241,920"),
    (5e6, "5,000,000"), (1.0, "1"), (-0.04, "-0.04"), (1234.6, "1,235"), (float("nan"), "-"),
])
def test_numbers_are_written_as_people_read_them_never_in_exponent_notation(number, text):
    assert format_number(number) == text


@pytest.mark.parametrize("unit, magnitude, readable", [
    ("s", 0.0405, ("ms", 1e-3)), ("s", 4.0, ("s", 1.0)), ("s", 2e-6, ("µs", 1e-6)), ("s", 1e-9, ("µs", 1e-6)),
    ("b/s", 5e6, ("Mb/s", 1e6)), ("b/s", 2.5e9, ("Gb/s", 1e9)), ("bytes", 241920, ("kB", 1e3)),
    ("bytes", 7.258e5, ("kB", 1e3)), ("bytes", 98e6, ("MB", 1e6)), ("share", 0.015, ("%", 0.01)),
    ("s", 0.0, ("s", 1.0)), ("bytes", 0, ("B", 1.0)), ("b/s", 0.0, ("b/s", 1.0)), ("share", 0.0, ("%", 0.01)),
    ("packets", 3, ("packets", 1.0)),
])
def test_a_quantity_takes_the_readable_unit_that_shows_it_as_a_number_of_at_least_one(unit, magnitude, readable):
    assert readable_unit(unit, magnitude) == readable
