"""Run configs of the agents: plain JSON written by the controller, read by an agent.

One file per agent. Field names carry units. The controller
(``testbed/controller.py``) is the only writer.
"""

import json
from dataclasses import asdict, dataclass, field


@dataclass
class SubmodelAssignment:
    submodel: int
    elements: int
    fragments: int
    ps: str                  # owning PS host
    ps_ip: str
    ps_node: int = 0         # its node id (agg_node of a GACK the PS sent)
    agg_node: int = 0        # worker: id of the first aggregation node (switch or PS)
    agg_ip: str = ""         # worker: where its raw fragments go
    fanin: int = 1           # worker: contributions that node collects for this sub-model
    slot_base: int = 0
    slot_count: int = 0
    shadow_pool: int = 0     # worker: SwitchML's pool (slot_count = 2 x pool copies, wire.shadow_slot); 0 = none


@dataclass
class AgentConfig:
    role: str                # "worker" | "ps" | "ring" (a ring all-reduce worker: testbed/agents/ring.py)
                             # | "rina" (a Rina job's worker: testbed/agents/rina.py)
    name: str                # its records, ready and status files are named after it
    ip: str
    job: str
    job_id: int
    seed: int
    iterations: int
    lanes: int
    scale_bits: int
    gradient_bound: float
    total_workers: int
    submodels: list          # SubmodelAssignment
    total_fragments: int     # fragments per worker per iteration (all sub-models)
    layout: list = field(default_factory=list)    # [(elements, fragments)] of every sub-model of the job
    worker_index: int = 0    # bitmap bit of a worker
    participant: bool = True # worker: its gradient counts (K-of-N schemes leave some out)
    participants: list = field(default_factory=list)   # ps: indices of the workers whose gradients count
    workers: list = field(default_factory=list)   # ps, ring: [(index, ip)] of every worker (a ring's order)
    schedule: str = ""       # ring: its scheme's steps (testbed.agents.ring_schedule.worker_steps: rar | h-ar)
    racks: list = field(default_factory=list)     # ring under h-ar: each rack's worker indices
    member_index: int = 0    # rina: its member's place in the ring of members (``workers`` lists the members)
    rack_tor_node: int = 0   # rina: its Rina rack's ToR (agg_node of the rack's shards); 0 = an autonomous worker
    rack_size: int = 0       # rina: the workers of its Rina rack (the ToR's fan-in)
    rack_rank: int = 0       # rina: its place in the rack (bitmap bit of its shards); 0 = the rack's agent
    agent_ip: str = ""       # rina: its member's agent (its own address for an agent or an autonomous worker)
    member_tors: list = field(default_factory=list)   # rina: [(member, its Rina ToR's address, or "")]: the
                                                      # source of a Rina rack's sums
    generation: int = 0      # rina: its ring's generation (a new ring after a worker's error, Rina §IV-C2;
                             # wire.rina_iteration carries it in every packet)
    first_iteration: int = 0 # the iteration it starts from (a new ring generation redoes the one interrupted)
    contributors: list = field(default_factory=list)  # worker indices whose gradients the sum holds; empty =
                                                      # all total_workers (a failed worker's is left out)
    step_overhead_s: float = 0.0   # ring: mean delay before each step (Rina Eq. 1's O), its options' step_overhead
    step_jitter_s: float = 0.0     # ring: that delay's std (Eq. 1's sigma; normal, clipped at 0)
    ps_id: int = 0           # ps: its agg_node id
    result_group_ip: str = ""  # ps: RESULTs go once to this address, the switches multicast them; "" = unicast
    local_worker_ip: str = ""  # ps: a worker on its own host (a co-located PS): it gets each RESULT sent to the
                               # group by unicast too, since no switch sends a copy back out of the PS's port
    bind_ip: str = ""          # the address its socket binds ("" = any: broadcast RESULTs arrive too); a
                               # co-located PS binds its own, so the worker beside it can bind the same port
    compute_time_s: float = 0.0
    start_s: float = 0.0     # its job's first iteration starts this long after the run's start
    compute_delay: dict = field(default_factory=dict)  # worker: straggler delay distribution (see worker.py)
    window: int = 64
    retransmit_timeout_s: float = 0.05   # worker: minimum RTO
    transport: str = "atp"               # testbed.agents.transport name (the job's ``transport``); the PS
                                         # answers raw gradients with GACKs under pa-atp and strawasyn
    transport_options: dict = field(default_factory=dict)   # worker: the job's ``transport_options``, validated
    link_rate_bps: float = 0.0           # worker: its host link (pacing); 0 = unpaced
    first_result_timeout_s: float = 1.0  # worker: wait for the first RESULT of an iteration (stragglers)
    run_dir: str = ""        # records, ready and go files live here
    deadline_s: float = 600.0      # the longest an iteration may take (virtual seconds: the run's run_timeout)
    ready_timeout_s: float = 600.0  # the longest it waits for the start signal once ready (wall seconds)
    time_dilation: float = 1.0     # the scenario's N: every duration here is virtual (agents.common.AgentClock)
    host: str = ""                 # the host it runs on ("" = its name; a co-located PS's name is <host>-ps)
    training: dict = field(default_factory=dict)   # worker, ps: the job's training section (TrainingSpec's
                                                   # fields); empty = synthetic gradients

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=1)

    @classmethod
    def from_json(cls, text: str) -> "AgentConfig":
        d = json.loads(text)
        d["submodels"] = [SubmodelAssignment(**s) for s in d["submodels"]]
        d["workers"] = [tuple(w) for w in d["workers"]]
        d["member_tors"] = [tuple(m) for m in d.get("member_tors", [])]
        d["layout"] = [tuple(x) for x in d["layout"]]
        return cls(**d)
