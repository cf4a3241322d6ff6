"""How a metric is shown to people: its name in words and its values in readable units, both from its
definition (:mod:`testbed.metrics.definitions`; the scales are :data:`testbed.units.READABLE_UNITS`).

``iteration_time_s`` at 0.0405 reads "iteration time" and "40.5 ms"; ``gradient_sending_rate_bps`` at 5e6
"gradient sending rate" and "5 Mb/s"; a share is a percentage, a bool yes or no. Values shown together (a
table's row of jobs, a sweep's column, a plot's axis) share one :class:`Scale`, chosen for the largest.
"""

import math
import numbers
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from testbed.metrics.definitions import JOB_METRICS, metric_definition, split_job_metric
from testbed.units import format_number, readable_unit

#: A key's last word that only says its unit (the definition says it too): left out of its name.
UNIT_SUFFIXES = {"s": "_s", "b/s": "_bps", "bytes": "_bytes"}
#: Words of keys that are abbreviations, as they are written in prose.
ABBREVIATIONS = {"ps": "PS", "ina": "INA", "cpu": "CPU", "bom": "BOM", "ce": "CE", "p4": "P4"}
#: Units a value is counted in: shown as they are (no readable scale), named in a table's unit column.
COUNTED_UNITS = ("packets", "fragments")


@dataclass(frozen=True)
class Scale:
    """How values of one metric are shown: ``symbol`` the unit shown ("ms"; "" for a plain count),
    ``per`` base units per shown unit."""
    symbol: str
    per: float = 1.0

    def number(self, value) -> str:
        """``value`` (in the metric's unit) in this scale, without the unit: ``40.5``; yes/no for a bool,
        "-" for none."""
        if value is None:
            return "-"
        if _is_bool(value):
            return "yes" if value else "no"
        if not isinstance(value, numbers.Real):
            return str(value)
        return format_number(value / self.per)

    def text(self, value) -> str:
        """``value`` with its unit: ``40.5 ms`` (a percentage without a space: ``1.5%``)."""
        number = self.number(value)
        if not self.symbol or number == "-" or not _is_number(value):
            return number
        return f"{number}{'' if self.symbol == '%' else ' '}{self.symbol}"


def metric_unit(name: str):
    """The unit the definition of ``name`` gives, or None: a run's metric, a job's as ``<job>.<metric>``, or a
    key of a job's entry on its own (``iterations_completed``; a key both define has one unit, a test says)."""
    definition = metric_definition(name) or JOB_METRICS.get(name)
    return definition.unit if definition else None


def metric_name(name: str) -> str:
    """``name`` in words, without the unit its key ends with: ``iteration time``, ``PS ingress``,
    ``resnet50 iteration time`` (a job's); a key without a definition as it is."""
    unit = metric_unit(name)
    if unit is None:
        return name
    job, key = split_job_metric(name)
    suffix = UNIT_SUFFIXES.get(unit)
    if suffix and key.endswith(suffix):
        key = key[:-len(suffix)]
    words = " ".join(ABBREVIATIONS.get(word, word) for word in key.split("_"))
    return f"{job} {words}" if job else words


def metric_scale(name: str, values=()) -> Scale:
    """The scale of ``name``'s values: the readable unit of the largest of ``values`` (one value or several);
    a count as it is, a metric without a definition (or not a number) without a unit."""
    unit = metric_unit(name)
    if unit is None or unit in ("count", "number", "bool", "text", "object", "list"):
        return Scale("")
    if unit in COUNTED_UNITS:
        return Scale(unit)
    values = [values] if _is_number(values) else list(values) if isinstance(values, Iterable) and \
        not isinstance(values, str) else []
    magnitudes = [abs(float(v)) for v in values if _is_number(v) and math.isfinite(float(v))]
    return Scale(*readable_unit(unit, max(magnitudes, default=0.0)))


def metric_label(name: str, values=()) -> str:
    """An axis's or a column's title: ``iteration time (ms)``; ``retransmitted packets`` (its name says the
    unit), ``training throughput iter per s`` (a count)."""
    scale, words = metric_scale(name, values), metric_name(name)
    return f"{words} ({scale.symbol})" if scale.symbol and not words.endswith(scale.symbol) else words


def format_metric(name: str, value) -> str:
    """One value of ``name`` with its unit in the scale that suits it: ``40.5 ms``, ``5 Mb/s``, ``yes``."""
    return metric_scale(name, value).text(value)


def format_value(value) -> str:
    """A value without a definition (a switch counter, a CPU share): yes/no, "-" for none, numbers never
    in exponent notation."""
    return Scale("").number(value)


def _is_bool(value) -> bool:
    return isinstance(value, (bool, np.bool_))


def _is_number(value) -> bool:
    return isinstance(value, numbers.Real) and not _is_bool(value)
