"""Scenario files: the one schema of the testbed, its validation and resolution.

A scenario is YAML with ``version: 1``. :func:`load_scenario` reads it,
applies ``--set`` overrides (dotted paths: ``jobs.0.policy=goat``,
``scale=0.0001``; ``policy=NAME`` sets every job's policy), validates every
field and resolves units and ``scale`` into a :class:`Scenario` of plain data.
Any problem raises :class:`ScenarioError` naming the file and line, the field
path and what was expected; nothing here touches the network.

``scale`` multiplies the papers' link rates, switch aggregation capacity and
gradient sizes (DESIGN.md "Scale and the packet budget"); durations such as
compute time are not scaled, so communication and computation keep the
papers' proportions.

Later features extend the schema here, in ``SCHEMA`` and the ``_resolve_*``
functions, so there is one home for every field.
"""

import copy
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path

import yaml

from testbed import models, topology
from testbed.dataplane.wire import DEFAULT_LANES, MAX_WORKERS_PER_JOB, choose_scale_bits
from testbed.errors import ScenarioError, TopologyError, UnitError
from testbed.units import parse_duration_s, parse_rate_bps, parse_size_bytes

SCENARIO_VERSION = 1
TARGETS = ("auto", "pyswitch", "bmv2")
TOPOLOGY_KINDS = ("explicit", "dumbbell", "leaf-spine", "fat-tree", "goat-testbed")
#: Policies the emulation can run now; the control-plane issue adds the others here.
POLICIES = ("ps", "atp")

# Allowed keys per section (a key not listed is an error naming the allowed ones).
TOP_KEYS = {"version", "name", "description", "seed", "scale", "target", "run_timeout", "topology", "switch",
            "jobs", "impairments", "metrics"}
TOPOLOGY_KEYS = {
    "explicit": {"kind", "link_rate", "programmable", "switches", "hosts", "links"},
    "dumbbell": {"kind", "link_rate", "programmable", "hosts_left", "hosts_right", "paths", "core_rate"},
    "leaf-spine": {"kind", "link_rate", "programmable", "spines", "leaves", "hosts_per_leaf"},
    "fat-tree": {"kind", "link_rate", "programmable", "k", "hosts_per_edge"},
    "goat-testbed": {"kind", "link_rate", "programmable"},
}
SWITCH_KEYS = {"slots", "lanes", "aggregation_capacity", "queue_depth", "ecn_threshold"}
JOB_KEYS = {"name", "model", "gradient_size", "workers", "ps", "policy", "iterations", "compute_time",
            "submodels", "window", "gradient_bound", "retransmit_timeout", "aggregation_switches"}
IMPAIRMENT_KEYS = {"link", "drop", "duplicate", "reorder"}
METRICS_KEYS = {"sample_interval", "iftop_interfaces"}


@dataclass
class SwitchSettings:
    slots: int = 1024
    lanes: int = DEFAULT_LANES
    aggregation_capacity_bps: float = 0.0   # 0 = unlimited (scaled)
    queue_depth_pkts: int = 64
    ecn_threshold_pkts: int = 0


@dataclass
class JobSpec:
    name: str
    job_id: int
    model: str
    gradient_bytes: int
    submodel_elements: list        # elements per sub-model after scaling
    workers: list
    ps: list
    policy: str
    iterations: int
    compute_time_s: float
    window: int
    gradient_bound: float
    scale_bits: int
    retransmit_timeout_s: float
    aggregation_switches: list     # empty = any programmable switch


@dataclass
class ImpairmentSpec:
    link: tuple                    # (a, b) or ("*", "*") for every switch port
    drop: float = 0.0
    duplicate: float = 0.0
    reorder: float = 0.0


@dataclass
class MetricsSettings:
    sample_interval_s: float = 0.5
    iftop_interfaces: list = field(default_factory=list)   # host names; empty = every PS


@dataclass
class Scenario:
    name: str
    source: str
    seed: int
    scale: float
    target: str
    run_timeout_s: float
    topology: topology.Topology
    switch: SwitchSettings
    jobs: list
    impairments: list
    metrics: MetricsSettings
    resolved: dict                 # the validated document after overrides (written to results)
    description: str = ""

    def job(self, name: str) -> JobSpec:
        return next(j for j in self.jobs if j.name == name)

    def summary_dict(self) -> dict:
        return {"name": self.name, "seed": self.seed, "scale": self.scale, "target": self.target,
                "jobs": [asdict(j) for j in self.jobs]}


# --- YAML with line numbers ------------------------------------------------------

class _LineLoader(yaml.SafeLoader):
    pass


def _compose_with_lines(text: str, source: str):
    """Load YAML keeping the line of every mapping key and sequence item, by field path."""
    try:
        node = yaml.compose(text, Loader=_LineLoader)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        raise ScenarioError("(file)", f"not valid YAML: {getattr(exc, 'problem', exc)}", source,
                            mark.line + 1 if mark else 0)
    lines = {}

    def convert(n, path):
        lines.setdefault(path, n.start_mark.line + 1)
        if isinstance(n, yaml.MappingNode):
            out = {}
            for key_node, value_node in n.value:
                key = key_node.value
                sub = f"{path}.{key}" if path else str(key)
                lines[sub] = key_node.start_mark.line + 1
                if key in out:
                    raise ScenarioError(sub, "key given twice", source, key_node.start_mark.line + 1)
                out[key] = convert(value_node, sub)
            return out
        if isinstance(n, yaml.SequenceNode):
            return [convert(item, f"{path}.{i}" if path else str(i)) for i, item in enumerate(n.value)]
        return yaml.safe_load(yaml.serialize(n)) if n.tag != "tag:yaml.org,2002:null" else None

    if node is None:
        raise ScenarioError("(file)", "the file is empty; a scenario needs at least version, topology and jobs",
                            source)
    return convert(node, ""), lines


# --- overrides -----------------------------------------------------------------------

def apply_overrides(doc: dict, overrides) -> dict:
    """Apply ``key=value`` strings with dotted paths; values are parsed as YAML scalars."""
    doc = copy.deepcopy(doc)
    for item in overrides or ():
        if "=" not in item:
            raise ScenarioError(f"--set {item}", "expected key=value, e.g. jobs.0.policy=atp or scale=0.001",
                                "<command line>")
        key, _, raw = item.partition("=")
        key = key.strip()
        value = yaml.safe_load(raw) if raw.strip() else ""
        if key == "policy":
            for job in doc.get("jobs") or []:
                if isinstance(job, dict):
                    job["policy"] = value
            continue
        parts = key.split(".")
        target = doc
        for depth, part in enumerate(parts[:-1]):
            nxt = target[int(part)] if isinstance(target, list) and part.isdigit() and int(part) < len(target) \
                else (target.get(part) if isinstance(target, dict) else None)
            if nxt is None:
                if isinstance(target, dict):
                    nxt = target[part] = {}
                else:
                    raise ScenarioError(f"--set {key}", f"{'.'.join(parts[:depth + 1])} does not exist",
                                        "<command line>")
            target = nxt
        last = parts[-1]
        if isinstance(target, list):
            if not last.isdigit() or int(last) >= len(target):
                raise ScenarioError(f"--set {key}", f"index {last} out of range", "<command line>")
            target[int(last)] = value
        else:
            target[last] = value
    return doc


# --- validation ------------------------------------------------------------------------

class _Checker:
    """Field access with errors that name the file, line and field path."""

    def __init__(self, source, lines):
        self.source = source
        self.lines = lines

    def fail(self, path, message):
        line = self.lines.get(path)
        probe = path
        while line is None and "." in probe:
            probe = probe.rsplit(".", 1)[0]
            line = self.lines.get(probe)
        raise ScenarioError(path, message, self.source, line or 0)

    def keys(self, mapping, path, allowed):
        if not isinstance(mapping, dict):
            self.fail(path, f"expected a mapping with keys {', '.join(sorted(allowed))}")
        for key in mapping:
            if key not in allowed:
                self.fail(f"{path}.{key}" if path else str(key),
                          f"unknown key; allowed here: {', '.join(sorted(allowed))}")

    def integer(self, value, path, low=None, high=None):
        if isinstance(value, bool) or not isinstance(value, int):
            self.fail(path, f"expected an integer, got {value!r}")
        if (low is not None and value < low) or (high is not None and value > high):
            self.fail(path, f"expected an integer in [{low}, {high if high is not None else 'inf'}], got {value}")
        return value

    def number(self, value, path, low=None, high=None, low_open=False):
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            self.fail(path, f"expected a number, got {value!r}")
        if low is not None and (value < low or (low_open and value == low)):
            self.fail(path, f"expected a number {'>' if low_open else '>='} {low}, got {value}")
        if high is not None and value > high:
            self.fail(path, f"expected a number <= {high}, got {value}")
        return float(value)

    def unit(self, parser, value, path):
        try:
            return parser(value)
        except UnitError as exc:
            self.fail(path, str(exc))

    def choice(self, value, path, allowed):
        if value not in allowed:
            self.fail(path, f"expected one of {', '.join(allowed)}, got {value!r}")
        return value

    def names(self, value, path):
        if isinstance(value, str):
            value = [value]
        if not isinstance(value, list) or not value or not all(isinstance(v, str) for v in value):
            self.fail(path, "expected a host name or a non-empty list of names")
        return list(value)


def load_scenario(path, overrides=()) -> Scenario:
    path = Path(path)
    source = str(path)
    try:
        text = path.read_text()
    except OSError as exc:
        raise ScenarioError("(file)", f"cannot read: {exc.strerror}", source)
    return parse_scenario(text, source, overrides, default_name=path.stem)


def parse_scenario(text: str, source: str = "<scenario>", overrides=(), default_name="scenario") -> Scenario:
    doc, lines = _compose_with_lines(text, source)
    if not isinstance(doc, dict):
        raise ScenarioError("(file)", "expected a mapping at the top level", source, 1)
    doc = apply_overrides(doc, overrides)
    c = _Checker(source, lines)
    c.keys(doc, "", TOP_KEYS)
    if "version" not in doc:
        c.fail("version", f"missing; write version: {SCENARIO_VERSION}")
    if doc["version"] != SCENARIO_VERSION:
        c.fail("version", f"expected {SCENARIO_VERSION}, got {doc['version']!r}")
    for required in ("topology", "jobs"):
        if required not in doc:
            c.fail(required, "missing (required)")
    name = doc.get("name", default_name)
    if not isinstance(name, str) or not re.fullmatch(r"[A-Za-z0-9_.-]+", name):
        c.fail("name", f"expected letters, digits, '-', '_' or '.', got {name!r}")
    seed = c.integer(doc.get("seed", 1), "seed", 0)
    scale = c.number(doc.get("scale", 1.0), "scale", 0, 1, low_open=True)
    target = c.choice(doc.get("target", "auto"), "target", TARGETS)
    run_timeout_s = c.unit(parse_duration_s, doc.get("run_timeout", "600s"), "run_timeout")

    topo = _resolve_topology(c, doc["topology"], scale, seed)
    switch = _resolve_switch(c, doc.get("switch") or {}, scale)
    jobs = _resolve_jobs(c, doc["jobs"], topo, scale, switch)
    impairments = _resolve_impairments(c, doc.get("impairments") or [], topo)
    metrics = _resolve_metrics(c, doc.get("metrics") or {}, topo)
    return Scenario(name, source, seed, scale, target, run_timeout_s, topo, switch, jobs, impairments, metrics,
                    doc, doc.get("description", ""))


def _resolve_topology(c, spec, scale, seed):
    path = "topology"
    if not isinstance(spec, dict):
        c.fail(path, "expected a mapping with a kind")
    kind = spec.get("kind")
    if kind not in TOPOLOGY_KINDS:
        c.fail(f"{path}.kind", f"unknown topology kind {kind!r}; expected one of {', '.join(TOPOLOGY_KINDS)}")
    c.keys(spec, path, TOPOLOGY_KEYS[kind])
    rate = c.unit(parse_rate_bps, spec.get("link_rate", "100Gbps"), f"{path}.link_rate") * scale
    try:
        if kind == "explicit":
            topo = _explicit(c, spec, rate, scale)
        elif kind == "dumbbell":
            core = spec.get("core_rate")
            topo = topology.dumbbell(
                "dumbbell", rate, c.integer(spec.get("hosts_left", 2), f"{path}.hosts_left", 1, 64),
                c.integer(spec.get("hosts_right", 2), f"{path}.hosts_right", 1, 64),
                c.integer(spec.get("paths", 1), f"{path}.paths", 1, 16),
                c.unit(parse_rate_bps, core, f"{path}.core_rate") * scale if core is not None else None)
        elif kind == "leaf-spine":
            topo = topology.leaf_spine(
                "leaf-spine", rate, c.integer(spec.get("spines", 2), f"{path}.spines", 1, 64),
                c.integer(spec.get("leaves", 2), f"{path}.leaves", 1, 64),
                c.integer(spec.get("hosts_per_leaf", 2), f"{path}.hosts_per_leaf", 1, 64))
        elif kind == "fat-tree":
            topo = topology.fat_tree("fat-tree", rate, c.integer(spec.get("k", 4), f"{path}.k", 2, 16),
                                     c.integer(spec["hosts_per_edge"], f"{path}.hosts_per_edge", 1, 64)
                                     if "hosts_per_edge" in spec else None)
        else:
            topo = topology.goat_testbed("goat-testbed", rate)
    except TopologyError as exc:
        c.fail(path, str(exc))
    # No rule keeps the builder's flags (every switch programmable, or the
    # explicit topology's per-switch ``programmable``).
    rule = spec.get("programmable")
    switch_names = {s.name for s in topo.switches()}
    if isinstance(rule, list):
        for i, sw in enumerate(rule):
            if sw not in switch_names:
                c.fail(f"{path}.programmable.{i}", f"{sw!r} is not a switch of this topology")
    elif isinstance(rule, dict):
        c.keys(rule, f"{path}.programmable", {"fraction"})
        c.number(rule.get("fraction"), f"{path}.programmable.fraction", 0, 1, low_open=True)
    elif rule not in ("all", "none", None):
        c.fail(f"{path}.programmable", "expected all, none, a list of switch names, or {fraction: F}")
    return topology.mark_programmable(topo, rule, seed)


def _explicit(c, spec, rate, scale):
    path = "topology"
    switches = []
    for i, item in enumerate(spec.get("switches") or []):
        if isinstance(item, str):
            switches.append((item, True))
        elif isinstance(item, dict):
            c.keys(item, f"{path}.switches.{i}", {"name", "programmable"})
            switches.append((item.get("name"), bool(item.get("programmable", True))))
        else:
            c.fail(f"{path}.switches.{i}", "expected a name or {name, programmable}")
    if not switches:
        c.fail(f"{path}.switches", "an explicit topology needs at least one switch")
    hosts = spec.get("hosts") or []
    if not isinstance(hosts, list) or not all(isinstance(h, str) for h in hosts) or not hosts:
        c.fail(f"{path}.hosts", "expected a non-empty list of host names")
    defined = {s for s, _ in switches} | set(hosts)
    links = []
    for i, item in enumerate(spec.get("links") or []):
        lp = f"{path}.links.{i}"
        link_rate = None
        if isinstance(item, list) and len(item) in (2, 3):
            a, b = item[0], item[1]
            if len(item) == 3:
                link_rate = c.unit(parse_rate_bps, item[2], lp) * scale
        elif isinstance(item, dict):
            c.keys(item, lp, {"a", "b", "rate"})
            a, b = item.get("a"), item.get("b")
            if "rate" in item:
                link_rate = c.unit(parse_rate_bps, item["rate"], f"{lp}.rate") * scale
        else:
            c.fail(lp, "expected [a, b], [a, b, rate] or {a, b, rate}")
        for end in (a, b):
            if end not in defined:
                c.fail(lp, f"node {end!r} is not defined in topology.switches or topology.hosts")
        links.append((a, b, link_rate))
    return topology.explicit("explicit", rate, switches, hosts, links)


def _resolve_switch(c, spec, scale):
    c.keys(spec, "switch", SWITCH_KEYS)
    s = SwitchSettings()
    s.slots = c.integer(spec.get("slots", s.slots), "switch.slots", 1, 1 << 20)
    s.lanes = c.integer(spec.get("lanes", s.lanes), "switch.lanes", 1, 255)
    if "aggregation_capacity" in spec:
        s.aggregation_capacity_bps = c.unit(parse_rate_bps, spec["aggregation_capacity"],
                                            "switch.aggregation_capacity") * scale
    s.queue_depth_pkts = c.integer(spec.get("queue_depth", s.queue_depth_pkts), "switch.queue_depth", 1, 100000)
    s.ecn_threshold_pkts = c.integer(spec.get("ecn_threshold", 0), "switch.ecn_threshold", 0, 100000)
    return s


def _resolve_jobs(c, spec, topo, scale, switch):
    if not isinstance(spec, list) or not spec:
        c.fail("jobs", "expected a non-empty list of jobs")
    hosts = {h.name for h in topo.hosts()}
    used = {}
    jobs = []
    for i, job in enumerate(spec):
        p = f"jobs.{i}"
        c.keys(job, p, JOB_KEYS)
        for required in ("workers", "ps"):
            if required not in job:
                c.fail(f"{p}.{required}", "missing (required)")
        name = job.get("name", f"job{i}")
        workers = c.names(job["workers"], f"{p}.workers")
        ps = c.names(job["ps"], f"{p}.ps")
        for role, names in (("workers", workers), ("ps", ps)):
            for k, h in enumerate(names):
                if h not in hosts:
                    c.fail(f"{p}.{role}.{k}", f"host {h!r} is not defined in the topology "
                                              f"(hosts: {', '.join(sorted(hosts)[:12])}{' ...' if len(hosts) > 12 else ''})")
                if h in used:
                    c.fail(f"{p}.{role}.{k}", f"host {h!r} already serves {used[h]}")
                used[h] = f"{name} as {role}"
        if len(workers) > MAX_WORKERS_PER_JOB:
            c.fail(f"{p}.workers", f"{len(workers)} workers; the INA bitmap holds at most {MAX_WORKERS_PER_JOB}")
        policy = job.get("policy", "ps")
        if policy not in POLICIES:
            c.fail(f"{p}.policy", f"unknown policy {policy!r}; expected one of {', '.join(POLICIES)}")
        model = str(job.get("model", "resnet18"))
        try:
            profile = models.load_profile(model)
        except KeyError:
            c.fail(f"{p}.model", f"unknown model {model!r}; expected one of {', '.join(models.available_models())}")
        if "gradient_size" in job:
            profile = profile.with_gradient_bytes(c.unit(parse_size_bytes, job["gradient_size"],
                                                         f"{p}.gradient_size"))
        profile = profile.scaled(scale)
        submodels = c.integer(job.get("submodels", 4), f"{p}.submodels", 1, 65535)
        if submodels > len(ps) * 4096:
            c.fail(f"{p}.submodels", "too many sub-models")
        if len(ps) > submodels:
            c.fail(f"{p}.ps", f"{len(ps)} parameter servers but only {submodels} sub-models to share among them")
        bound = c.number(job.get("gradient_bound", 1.0), f"{p}.gradient_bound", 0, low_open=True)
        try:
            scale_bits = choose_scale_bits(len(workers), bound)
        except ValueError as exc:
            c.fail(f"{p}.gradient_bound", str(exc))
        agg_switches = job.get("aggregation_switches") or []
        for k, sw in enumerate(agg_switches):
            node = topo.nodes.get(sw)
            if node is None or node.kind != "switch":
                c.fail(f"{p}.aggregation_switches.{k}", f"{sw!r} is not a switch of this topology")
            if not node.programmable:
                c.fail(f"{p}.aggregation_switches.{k}",
                       f"switch {sw!r} is not programmable; aggregation needs a programmable switch "
                       f"(see topology.programmable)")
        window = c.integer(job.get("window", 64), f"{p}.window", 1, 65535)
        if window > switch.slots:
            c.fail(f"{p}.window", f"window {window} exceeds switch.slots {switch.slots}")
        jobs.append(JobSpec(
            name=name, job_id=i + 1, model=profile.name, gradient_bytes=profile.gradient_bytes,
            submodel_elements=profile.partition(submodels), workers=workers, ps=ps, policy=policy,
            iterations=c.integer(job.get("iterations", 10), f"{p}.iterations", 1, 10**6),
            compute_time_s=c.unit(parse_duration_s, job.get("compute_time", "0s"), f"{p}.compute_time"),
            window=window, gradient_bound=bound, scale_bits=scale_bits,
            retransmit_timeout_s=c.unit(parse_duration_s, job.get("retransmit_timeout", "50ms"),
                                        f"{p}.retransmit_timeout"),
            aggregation_switches=list(agg_switches)))
    names = [j.name for j in jobs]
    if len(set(names)) != len(names):
        c.fail("jobs", f"job names must be unique, got {names}")
    return jobs


def _resolve_impairments(c, spec, topo):
    if not isinstance(spec, list):
        c.fail("impairments", "expected a list of {link: [a, b] or all, drop, duplicate, reorder}")
    out = []
    for i, item in enumerate(spec):
        p = f"impairments.{i}"
        c.keys(item, p, IMPAIRMENT_KEYS)
        link = item.get("link", "all")
        if link == "all":
            ends = ("*", "*")
        else:
            if not (isinstance(link, list) and len(link) == 2):
                c.fail(f"{p}.link", "expected [a, b] naming a link, or all")
            if not any({l.a, l.b} == set(link) for l in topo.links):
                c.fail(f"{p}.link", f"no link between {link[0]!r} and {link[1]!r} in the topology")
            if all(topo.nodes[n].kind == "host" for n in link):
                c.fail(f"{p}.link", "impairments are applied by a switch; the link needs a switch end")
            ends = tuple(link)
        values = {k: c.number(item.get(k, 0.0), f"{p}.{k}", 0, 0.5) for k in ("drop", "duplicate", "reorder")}
        out.append(ImpairmentSpec(ends, **values))
    return out


def _resolve_metrics(c, spec, topo):
    c.keys(spec, "metrics", METRICS_KEYS)
    m = MetricsSettings()
    m.sample_interval_s = c.unit(parse_duration_s, spec.get("sample_interval", "0.5s"), "metrics.sample_interval")
    hosts = {h.name for h in topo.hosts()}
    for i, h in enumerate(spec.get("iftop_interfaces") or []):
        if h not in hosts:
            c.fail(f"metrics.iftop_interfaces.{i}", f"host {h!r} is not defined in the topology")
        m.iftop_interfaces.append(h)
    return m
