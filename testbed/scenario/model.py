"""The resolved scenario as plain data: :class:`Scenario` and the dataclasses of its parts (switch settings,
jobs, impairments, background traffic, stragglers and their timed injections, simulator inputs, metrics),
whose values are virtual, scaled and in base units. The ``resolve_*`` modules fill them; every later stage
(schemes, controller, budget, emulation, simulator) reads them and trusts them."""

from dataclasses import dataclass, field
from typing import Optional

from testbed import topology
from testbed.dataplane.wire import DEFAULT_LANES
from testbed.scenario.schema import AUTO_PROCESSES, DEFAULT_BACKGROUND_CONGESTION_CONTROL, RING_SCHEMES


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
class TrainingSpec:
    """A job's ``training:`` section: its workers train ``model`` on their shards of ``dataset`` (the
    scenario's seed draws both) and send its real gradients (testbed/training)."""
    model: str                     # testbed.training.models.MODELS
    dataset: str                   # testbed.training.datasets.DATASETS
    learning_rate: float
    momentum: float
    batch_size: int                # examples per worker per iteration
    eval_every: int                # iterations between two evaluations on the held-out set
    target_accuracy: Optional[float] = None   # time_to_accuracy_s measures the virtual time to reach it


@dataclass
class JobSpec:
    name: str
    job_id: int
    model: str
    gradient_bytes: int
    submodel_elements: list        # elements per sub-model after scaling
    workers: list
    ps: list
    scheme: str
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
    #: Real training (its ``training:`` section), or None: synthetic gradients (testbed/agents/gradients.py).
    training: Optional[TrainingSpec] = None

    @property
    def is_ring(self) -> bool:
        """A ring all-reduce of its workers (``RING_SCHEMES``): no PS, no aggregation in the network."""
        return self.scheme in RING_SCHEMES

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
    # Interfaces captured into ``pcap/<interface>.pcap`` (a host's own ``<host>-eth0``, switch ports), and
    # the cap of each file (testbed/metrics/pcap.py).
    pcap_interfaces: list = field(default_factory=list)
    pcap_max_bytes: int = 0      # the resolver sets it (schema.DEFAULT_PCAP_MAX_SIZE when not written)


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
    overridden: dict = field(default_factory=dict)         # field path -> the ``--set`` item that set it (messages)
    #: N >= 1 (the emulation runs N times slower; every reported time is virtual: testbed/dilation.py), or
    #: ``AUTO_DILATION``: the smallest N the packet budget allows (testbed.budget.PacketBudget.auto_factor).
    time_dilation: object = 1.0
