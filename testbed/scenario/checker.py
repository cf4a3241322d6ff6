"""Field access with errors that name the file, line and field path: :class:`Checker` reads one value of
the document (a mapping's keys, an integer, a number, a rate, a size, a duration, a choice, names, a link)
against its bounds and what it becomes; :func:`field_error` is the error of a field, naming the ``--set``
argument its value came from (:func:`override_of`) or else its line (:func:`line_of`). The ``resolve_*``
modules and the sweep files check every field through it."""

import math
import re

from testbed import topology
from testbed.errors import ScenarioError, UnitError, brief_repr as _brief, closest
from testbed.scenario.schema import (FILE_NAME, MAX_DURATION_S, MAX_FILE_NAME_CHARS, MAX_RATE_BPS, MAX_SIZE_BYTES,
                                     NODE_NAME)
from testbed.units import parse_duration_s, parse_rate_bps, parse_size_bytes


def line_of(lines: dict, path: str) -> int:
    """Line of ``path`` in its file, or of its nearest parent that has one (0 = unknown)."""
    line = lines.get(path)
    while line is None and "." in path:
        path = path.rsplit(".", 1)[0]
        line = lines.get(path)
    return line or 0


def override_of(overridden: dict, path: str) -> str:
    """The ``--set`` item whose value field ``path`` holds (set at ``path`` or at its nearest overridden parent;
    ``overridden`` as ``apply_overrides`` returns it), or "" when the value is the file's."""
    while path not in overridden and "." in path:
        path = path.rsplit(".", 1)[0]
    return overridden.get(path, "")


def field_error(path: str, message: str, source: str, lines: dict, overridden=None) -> ScenarioError:
    """The error of field ``path``: naming the ``--set`` argument its value came from, else its file's line."""
    item = override_of(overridden or {}, path)
    if item:
        return ScenarioError(path, message, source, override=item)
    return ScenarioError(path, message, source, line_of(lines, path))


def _unknown_key_message(key, allowed) -> str:
    """``unknown key; did you mean X?`` with the allowed key closest to ``key`` (:func:`closest`), or the list
    of them all when none is close."""
    guess = closest(key, allowed)
    if guess:
        return f"unknown key; did you mean {guess}?"
    return f"unknown key; allowed here: {', '.join(sorted(str(a) for a in allowed))}"


class Checker:
    """Field access with errors that name the file, line and field path.

    Numbers and quantities are finite and inside the field's range (NaN passes
    every comparison, so it is refused first); names are checked against what
    they become (file names, interface names).
    """

    def __init__(self, source, lines, overridden=None):
        self.source = source
        self.lines = lines
        self.overridden = overridden or {}     # field path -> the --set item that set it

    def error(self, path, message) -> ScenarioError:
        """The error of field ``path`` (see :func:`field_error`), for a caller that raises it itself."""
        return field_error(path, message, self.source, self.lines, self.overridden)

    def fail(self, path, message):
        raise self.error(path, message)

    def keys(self, mapping, path, allowed):
        if not isinstance(mapping, dict):
            self.fail(path, f"expected a mapping with keys {', '.join(sorted(allowed))}")
        for key in mapping:
            if key not in allowed:
                self.fail(f"{path}.{key}" if path else str(key), _unknown_key_message(key, allowed))

    def integer(self, value, path, low=None, high=None):
        if isinstance(value, bool) or not isinstance(value, int):
            self.fail(path, f"expected an integer, got {_brief(value)}")
        if (low is not None and value < low) or (high is not None and value > high):
            shown = value if abs(value) < 10**18 else "a number of more than 18 digits"
            self.fail(path, f"expected an integer in [{low}, {high if high is not None else 'inf'}], got {shown}")
        return value

    def number(self, value, path, low=None, high=None, low_open=False):
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            hint = ""
            if isinstance(value, str) and re.fullmatch(r"[-+]?[0-9]+[eE][-+]?[0-9]+", value.strip()):
                hint = f" (YAML reads {value.strip()} as text; write it with a dot and a sign, e.g. 1.0e-3)"
            self.fail(path, f"expected a number, got {_brief(value)}{hint}")
        try:
            number = float(value)
        except OverflowError:
            number = float("inf")
        if not math.isfinite(number):
            self.fail(path, f"expected a finite number, got {_brief(value) if isinstance(value, float) else 'inf'}")
        if low is not None and (number < low or (low_open and number == low)):
            self.fail(path, f"expected a number {'>' if low_open else '>='} {low}, got {number:g}")
        if high is not None and number > high:
            self.fail(path, f"expected a number <= {high}, got {number:g}")
        return number

    def unit(self, parser, value, path):
        try:
            return parser(value)
        except UnitError as exc:
            self.fail(path, str(exc))

    def rate_bps(self, value, path):
        """A rate as written (before ``scale``): > 0 and at most MAX_RATE_BPS."""
        bps = self.unit(parse_rate_bps, value, path)
        if not 0 < bps <= MAX_RATE_BPS:
            self.fail(path, f"expected a rate > 0 and at most {MAX_RATE_BPS / 1e12:g}Tbps, got {_brief(value)}")
        return bps

    def _bounded(self, parse, value, path, allow_zero, most, what, most_text):
        """A quantity parsed by ``parse``: > 0 (or >= 0 with ``allow_zero``) and at most ``most``."""
        amount = self.unit(parse, value, path)
        if not (0 <= amount if allow_zero else 0 < amount) or amount > most:
            self.fail(path, f"expected a {what} {'>=' if allow_zero else '>'} 0 and at most {most_text}, "
                            f"got {_brief(value)}")
        return amount

    def size_bytes(self, value, path, allow_zero=False):
        """A size as written (before ``scale``): > 0 (or >= 0) and at most MAX_SIZE_BYTES."""
        return self._bounded(parse_size_bytes, value, path, allow_zero, MAX_SIZE_BYTES, "size",
                             f"{MAX_SIZE_BYTES / 1e12:g}TB")

    def duration_s(self, value, path, allow_zero=True):
        """A duration: >= 0 (or > 0) and at most MAX_DURATION_S."""
        return self._bounded(parse_duration_s, value, path, allow_zero, MAX_DURATION_S, "duration",
                             f"{MAX_DURATION_S / 3600:g}h")

    def boolean(self, value, path):
        if not isinstance(value, bool):
            self.fail(path, f"expected true or false, got {_brief(value)}")
        return value

    def choice(self, value, path, allowed):
        if not isinstance(value, str) or value not in allowed:
            self.fail(path, f"expected one of {', '.join(allowed)}, got {_brief(value)}")
        return value

    def names(self, value, path):
        if isinstance(value, str):
            value = [value]
        if not isinstance(value, list) or not value or not all(isinstance(v, str) for v in value):
            self.fail(path, "expected a host name or a non-empty list of names")
        return list(value)

    def items(self, value, path, what):
        """A list (absent or null = empty); anything else names ``what`` was expected."""
        if value is None:
            return []
        if not isinstance(value, list):
            self.fail(path, f"expected a list of {what}, got {_brief(value)}")
        return value

    def link_ends(self, value, path, topo, what="[a, b] naming a link of the topology"):
        """``[a, b]`` naming a link of ``topo`` -> (a, b)."""
        if not (isinstance(value, list) and len(value) == 2 and all(isinstance(v, str) for v in value)
                and any({l.a, l.b} == set(value) for l in topo.links)):
            self.fail(path, f"expected {what}, got {_brief(value)}")
        return tuple(value)

    def file_name(self, value, path):
        """A name that becomes a file or directory name under the results root (see FILE_NAME)."""
        if not isinstance(value, str) or not FILE_NAME.fullmatch(value):
            self.fail(path, f"expected 1-{MAX_FILE_NAME_CHARS} letters, digits, '-', '_' or '.', not starting "
                            f"with '.', got {_brief(value)}")
        return value

    def node_name(self, value, path):
        """A host or switch name: part of Linux interface names (``<node>-eth<N>``), see NODE_NAME."""
        if not isinstance(value, str) or not NODE_NAME.fullmatch(value):
            self.fail(path, f"expected 1-{topology.MAX_NAME_CHARS} ASCII letters, digits or '_' starting with "
                            f"a letter (it becomes an interface name), got {_brief(value)}")
        return value
