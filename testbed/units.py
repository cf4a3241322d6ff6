"""Quantities with units, as scenario files write them and as reports show them.

Rates are bits per second (``100Gbps``, ``9Mbps``, ``1.5Gb/s``) or bytes per second
(``12.5GBps``, ``100MB/s``: eight bits a byte, so ``10GBps`` is exactly ``80Gbps``);
sizes are bytes (``98MB``, ``44.6MiB``, ``256B``, ``2KB``); durations are seconds
(``200ms``, ``1.5s``, ``10us``). In rates and sizes a lower-case ``b`` is a bit and
an upper-case ``B`` a byte, whatever the case of the prefix (``kbps`` = ``Kbps``,
``mbps`` = ``Mbps``): a rate's unit is matched with its case, and a size in bits
(``98Mb``) is refused. Decimal prefixes are powers of 1000, binary ones (KiB, MiB,
GiB) powers of 1024. A bare number is accepted only where the caller says so
(``allow_bare``), because a silent unit is how experiments go wrong.

Every parsed quantity is finite: ``1e400Gbps`` (which overflows to infinity)
and YAML's ``.nan``/``.inf`` are refused here, so no caller has to compare
against NaN. Ranges (> 0, at most ...) are the caller's, which knows the field.
"""

import math
import re

from testbed.errors import UnitError, brief_repr as _brief

_NUMBER = r"([0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)"
_QUANTITY = re.compile(r"^\s*" + _NUMBER + r"\s*([A-Za-z/]*)\s*$")

#: Rate units, matched with their case: a decimal prefix (either case), ``b`` (bit) or ``B`` (byte, 8 bits),
#: then ``ps`` or ``/s``. ``GBps`` is 8e9 b/s, ``Gbps`` 1e9 b/s; ``GBPS`` is neither, and refused.
_RATE_PREFIXES = {"": 1, "k": 10**3, "K": 10**3, "m": 10**6, "M": 10**6, "g": 10**9, "G": 10**9,
                  "t": 10**12, "T": 10**12}
_BITS_OF = {"b": 1, "B": 8}
RATE_UNITS_BPS = {prefix + base + per: float(factor * bits)
                  for prefix, factor in _RATE_PREFIXES.items() for base, bits in _BITS_OF.items()
                  for per in ("ps", "/s")}
_RATE_UNITS_TEXT = ("bps, kbps, Mbps, Gbps, Tbps (bits per second, also b/s ...) or "
                    "Bps, KBps, MBps, GBps, TBps (bytes per second, also B/s ...)")
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


def _parse(text, kind, example, allow_bare, factor_of):
    """``text`` as a finite quantity: its number times ``factor_of(unit, text)`` (which refuses a unit)."""
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
    return _finite(number * factor_of(unit, text), text, kind)


def _unknown_unit(unit, text, expected) -> UnitError:
    return UnitError(f"unknown unit {unit!r} in {text!r}; expected one of {expected}")


def _rate_factor(unit, text) -> float:
    """Bits per second of one ``unit``, matched with its case (b: bit, B: byte)."""
    if unit not in RATE_UNITS_BPS:
        raise _unknown_unit(unit, text, _RATE_UNITS_TEXT)
    return RATE_UNITS_BPS[unit]


def _size_factor(unit, text) -> int:
    """Bytes of one ``unit``, in any case but a lower-case final ``b`` (a bit) after a prefix."""
    if unit.endswith("b") and not unit.endswith("ib") and unit != "b":
        # "Mb" (megabits) in a size field is almost always a mistake for "MB".
        raise UnitError(f"{text!r}: sizes are in bytes; write {unit[:-1]}B (bits are for rates)")
    if unit.lower() not in SIZE_UNITS_BYTES:
        raise _unknown_unit(unit, text, ", ".join(sorted(SIZE_UNITS_BYTES)))
    return SIZE_UNITS_BYTES[unit.lower()]


def _duration_factor(unit, text) -> float:
    """Seconds of one ``unit``, in any case."""
    if unit.lower() not in DURATION_UNITS_S:
        raise _unknown_unit(unit, text, ", ".join(sorted(DURATION_UNITS_S)))
    return DURATION_UNITS_S[unit.lower()]


def parse_rate_bps(text, allow_bare=False) -> float:
    """``'100Gbps'`` -> 1e11, ``'100GBps'`` -> 8e11 (bits per second)."""
    return _parse(text, "rate", "100Gbps", allow_bare, _rate_factor)


def parse_size_bytes(text, allow_bare=False) -> float:
    """``'98MB'`` -> 98e6, ``'44.6MiB'`` -> 44.6 * 2**20 (bytes)."""
    return _parse(text, "size", "98MB", allow_bare, _size_factor)


def parse_duration_s(text, allow_bare=False) -> float:
    """``'200ms'`` -> 0.2 (seconds)."""
    return _parse(text, "duration", "200ms", allow_bare, _duration_factor)


#: How a quantity in a base unit (a metric's unit, testbed/metrics/definitions.py) is shown to people: its
#: readable units, largest first, each with how many base units it holds.
READABLE_UNITS = {
    "s": (("s", 1.0), ("ms", 1e-3), ("µs", 1e-6)),
    "b/s": (("Gb/s", 1e9), ("Mb/s", 1e6), ("kb/s", 1e3), ("b/s", 1.0)),
    "bytes": (("GB", 1e9), ("MB", 1e6), ("kB", 1e3), ("B", 1.0)),
    "share": (("%", 0.01),),
}


def readable_unit(unit: str, magnitude: float) -> tuple:
    """(symbol, base units per symbol) that shows ``magnitude`` (in ``unit``) as a number of at least 1, or
    the smallest of :data:`READABLE_UNITS` below that: ``("ms", 1e-3)`` for 0.04 s, ``("Mb/s", 1e6)`` for
    5e6 b/s; zero in the unit itself (``0 s``, ``0 B``), where it has one. A unit without readable ones
    (``packets``, ``count``) is shown as it is: ``(unit, 1.0)``."""
    scales = READABLE_UNITS.get(unit)
    if not scales:
        return unit, 1.0
    magnitude = abs(magnitude)
    if not magnitude:
        return next((scale for scale in scales if scale[1] == 1.0), scales[0])
    for symbol, per in scales:
        if magnitude >= per:
            return symbol, per
    return scales[-1]


def format_number(number: float) -> str:
    """A number as people read it, never in exponent notation: whole numbers and those of 1000 or more in
    whole units with thousands separated (``241,920``), others to three significant digits (``40.5``,
    ``0.00123``)."""
    number = float(number)
    if math.isnan(number):
        return "-"
    if math.isinf(number):
        return "∞" if number > 0 else "-∞"
    if abs(number) >= 1000 or number.is_integer():
        return f"{number:,.0f}"
    digits = 3 - 1 - math.floor(math.log10(abs(number)))
    text = f"{round(number, digits):.{max(digits, 0)}f}"
    return text.rstrip("0").rstrip(".") if "." in text else text


def format_wall_time(seconds: float) -> str:
    """A wall time as people read it: ``45 s`` below a minute and a half, else whole minutes (``16 min``)."""
    return f"{seconds:.0f} s" if seconds < 90 else f"{seconds / 60:.0f} min"
