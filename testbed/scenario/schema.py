"""What a scenario file may say: the version, the allowed keys of every section, the names a field may take
(targets, topology kinds, schemes and their ``policy_options``, transports, modes), the patterns of names that
become file and interface names, and the ceilings and defaults of quantities as written. The checker and the
``resolve_*`` modules refuse anything outside these tables; :mod:`testbed.scenario_keys` documents them."""

import re

from testbed import topology
from testbed.dataplane import targets
from testbed.agents.transport import TRANSPORTS
from testbed.schemes import SCHEMES

SCENARIO_VERSION = 1
#: ``time_dilation: N | auto`` (testbed/dilation.py): the emulation runs N times slower and reports virtual time.
AUTO_DILATION = "auto"
MAX_TIME_DILATION = 1000.0
TARGETS = targets.CHOICES
TOPOLOGY_KINDS = ("explicit", "dumbbell", "leaf-spine", "fat-tree", "dragonfly", "goat-testbed")
#: Every control-plane scheme, as testbed/policy registers it (a job's ``policy:``).
SCHEME_NAMES = tuple(SCHEMES)
#: Schemes whose jobs are rings of workers (all-reduce) without a PS: no ``ps``, no INA
#: (testbed/schemes/ring.py, testbed/agents/ring.py). Their workers send over the transports listed here.
RING_SCHEMES = tuple(name for name, scheme in SCHEMES.items() if scheme.ring)
RING_TRANSPORTS = ("atp",)
#: Options a scheme accepts under a job's ``policy_options.<scheme>`` (keyed by scheme, so that
#: ``--set policy=NAME`` picks up NAME's options), as the scheme declares them (testbed.schemes.base.Scheme).
SCHEME_OPTIONS = {name: scheme.options for name, scheme in SCHEMES.items()}

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
            "start", "straggler_allowance", "training"}
#: A job's ``training:`` section (testbed/training): its model and dataset, and how its workers learn.
TRAINING_KEYS = {"model", "dataset", "learning_rate", "momentum", "batch_size", "eval_every", "target_accuracy"}
#: What a job with ``training:`` cannot also say: its gradient is its model's.
NOT_WITH_TRAINING = ("model", "gradient_size", "submodel_elements", "submodel_size")
#: The dataset a model trains on unless ``training.dataset`` names one.
DEFAULT_DATASET = {"mlp": "blobs", "cnn": "patterns"}
#: A job's ``transport:`` (how its workers send; testbed/agents/transport registers one class per name, and
#: each class declares the ``transport_options`` it takes). Default: the one each paper pairs with the
#: job's scheme (``default_transport``). Transports are not schemes: any scheme runs with any transport, except
#: that a ring scheme's workers send over ``RING_TRANSPORTS`` only.
TRANSPORT_NAMES = tuple(TRANSPORTS)
#: ``simulation:`` inputs of the flow- and fragment-level simulator (testbed/sim) only.
SIMULATION_KEYS = {"worker_start", "worker_pacing", "max_fragment_events", "results"}
#: ``simulation.worker_pacing``: how often a worker sends a fragment in the fragment-level model.
WORKER_PACINGS = ("uniform", "host_link")
IMPAIRMENT_KEYS = {"link", "drop", "duplicate", "reorder"}
METRICS_KEYS = {"sample_interval", "iftop_interfaces", "warmup_iterations", "pcap", "pcap_max_size"}
#: ``metrics.pcap_max_size``: the cap of each pcap file (testbed/metrics/pcap.py), as written (not scaled).
DEFAULT_PCAP_MAX_SIZE = "64MB"
MIN_PCAP_SIZE_BYTES = 10**3
MAX_PCAP_SIZE_BYTES = 10 * 10**9
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
