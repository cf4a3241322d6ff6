"""``--set`` overrides: ``key=value`` strings with dotted paths applied to the composed document before it
is checked, each value read by the same limited YAML loader as a file; ``policy=NAME`` and
``transport=NAME`` set every job's."""

import copy
import re

from testbed.errors import ScenarioError, brief_repr as _brief
from testbed.scenario.yaml_source import compose_with_lines


def apply_overrides(doc: dict, overrides) -> dict:
    """Apply ``key=value`` strings with dotted paths; values are YAML read as scenario files are.

    A value is composed by the same safe loader as a file (plain data only, the
    same limits), so ``!!python/...`` or an undefined alias is a one-line error.
    A path may create missing mapping keys but never index past a list or
    descend into a scalar.
    """
    doc = copy.deepcopy(doc)
    for item in overrides or ():
        if "=" not in item:
            raise ScenarioError(f"--set {item}", "expected key=value, e.g. jobs.0.policy=atp or scale=0.001",
                                "<command line>")
        key, _, raw = item.partition("=")
        key = key.strip()
        parts = key.split(".")
        if not all(parts):
            raise ScenarioError(f"--set {key}", "expected a dotted path such as jobs.0.policy or scale",
                                "<command line>")
        value = _override_value(key, raw)
        if key in ("policy", "transport"):
            for job in doc.get("jobs") or []:
                if isinstance(job, dict):
                    job[key] = value
            continue
        _set_path(doc, key, parts, value)
    return doc


def _override_value(key: str, raw: str):
    if not raw.strip():
        return ""
    try:
        value, _ = compose_with_lines(raw, "<command line>", f"--set {key}")
    except ScenarioError as exc:   # a line inside a one-line value says nothing
        raise ScenarioError(exc.field, exc.message, "<command line>") from None
    return value


def _index(part: str):
    """``part`` as a list index, or None (only ASCII digits: ``'²'.isdigit()`` is true)."""
    return int(part) if re.fullmatch(r"[0-9]{1,9}", part) else None


def _set_path(doc: dict, key: str, parts: list, value) -> None:
    target = doc
    for depth, part in enumerate(parts):
        here = ".".join(parts[:depth + 1])
        last = depth == len(parts) - 1
        if isinstance(target, list):
            index = _index(part)
            if index is None or index >= len(target):
                raise ScenarioError(f"--set {key}", f"{here}: index {part} out of range (the list has "
                                                    f"{len(target)} items)", "<command line>")
            if last:
                target[index] = value
            else:
                target = target[index]
        elif isinstance(target, dict):
            if last:
                target[part] = value
            else:
                if target.get(part) is None:
                    target[part] = {}
                target = target[part]
        else:
            parent = ".".join(parts[:depth]) or "(top level)"
            raise ScenarioError(f"--set {key}", f"{parent} is a value ({_brief(target)}), not a mapping or list",
                                "<command line>")
