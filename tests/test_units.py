"""Sizes, bandwidths and times from text, as docs/design.md#units lists them."""

import contextlib

import pytest
from hypothesis import given
from hypothesis import strategies as st

from collsim.units import (
    BANDWIDTH_RANGE,
    TIME_RANGE,
    UnitError,
    format_size,
    parse_bandwidth,
    parse_size,
    parse_time,
)


@pytest.mark.parametrize("text, value", [
    ("4MiB", 4 * 2**20), ("1GB", 10**9), ("512", 512), (512, 512), ("1.5KiB", 1536),
    ("2 TiB", 2 * 2**40), ("0", 0), ("8B", 8), ("3KB", 3000),
])
def test_sizes(text, value):
    assert parse_size(text) == value


@pytest.mark.parametrize("text, value", [
    ("900GB/s", 900e9), ("400Gbps", 50e9), ("1.6Tbps", 200e9), ("25 GB/s", 25e9),
    ("100MB/s", 1e8), (1e9, 1e9), ("3.2TB/s", 3.2e12),
])
def test_bandwidths(text, value):
    assert parse_bandwidth(text) == pytest.approx(value, rel=1e-15)


@pytest.mark.parametrize("text, value", [
    ("1.5us", 1.5e-6), ("2ms", 2e-3), ("700ns", 7e-7), ("1s", 1.0), (0, 0.0), ("0.5", 0.5),
])
def test_times(text, value):
    assert parse_time(text) == pytest.approx(value, rel=1e-15)


@pytest.mark.parametrize("parse, text, message", [
    (parse_size, "4 MB/s", "unknown unit 'MB/s'"),
    (parse_size, "-1KB", "cannot be negative"),
    (parse_size, "4XB", "unknown unit"),
    (parse_size, "1.5B", "whole number of bytes"),
    (parse_size, "lots", "expected a size"),
    (parse_size, True, "expected a size"),
    (parse_size, None, "expected a size"),
    (parse_bandwidth, "0GB/s", "must be positive"),
    (parse_bandwidth, "-5GB/s", "cannot be negative"),
    (parse_bandwidth, "5GiB", "unknown unit"),
    (parse_bandwidth, "inf", "expected a bandwidth"),
    (parse_time, "3 weeks", "unknown unit"),
    (parse_time, "-1us", "cannot be negative"),
    (parse_time, "nan", "expected a time"),
    (parse_bandwidth, "1e-320", "between 1 KB/s and 1000 TB/s"),
    (parse_bandwidth, 10**400, "between 1 KB/s and 1000 TB/s, got an integer of about 400"),
    (parse_bandwidth, "1.5PB/s", "unknown unit"),
    (parse_time, "1e308", "and 1 s, or be 0"),
    (parse_time, 1e-320, "between 1 ps"),
    (parse_time, -(10**400), "cannot be negative"),
    (parse_size, 10**400, "expected a finite size"),
])
def test_bad_quantities_say_what_was_expected(parse, text, message):
    with pytest.raises(UnitError, match=message):
        parse(text)


@given(st.floats(allow_nan=True, allow_infinity=True))
def test_bandwidths_parse_exactly_when_in_range(value):
    low, high = BANDWIDTH_RANGE
    if low <= value <= high:
        assert parse_bandwidth(value) == value
    else:
        with pytest.raises(UnitError):
            parse_bandwidth(value)


@given(st.floats(allow_nan=True, allow_infinity=True))
def test_times_parse_exactly_when_zero_or_in_range(value):
    low, high = TIME_RANGE
    if value == 0 or low <= value <= high:
        assert parse_time(value) == value
    else:
        with pytest.raises(UnitError):
            parse_time(value)


@given(st.integers(0, 2**50))
def test_plain_byte_counts_round_trip(n):
    assert parse_size(str(n)) == n


@given(st.text(max_size=12))
def test_arbitrary_text_never_escapes_as_another_error(text):
    for parse in (parse_size, parse_bandwidth, parse_time):
        with contextlib.suppress(UnitError):
            parse(text)


def test_format_size_uses_short_binary_units():
    assert [format_size(x) for x in (8, 1024, 2**20, 3 * 2**30, 1536)] == \
        ["8B", "1K", "1M", "3G", "1.5K"]


def test_format_size_spells_out_binary_units_for_figures():
    assert [format_size(x, iec=True) for x in (8, 1024, 2**20, 3 * 2**30, 1536, 483_000)] == \
        ["8 B", "1 KiB", "1 MiB", "3 GiB", "1.5 KiB", "472 KiB"]
    assert format_size(1015.6 * 2**10) == "1016K"     # no exponent just under the next unit
