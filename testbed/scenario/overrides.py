"""``--set`` overrides: ``key=value`` strings with dotted paths applied to the composed document before it
is checked, each value read by the same limited YAML loader as a file; ``policy=NAME`` and
``transport=NAME`` set every job's. Every field path an override set is remembered with the override, so
that an error in its value names the ``--set`` argument rather than a line of the file."""

import copy
import re

from testbed.errors import ScenarioError, brief_repr as _brief
from testbed.scenario.yaml_source import compose_with_lines

#: Keys a ``--set`` writes into every job (``policy=atp``: each job's ``policy``).
EVERY_JOB_KEYS = ("policy", "transport")


def apply_overrides(doc: dict, overrides) -> tuple:
    """Apply ``key=value`` strings with dotted paths; values are YAML read as scenario files are.

    Returns ``(document, overridden)``: the new document and, for every field
    path an override set, that override (``{"scale": "scale=0.001"}``); a path
    below one of them holds that override's value too (``checker.override_of``).
    A value is composed by the same safe loader as a file (plain data only, the
    same limits), so ``!!python/...`` or an undefined alias is a one-line error.
    A path may create missing mapping keys but never index past a list or
    descend into a scalar.
    """
    doc = copy.deepcopy(doc)
    overridden = {}
    for item in overrides or ():
        if "=" not in item:
            raise ScenarioError(item.strip(), "expected key=value, e.g. jobs.0.policy=atp or scale=0.001",
                                override=item)
        key, _, raw = item.partition("=")
        key = key.strip()
        parts = key.split(".")
        if not all(parts):
            raise ScenarioError(key, "expected a dotted path such as jobs.0.policy or scale", override=item)
        value = _override_value(item, key, raw)
        if key in EVERY_JOB_KEYS:
            for i, job in enumerate(doc.get("jobs") or []):
                if isinstance(job, dict):
                    job[key] = value
                    _record_override(overridden, f"jobs.{i}.{key}", item)
            continue
        _set_path(doc, item, key, parts, value)
        _record_override(overridden, key, item)
    return doc, overridden


def _record_override(overridden: dict, path: str, item: str) -> None:
    """``path`` now holds ``item``'s value, and so does everything below it (set before or not)."""
    for below in [p for p in overridden if p.startswith(path + ".")]:
        del overridden[below]
    overridden[path] = item


def override_field(override: str) -> tuple:
    """The field a ``key=value`` override writes, as the parts of its path; an every-job key (``policy``) as
    ``("jobs", "*", "policy")``."""
    key = override.partition("=")[0].strip()
    return ("jobs", "*", key) if key in EVERY_JOB_KEYS else tuple(key.split("."))


def overrides_overlap(a: str, b: str) -> bool:
    """Whether overrides ``a`` and ``b`` write the same field, or one writes a field inside the other's."""
    return all(x == y or "*" in (x, y) for x, y in zip(override_field(a), override_field(b)))


def _override_value(item: str, key: str, raw: str):
    if not raw.strip():
        return ""
    try:
        value, _ = compose_with_lines(raw, "<command line>", key)
    except ScenarioError as exc:   # a line inside a one-line value says nothing
        raise ScenarioError(exc.field, exc.message, override=item) from None
    return value


def _index(part: str):
    """``part`` as a list index, or None (only ASCII digits: ``'²'.isdigit()`` is true)."""
    return int(part) if re.fullmatch(r"[0-9]{1,9}", part) else None


def _set_path(doc: dict, item: str, key: str, parts: list, value) -> None:
    target = doc
    for depth, part in enumerate(parts):
        here = ".".join(parts[:depth + 1])
        last = depth == len(parts) - 1
        if isinstance(target, list):
            index = _index(part)
            if index is None or index >= len(target):
                raise ScenarioError(key, f"{here}: index {part} out of range (the list has {len(target)} items)",
                                    override=item)
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
            raise ScenarioError(key, f"{parent} is a value ({_brief(target)}), not a mapping or list",
                                override=item)
