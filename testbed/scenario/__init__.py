"""Scenario files: the one schema of the testbed, its validation and resolution.

A scenario is YAML with ``version: 1``. :func:`load_scenario` reads it,
applies ``--set`` overrides (dotted paths: ``jobs.0.policy=goat``,
``scale=0.0001``; ``policy=NAME`` sets every job's policy), validates every
field and resolves units and ``scale`` into a :class:`Scenario` of plain data.
Any problem raises :class:`ScenarioError` naming the file and line (or the
``--set`` argument the value came from), the field path and what was
expected; nothing here touches the network.

``scale`` multiplies the papers' link rates, switch aggregation capacity and
gradient sizes (testbed/budget.py: the packet budget a scale asks for); durations such as
compute time are not scaled, so communication and computation keep the
papers' proportions. ``time_dilation`` (N >= 1, or ``auto``) is how much
slower the emulation runs; every value here stays virtual
(testbed/dilation.py derives the network's slowed world).

Later features extend the schema here, in the tables of :mod:`.schema` and the
``resolve_*`` functions, so there is one home for every field.

The package divides the work: :mod:`.schema` says what a file may say,
:mod:`.model` what it resolves into; :mod:`.yaml_source` reads the YAML with
its lines, :mod:`.overrides` applies ``--set``, :mod:`.checker` checks one
field at a time; :mod:`.resolve_topology`, :mod:`.resolve_jobs` and
:mod:`.resolve_dynamics` resolve the sections, which this module puts
together (:func:`parse_scenario`); :mod:`.limits` says what only the
simulator can take. The names the rest of the testbed uses are re-exported
here.
"""

import re
from pathlib import Path

from testbed import topology
from testbed.errors import ScenarioError, brief_repr as _brief
from testbed.scenario.checker import Checker, field_error, line_of
from testbed.scenario.limits import HTB_MAX_RATE_BPS, emulation_limits, require_emulable
from testbed.scenario.model import Scenario
from testbed.scenario.overrides import apply_overrides
from testbed.scenario.resolve_dynamics import (resolve_background, resolve_impairments, resolve_metrics,
                                               resolve_simulation, resolve_stragglers)
from testbed.scenario.resolve_jobs import resolve_jobs, resolve_switch
from testbed.scenario.resolve_topology import resolve_topology
from testbed.scenario.schema import (AUTO_DILATION, AUTO_PROCESSES, BACKGROUND_KEYS, IMPAIRMENT_KEYS, JOB_KEYS,
                                     MAX_FILE_NAME_CHARS, MAX_SEED, MAX_TIME_DILATION, METRICS_KEYS, NODE_NAME,
                                     PER_SWITCH_PROCESSES, SCHEME_NAMES, SCHEME_OPTIONS, RING_SCHEMES, RING_TRANSPORTS,
                                     SCENARIO_VERSION, SIMULATION_KEYS, STRAGGLER_KEYS, SWITCH_KEYS, TARGETS,
                                     TOP_KEYS, TOPOLOGY_KEYS, TRAINING_KEYS, TRANSPORT_NAMES)
from testbed.scenario.yaml_source import (MAX_SCENARIO_BYTES, compose_with_lines, read_yaml_document,
                                          read_yaml_text)

__all__ = [
    "AUTO_DILATION", "AUTO_PROCESSES", "BACKGROUND_KEYS", "HTB_MAX_RATE_BPS", "IMPAIRMENT_KEYS", "JOB_KEYS",
    "MAX_SCENARIO_BYTES", "METRICS_KEYS", "NODE_NAME", "PER_SWITCH_PROCESSES", "SCHEME_NAMES", "SCHEME_OPTIONS",
    "RING_SCHEMES", "RING_TRANSPORTS", "SIMULATION_KEYS", "STRAGGLER_KEYS", "SWITCH_KEYS", "Scenario", "TARGETS",
    "TOP_KEYS", "TOPOLOGY_KEYS", "TRAINING_KEYS", "TRANSPORT_NAMES", "apply_overrides", "default_scenario_name",
    "emulation_limits",
    "field_error", "line_of", "load_scenario", "parse_scenario", "read_yaml_document", "read_yaml_text",
    "require_emulable", "resolve_document",
]


def load_scenario(path, overrides=()) -> Scenario:
    path = Path(path)
    return parse_scenario(read_yaml_text(path), str(path), overrides, default_name=default_scenario_name(path))


def default_scenario_name(path) -> str:
    """The name of a scenario without ``name:``: its file's stem made a valid name (a file name need
    not be one)."""
    name = re.sub(r"[^A-Za-z0-9._-]+", "-", Path(path).stem).lstrip(".")[:MAX_FILE_NAME_CHARS]
    return name or "scenario"


def parse_scenario(text: str, source: str = "<scenario>", overrides=(), default_name="scenario") -> Scenario:
    """The scenario YAML ``text`` says (read from ``source``), with ``overrides`` (``--set`` items) applied."""
    doc, lines = compose_with_lines(text, source)
    return resolve_document(doc, lines, source, overrides, default_name)


def resolve_document(doc, lines: dict, source: str, overrides=(), default_name="scenario") -> Scenario:
    """The scenario a composed document says (plain data, as :func:`compose_with_lines` returns it), with
    ``overrides`` applied; ``lines``: the line of each field path in ``source``, empty when it has none (a
    dict given in Python: errors then name the source and the field)."""
    if doc is None:
        raise ScenarioError("(file)", "the file is empty; a scenario needs at least version, topology and jobs",
                            source)
    if not isinstance(doc, dict):
        raise ScenarioError("(file)", "expected a mapping at the top level", source, 1)
    doc, overridden = apply_overrides(doc, overrides)
    c = Checker(source, lines, overridden)
    if "axes" in doc and "topology" not in doc:
        c.fail("axes", "this is a sweep file (a scenario and axes), not a scenario: run it with inatb sweep")
    c.keys(doc, "", TOP_KEYS)
    if "version" not in doc:
        c.fail("version", f"missing; write version: {SCENARIO_VERSION}")
    if doc["version"] != SCENARIO_VERSION or isinstance(doc["version"], bool):
        c.fail("version", f"expected {SCENARIO_VERSION}, got {_brief(doc['version'])}")
    for required in ("topology", "jobs"):
        if required not in doc:
            c.fail(required, "missing (required)")
    name = c.file_name(doc.get("name", default_name), "name")
    description = doc.get("description", "")
    if not isinstance(description, str):
        c.fail("description", f"expected text, got {_brief(description)}")
    seed = c.integer(doc.get("seed", 1), "seed", 0, MAX_SEED)
    scale = c.number(doc.get("scale", 1.0), "scale", 0, 1, low_open=True)
    target = c.choice(doc.get("target", "auto"), "target", TARGETS)
    run_timeout_s = c.duration_s(doc.get("run_timeout", "600s"), "run_timeout", allow_zero=False)
    dilation = doc.get("time_dilation", 1.0)
    if dilation != AUTO_DILATION:
        if isinstance(dilation, str):
            c.fail("time_dilation", f"expected a number in [1, {MAX_TIME_DILATION:g}] or {AUTO_DILATION}, "
                                    f"got {_brief(dilation)}")
        dilation = c.number(dilation, "time_dilation", 1, MAX_TIME_DILATION)

    topo = resolve_topology(c, doc["topology"], scale, seed, _listed_workers(doc.get("jobs")))
    switch = resolve_switch(c, _section(c, doc, "switch"), scale)
    jobs = resolve_jobs(c, doc["jobs"], topo, scale, switch)
    impairments = resolve_impairments(c, c.items(doc.get("impairments"), "impairments", "impairments"), topo)
    metrics = resolve_metrics(c, _section(c, doc, "metrics"), topo)
    fewest = min(j.iterations for j in jobs)
    if metrics.warmup_iterations >= fewest:
        c.fail("metrics.warmup_iterations", f"expected fewer than the fewest iterations of a job ({fewest}), "
                                            f"got {metrics.warmup_iterations}")
    background = resolve_background(c, c.items(doc.get("background"), "background", "background entries"),
                                     topo, jobs)
    stragglers = resolve_stragglers(c, _section(c, doc, "stragglers"), topo, jobs, scale, seed)
    if stragglers.heterogeneous_links:
        topo = topology.with_host_link_rates(topo, stragglers.heterogeneous_links, seed)
    topo.colocated_ps = {ps for job in jobs for ps in job.ps if ps in job.workers}
    simulation = resolve_simulation(c, _section(c, doc, "simulation"), jobs)
    return Scenario(name, source, seed, scale, target, run_timeout_s, topo, switch, jobs, impairments, metrics,
                    doc, description, background, stragglers, simulation, lines=lines, overridden=overridden,
                    time_dilation=dilation)


def _listed_workers(jobs) -> list:
    """The worker names the jobs list, in order, before the jobs are checked (``programmable: {count, order}``
    orders the switches by them; a malformed job is reported by the jobs' own checks)."""
    return [w for job in (jobs if isinstance(jobs, list) else []) if isinstance(job, dict)
            for w in (job.get("workers") if isinstance(job.get("workers"), list) else []) if isinstance(w, str)]


def _section(c, doc, key):
    """A top-level mapping section; absent or null is empty."""
    value = doc.get(key)
    if value is None:
        return {}
    if not isinstance(value, dict):
        c.fail(key, f"expected a mapping, got {_brief(value)}")
    return value
