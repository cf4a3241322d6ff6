"""Quantities with units, as scenario files write them.

Rates are bits per second (``100Gbps``, ``9Mbps``, ``1.5Gb/s``), sizes are bytes
(``98MB``, ``44.6MiB``, ``256B``, ``2KB``), durations are seconds (``200ms``,
``1.5s``, ``10us``). Decimal prefixes are powers of 1000, binary ones (KiB,
MiB, GiB) powers of 1024. A bare number is accepted only where the caller says
so (``allow_bare``), because a silent unit is how experiments go wrong.

Every parsed quantity is finite: ``1e400Gbps`` (which overflows to infinity)
and YAML's ``.nan``/``.inf`` are refused here, so no caller has to compare
against NaN. Ranges (> 0, at most ...) are the caller's, which knows the field.
"""

import math
import re

from testbed.errors import UnitError, brief_repr as _brief

_NUMBER = r"([0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)"
_QUANTITY = re.compile(r"^\s*" + _NUMBER + r"\s*([A-Za-z/]*)\s*$")

RATE_UNITS_BPS = {
    "bps": 1.0, "b/s": 1.0,
    "kbps": 1e3, "kb/s": 1e3,
    "mbps": 1e6, "mb/s": 1e6,
    "gbps": 1e9, "gb/s": 1e9,
    "tbps": 1e12, "tb/s": 1e12,
}
SIZE_UNITS_BYTES = {
    "b": 1, "kb": 1000, "mb": 1000**2, "gb": 1000**3, "tb": 1000**4,
    "kib": 1024, "mib": 1024**2, "gib": 1024**3, "tib": 1024**4,
}
DURATION_UNITS_S = {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0, "min": 60.0, "h": 3600.0}
#: Longest text parsed as a quantity: the pattern backtracks quadratically on long digit runs,
#: and no honest quantity is longer.
MAX_QUANTITY_CHARS = 64


def _finite(number: float, text, kind: str) -> float:
    if not math.isfinite(number):
        raise UnitError(f"{_brief(text)} is not a finite {kind}")
    return number


def _parse(text, table, kind, example, allow_bare, case_sensitive_bytes=False):
    if isinstance(text, bool):
        raise UnitError(f"expected a {kind} such as {example!r}, got {text!r}")
    if isinstance(text, (int, float)):
        if allow_bare:
            try:
                return _finite(float(text), text, kind)
            except OverflowError:
                raise UnitError(f"{_brief(text)} is not a finite {kind}") from None
        raise UnitError(f"expected a {kind} with a unit such as {example!r}, got bare number {_brief(text)}")
    match = _QUANTITY.match(text) if isinstance(text, str) and len(text) <= MAX_QUANTITY_CHARS else None
    if not match:
        raise UnitError(f"expected a {kind} such as {example!r}, got {_brief(text)}")
    number, unit = _finite(float(match.group(1)), text, kind), match.group(2)
    if not unit:
        if allow_bare:
            return number
        raise UnitError(f"expected a {kind} with a unit such as {example!r}, got {text!r}")
    key = unit.lower()
    if case_sensitive_bytes and unit.endswith("b") and not unit.endswith("ib") and unit != "b":
        # "Mb" (megabits) in a size field is almost always a mistake for "MB".
        raise UnitError(f"{text!r}: sizes are in bytes; write {unit[:-1]}B (bits are for rates)")
    if key not in table:
        raise UnitError(f"unknown unit {unit!r} in {text!r}; expected one of {', '.join(sorted(set(table)))}")
    return _finite(number * table[key], text, kind)


def parse_rate_bps(text, allow_bare=False) -> float:
    """``'100Gbps'`` -> 1e11 (bits per second)."""
    return _parse(text, RATE_UNITS_BPS, "rate", "100Gbps", allow_bare)


def parse_size_bytes(text, allow_bare=False) -> float:
    """``'98MB'`` -> 98e6, ``'44.6MiB'`` -> 44.6 * 2**20 (bytes)."""
    return _parse(text, SIZE_UNITS_BYTES, "size", "98MB", allow_bare, case_sensitive_bytes=True)


def parse_duration_s(text, allow_bare=False) -> float:
    """``'200ms'`` -> 0.2 (seconds)."""
    return _parse(text, DURATION_UNITS_S, "duration", "200ms", allow_bare)


def format_rate(bps: float) -> str:
    for unit, factor in (("Gbps", 1e9), ("Mbps", 1e6), ("kbps", 1e3)):
        if abs(bps) >= factor:
            return f"{bps / factor:.3g}{unit}"
    return f"{bps:.3g}bps"
