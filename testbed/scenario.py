"""Scenario files: the one schema of the testbed, its validation and resolution.

A scenario is YAML with ``version: 1``. :func:`load_scenario` reads it,
applies ``--set`` overrides (dotted paths: ``jobs.0.policy=goat``,
``scale=0.0001``; ``policy=NAME`` sets every job's policy), validates every
field and resolves units and ``scale`` into a :class:`Scenario` of plain data.
Any problem raises :class:`ScenarioError` naming the file and line, the field
path and what was expected; nothing here touches the network.

``scale`` multiplies the papers' link rates, switch aggregation capacity and
gradient sizes (testbed/budget.py: the packet budget a scale asks for); durations such as
compute time are not scaled, so communication and computation keep the
papers' proportions. ``time_dilation`` (N >= 1, or ``auto``) is how much
slower the emulation runs; every value here stays virtual
(testbed/dilation.py derives the network's slowed world).

Later features extend the schema here, in ``SCHEMA`` and the ``_resolve_*``
functions, so there is one home for every field.
"""

import copy
import math
import random
import re
from dataclasses import asdict, dataclass, field
from typing import Optional
from pathlib import Path

import yaml

from testbed import models, topology
from testbed.agents.common import straggler_delay_s
from testbed.agents.transport import AWAITING_DATA_PLANE, TRANSPORTS, default_transport
from testbed.dataplane.wire import DEFAULT_LANES, MAX_WORKERS_PER_JOB, choose_scale_bits, fragments_of
from testbed.errors import ScenarioError, TopologyError, UnitError, brief_repr as _brief
from testbed.units import parse_duration_s, parse_rate_bps, parse_size_bytes

SCENARIO_VERSION = 1
#: ``time_dilation: N | auto`` (testbed/dilation.py): the emulation runs N times slower and reports virtual time.
AUTO_DILATION = "auto"
MAX_TIME_DILATION = 1000.0
TARGETS = ("auto", "pyswitch", "bmv2")
TOPOLOGY_KINDS = ("explicit", "dumbbell", "leaf-spine", "fat-tree", "dragonfly", "goat-testbed")
#: Every control-plane scheme; ``testbed/policy`` registers one function per name.
POLICIES = ("ps", "atp", "switchml", "esa", "geryon", "lbmm", "ksgd", "goat", "goat-async", "grid", "inart",
            "inart-equal", "rar", "h-ar", "rina")
#: Schemes whose jobs are rings of workers (all-reduce) without a PS: no ``ps``, no INA
#: (testbed/policy/ring.py, testbed/agents/ring.py). Their workers send over the transports listed here.
RING_POLICIES = ("rar", "h-ar", "rina")
RING_TRANSPORTS = ("atp",)
#: Options a scheme accepts under a job's ``policy_options.<scheme>`` (keyed by scheme, so that
#: ``--set policy=NAME`` picks up NAME's options). Defaults and meaning live in the scheme's module.
#: Kinds: ("int", low, high), ("number", low, high), ("bool",), ("choice", values), ("int_or", low,
#: high, word): an integer in [low, high] or that word, ("duration",) -> stored as ``<key>_s``,
#: ("worker_durations",) -> ``<key>_s`` = {worker: seconds}.
_LP_OPTIONS = {"solver": ("choice", ("auto", "highs", "cbc")), "time_limit": ("duration",)}
_ROUTING_OPTIONS = {"paths": ("int", 1, 16), "roundings": ("int", 1, 1000), "improve": ("bool",), **_LP_OPTIONS}
_KRGS_OPTIONS = {"objective": ("choice", ("eq4", "eq1")), "roundings": ("int", 1, 1000),
                 "release": ("choice", ("hold", "emit")), **_LP_OPTIONS}
#: Ring schemes' per-step delay (Rina Eq. 1: a step's fixed overhead O and its spread sigma): each worker
#: waits a draw of a normal of mean ``step_overhead`` and std ``step_jitter``, clipped at 0, before each step.
_RING_OPTIONS = {"step_overhead": ("duration",), "step_jitter": ("duration",)}
POLICY_OPTIONS = {
    "ps": {},
    "atp": {"levels": ("int_or", 1, 2, "all"), "admission": ("choice", ("fragment", "flow")),
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
    "rar": dict(_RING_OPTIONS),
    "h-ar": dict(_RING_OPTIONS),
    "rina": dict(_RING_OPTIONS),
}

#: Names that become file and directory names under the results root (scenario and job names):
#: no '/', NUL or '..', no hidden files, short enough for any file system.
MAX_FILE_NAME_CHARS = 64
FILE_NAME = re.compile(r"[A-Za-z0-9_-][A-Za-z0-9._-]{0,%d}" % (MAX_FILE_NAME_CHARS - 1))
#: Host and switch names become Linux interface names ``<node>-eth<N>`` (IFNAMSIZ = 16): ASCII only.
NODE_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_]{0,%d}" % (topology.MAX_NAME_CHARS - 1))
#: Sanity ceilings on quantities as written (before ``scale``); far above any paper's figure
#: (400 Gb/s links, a 1.6 GB LSTM gradient, minutes-long runs), far below float overflow.
MAX_RATE_BPS = 1e15
MAX_SIZE_BYTES = 1e15
MAX_DURATION_S = 24 * 3600.0
MAX_SEED = 2**32 - 1
#: Fragments one worker sends per iteration (all sub-models, after ``scale``): beyond this a
#: gradient size is a typo, not an experiment (the LSTM of InArt at scale 1 is 6.4 million).
MAX_FRAGMENTS_PER_ITERATION = 10_000_000
#: Mininet shapes host interfaces with htb through TCIntf, which accepts at most 1000 Mb/s on these
#: machines; a scaled link rate above it is valid for ``inatb simulate`` only.
HTB_MAX_RATE_BPS = 1000e6
#: ... and writes the rate in Mbit/s with six decimals: far below this it shapes nothing like the figure.
HTB_MIN_RATE_BPS = 1e3

# Allowed keys per section (a key not listed is an error naming the allowed ones).
TOP_KEYS = {"version", "name", "description", "seed", "scale", "time_dilation", "target", "run_timeout", "topology",
            "switch", "jobs", "impairments", "metrics", "background", "stragglers", "simulation"}
_TOPOLOGY_COMMON_KEYS = {"kind", "link_rate", "programmable", "result_multicast"}
TOPOLOGY_KEYS = {
    "explicit": _TOPOLOGY_COMMON_KEYS | {"switches", "hosts", "links", "pinned_paths", "ecmp"},
    "dumbbell": _TOPOLOGY_COMMON_KEYS | {"hosts_left", "hosts_right", "paths", "core_rate", "pinned_paths", "ecmp"},
    "leaf-spine": _TOPOLOGY_COMMON_KEYS | {"spines", "leaves", "hosts_per_leaf"},
    "fat-tree": _TOPOLOGY_COMMON_KEYS | {"k", "hosts_per_edge"},
    "dragonfly": _TOPOLOGY_COMMON_KEYS | {"a", "g", "h", "hosts_per_router"},
    "goat-testbed": _TOPOLOGY_COMMON_KEYS | {"workers_per_rack"},
}
#: ``topology.result_multicast``: which switches replicate RESULTs (Topology.result_multicast).
RESULT_MULTICAST = ("programmable", "all")
#: ``topology.ecmp``: how the flows of hosts running no job agent share parallel links (Topology.ecmp).
ECMP_MODES = ("pair", "flow")
#: ``topology.programmable: {count: k, order: ...}``: which k switches are programmable
#: (``topology.incremental_order``: Rina §IV-D's replacement order).
INCREMENTAL_ORDERS = ("rina",)
SWITCH_KEYS = {"slots", "memory", "lanes", "aggregation_capacity", "queue_depth", "ecn_threshold", "processes"}
#: A job's ``retransmit_timeout``: the workers' minimum RTO (Linux's TCP_RTO_MIN). Their RTO follows the
#: measured RTT above it; a smaller floor fires while fragments still wait in a growing window's queue.
DEFAULT_MIN_RTO = "200ms"
DEFAULT_WINDOW = 100
JOB_KEYS = {"name", "model", "gradient_size", "workers", "ps", "policy", "iterations", "compute_time",
            "submodels", "window", "gradient_bound", "retransmit_timeout", "aggregation_switches",
            "submodel_elements", "submodel_size", "policy_options", "ps_memory", "transport", "transport_options",
            "start", "straggler_allowance"}
#: A job's ``transport:`` (how its workers send; testbed/agents/transport registers one class per name, and
#: each class declares the ``transport_options`` it takes). Default: the one each paper pairs with the
#: job's policy (``default_transport``). Transports are not policies: any policy runs with any transport, except
#: that a ring policy's workers send over ``RING_TRANSPORTS`` only.
TRANSPORT_NAMES = tuple(TRANSPORTS)
#: ``simulation:`` inputs of the flow- and fragment-level simulator (testbed/sim) only.
SIMULATION_KEYS = {"worker_start", "worker_pacing", "max_fragment_events", "results"}
#: ``simulation.worker_pacing``: how often a worker sends a fragment in the fragment-level model.
WORKER_PACINGS = ("uniform", "host_link")
IMPAIRMENT_KEYS = {"link", "drop", "duplicate", "reorder"}
METRICS_KEYS = {"sample_interval", "iftop_interfaces", "warmup_iterations"}
BACKGROUND_KEYS = {"distribution", "load", "senders", "receivers", "bottleneck", "max_flow_size", "flow_size_scale",
                   "duration", "port", "start", "congestion_control", "ecn"}
#: The background's TCP congestion control unless a scenario names one: Linux's default, so a run does not
#: depend on what its host was set to (``net.ipv4.tcp_congestion_control``).
DEFAULT_BACKGROUND_CONGESTION_CONTROL = "cubic"
STRAGGLER_KEYS = {"compute_delay", "rate_changes", "pauses", "link_degradations", "failures", "heterogeneous_links"}
DELAY_KINDS = ("normal", "uniform", "fixed")
#: GOAT §VII-C draws per-worker latency ("ratio in [0, 1]") from a normal distribution with std 0.2 and
#: gives no mean: we centre it at 0, clipped to [0, 1] s (half the workers wait nothing, the others
#: |N(0, 0.2)|). Centred at 0.5 s, the middle of the clip range, the delays spread too little for K-SGD's
#: fastest half to beat GOAT (0.85x at 16 workers, where Exp#4 has 1.30x); centred at 0, Exp#4's order holds.
GOAT_DELAY_DEFAULTS = {"mean": "0s", "std": "0.2s", "clip": ["0s", "1s"]}


#: ``switch.processes``: the planner groups the pyswitch switches into processes (``testbed.budget``), or
#: every switch has a process of its own, or a number of processes.
AUTO_PROCESSES = "auto"
PER_SWITCH_PROCESSES = "per-switch"


@dataclass
class SwitchSettings:
    slots: int = 1024
    lanes: int = DEFAULT_LANES
    aggregation_capacity_bps: float = 0.0   # 0 = unlimited (scaled)
    queue_depth_pkts: int = 128      # packets per switch egress queue; ECN marks from half of it by default
    ecn_threshold_pkts: int = 0
    #: How many pyswitch processes the switches share (``testbed.budget.plan_switch_groups``): a number,
    #: AUTO_PROCESSES (the planner's choice) or PER_SWITCH_PROCESSES
    processes: object = AUTO_PROCESSES


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
    transport: str = "atp"         # how its workers send (testbed/agents/transport)
    transport_options: dict = field(default_factory=dict)   # {option: value}, checked against the transport's OPTIONS
    start_s: float = 0.0           # its workers start the first iteration this long after the run's start
    #: Whether its workers know the compute-delay spread (``stragglers.compute_delay``) and wait that long
    #: for an iteration's first RESULT before counting fragments as lost (controller.straggler_allowance_s).
    #: False: as a deployed transport, which cannot know it, they time out on their RTO alone, and a fast
    #: worker resends while the job waits for its stragglers (GOAT §VII-B's asynchronous arrivals).
    straggler_allowance: bool = True

    @property
    def is_ring(self) -> bool:
        """A ring all-reduce of its workers (``RING_POLICIES``): no PS, no aggregation in the network."""
        return self.policy in RING_POLICIES

    def ps_agent(self, ps: str) -> str:
        """The agent name of the job's PS on host ``ps``: the host's, or ``<host>-ps`` beside the job's worker
        on the same host (a co-located PS: two agents, two record files)."""
        return f"{ps}-ps" if ps in self.workers else ps

    @property
    def ps_agents(self) -> list:
        return [self.ps_agent(ps) for ps in self.ps]

    @property
    def completion_agents(self) -> list:
        """The agents whose records say an iteration of the job is complete (and exact): its PSs, or every
        worker of a ring."""
        return list(self.workers) if self.is_ring else self.ps_agents


@dataclass
class ImpairmentSpec:
    link: tuple                    # (a, b) or ("*", "*") for every switch port
    drop: float = 0.0
    duplicate: float = 0.0
    reorder: float = 0.0


@dataclass
class BackgroundSpec:
    """Background flows (PA-ATP §5: Hadoop flows, Poisson arrivals, load 0.2-0.8).

    ``load`` is relative to a sender's link rate (the HPCC rule; the slowest sender's, where their links
    differ, for every sender) unless
    ``bottleneck`` names a link: then the senders together offer ``load`` of
    that link's rate. Flow sizes are not scaled with the run's ``scale`` (a
    Hadoop flow stays a Hadoop flow); rates are, so arrival rates follow from
    load, rate and the distribution's mean. ``flow_size_scale`` multiplies
    every size of the distribution (1 unless given), so that flows can keep
    their length against an iteration's instead; ``max_flow_bytes`` then caps
    the sizes. ``distribution: constant`` (``CONSTANT_RATE``) is instead one
    UDP flow from each sender to each receiver at a constant rate, the
    sender's ``load`` shared among its receivers, in Ethernet frame bits
    (PA-ATP §V-B). Flows run from ``start_s`` for ``duration_s`` after the
    run's start. TCP flows use
    ``congestion_control`` (a name the kernel knows; the run checks it before
    it builds anything), cubic unless the scenario says otherwise, and
    negotiate ECN when ``ecn`` is true (``net.ipv4.tcp_ecn=1`` in each sender's
    namespace, RFC 3168: a CE mark from a switch queue cuts their window as a
    loss would); by default they do not ask for it, as Linux does not.
    """
    distribution: str
    load: float
    senders: list
    receivers: list
    bottleneck: tuple = ()           # (a, b) or empty
    max_flow_bytes: float = 0.0      # 0 = no truncation
    flow_size_scale: float = 1.0     # every size of the distribution times this
    duration_s: float = 0.0          # 0 = as long as the job runs
    port: int = 5001
    start_s: float = 0.0             # the flows' window opens this long after the run's start
    congestion_control: str = DEFAULT_BACKGROUND_CONGESTION_CONTROL   # TCP flows only; None for constant
    ecn: bool = False                # TCP flows ask for ECN (RFC 3168)


@dataclass
class ComputeDelaySpec:
    """Extra compute time per worker per iteration drawn from a distribution (seconds): every iteration
    afresh, or with ``persistent: true`` once per worker for the whole run (a persistently slow worker, the
    straggler a K-of-N scheme leaves out), drawn here from the scenario's seed: ``persistent_s``."""
    workers: list
    distribution: str                # normal | uniform | fixed
    mean_s: float = 0.0
    std_s: float = 0.0
    low_s: float = 0.0               # uniform bounds, or the normal's clip range
    high_s: float = 0.0
    value_s: float = 0.0
    persistent_s: dict = field(default_factory=dict)   # worker -> its delay every iteration; empty: redrawn


#: ``stragglers`` sections of timed injections -> their kind (:class:`TimedInjection`).
INJECTION_SECTIONS = {"rate_changes": "rate_change", "pauses": "pause", "link_degradations": "link_degradation",
                      "failures": "failure"}


@dataclass
class TimedInjection:
    """A change at ``at_s`` after the start for ``duration_s``: a host NIC rate, a pause, a link rate; or a
    worker's failure (its agent killed at ``at_s``, for good: ``duration_s`` 0)."""
    kind: str                        # rate_change | pause | link_degradation | failure
    target: tuple                    # (host,) or (a, b)
    at_s: float
    duration_s: float
    rate_bps: float = 0.0


@dataclass
class StragglerSpec:
    compute_delays: list = field(default_factory=list)   # ComputeDelaySpec
    injections: list = field(default_factory=list)       # TimedInjection
    heterogeneous_links: Optional[topology.HostLinkDraw] = None   # how host link capacities are drawn


@dataclass
class SimulationSettings:
    """Inputs of ``inatb simulate`` that describe no real component (testbed/sim).

    ``worker_start_fragments``: how many fragment times each worker starts
    late in the fragment-level model (GOAT Fig. 2(b): W2 and W4 send after
    W1 and W3 sent their three fragments); absent workers start at 0.
    ``worker_pacing``: ``uniform`` (every worker one fragment per time unit)
    or ``host_link`` (each one fragment every r_max / r_w time units, r_w
    its host link's rate and r_max the fastest worker's: open-loop senders
    at their links' rates, as GOAT §VII-D simulates network dynamics; no
    window holds a fast worker back, so it may run ``slots`` fragments ahead
    of a slow one and collide).
    ``max_fragment_events``: above this many fragment-hops per iteration the
    fragment-level model is replaced by its analytic count (no collisions).
    ``results``: whether the fluid model loads links with the RESULTs the PSs
    send back (as ``inatb run`` does: multicast by the switches for schemes
    that aggregate in the network, unicast otherwise); the papers' motivating
    examples count the gradient push only and set it false.
    """
    worker_start_fragments: dict = field(default_factory=dict)
    worker_pacing: str = "uniform"
    max_fragment_events: int = 2_000_000
    results: bool = True


@dataclass
class MetricsSettings:
    sample_interval_s: float = 0.5
    iftop_interfaces: list = field(default_factory=list)   # host names; empty = every PS
    # The first iterations whose times and rates the summary leaves out: the transports' warm-up (slow
    # start from the initial window), which a model at equilibrium does not describe. 0 = none.
    warmup_iterations: int = 0


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
    lines: dict = field(default_factory=dict)              # field path -> line in ``source`` (for messages)
    #: N >= 1 (the emulation runs N times slower; every reported time is virtual: testbed/dilation.py), or
    #: ``AUTO_DILATION``: the smallest N the packet budget allows (testbed.budget.PacketBudget.auto_factor).
    time_dilation: object = 1.0


# --- YAML with line numbers ------------------------------------------------------

#: Limits on the YAML itself, so that no file (however built) takes long or ends in a traceback:
#: the composer recurses once per nesting level and aliases let a small file describe an
#: exponentially large document ("billion laughs"). Real scenarios are a few kB, < 10 levels deep and
#: a few hundred values; 20,000 values take the pure-Python composer about a second.
MAX_SCENARIO_BYTES = 1 << 20
MAX_YAML_DEPTH = 64
MAX_YAML_ALIASES = 100
MAX_YAML_NODES = 20_000
#: Tags a scenario may carry (explicit or resolved): plain data only, never ``!!python/...``.
_PLAIN_TAGS = {"tag:yaml.org,2002:" + t for t in ("str", "int", "float", "bool", "null", "timestamp")}
_SEQ_TAG, _MAP_TAG = "tag:yaml.org,2002:seq", "tag:yaml.org,2002:map"


class _YamlLimitError(yaml.YAMLError):
    """A YAML document beyond MAX_YAML_DEPTH / MAX_YAML_ALIASES / MAX_YAML_NODES (carries its line)."""

    def __init__(self, problem, mark):
        super().__init__(problem)
        self.problem, self.problem_mark = problem, mark


class _LineLoader(yaml.SafeLoader):
    """SafeLoader whose composer counts depth, aliases and nodes (per instance) and stops at the limits."""

    def __init__(self, stream):
        super().__init__(stream)
        self._depth = self._aliases = self._nodes = 0

    def compose_node(self, parent, index):
        mark = self.peek_event().start_mark
        if self.check_event(yaml.AliasEvent):
            self._aliases += 1
            if self._aliases > MAX_YAML_ALIASES:
                raise _YamlLimitError(f"more than {MAX_YAML_ALIASES} aliases (*name)", mark)
        self._nodes += 1
        if self._nodes > MAX_YAML_NODES:
            raise _YamlLimitError(f"more than {MAX_YAML_NODES:,} values", mark)
        self._depth += 1
        try:
            if self._depth > MAX_YAML_DEPTH:
                raise _YamlLimitError(f"nested deeper than {MAX_YAML_DEPTH} levels", mark)
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1


def _yaml_error(exc, text: str, source: str, field: str = "(file)"):
    """A PyYAML error as one ScenarioError line: its problem and line (a ReaderError has a position)."""
    mark = getattr(exc, "problem_mark", None)
    line = mark.line + 1 if mark else 0
    if isinstance(exc, yaml.reader.ReaderError):
        line = text.count("\n", 0, exc.position) + 1
        problem = f"character #x{exc.character:04x} is not allowed in YAML ({exc.reason})" \
            if isinstance(exc.character, int) else exc.reason
    else:
        problem = getattr(exc, "problem", None) or str(exc)
    return ScenarioError(field, f"not valid YAML: {problem}", source, line)


def decode_scenario_bytes(data: bytes, source: str) -> str:
    """The text of a scenario file: at most MAX_SCENARIO_BYTES of UTF-8 (a binary file is refused here)."""
    if len(data) > MAX_SCENARIO_BYTES:
        raise ScenarioError("(file)", f"larger than {MAX_SCENARIO_BYTES // 1024} KiB; a scenario is a few kB of "
                                      f"YAML", source)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[:exc.start].count(b"\n") + 1
        raise ScenarioError("(file)", f"not UTF-8 text (byte 0x{data[exc.start]:02x} at offset {exc.start}); "
                                      f"a scenario is a YAML text file", source, line)


def _compose_with_lines(text: str, source: str, field: str = "(file)"):
    """Load YAML keeping the line of every mapping key and sequence item, by field path.

    Returns ``(document, lines)``; the document is None when the text holds no
    value. Plain data only: other tags, non-scalar keys and anything past the
    MAX_YAML_* limits are a ScenarioError (never a traceback or a long wait).
    """
    loader = None
    try:
        loader = _LineLoader(text)
        node = loader.get_single_node()
        if node is None:
            return None, {}
        return _NodeConverter(loader, source, field).convert(node, "", 0)
    except yaml.YAMLError as exc:
        raise _yaml_error(exc, text, source, field) from None
    finally:
        if loader is not None:
            loader.dispose()


class _NodeConverter:
    """Composed YAML nodes -> plain dicts/lists/scalars, recording the line of every field path.

    Aliases are expanded here, so the expanded size is counted (MAX_YAML_NODES)
    and the depth too (an anchor may contain its own alias: ``&a [*a]``).
    """

    def __init__(self, loader, source, field):
        self.loader, self.source, self.field = loader, source, field
        self.lines = {}
        self.count = 0

    def fail(self, node, message, path=None):
        """Raise at ``node``'s line; ``path`` is relative to the document (a --set value's field prefixes it)."""
        if path and self.field != "(file)":
            path = f"{self.field}.{path}"
        raise ScenarioError(path or self.field, message, self.source, node.start_mark.line + 1)

    def convert(self, node, path, depth):
        return self.value(node, path, depth), self.lines

    def value(self, n, path, depth):
        self.count += 1
        if self.count > MAX_YAML_NODES:
            self.fail(n, f"not valid YAML: more than {MAX_YAML_NODES:,} values once aliases are expanded")
        if depth > MAX_YAML_DEPTH:
            self.fail(n, f"not valid YAML: nested deeper than {MAX_YAML_DEPTH} levels (an alias inside itself?)")
        self.lines.setdefault(path, n.start_mark.line + 1)
        if isinstance(n, yaml.MappingNode):
            return self.mapping(n, path, depth)
        if isinstance(n, yaml.SequenceNode):
            if n.tag != _SEQ_TAG:
                self.fail(n, f"tag {n.tag} is not allowed; a scenario holds plain YAML values only", path or None)
            return [self.value(item, f"{path}.{i}" if path else str(i), depth + 1) for i, item in enumerate(n.value)]
        if n.tag not in _PLAIN_TAGS:
            self.fail(n, f"tag {n.tag} is not allowed; a scenario holds plain YAML values only", path or None)
        return self.scalar(n, path)

    def scalar(self, n, path):
        try:
            return self.loader.construct_object(n)
        except (ValueError, OverflowError):   # an int past Python's 4300 digits, a date like 2020-13-45
            kind = n.tag.rsplit(":", 1)[-1]
            self.fail(n, f"not valid YAML: cannot read {_brief(n.value)} as {kind}", path or None)

    def mapping(self, n, path, depth):
        if n.tag != _MAP_TAG:
            self.fail(n, f"tag {n.tag} is not allowed; a scenario holds plain YAML values only", path or None)
        out = {}
        for key_node, value_node in n.value:
            if not isinstance(key_node, yaml.ScalarNode):
                self.fail(key_node, "a key must be a plain name, not a list or mapping", path or None)
            key = key_node.value
            sub = f"{path}.{key}" if path else str(key)
            self.lines[sub] = key_node.start_mark.line + 1
            if key in out:
                self.fail(key_node, "key given twice", sub)
            out[key] = self.value(value_node, sub, depth + 1)
        return out


# --- overrides -----------------------------------------------------------------------

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
        value, _ = _compose_with_lines(raw, "<command line>", f"--set {key}")
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


# --- validation ------------------------------------------------------------------------

def line_of(lines: dict, path: str) -> int:
    """Line of ``path`` in its file, or of its nearest parent that has one (0 = unknown)."""
    line = lines.get(path)
    while line is None and "." in path:
        path = path.rsplit(".", 1)[0]
        line = lines.get(path)
    return line or 0


class _Checker:
    """Field access with errors that name the file, line and field path.

    Numbers and quantities are finite and inside the field's range (NaN passes
    every comparison, so it is refused first); names are checked against what
    they become (file names, interface names).
    """

    def __init__(self, source, lines):
        self.source = source
        self.lines = lines

    def fail(self, path, message):
        raise ScenarioError(path, message, self.source, line_of(self.lines, path))

    def keys(self, mapping, path, allowed):
        if not isinstance(mapping, dict):
            self.fail(path, f"expected a mapping with keys {', '.join(sorted(allowed))}")
        for key in mapping:
            if key not in allowed:
                self.fail(f"{path}.{key}" if path else str(key),
                          f"unknown key; allowed here: {', '.join(sorted(allowed))}")

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


def load_scenario(path, overrides=()) -> Scenario:
    path = Path(path)
    return parse_scenario(read_yaml_text(path), str(path), overrides, default_name=default_scenario_name(path))


def read_yaml_text(path) -> str:
    """The text of a YAML input file (a scenario, a sweep): at most MAX_SCENARIO_BYTES of UTF-8."""
    source = str(path)
    try:
        with open(path, "rb") as f:
            data = f.read(MAX_SCENARIO_BYTES + 1)
    except OSError as exc:
        raise ScenarioError("(file)", f"cannot read: {exc.strerror or exc}", source)
    return decode_scenario_bytes(data, source)


def read_yaml_document(path):
    """``(document, lines, checker)`` of a YAML input file read as scenarios are (plain data, bounded),
    with a checker whose errors name the file, line and field."""
    source = str(path)
    doc, lines = _compose_with_lines(read_yaml_text(path), source)
    return doc, lines, _Checker(source, lines)


def default_scenario_name(path) -> str:
    """The name of a scenario without ``name:``: its file's stem made a valid name (a file name need
    not be one)."""
    name = re.sub(r"[^A-Za-z0-9._-]+", "-", Path(path).stem).lstrip(".")[:MAX_FILE_NAME_CHARS]
    return name or "scenario"


def parse_scenario(text: str, source: str = "<scenario>", overrides=(), default_name="scenario") -> Scenario:
    doc, lines = _compose_with_lines(text, source)
    if doc is None:
        raise ScenarioError("(file)", "the file is empty; a scenario needs at least version, topology and jobs",
                            source)
    if not isinstance(doc, dict):
        raise ScenarioError("(file)", "expected a mapping at the top level", source, 1)
    doc = apply_overrides(doc, overrides)
    c = _Checker(source, lines)
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

    topo = _resolve_topology(c, doc["topology"], scale, seed, _listed_workers(doc.get("jobs")))
    switch = _resolve_switch(c, _section(c, doc, "switch"), scale)
    jobs = _resolve_jobs(c, doc["jobs"], topo, scale, switch)
    impairments = _resolve_impairments(c, c.items(doc.get("impairments"), "impairments", "impairments"), topo)
    metrics = _resolve_metrics(c, _section(c, doc, "metrics"), topo)
    fewest = min(j.iterations for j in jobs)
    if metrics.warmup_iterations >= fewest:
        c.fail("metrics.warmup_iterations", f"expected fewer than the fewest iterations of a job ({fewest}), "
                                            f"got {metrics.warmup_iterations}")
    background = _resolve_background(c, c.items(doc.get("background"), "background", "background entries"),
                                     topo, jobs)
    stragglers = _resolve_stragglers(c, _section(c, doc, "stragglers"), topo, jobs, scale, seed)
    if stragglers.heterogeneous_links:
        topo = topology.with_host_link_rates(topo, stragglers.heterogeneous_links, seed)
    topo.colocated_ps = {ps for job in jobs for ps in job.ps if ps in job.workers}
    simulation = _resolve_simulation(c, _section(c, doc, "simulation"), jobs)
    return Scenario(name, source, seed, scale, target, run_timeout_s, topo, switch, jobs, impairments, metrics,
                    doc, description, background, stragglers, simulation, lines=lines, time_dilation=dilation)


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


def _resolve_topology(c, spec, scale, seed, workers=()):
    path = "topology"
    if not isinstance(spec, dict):
        c.fail(path, "expected a mapping with a kind")
    kind = spec.get("kind")
    if not isinstance(kind, str) or kind not in TOPOLOGY_KINDS:
        c.fail(f"{path}.kind", f"unknown topology kind {_brief(kind)}; expected one of {', '.join(TOPOLOGY_KINDS)}")
    c.keys(spec, path, TOPOLOGY_KEYS[kind])
    rate = c.rate_bps(spec.get("link_rate", "100Gbps"), f"{path}.link_rate") * scale
    try:
        if kind == "explicit":
            topo = _explicit(c, spec, rate, scale)
        elif kind == "dumbbell":
            core = spec.get("core_rate")
            topo = topology.dumbbell(
                "dumbbell", rate, c.integer(spec.get("hosts_left", 2), f"{path}.hosts_left", 1, 64),
                c.integer(spec.get("hosts_right", 2), f"{path}.hosts_right", 1, 64),
                c.integer(spec.get("paths", 1), f"{path}.paths", 1, 16),
                c.rate_bps(core, f"{path}.core_rate") * scale if core is not None else None)
        elif kind == "leaf-spine":
            topo = topology.leaf_spine(
                "leaf-spine", rate, c.integer(spec.get("spines", 2), f"{path}.spines", 1, 64),
                c.integer(spec.get("leaves", 2), f"{path}.leaves", 1, 64),
                c.integer(spec.get("hosts_per_leaf", 2), f"{path}.hosts_per_leaf", 1, 64))
        elif kind == "fat-tree":
            topo = topology.fat_tree("fat-tree", rate, c.integer(spec.get("k", 4), f"{path}.k", 2, 16),
                                     c.integer(spec["hosts_per_edge"], f"{path}.hosts_per_edge", 1, 64)
                                     if "hosts_per_edge" in spec else None)
        elif kind == "dragonfly":
            # Rina §VI-C: a=4, g=9, h=2; two hosts per router (not stated): the balanced dragonfly of
            # Kim et al., a = 2p = 2h.
            a = c.integer(spec.get("a", 4), f"{path}.a", 1, 16)
            h = c.integer(spec.get("h", 2), f"{path}.h", 1, 16)
            topo = topology.dragonfly("dragonfly", rate, a, c.integer(spec.get("g", a * h + 1), f"{path}.g", 2, 64),
                                      h, c.integer(spec.get("hosts_per_router", max(1, a // 2)),
                                                   f"{path}.hosts_per_router", 1, 64))
        else:
            topo = topology.goat_testbed("goat-testbed", rate, c.integer(
                spec.get("workers_per_rack", 4), f"{path}.workers_per_rack", 1, 32))
    except TopologyError as exc:
        c.fail(path, str(exc))
    # No rule keeps the builder's flags (every switch programmable, or the
    # explicit topology's per-switch ``programmable``).
    rule = spec.get("programmable")
    switch_names = {s.name for s in topo.switches()}
    if isinstance(rule, list):
        for i, sw in enumerate(rule):
            if not isinstance(sw, str) or sw not in switch_names:
                c.fail(f"{path}.programmable.{i}", f"{_brief(sw)} is not a switch of this topology")
    elif isinstance(rule, dict) and "fraction" in rule:
        c.keys(rule, f"{path}.programmable", {"fraction"})
        c.number(rule.get("fraction"), f"{path}.programmable.fraction", 0, 1, low_open=True)
    elif isinstance(rule, dict):
        c.keys(rule, f"{path}.programmable", {"count", "order"})
        if "count" not in rule:
            c.fail(f"{path}.programmable", "expected {fraction: F} or {count: K, order: rina}")
        c.integer(rule["count"], f"{path}.programmable.count", 0, len(switch_names))
        c.choice(rule.get("order", INCREMENTAL_ORDERS[0]), f"{path}.programmable.order", INCREMENTAL_ORDERS)
    elif rule not in ("all", "none", None):
        c.fail(f"{path}.programmable", "expected all, none, a list of switch names, {fraction: F} or "
                                       "{count: K, order: rina}")
    if "pinned_paths" in spec:
        topo.pinned_paths = _resolve_pinned_paths(c, spec["pinned_paths"], f"{path}.pinned_paths", topo)
    topo.result_multicast = c.choice(spec.get("result_multicast", "programmable"), f"{path}.result_multicast",
                                     RESULT_MULTICAST)
    topo.ecmp = c.choice(spec.get("ecmp", "pair"), f"{path}.ecmp", ECMP_MODES)
    return topology.mark_programmable(topo, rule, seed, workers)


def _resolve_pinned_paths(c, spec, path, topo):
    """``pinned_paths: {hl1: 1, hl2: 2}``: the traffic a host sends crosses the k-th (from 1, in link order;
    PA-ATP's p1-p4) of the parallel links between two switches; stored 0-based."""
    if not isinstance(spec, dict) or not spec:
        c.fail(path, "expected a mapping {host: path number}, e.g. {hl1: 1, hl2: 2}")
    most = topo.parallel_link_count()
    if most < 2:
        c.fail(path, "this topology joins no two switches by parallel links; there is no path to pin")
    hosts = {h.name for h in topo.hosts()}
    out = {}
    for host, number in spec.items():
        if host not in hosts:
            c.fail(f"{path}.{host}", f"host {_brief(host)} is not defined in the topology")
        out[host] = c.integer(number, f"{path}.{host}", 1, most) - 1
    return out


def _explicit(c, spec, rate, scale):
    path = "topology"
    switches = []
    for i, item in enumerate(c.items(spec.get("switches"), f"{path}.switches", "switch names")):
        sp = f"{path}.switches.{i}"
        if isinstance(item, str):
            switches.append((c.node_name(item, sp), True))
        elif isinstance(item, dict):
            c.keys(item, sp, {"name", "programmable"})
            programmable = c.boolean(item.get("programmable", True), f"{sp}.programmable")
            switches.append((c.node_name(item.get("name"), f"{sp}.name"), programmable))
        else:
            c.fail(sp, "expected a name or {name, programmable}")
    if not switches:
        c.fail(f"{path}.switches", "an explicit topology needs at least one switch")
    hosts = spec.get("hosts") or []
    if not isinstance(hosts, list) or not all(isinstance(h, str) for h in hosts) or not hosts:
        c.fail(f"{path}.hosts", "expected a non-empty list of host names")
    for i, h in enumerate(hosts):
        c.node_name(h, f"{path}.hosts.{i}")
    defined = {s for s, _ in switches} | set(hosts)
    links = []
    for i, item in enumerate(c.items(spec.get("links"), f"{path}.links", "links [a, b] or [a, b, rate]")):
        lp = f"{path}.links.{i}"
        link_rate = None
        if isinstance(item, list) and len(item) in (2, 3):
            a, b = item[0], item[1]
            if len(item) == 3:
                link_rate = c.rate_bps(item[2], lp) * scale
        elif isinstance(item, dict):
            c.keys(item, lp, {"a", "b", "rate"})
            a, b = item.get("a"), item.get("b")
            if "rate" in item:
                link_rate = c.rate_bps(item["rate"], f"{lp}.rate") * scale
        else:
            c.fail(lp, "expected [a, b], [a, b, rate] or {a, b, rate}")
        for end in (a, b):
            if not isinstance(end, str) or end not in defined:
                c.fail(lp, f"node {_brief(end)} is not defined in topology.switches or topology.hosts")
        links.append((a, b, link_rate))
    return topology.explicit("explicit", rate, switches, hosts, links)


def _resolve_switch(c, spec, scale):
    c.keys(spec, "switch", SWITCH_KEYS)
    s = SwitchSettings()
    s.slots = c.integer(spec.get("slots", s.slots), "switch.slots", 1, 1 << 20)
    s.lanes = c.integer(spec.get("lanes", s.lanes), "switch.lanes", 1, 255)
    if "memory" in spec:
        # A switch's aggregation memory as a paper states it (GOAT §VII-B: ~20 MB of a Tofino), scaled like
        # the gradients, in slots of one fragment (lanes x 4 bytes) each.
        if "slots" in spec:
            c.fail("switch.memory", "give either memory (scaled, in slots of lanes x 4 bytes) or slots, not both")
        memory_bytes = c.size_bytes(spec["memory"], "switch.memory") * scale
        s.slots = int(memory_bytes // (4 * s.lanes))
        if not 1 <= s.slots <= 1 << 20:
            c.fail("switch.memory", f"{memory_bytes:,.0f} B after scale is {s.slots} slots of {4 * s.lanes} B; "
                                    f"expected 1 to {1 << 20} (raise or lower the memory, or scale)")
    if "aggregation_capacity" in spec:
        s.aggregation_capacity_bps = c.rate_bps(spec["aggregation_capacity"], "switch.aggregation_capacity") * scale
    s.queue_depth_pkts = c.integer(spec.get("queue_depth", s.queue_depth_pkts), "switch.queue_depth", 1, 100000)
    # Default: half the queue, so congestion-controlled senders (transport atp) halve their windows
    # before the queue tail-drops, while a burst from a switch process that waited for a core (a few
    # milliseconds of frames) does not mark; 0 turns marking off.
    s.ecn_threshold_pkts = c.integer(spec.get("ecn_threshold", max(1, s.queue_depth_pkts // 2)),
                                     "switch.ecn_threshold", 0, 100000)
    processes = spec.get("processes", AUTO_PROCESSES)
    if processes not in (AUTO_PROCESSES, PER_SWITCH_PROCESSES) and \
            (isinstance(processes, bool) or not isinstance(processes, int) or processes < 1):
        c.fail("switch.processes", f"expected {AUTO_PROCESSES}, {PER_SWITCH_PROCESSES} or a whole number of "
                                   f"processes >= 1, got {_brief(processes)}")
    s.processes = processes
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
        policy = job.get("policy", "ps")
        if not isinstance(policy, str) or policy not in POLICIES:
            c.fail(f"{p}.policy", f"unknown policy {_brief(policy)}; expected one of {', '.join(POLICIES)}")
        ring = policy in RING_POLICIES
        if ring and "ps" in job:
            c.fail(f"{p}.ps", f"policy {policy} is a ring all-reduce of the workers: it has no parameter server "
                              f"(remove ps, or choose a PS scheme)")
        for required in ("workers",) if ring else ("workers", "ps"):
            if required not in job:
                c.fail(f"{p}.{required}", "missing (required)")
        name = c.file_name(job.get("name", f"job{i}"), f"{p}.name")
        workers = c.names(job["workers"], f"{p}.workers")
        if ring and len(workers) < 2:
            c.fail(f"{p}.workers", f"a ring all-reduce (policy {policy}) needs at least 2 workers")
        ps = [] if ring else c.names(job["ps"], f"{p}.ps")
        for role, names in (("workers", workers), ("ps", ps)):
            for k, h in enumerate(names):
                if h not in hosts:
                    listed = ", ".join(sorted(hosts)[:12]) + (" ..." if len(hosts) > 12 else "")
                    c.fail(f"{p}.{role}.{k}", f"host {_brief(h)} is not defined in the topology (hosts: {listed})")
                if h in used and not (role == "ps" and h in workers):
                    c.fail(f"{p}.{role}.{k}", f"host {h!r} already serves {used[h]}")
                used[h] = f"{name} as {role}"
        if len(workers) > MAX_WORKERS_PER_JOB:
            c.fail(f"{p}.workers", f"{len(workers)} workers; the INA bitmap holds at most {MAX_WORKERS_PER_JOB}")
        if "submodel_elements" in job:
            model_name, elements = _explicit_submodels(c, job, p, scale)
            submodels = len(elements)
        else:
            model = job.get("model", "resnet18")
            try:
                profile = models.load_profile(model) if isinstance(model, str) else None
            except KeyError:
                profile = None
            if profile is None:
                c.fail(f"{p}.model",
                       f"unknown model {_brief(model)}; expected one of {', '.join(models.available_models())}")
            if "gradient_size" in job:
                profile = profile.with_gradient_bytes(c.size_bytes(job["gradient_size"], f"{p}.gradient_size"))
            profile = profile.scaled(scale)
            if "submodel_size" in job:
                if "submodels" in job:
                    c.fail(f"{p}.submodels", "give either submodels (layer groups) or submodel_size, not both")
                most_elements = max(1, round(c.size_bytes(job["submodel_size"], f"{p}.submodel_size") * scale / 4))
                model_name, elements = profile.name, models.even_pieces(profile.elements, most_elements)
                submodels = len(elements)
                if submodels > 65535:
                    c.fail(f"{p}.submodel_size", f"{submodels:,} sub-models of the {profile.gradient_bytes:,} B "
                                                 f"gradient; at most 65,535 (give a larger size)")
            else:
                submodels = c.integer(job.get("submodels", 4), f"{p}.submodels", 1, 65535)
                model_name, elements = profile.name, profile.partition(submodels)
        if not ring and submodels > len(ps) * 4096:
            c.fail(f"{p}.submodels", "too many sub-models")
        if len(ps) > submodels:
            c.fail(f"{p}.ps", f"{len(ps)} parameter servers but only {submodels} sub-models to share among them")
        _check_fragments(c, job, p, elements, switch.lanes)
        bound = c.number(job.get("gradient_bound", 1.0), f"{p}.gradient_bound", 0, low_open=True)
        try:
            scale_bits = choose_scale_bits(len(workers), bound)
        except ValueError as exc:
            c.fail(f"{p}.gradient_bound", str(exc))
        for key in ("aggregation_switches", "ps_memory"):
            if ring and key in job:
                c.fail(f"{p}.{key}", f"policy {policy} aggregates nowhere but in its workers; remove {key}")
        agg_switches = c.items(job.get("aggregation_switches"), f"{p}.aggregation_switches", "switch names")
        for k, sw in enumerate(agg_switches):
            node = topo.nodes.get(sw) if isinstance(sw, str) else None
            if node is None or node.kind != "switch":
                c.fail(f"{p}.aggregation_switches.{k}", f"{_brief(sw)} is not a switch of this topology")
            if not node.programmable:
                c.fail(f"{p}.aggregation_switches.{k}",
                       f"switch {sw!r} is not programmable; aggregation needs a programmable switch "
                       f"(see topology.programmable)")
        transport = c.choice(job.get("transport", default_transport(policy)), f"{p}.transport",
                             RING_TRANSPORTS if ring else TRANSPORT_NAMES)
        # Default: ATP's largest window (100 fragments), so a worker's window can cover the round trip of
        # a 5 Mb/s link with the switches' processing in it (RTTs of 30-50 ms measured on 2 cores); at most
        # the switches' slots (a switch of a paper's small memory at reduced scale holds fewer).
        window = c.integer(job.get("window", DEFAULT_WINDOW if ring else min(DEFAULT_WINDOW, switch.slots)),
                           f"{p}.window", 1, 65535)
        transport_options = _resolve_transport_options(
            c, job.get("transport_options"), f"{p}.transport_options", transport, window,
            sum(fragments_of(n, switch.lanes) for n in elements), scale)
        # ATP's window is a congestion window: with slot_bound false it may outrun the slots, and a
        # fragment that finds its slot still held by the one a window earlier overflows (GOAT §III-A).
        if not ring and window > switch.slots and TRANSPORTS[transport].window_within_slots(transport_options):
            hint = (" (transport_options.slot_bound: false lets ATP's window outrun them)" if transport == "atp"
                    else "")
            c.fail(f"{p}.window", f"window {window} exceeds switch.slots {switch.slots}{hint}")
        jobs.append(JobSpec(
            name=name, job_id=i + 1, model=model_name, gradient_bytes=4 * sum(elements),
            submodel_elements=elements, workers=workers, ps=ps, policy=policy,
            iterations=c.integer(job.get("iterations", 10), f"{p}.iterations", 1, 10**6),
            compute_time_s=c.duration_s(job.get("compute_time", "0s"), f"{p}.compute_time"),
            window=window, gradient_bound=bound, scale_bits=scale_bits,
            retransmit_timeout_s=c.duration_s(job.get("retransmit_timeout", DEFAULT_MIN_RTO), f"{p}.retransmit_timeout",
                                              allow_zero=False),
            aggregation_switches=list(agg_switches),
            policy_options=_resolve_policy_options(c, job.get("policy_options") or {}, f"{p}.policy_options",
                                                   workers),
            ps_memory_bytes=c.size_bytes(job["ps_memory"], f"{p}.ps_memory", allow_zero=True) * scale
            if "ps_memory" in job else 0.0,
            transport=transport, transport_options=transport_options,
            start_s=c.duration_s(job.get("start", "0s"), f"{p}.start"),
            straggler_allowance=c.boolean(job.get("straggler_allowance", True), f"{p}.straggler_allowance")))
    names = [j.name for j in jobs]
    if len(set(names)) != len(names):
        c.fail("jobs", f"job names must be unique, got {names}")
    return jobs


def _explicit_submodels(c, job, p, scale):
    """``submodel_elements: [64, 64, 64]``: the sub-model partition given directly (elements, scaled).

    For examples that need exact fragment counts or split ratios (GOAT Fig. 2's
    three one-fragment sub-models); excludes ``submodels`` and ``gradient_size``.
    """
    for other in ("submodels", "submodel_size", "gradient_size"):
        if other in job:
            c.fail(f"{p}.{other}", "give either submodel_elements or submodels/submodel_size/gradient_size, "
                                   "not both")
    spec = job["submodel_elements"]
    if not isinstance(spec, list) or not spec:
        c.fail(f"{p}.submodel_elements", "expected a non-empty list of element counts, e.g. [64, 64, 64]")
    elements = [max(1, round(c.integer(n, f"{p}.submodel_elements.{k}", 1, int(MAX_SIZE_BYTES) // 4) * scale))
                for k, n in enumerate(spec)]
    model = job.get("model", "custom")
    if not isinstance(model, str):
        c.fail(f"{p}.model", f"expected a label (text), got {_brief(model)}")
    return model, elements


def _check_fragments(c, job, p, elements, lanes):
    """Refuse a gradient whose fragments per worker per iteration exceed MAX_FRAGMENTS_PER_ITERATION."""
    fragments = sum(fragments_of(n, lanes) for n in elements)
    if fragments > MAX_FRAGMENTS_PER_ITERATION:
        field = next((k for k in ("gradient_size", "submodel_elements", "model") if k in job), "model")
        c.fail(f"{p}.{field}", f"{fragments:,} fragments of {lanes} lanes per worker per iteration after scale; "
                               f"at most {MAX_FRAGMENTS_PER_ITERATION:,} (lower the size or scale)")


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
                out[key] = c.boolean(value, kp)
            elif kind[0] == "choice":
                out[key] = c.choice(value, kp, kind[1])
            elif kind[0] == "int_or":
                if value != kind[3] and (isinstance(value, bool) or not isinstance(value, int)
                                         or not kind[1] <= value <= kind[2]):
                    c.fail(kp, f"expected an integer in [{kind[1]}, {kind[2]}] or {kind[3]}, got {_brief(value)}")
                out[key] = value
            elif kind[0] == "duration":
                out[f"{key}_s"] = c.duration_s(value, kp, allow_zero=False)
            else:  # worker_durations
                c.keys(value, kp, set(workers))
                out[f"{key}_s"] = {w: c.duration_s(d, f"{kp}.{w}", allow_zero=False) for w, d in value.items()}
        resolved[scheme] = out
    return resolved


def _resolve_transport_options(c, spec, path, transport, window, fragments, scale):
    """``transport_options: {initial_cwd: 16, awd_limit: false}`` for the job's ``transport``, checked
    against that transport's ``OPTIONS`` (kinds in testbed/agents/transport/base.py) and its
    ``option_conflict``; ``window`` is the job's window, ``fragments`` what a worker sends per iteration."""
    if spec is None:
        return {}
    allowed = TRANSPORTS[transport].OPTIONS
    if not isinstance(spec, dict):
        c.fail(path, f"expected a mapping of {transport}'s options, got {_brief(spec)}")
    if spec and not allowed:
        c.fail(path, f"transport {transport} takes no options")
    c.keys(spec, path, set(allowed))
    out = {}
    for key, value in spec.items():
        kind, kp = allowed[key], f"{path}.{key}"
        if kind[0] == "window":
            most = window if kind[1] is None else min(window, kind[1])
            out[key] = c.integer(value, kp, 1, most)
        elif kind[0] == "fragments":
            out[key] = c.integer(value, kp, 1, fragments)
        elif kind[0] == "weight":
            out[key] = c.number(value, kp, 0, 1, low_open=True)
        elif kind[0] == "duration":
            out[f"{key}_s"] = c.duration_s(value, kp, allow_zero=False)
        elif kind[0] == "rate":
            out[f"{key}_bps"] = c.rate_bps(value, kp) * scale
        else:  # bool
            out[key] = c.boolean(value, kp)
    conflict = TRANSPORTS[transport].option_conflict(out)
    if conflict:
        c.fail(f"{path}.{conflict[0]}", conflict[1])
    return out


def _resolve_simulation(c, spec, jobs):
    c.keys(spec, "simulation", SIMULATION_KEYS)
    s = SimulationSettings()
    workers = {w for j in jobs for w in j.workers}
    starts = spec.get("worker_start") or {}
    c.keys(starts, "simulation.worker_start", workers)
    s.worker_start_fragments = {w: c.integer(v, f"simulation.worker_start.{w}", 0, MAX_FRAGMENTS_PER_ITERATION)
                                for w, v in starts.items()}
    s.worker_pacing = c.choice(spec.get("worker_pacing", s.worker_pacing), "simulation.worker_pacing", WORKER_PACINGS)
    s.max_fragment_events = c.integer(spec.get("max_fragment_events", s.max_fragment_events),
                                      "simulation.max_fragment_events", 0, 1 << 40)
    s.results = c.boolean(spec.get("results", True), "simulation.results")
    return s


def _resolve_impairments(c, spec, topo):
    out = []
    for i, item in enumerate(spec):
        p = f"impairments.{i}"
        c.keys(item, p, IMPAIRMENT_KEYS)
        link = item.get("link", "all")
        if link == "all":
            ends = ("*", "*")
        else:
            if not (isinstance(link, list) and len(link) == 2 and all(isinstance(n, str) for n in link)):
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
    m.sample_interval_s = c.duration_s(spec.get("sample_interval", "0.5s"), "metrics.sample_interval",
                                       allow_zero=False)
    hosts = {h.name for h in topo.hosts()}
    for i, h in enumerate(c.items(spec.get("iftop_interfaces"), "metrics.iftop_interfaces", "host names")):
        if not isinstance(h, str) or h not in hosts:
            c.fail(f"metrics.iftop_interfaces.{i}", f"host {_brief(h)} is not defined in the topology")
        m.iftop_interfaces.append(h)
    m.warmup_iterations = c.integer(spec.get("warmup_iterations", 0), "metrics.warmup_iterations", 0, 1_000_000)
    return m


def _resolve_background(c, spec, topo, jobs):
    from testbed.traffic.distributions import CONSTANT_RATE, FlowSizeCDF, UnknownDistributionError
    hosts = {h.name for h in topo.hosts()}
    busy = {h for j in jobs for h in j.workers + j.ps}
    idle = sorted(hosts - busy)
    out = []
    for i, item in enumerate(spec):
        p = f"background.{i}"
        c.keys(item, p, BACKGROUND_KEYS)
        name = item.get("distribution", "hadoop")
        if not isinstance(name, str) or not name:
            c.fail(f"{p}.distribution", f"expected a distribution name or file path, got {_brief(name)}")
        try:
            if name != CONSTANT_RATE:
                FlowSizeCDF.load(name)
        except UnknownDistributionError as exc:
            c.fail(f"{p}.distribution", f"{exc}, or {CONSTANT_RATE} (one UDP flow at a constant rate)")
        except (OSError, ValueError) as exc:   # a path given: unreadable, not text, or not a CDF
            c.fail(f"{p}.distribution", f"cannot use {_brief(name)} as a flow-size CDF: {exc}")
        for key, verb in (("max_flow_size", "truncate"), ("flow_size_scale", "scale")):
            if name == CONSTANT_RATE and key in item:
                c.fail(f"{p}.{key}", f"a {CONSTANT_RATE} flow has no flow sizes to {verb}")
        if name == CONSTANT_RATE and "congestion_control" in item:
            c.fail(f"{p}.congestion_control",
                   f"a {CONSTANT_RATE} flow is UDP at a constant rate: no congestion control")
        congestion_control = None if name == CONSTANT_RATE else item.get("congestion_control",
                                                                          DEFAULT_BACKGROUND_CONGESTION_CONTROL)
        if name == CONSTANT_RATE and "ecn" in item:
            c.fail(f"{p}.ecn", f"a {CONSTANT_RATE} flow is UDP at a constant rate: it cannot react to ECN")
        ecn = c.boolean(item.get("ecn", False), f"{p}.ecn")
        if congestion_control is not None and not (isinstance(congestion_control, str)
                                                   and re.fullmatch(r"[a-z0-9_]{1,15}", congestion_control)):
            c.fail(f"{p}.congestion_control", f"expected a TCP congestion control's name such as cubic, reno, bbr "
                                              f"or dctcp, got {_brief(congestion_control)}")
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
        bottleneck = c.link_ends(item["bottleneck"], f"{p}.bottleneck", topo) if "bottleneck" in item else ()
        out.append(BackgroundSpec(
            name, load, groups["senders"], groups["receivers"], bottleneck,
            max_flow_bytes=(c.size_bytes(item["max_flow_size"], f"{p}.max_flow_size")
                            if "max_flow_size" in item else 0.0),
            flow_size_scale=c.number(item.get("flow_size_scale", 1.0), f"{p}.flow_size_scale", 0, 1, low_open=True),
            duration_s=c.duration_s(item["duration"], f"{p}.duration") if "duration" in item else 0.0,
            port=c.integer(item.get("port", 5001 + i), f"{p}.port", 1024, 39999),
            start_s=c.duration_s(item.get("start", "0s"), f"{p}.start"),
            congestion_control=congestion_control, ecn=ecn))
    ecn_of_sender = {}
    for i, spec in enumerate(out):
        if spec.distribution == CONSTANT_RATE:
            continue
        for host in spec.senders:
            # ECN is a sysctl of the sender's namespace: every TCP entry sending from a host shares it.
            if ecn_of_sender.setdefault(host, spec.ecn) != spec.ecn:
                c.fail(f"background.{i}.ecn", f"host {host} also sends another entry's TCP flows with ecn: "
                                              f"{str(not spec.ecn).lower()}; a host's TCP either asks for ECN or not")
    return out


def _resolve_stragglers(c, spec, topo, jobs, scale, seed=1):
    c.keys(spec, "stragglers", STRAGGLER_KEYS)
    workers = {w for j in jobs for w in j.workers}
    out = StragglerSpec()
    delayed = {}      # worker -> the compute_delay entry that names it
    for i, item in enumerate(c.items(spec.get("compute_delay"), "stragglers.compute_delay", "compute delays")):
        p = f"stragglers.compute_delay.{i}"
        c.keys(item, p, {"workers", "distribution", "mean", "std", "clip", "low", "high", "value", "persistent"})
        names = sorted(workers) if item.get("workers", "all") == "all" else c.names(item["workers"], f"{p}.workers")
        for k, w in enumerate(names):
            if w not in workers:
                c.fail(f"{p}.workers.{k}", f"{w!r} is not a worker of any job")
            if w in delayed:
                # An agent draws from one distribution; a second entry would be dropped, so it is refused.
                c.fail(f"{p}.workers", f"{w} already has a compute delay (stragglers.compute_delay.{delayed[w]}); "
                                       f"expected each worker in one entry")
            delayed[w] = i
        kind = c.choice(item.get("distribution", "normal"), f"{p}.distribution", DELAY_KINDS)
        d = ComputeDelaySpec(names, kind)
        dur = lambda key, default: c.duration_s(item.get(key, default), f"{p}.{key}")  # noqa: E731
        if kind == "normal":
            d.mean_s, d.std_s = dur("mean", GOAT_DELAY_DEFAULTS["mean"]), dur("std", GOAT_DELAY_DEFAULTS["std"])
            clip = item.get("clip", GOAT_DELAY_DEFAULTS["clip"])
            if not (isinstance(clip, list) and len(clip) == 2):
                c.fail(f"{p}.clip", "expected [low, high], e.g. [0s, 1s]")
            d.low_s = c.duration_s(clip[0], f"{p}.clip.0")
            d.high_s = c.duration_s(clip[1], f"{p}.clip.1")
        elif kind == "uniform":
            d.low_s, d.high_s = dur("low", "0s"), dur("high", "1s")
        else:
            d.value_s = dur("value", "0s")
        if d.low_s > d.high_s:
            c.fail(p, f"low/clip bound {d.low_s}s exceeds the high bound {d.high_s}s")
        if c.boolean(item.get("persistent", False), f"{p}.persistent"):
            rng = random.Random(seed * 1_000_003 + 7919 * (i + 1))
            d.persistent_s = {w: straggler_delay_s(asdict(d), rng) for w in names}
        out.compute_delays.append(d)
    windows = {}
    for section, kind in INJECTION_SECTIONS.items():
        for i, item in enumerate(c.items(spec.get(section), f"stragglers.{section}", section.replace("_", " "))):
            p = f"stragglers.{section}.{i}"
            allowed = {"at", "duration"} | ({"link", "rate"} if kind == "link_degradation" else
                                            {"host", "rate"} if kind == "rate_change" else {"worker"})
            if kind == "failure":
                allowed = {"at", "worker"}
            c.keys(item, p, allowed)
            if kind == "link_degradation":
                target = c.link_ends(item.get("link"), f"{p}.link", topo)
            else:
                key = "host" if kind == "rate_change" else "worker"
                name = item.get(key)
                if not isinstance(name, str) or name not in workers:
                    c.fail(f"{p}.{key}",
                           f"{_brief(name)} is not a worker of any job (workers: {', '.join(sorted(workers))})")
                target = (name,)
            at_s = c.duration_s(item.get("at", "0s"), f"{p}.at")
            if kind == "failure":
                if any(inj.kind == "failure" and inj.target == target for inj in out.injections):
                    c.fail(f"{p}.worker", f"{target[0]} fails twice; a failed worker stays failed")
                out.injections.append(TimedInjection(kind, target, at_s, 0.0))
                continue
            if "duration" not in item:
                c.fail(f"{p}.duration", "missing; how long the change lasts, e.g. 2s")
            duration_s = c.duration_s(item["duration"], f"{p}.duration", allow_zero=False)
            rate = 0.0
            if kind != "pause":
                if "rate" not in item:
                    c.fail(f"{p}.rate", "missing; the rate during the change, e.g. 10Gbps (scaled like link rates)")
                rate = c.rate_bps(item["rate"], f"{p}.rate") * scale
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
        out.heterogeneous_links = _resolve_host_link_draw(c, spec["heterogeneous_links"], scale)
    return out


def _resolve_host_link_draw(c, item, scale):
    """``stragglers.heterogeneous_links``: ``{range: [low, high]}`` (uniform, InArt §5) or ``{normal: {mean:
    1, std: 0.2}}`` (a ratio of each host's link rate, GOAT §VII-D)."""
    p = "stragglers.heterogeneous_links"
    c.keys(item, p, {"range", "normal"})
    if ("range" in item) == ("normal" in item):
        c.fail(p, "expected one of range: [low, high] (uniform, e.g. [10Mbps, 30Mbps]) or normal: {std: 0.2} "
                  "(a ratio of each host's link rate)")
    if "normal" in item:
        ratio = item["normal"]
        c.keys(ratio, f"{p}.normal", {"mean", "std"})
        return topology.HostLinkDraw("normal",
                                     mean_ratio=c.number(ratio.get("mean", 1.0), f"{p}.normal.mean", 0, 1,
                                                         low_open=True),
                                     std_ratio=c.number(ratio.get("std", 0.2), f"{p}.normal.std", 0, 10))
    bounds = item["range"]
    if not (isinstance(bounds, list) and len(bounds) == 2):
        c.fail(f"{p}.range", "expected [low, high], e.g. [10Mbps, 30Mbps] (InArt §5; scaled)")
    low, high = (c.rate_bps(b, f"{p}.range.{k}") * scale for k, b in enumerate(bounds))
    if low > high:
        c.fail(f"{p}.range", "low exceeds high")
    return topology.HostLinkDraw("uniform", low_bps=low, high_bps=high)


# --- what only the simulator can take ------------------------------------------------------

#: Aggregator cells (slots x lanes) an emulated switch allocates: pyswitch keeps them in memory
#: and bmv2 compiles them into registers; 64x the default (1024 x 64) is the most a small VM holds.
MAX_EMULATED_AGGREGATOR_CELLS = 1 << 22
SIMULATE_ONLY = "valid for `inatb simulate` only"


def emulation_limits(scenario) -> list:
    """Why ``inatb run`` cannot emulate ``scenario`` faithfully, as ``FILE:LINE: field: reason`` lines.

    A resolved scenario is valid input for the flow-level simulator; these are
    the checks that would otherwise fail only once the network is built (htb's
    rate ceiling, switch memory) or that the emulation would silently ignore
    (the simulator's ``simulation:`` inputs, a transport whose switch side the
    data plane does not implement yet, a Rina ring of one member). Empty:
    nothing stops a run.
    Pure: reads the scenario, touches nothing. ``require_emulable`` raises on
    the first.
    """
    return [str(ScenarioError(path, reason, scenario.source, line_of(scenario.lines, path)))
            for path, reason in _emulation_limit_fields(scenario)]


def require_emulable(scenario) -> None:
    """Raise ScenarioError ``FILE:LINE: field: valid for `inatb simulate` only: reason`` (the first limit;
    the others are named by field) unless ``emulation_limits(scenario)`` is empty. A transport the data
    plane cannot run yet comes first, as ``FILE:LINE: jobs.N.transport: transport NAME needs ...``: it is
    no simulator input (the simulator models no transport), only a feature the emulation lacks."""
    for path, reason in _transport_gaps(scenario):
        raise ScenarioError(path, reason, scenario.source, line_of(scenario.lines, path))
    found = _emulation_limit_fields(scenario)
    if not found:
        return
    (path, reason), others = found[0], [p for p, _ in found[1:]]
    more = f" (also: {', '.join(others)})" if others else ""
    raise ScenarioError(path, f"{SIMULATE_ONLY}: {reason}{more}", scenario.source, line_of(scenario.lines, path))


def _emulation_limit_fields(scenario) -> list:
    """[(field path, reason)], one per offending field, in file order of the checks."""
    found = _htb_limits(scenario)
    switch = scenario.switch
    cells = switch.slots * switch.lanes
    if cells > MAX_EMULATED_AGGREGATOR_CELLS:
        found.append(("switch.slots", f"{switch.slots} slots x {switch.lanes} lanes = {cells:,} aggregator cells "
                                      f"per switch; an emulated switch holds at most "
                                      f"{MAX_EMULATED_AGGREGATOR_CELLS:,} (lower switch.slots)"))
    if scenario.simulation.worker_start_fragments:
        found.append(("simulation.worker_start", "the emulation starts every worker together; staggered starts "
                                                 "are a model input of the simulator"))
    topology = scenario.topology
    for i, job in enumerate(scenario.jobs):
        tors = {topology.neighbor(w, topology.host_link(w)) for w in job.workers}
        if job.policy == "rina" and len(tors) == 1 and topology.nodes[next(iter(tors))].programmable:
            found.append((f"jobs.{i}.workers", f"policy rina: every worker is under one programmable ToR "
                                               f"({next(iter(tors))}), a ring of one member; the emulated Rina "
                                               f"needs two members at least (workers under another ToR)"))
    return _transport_gaps(scenario) + found


def _transport_gaps(scenario) -> list:
    """[(jobs.N.transport, reason)] for jobs whose transport the data plane cannot run yet
    (``AWAITING_DATA_PLANE``): refused rather than run without the packets its workers read."""
    return [(f"jobs.{i}.transport", f"transport {job.transport} {AWAITING_DATA_PLANE[job.transport]}")
            for i, job in enumerate(scenario.jobs) if job.transport in AWAITING_DATA_PLANE]


def _htb_limits(scenario) -> list:
    """Scaled rates outside [HTB_MIN_RATE_BPS, HTB_MAX_RATE_BPS]: links (the worst per field that set
    them) and timed rate changes (pauses carry no rate)."""
    def shapeable(bps):
        return HTB_MIN_RATE_BPS <= bps <= HTB_MAX_RATE_BPS

    def how_far(bps):
        return max(bps / HTB_MAX_RATE_BPS, HTB_MIN_RATE_BPS / bps)

    def reason(bps, what):
        if bps < HTB_MIN_RATE_BPS:
            return (f"{bps:.3g} b/s{what} is below what htb shapes ({HTB_MIN_RATE_BPS / 1e3:g} kb/s); "
                    f"raise scale (now {scenario.scale:g})")
        return (f"{bps / 1e6:,.0f} Mb/s{what} exceeds what htb shapes ({HTB_MAX_RATE_BPS / 1e6:.0f} Mb/s); "
                f"lower scale (now {scenario.scale:g})")

    worst = {}   # field path -> (rate_bps, " on link a-b")
    for link in scenario.topology.links:
        if not shapeable(link.rate_bps):
            path = _link_rate_field(scenario, link)
            if path not in worst or how_far(link.rate_bps) > how_far(worst[path][0]):
                worst[path] = (link.rate_bps, f" on link {link.a}-{link.b}")
    found = [(path, reason(bps, what)) for path, (bps, what) in worst.items()]
    counts = {}
    for inj in scenario.stragglers.injections:
        section = {kind: section for section, kind in INJECTION_SECTIONS.items()}[inj.kind]
        index = counts[section] = counts.get(section, -1) + 1
        if inj.kind not in ("pause", "failure") and not shapeable(inj.rate_bps):
            found.append((f"stragglers.{section}.{index}.rate", reason(inj.rate_bps, "")))
    return found


def _link_rate_field(scenario, link) -> str:
    """The field that set ``link``'s rate: its own entry, the heterogeneous range, core_rate or link_rate."""
    spec = scenario.resolved.get("topology") or {}
    kinds = {scenario.topology.nodes[link.a].kind, scenario.topology.nodes[link.b].kind}
    if scenario.stragglers.heterogeneous_links and "host" in kinds:
        return "stragglers.heterogeneous_links"
    if spec.get("kind") == "explicit":
        for i, item in enumerate(spec.get("links") or []):
            if isinstance(item, list) and len(item) == 3 and set(item[:2]) == {link.a, link.b}:
                return f"topology.links.{i}"
            if isinstance(item, dict) and "rate" in item and {item.get("a"), item.get("b")} == {link.a, link.b}:
                return f"topology.links.{i}.rate"
    if spec.get("kind") == "dumbbell" and spec.get("core_rate") is not None and kinds == {"switch"}:
        return "topology.core_rate"
    return "topology.link_rate"
