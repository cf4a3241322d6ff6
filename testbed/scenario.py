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
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from testbed import models, topology
from testbed.dataplane.wire import DEFAULT_LANES, MAX_WORKERS_PER_JOB, choose_scale_bits
from testbed.errors import ScenarioError, TopologyError, UnitError
from testbed.units import parse_duration_s, parse_rate_bps, parse_size_bytes

SCENARIO_VERSION = 1
TARGETS = ("auto", "pyswitch", "bmv2")
TOPOLOGY_KINDS = ("explicit", "dumbbell", "leaf-spine", "fat-tree", "goat-testbed")
#: Every control-plane scheme; ``testbed/policy`` registers one function per name.
POLICIES = ("ps", "atp", "switchml", "esa", "geryon", "lbmm", "ksgd", "goat", "goat-async", "grid", "inart",
            "inart-equal")
#: Options a scheme accepts under a job's ``policy_options.<scheme>`` (keyed by scheme, so that
#: ``--set policy=NAME`` picks up NAME's options). Defaults and meaning live in the scheme's module.
#: Kinds: ("int", low, high), ("number", low, high), ("bool",), ("choice", values),
#: ("duration",) -> stored as ``<key>_s``, ("worker_durations",) -> ``<key>_s`` = {worker: seconds}.
_LP_OPTIONS = {"solver": ("choice", ("auto", "highs", "cbc")), "time_limit": ("duration",)}
_ROUTING_OPTIONS = {"paths": ("int", 1, 16), "roundings": ("int", 1, 1000), "improve": ("bool",), **_LP_OPTIONS}
_KRGS_OPTIONS = {"objective": ("choice", ("eq4", "eq1")), "roundings": ("int", 1, 1000), **_LP_OPTIONS}
POLICY_OPTIONS = {
    "ps": {},
    "atp": {"levels": ("int", 1, 2), "admission": ("choice", ("fragment", "flow")),
            "release": ("choice", ("result", "emit"))},
    "esa": {"levels": ("int", 1, 2), "priority": ("int", 0, 65535), "release": ("choice", ("result", "emit"))},
    "switchml": {"pool": ("int", 1, 1 << 20)},
    "geryon": {"paths": ("int", 1, 16)},
    "lbmm": {"paths": ("int", 1, 16)},
    "ksgd": {"k": ("int", 1, 64), "intervals": ("worker_durations",)},
    "goat": dict(_KRGS_OPTIONS),
    "goat-async": {**_KRGS_OPTIONS, "intervals": ("worker_durations",), "rounds": ("int", 1, 100000),
                   "loss_gap": ("number", 0, None), "epsilon": ("number", 0, None),
                   "sigma2": ("number", 0, None)},
    "grid": dict(_ROUTING_OPTIONS),
    "inart": {**_ROUTING_OPTIONS, "split_search": ("bool",)},
    "inart-equal": dict(_ROUTING_OPTIONS),
}

# Allowed keys per section (a key not listed is an error naming the allowed ones).
TOP_KEYS = {"version", "name", "description", "seed", "scale", "target", "run_timeout", "topology", "switch",
            "jobs", "impairments", "metrics", "background", "stragglers", "simulation"}
TOPOLOGY_KEYS = {
    "explicit": {"kind", "link_rate", "programmable", "switches", "hosts", "links"},
    "dumbbell": {"kind", "link_rate", "programmable", "hosts_left", "hosts_right", "paths", "core_rate"},
    "leaf-spine": {"kind", "link_rate", "programmable", "spines", "leaves", "hosts_per_leaf"},
    "fat-tree": {"kind", "link_rate", "programmable", "k", "hosts_per_edge"},
    "goat-testbed": {"kind", "link_rate", "programmable"},
}
SWITCH_KEYS = {"slots", "lanes", "aggregation_capacity", "queue_depth", "ecn_threshold"}
JOB_KEYS = {"name", "model", "gradient_size", "workers", "ps", "policy", "iterations", "compute_time",
            "submodels", "window", "gradient_bound", "retransmit_timeout", "aggregation_switches",
            "submodel_elements", "policy_options", "ps_memory"}
#: ``simulation:`` inputs of the flow- and fragment-level simulator (testbed/sim) only.
SIMULATION_KEYS = {"worker_start", "max_fragment_events"}
IMPAIRMENT_KEYS = {"link", "drop", "duplicate", "reorder"}
METRICS_KEYS = {"sample_interval", "iftop_interfaces"}
BACKGROUND_KEYS = {"distribution", "load", "senders", "receivers", "bottleneck", "max_flow_size", "duration", "port"}
STRAGGLER_KEYS = {"compute_delay", "rate_changes", "pauses", "link_degradations", "heterogeneous_links"}
DELAY_KINDS = ("normal", "uniform", "fixed")
#: GOAT §VII-C draws per-worker latency from a normal distribution with std 0.2 clipped
#: to [0, 1] s and gives no mean; 0.5 s (the middle of the clip range) is our default.
GOAT_DELAY_DEFAULTS = {"mean": "0.5s", "std": "0.2s", "clip": ["0s", "1s"]}


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
    policy_options: dict = field(default_factory=dict)   # scheme -> {option: resolved value}
    ps_memory_bytes: float = 0.0   # aggregation memory of each PS for this job (GOAT's B(alpha)); 0 = unlimited


@dataclass
class ImpairmentSpec:
    link: tuple                    # (a, b) or ("*", "*") for every switch port
    drop: float = 0.0
    duplicate: float = 0.0
    reorder: float = 0.0


@dataclass
class BackgroundSpec:
    """Background flows (PA-ATP §5: Hadoop flows, Poisson arrivals, load 0.2-0.8).

    ``load`` is relative to each sender's own link rate (the HPCC rule) unless
    ``bottleneck`` names a link: then the senders together offer ``load`` of
    that link's rate. Flow sizes are not scaled; rates are, so arrival rates
    follow from load, rate and the distribution's mean.
    """
    distribution: str
    load: float
    senders: list
    receivers: list
    bottleneck: tuple = ()           # (a, b) or empty
    max_flow_bytes: float = 0.0      # 0 = no truncation
    duration_s: float = 0.0          # 0 = as long as the job runs
    port: int = 5001


@dataclass
class ComputeDelaySpec:
    """Extra compute time per worker per iteration drawn from a distribution (seconds)."""
    workers: list
    distribution: str                # normal | uniform | fixed
    mean_s: float = 0.0
    std_s: float = 0.0
    low_s: float = 0.0               # uniform bounds, or the normal's clip range
    high_s: float = 0.0
    value_s: float = 0.0


@dataclass
class TimedInjection:
    """A change at ``at_s`` after the start for ``duration_s``: a host NIC rate, a pause, a link rate."""
    kind: str                        # rate_change | pause | link_degradation
    target: tuple                    # (host,) or (a, b)
    at_s: float
    duration_s: float
    rate_bps: float = 0.0


@dataclass
class StragglerSpec:
    compute_delays: list = field(default_factory=list)   # ComputeDelaySpec
    injections: list = field(default_factory=list)       # TimedInjection
    heterogeneous_range_bps: tuple = ()                  # host link capacities drawn in [low, high]


@dataclass
class SimulationSettings:
    """Inputs of ``inatb simulate`` that describe no real component (testbed/sim).

    ``worker_start_fragments``: how many fragment times each worker starts
    late in the fragment-level model (GOAT Fig. 2(b): W2 and W4 send after
    W1 and W3 sent their three fragments); absent workers start at 0.
    ``max_fragment_events``: above this many fragment-hops per iteration the
    fragment-level model is replaced by its analytic count (no collisions).
    """
    worker_start_fragments: dict = field(default_factory=dict)
    max_fragment_events: int = 2_000_000


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
    background: list = field(default_factory=list)       # BackgroundSpec
    stragglers: StragglerSpec = field(default_factory=StragglerSpec)
    simulation: SimulationSettings = field(default_factory=SimulationSettings)


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
    background = _resolve_background(c, doc.get("background") or [], topo, jobs)
    stragglers = _resolve_stragglers(c, doc.get("stragglers") or {}, topo, jobs, scale)
    if stragglers.heterogeneous_range_bps:
        topo = topology.with_host_link_rates(topo, stragglers.heterogeneous_range_bps, seed)
    simulation = _resolve_simulation(c, doc.get("simulation") or {}, jobs)
    return Scenario(name, source, seed, scale, target, run_timeout_s, topo, switch, jobs, impairments, metrics,
                    doc, doc.get("description", ""), background, stragglers, simulation)


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
        if "submodel_elements" in job:
            model_name, elements = _explicit_submodels(c, job, p, scale)
            submodels = len(elements)
        else:
            model = str(job.get("model", "resnet18"))
            try:
                profile = models.load_profile(model)
            except KeyError:
                c.fail(f"{p}.model",
                       f"unknown model {model!r}; expected one of {', '.join(models.available_models())}")
            if "gradient_size" in job:
                profile = profile.with_gradient_bytes(c.unit(parse_size_bytes, job["gradient_size"],
                                                             f"{p}.gradient_size"))
            profile = profile.scaled(scale)
            submodels = c.integer(job.get("submodels", 4), f"{p}.submodels", 1, 65535)
            model_name, elements = profile.name, profile.partition(submodels)
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
            name=name, job_id=i + 1, model=model_name, gradient_bytes=4 * sum(elements),
            submodel_elements=elements, workers=workers, ps=ps, policy=policy,
            iterations=c.integer(job.get("iterations", 10), f"{p}.iterations", 1, 10**6),
            compute_time_s=c.unit(parse_duration_s, job.get("compute_time", "0s"), f"{p}.compute_time"),
            window=window, gradient_bound=bound, scale_bits=scale_bits,
            retransmit_timeout_s=c.unit(parse_duration_s, job.get("retransmit_timeout", "50ms"),
                                        f"{p}.retransmit_timeout"),
            aggregation_switches=list(agg_switches),
            policy_options=_resolve_policy_options(c, job.get("policy_options") or {}, f"{p}.policy_options",
                                                   workers),
            ps_memory_bytes=c.unit(parse_size_bytes, job["ps_memory"], f"{p}.ps_memory") * scale
            if "ps_memory" in job else 0.0))
    names = [j.name for j in jobs]
    if len(set(names)) != len(names):
        c.fail("jobs", f"job names must be unique, got {names}")
    return jobs


def _explicit_submodels(c, job, p, scale):
    """``submodel_elements: [64, 64, 64]``: the sub-model partition given directly (elements, scaled).

    For examples that need exact fragment counts or split ratios (GOAT Fig. 2's
    three one-fragment sub-models); excludes ``submodels`` and ``gradient_size``.
    """
    for other in ("submodels", "gradient_size"):
        if other in job:
            c.fail(f"{p}.{other}", "give either submodel_elements or submodels/gradient_size, not both")
    spec = job["submodel_elements"]
    if not isinstance(spec, list) or not spec:
        c.fail(f"{p}.submodel_elements", "expected a non-empty list of element counts, e.g. [64, 64, 64]")
    elements = [max(1, round(c.integer(n, f"{p}.submodel_elements.{k}", 1) * scale)) for k, n in enumerate(spec)]
    return str(job.get("model", "custom")), elements


def _resolve_policy_options(c, spec, path, workers):
    """``policy_options: {goat: {roundings: 4}, ksgd: {k: 6}}`` -> {scheme: {option: value}} (see POLICY_OPTIONS)."""
    c.keys(spec, path, set(POLICY_OPTIONS))
    resolved = {}
    for scheme, options in spec.items():
        sp = f"{path}.{scheme}"
        allowed = POLICY_OPTIONS[scheme]
        if not allowed and options:
            c.fail(sp, f"{scheme} takes no options")
        c.keys(options or {}, sp, set(allowed))
        out = {}
        for key, value in (options or {}).items():
            kind, kp = allowed[key], f"{sp}.{key}"
            if kind[0] == "int":
                out[key] = c.integer(value, kp, kind[1], kind[2])
            elif kind[0] == "number":
                out[key] = c.number(value, kp, kind[1], kind[2])
            elif kind[0] == "bool":
                if not isinstance(value, bool):
                    c.fail(kp, f"expected true or false, got {value!r}")
                out[key] = value
            elif kind[0] == "choice":
                out[key] = c.choice(value, kp, kind[1])
            elif kind[0] == "duration":
                out[f"{key}_s"] = c.unit(parse_duration_s, value, kp)
            else:  # worker_durations
                c.keys(value, kp, set(workers))
                out[f"{key}_s"] = {w: c.unit(parse_duration_s, d, f"{kp}.{w}") for w, d in value.items()}
        resolved[scheme] = out
    return resolved


def _resolve_simulation(c, spec, jobs):
    c.keys(spec, "simulation", SIMULATION_KEYS)
    s = SimulationSettings()
    workers = {w for j in jobs for w in j.workers}
    starts = spec.get("worker_start") or {}
    c.keys(starts, "simulation.worker_start", workers)
    s.worker_start_fragments = {w: c.integer(v, f"simulation.worker_start.{w}", 0, 1 << 30)
                                for w, v in starts.items()}
    s.max_fragment_events = c.integer(spec.get("max_fragment_events", s.max_fragment_events),
                                      "simulation.max_fragment_events", 0, 1 << 40)
    return s


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


def _resolve_background(c, spec, topo, jobs):
    from testbed.traffic.distributions import FlowSizeCDF, UnknownDistributionError
    if not isinstance(spec, list):
        c.fail("background", "expected a list of {distribution, load, senders, receivers, ...}")
    hosts = {h.name for h in topo.hosts()}
    busy = {h for j in jobs for h in j.workers + j.ps}
    idle = sorted(hosts - busy)
    out = []
    for i, item in enumerate(spec):
        p = f"background.{i}"
        c.keys(item, p, BACKGROUND_KEYS)
        name = item.get("distribution", "hadoop")
        try:
            FlowSizeCDF.load(name)
        except UnknownDistributionError as exc:
            c.fail(f"{p}.distribution", str(exc))
        if "load" not in item:
            c.fail(f"{p}.load", "missing; a fraction in (0, 1] of the sender's link rate")
        load = c.number(item["load"], f"{p}.load", 0, 1, low_open=True)
        groups = {}
        for role in ("senders", "receivers"):
            names = c.names(item[role], f"{p}.{role}") if role in item else idle
            for k, h in enumerate(names):
                if h not in hosts:
                    c.fail(f"{p}.{role}.{k}", f"host {h!r} is not defined in the topology")
            groups[role] = names
        if len(set(groups["senders"]) | set(groups["receivers"])) < 2:
            c.fail(p, "background traffic needs at least two hosts (senders and receivers); "
                      "by default it uses the hosts no job uses")
        bottleneck = ()
        if "bottleneck" in item:
            link = item["bottleneck"]
            if not (isinstance(link, list) and len(link) == 2 and any({l.a, l.b} == set(link) for l in topo.links)):
                c.fail(f"{p}.bottleneck", f"expected [a, b] naming a link of the topology, got {link!r}")
            bottleneck = tuple(link)
        out.append(BackgroundSpec(
            name, load, groups["senders"], groups["receivers"], bottleneck,
            c.unit(parse_size_bytes, item["max_flow_size"], f"{p}.max_flow_size") if "max_flow_size" in item else 0.0,
            c.unit(parse_duration_s, item["duration"], f"{p}.duration") if "duration" in item else 0.0,
            c.integer(item.get("port", 5001 + i), f"{p}.port", 1024, 39999)))
    return out


def _resolve_stragglers(c, spec, topo, jobs, scale):
    c.keys(spec, "stragglers", STRAGGLER_KEYS)
    workers = {w for j in jobs for w in j.workers}
    out = StragglerSpec()
    for i, item in enumerate(spec.get("compute_delay") or []):
        p = f"stragglers.compute_delay.{i}"
        c.keys(item, p, {"workers", "distribution", "mean", "std", "clip", "low", "high", "value"})
        names = sorted(workers) if item.get("workers", "all") == "all" else c.names(item["workers"], f"{p}.workers")
        for k, w in enumerate(names):
            if w not in workers:
                c.fail(f"{p}.workers.{k}", f"{w!r} is not a worker of any job")
        kind = c.choice(item.get("distribution", "normal"), f"{p}.distribution", DELAY_KINDS)
        d = ComputeDelaySpec(names, kind)
        dur = lambda key, default: c.unit(parse_duration_s, item.get(key, default), f"{p}.{key}")  # noqa: E731
        if kind == "normal":
            d.mean_s, d.std_s = dur("mean", GOAT_DELAY_DEFAULTS["mean"]), dur("std", GOAT_DELAY_DEFAULTS["std"])
            clip = item.get("clip", GOAT_DELAY_DEFAULTS["clip"])
            if not (isinstance(clip, list) and len(clip) == 2):
                c.fail(f"{p}.clip", "expected [low, high], e.g. [0s, 1s]")
            d.low_s = c.unit(parse_duration_s, clip[0], f"{p}.clip.0")
            d.high_s = c.unit(parse_duration_s, clip[1], f"{p}.clip.1")
        elif kind == "uniform":
            d.low_s, d.high_s = dur("low", "0s"), dur("high", "1s")
        else:
            d.value_s = dur("value", "0s")
        if d.low_s > d.high_s:
            c.fail(p, f"low/clip bound {d.low_s}s exceeds the high bound {d.high_s}s")
        out.compute_delays.append(d)
    windows = {}
    for section, kind in (("rate_changes", "rate_change"), ("pauses", "pause"),
                          ("link_degradations", "link_degradation")):
        for i, item in enumerate(spec.get(section) or []):
            p = f"stragglers.{section}.{i}"
            allowed = {"at", "duration"} | ({"link", "rate"} if kind == "link_degradation" else
                                            {"host", "rate"} if kind == "rate_change" else {"worker"})
            c.keys(item, p, allowed)
            if kind == "link_degradation":
                link = item.get("link")
                if not (isinstance(link, list) and len(link) == 2 and any({l.a, l.b} == set(link)
                                                                          for l in topo.links)):
                    c.fail(f"{p}.link", f"expected [a, b] naming a link of the topology, got {link!r}")
                target = tuple(link)
            else:
                key = "host" if kind == "rate_change" else "worker"
                name = item.get(key)
                if name not in workers:
                    c.fail(f"{p}.{key}", f"{name!r} is not a worker of any job (workers: {', '.join(sorted(workers))})")
                target = (name,)
            at_s = c.unit(parse_duration_s, item.get("at", "0s"), f"{p}.at")
            if "duration" not in item:
                c.fail(f"{p}.duration", "missing; how long the change lasts, e.g. 2s")
            duration_s = c.unit(parse_duration_s, item["duration"], f"{p}.duration")
            rate = 0.0
            if kind != "pause":
                if "rate" not in item:
                    c.fail(f"{p}.rate", "missing; the rate during the change, e.g. 10Gbps (scaled like link rates)")
                rate = c.unit(parse_rate_bps, item["rate"], f"{p}.rate") * scale
            if kind != "pause":
                # One rate change at a time per interface: overlapping windows would undo each other.
                iface = frozenset(target) if kind == "link_degradation" else \
                    frozenset((target[0], topo.neighbor(target[0], topo.host_link(target[0]))))
                for other_at, other_end, other_path in windows.get(iface, []):
                    if at_s < other_end and other_at < at_s + duration_s:
                        c.fail(p, f"overlaps {other_path} on the same interface "
                                  f"({other_at:g}s-{other_end:g}s); one rate change at a time")
                windows.setdefault(iface, []).append((at_s, at_s + duration_s, p))
            out.injections.append(TimedInjection(kind, target, at_s, duration_s, rate))
    if "heterogeneous_links" in spec:
        item = spec["heterogeneous_links"]
        p = "stragglers.heterogeneous_links"
        c.keys(item, p, {"range"})
        bounds = item.get("range")
        if not (isinstance(bounds, list) and len(bounds) == 2):
            c.fail(f"{p}.range", "expected [low, high], e.g. [10Mbps, 30Mbps] (InArt §5; scaled)")
        low, high = (c.unit(parse_rate_bps, b, f"{p}.range.{k}") * scale for k, b in enumerate(bounds))
        if low > high:
            c.fail(f"{p}.range", "low exceeds high")
        out.heterogeneous_range_bps = (low, high)
    return out
