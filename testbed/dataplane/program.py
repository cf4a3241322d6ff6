"""Declarations of the INA program: every table, action, register, counter and meter.

This is the one list that ``p4/ina.p4`` and the pyswitch model must both
match (``tests/dataplane/test_program_mirror.py`` reads the P4 source and
compares). The controller builds entries against these declarations, so an
entry that names an unknown table, action or parameter is rejected before it
reaches any switch, identically for both targets.

Names are given without the control instance prefix; bmv2 names them
``Ingress.<name>`` / ``Egress.<name>`` (``control_of`` says which).

Value kinds: ``ip`` (dotted IPv4 string), ``mac`` (``aa:bb:..``), ``int``.

Slot release modes (``ina_aggregate``'s ``release_mode``; p4/README.md has
the full semantics), implemented by both targets: release on emit, release
on RESULT (ATP), release on emit with partials held (``RELEASE_HOLD``,
GOAT: a member's retransmission of an incomplete partial is dropped, not a
flush of it), and SwitchML's shadow copies (``RELEASE_SHADOW``: a
complete slot keeps its aggregate until a newer use of the same job claims
it; once the PS's RESULT of it passed the switch (``ina_shadow_result``
marks it in ``agg_resulted``) it answers a retransmission with it, before
that it re-emits it toward the PS; ``wire.shadow_slot`` says which copy a
fragment names).

Link impairments (loss, duplication, reordering per egress port; p4/README.md
has the semantics): a probability is held as a threshold out of
``IMPAIR_SCALE`` in the Egress registers ``impair_drop``,
``impair_duplicate`` and ``impair_reorder`` (``impair_threshold``); a
packet is impaired when a uniform draw in ``[0, IMPAIR_SCALE)`` is below the
threshold. Duplicates are egress-to-egress clones to the mirror session
``impair_session(port)``, which the runtime maps to the port itself.

PA-ATP's switch side (PA-ATP §III-B, §IV; p4/README.md has the semantics),
per job, opt-in: a ``pa_job`` entry (job -> its row ``pa_index``) makes the
switch track each worker's last seq (``pa_seq``, row-major: ``pa_index x
PA_WORKERS + worker``, the worker being the bit of a raw gradient's one-hot
bitmap) and their sum (``pa_seq_sum[pa_index]``), stamp the sum into the
gradient's ``progress`` field, answer every gradient it absorbs with a GACK
(the completing one by an ingress clone to mirror session
``gack_session(port)``, which the runtime maps to the port itself), and,
where the entry's ``aecn`` is 1, count the job's overflowed gradients
(``pa_overflow`` per seq cell, ``pa_overflowed[pa_index]`` in all) and mark
its RESULTs AECN while the slots it holds (``agg_used[pa_index]``) plus
``pa_overflowed[pa_index]`` exceed ``aecn_threshold[pa_index]``: each job's
aggregators are its own slot range, so PA-ATP's "used aggregators" and
threshold are the job's. Jobs whose transport is in ``PA_ATP_TRANSPORTS`` get
the entry (testbed/controller.py), and their PS answers raw gradients with
GACKs (testbed/agents/ps.py).

ESA's preemption (p4/README.md has the semantics), per job, opt-in: when a
contribution collides with the slot's holder, an ``esa_job`` entry gives its
job's priority and an ``esa_evict`` entry (the holder's job and sub-model,
read from ``agg_job`` and ``agg_submodel``) the holder's priority, fan-in
and overflow target. If the contribution outranks an incomplete holder
(:func:`esa_preempts`), it takes the slot and the packet leaves carrying the
evicted partial (``FLAG_EVICTED``) toward the holder's overflow target.
Jobs whose placement collides by preemption share one slot range per switch
(``Placement.shared_slot_ranges``), so that their fragments meet at all.

Rina's switch side (Rina §IV-B, §V-1; p4/README.md has the semantics): a
``rina_rack`` entry (job, the ToR's agg_node) makes the ToR aggregate its
rack's shards in the job's contiguous slots (``slot_base + seq mod
slot_count``, no hash), a task (flag TASK, the agent's own shard) claiming
a slot and going on as a header-only pull (flag PULL) to ``pull_grp``; the
slot's sum leaves, from ``switch_addr``, toward the packet's destination
(the next member) once every worker's shard is in, to ``gather_grp`` too
when it is a finished chunk (flag GATHER). A resent task re-pulls an
incomplete slot and sends a complete one's sum again; a slot keeps its sum
until a newer task (later iteration, or higher seq: ``wire.rina_seq``)
claims it. A ``rina_gather`` entry (job, the agent's address) multicasts a
GATHER packet arriving for the agent to the whole rack.
"""

from dataclasses import dataclass, field

from testbed.dataplane.wire import (DEFAULT_LANES, ETH_HEADER_BYTES, INA_HEADER_BYTES, IPV4_HEADER_BYTES,
                                    MAX_WORKERS_PER_JOB, UDP_HEADER_BYTES)

DEFAULT_SLOTS = 1024     # aggregator slots per switch (p4 `-D INA_SLOTS`)
MAX_PORTS = 64

#: ina_aggregate's release_mode parameter
RELEASE_ON_EMIT = 0     # GOAT / GRID / InArt / first-level ATP: free the slot when the aggregate leaves
RELEASE_ON_RESULT = 1   # ATP: free the slot when the PS's RESULT for its tag passes back
RELEASE_SHADOW = 2      # SwitchML: two copies per pool slot (wire.shadow_slot); a complete copy keeps its
                        # aggregate until a newer use of its job claims it, and answers RETX duplicates with it
                        # once the PS's RESULT of it passed (ina_shadow_result); before, it re-emits it
RELEASE_HOLD = 3        # GOAT: free the slot when the aggregate leaves; the switch's memory for a sub-model is
                        # its own (GOAT §I), so an incomplete partial waits for its missing members: a member's
                        # RETX duplicate is dropped (retx_held) and a RETX the partial lacks joins it
SUPPORTED_RELEASE_MODES = (RELEASE_ON_EMIT, RELEASE_ON_RESULT, RELEASE_SHADOW, RELEASE_HOLD)

#: How many iterations a DATA packet may be ahead of the tag of the slot it names (same job) and still
#: claim or reclaim it (ina.p4's MAX_ITERATION_LEAD). Synchronous training has one iteration in flight
#: per job; a worker that fell behind and catches up adds one. K-of-N workers that skip ahead send to
#: their PS, never to a switch. A packet further ahead is garbage (or a misconfigured sender): it goes
#: on to bypass_dst unchanged (``lead_bypassed``) instead of pinning the slot for the rest of the run.
MAX_ITERATION_LEAD = 2

#: Impairment draws are uniform in [0, IMPAIR_SCALE) (ina.p4: ``random(draw, 0, IMPAIR_DRAW_MAX)``,
#: IMPAIR_DRAW_MAX = IMPAIR_SCALE - 1); a probability p is the threshold round(p * IMPAIR_SCALE), so 0 never
#: and 1 always impairs, with a resolution of 2^-31.
IMPAIR_SCALE = 1 << 31
#: The duplicate of a packet leaving port p is cloned to mirror session IMPAIR_SESSION_BASE + p
#: (ina.p4's constant of the same name), which set_port_impairment maps to port p.
IMPAIR_SESSION_BASE = 1000
#: The impairment registers (thresholds per port) in the order drop, duplicate, reorder, and the
#: per-port counters of what they did, under the labels of the runtimes' ``impairment`` stats.
IMPAIR_REGISTERS = ("impair_drop", "impair_duplicate", "impair_reorder")
IMPAIR_COUNTERS = {"dropped": "port_impair_dropped", "duplicated": "port_impair_duplicated",
                   "reordered": "port_impair_reordered"}

#: The transports whose jobs get PA-ATP's switch side (a ``pa_job`` entry at each switch aggregating them)
#: and GACKs from their PS: both read GACKs, and ``pa-atp`` reads AECN on RESULTs too.
PA_ATP_TRANSPORTS = ("pa-atp", "strawasyn")
#: Rows of the PA-ATP registers (ina.p4's INA_PA_JOBS): opted-in jobs per switch, ``pa_index`` in [0, PA_JOBS).
PA_JOBS = 16
#: Workers per row of ``pa_seq`` (INA_PA_WORKERS): one per bitmap bit, so any one-hot bitmap has its entry.
PA_WORKERS = MAX_WORKERS_PER_JOB
#: Seq cells per row of ``pa_overflow`` (INA_PA_SEQS, a power of two): an overflowed gradient of seq s is
#: counted in cell ``pa_index x PA_SEQS + (s mod PA_SEQS)`` until the RESULT of a seq of that cell passes.
PA_SEQS = 1024
#: The cells of register ``switch_wait`` (ina.p4's INA_WAIT_CELLS): packets that reached an egress queue, their
#: summed wait inside the switch before it (microseconds), the longest such wait (microseconds).
WAIT_PACKETS, WAIT_SUM_US, WAIT_MAX_US = 0, 1, 2
WAIT_CELLS = 3
#: The GACK of a gradient that completes an aggregate is an ingress clone to mirror session
#: GACK_SESSION_BASE + its ingress port (ina.p4's constant), which the runtime maps to that port.
GACK_SESSION_BASE = 2000
#: Mirror session ids bmv2 accepts (simple_switch: 0..2^15 - 1); 0 is taken as "no session" here.
MAX_MIRROR_SESSION = (1 << 15) - 1
#: A GACK as the switch sends it: the gradient's headers without lanes, a fresh TTL (ina.p4's GACK_*).
GACK_TTL = 64
GACK_UDP_BYTES = UDP_HEADER_BYTES + INA_HEADER_BYTES
GACK_IPV4_BYTES = IPV4_HEADER_BYTES + GACK_UDP_BYTES
#: A GACK on the wire (80 bytes, the PS's as the switch's): the load it puts on the links toward its worker.
GACK_FRAME_BYTES = ETH_HEADER_BYTES + GACK_IPV4_BYTES


@dataclass(frozen=True)
class Param:
    name: str
    bits: int
    kind: str = "int"  # int | ip | mac


@dataclass(frozen=True)
class Action:
    name: str
    params: tuple = ()

    def param_names(self):
        return [p.name for p in self.params]


@dataclass(frozen=True)
class Key:
    field: str
    match: str  # exact | lpm | ternary
    bits: int
    kind: str = "int"


@dataclass(frozen=True)
class Table:
    name: str
    control: str
    keys: tuple
    actions: tuple
    default_action: str
    size: int = 4096


@dataclass(frozen=True)
class Register:
    name: str
    control: str
    bits: int
    size_expr: str  # a key of register_size's table: "SLOTS", "SLOTS*LANES", "PORTS", "PA_JOBS" ...


@dataclass(frozen=True)
class Counter:
    name: str
    control: str
    size_expr: str
    indices: dict = field(default_factory=dict)


@dataclass(frozen=True)
class Meter:
    name: str
    control: str
    size_expr: str
    unit: str  # packets | bytes


FORWARD_PARAMS = (Param("dstAddr", 48, "mac"), Param("port", 9))

ACTIONS = {
    a.name: a for a in (
        Action("ipv4_forward", FORWARD_PARAMS),
        Action("route_forward", FORWARD_PARAMS),
        # ECMP per flow: port first_port + CRC-16(five-tuple) mod ports (ecmp_member)
        Action("route_ecmp", (Param("dstAddr", 48, "mac"), Param("first_port", 9), Param("ports", 9))),
        Action("drop"),
        Action("NoAction"),
        Action("ina_pass"),
        Action("ina_aggregate", (
            Param("switch_addr", 32, "ip"),       # IPv4 source of aggregates this switch emits
            Param("slot_base", 32),
            Param("slot_count", 32),
            Param("release_mode", 8),
            Param("next_agg_node", 16),
            Param("next_fanin", 16),
            Param("next_dst", 32, "ip"),          # next aggregation node's address, or the PS
            Param("next_slot_base", 32),
            Param("next_slot_count", 32),
            Param("bypass_dst", 32, "ip"),        # where resent fragments and garbage go: the PS
            Param("overflow_dst", 32, "ip"),      # where collisions / capacity overflow go (bypass_hop, or the PS)
            Param("overflow_agg_node", 16),       # the overflow target's agg_node, fan-in and slot range
            Param("overflow_fanin", 16),
            Param("overflow_slot_base", 32),
            Param("overflow_slot_count", 32),     # 0: the target is the PS, the header is left as it is
        )),
        # RESULT packets: replicate to a multicast group (0 = forward as unicast)
        Action("ina_multicast", (Param("mcast_grp", 16),)),
        # RESULT packets of a RELEASE_ON_RESULT job: free the slot holding the
        # RESULT's tag in [slot_base, slot_base + slot_count), then as ina_multicast
        Action("ina_release", (Param("slot_base", 32), Param("slot_count", 32), Param("mcast_grp", 16))),
        # RESULT packets of a RELEASE_SHADOW job (SwitchML): the copy of pool slot seq mod pool (of the
        # job's range from slot_base, wire.shadow_slot) holding the RESULT's tag is marked resulted (its
        # PS has the aggregate, so a retransmission is answered from the copy), then as ina_multicast
        Action("ina_shadow_result", (Param("slot_base", 32), Param("pool", 32), Param("mcast_grp", 16))),
        # Egress, multicast copies only: the host behind this port gets the copy addressed to it
        Action("mcast_rewrite", (Param("dstAddr", 48, "mac"), Param("ipDstAddr", 32, "ip"))),
        # PA-ATP opt-in of a job at this switch: its register row, and whether it takes part in AECN here
        # (1: its RESULTs cross this switch, so its overflowed gradients are counted and its RESULTs marked)
        Action("pa_enable", (Param("pa_index", 32), Param("aecn", 8))),
        # ESA (collision preemption): the job of a colliding contribution is ranked (opt-in per job here)
        Action("esa_enable", (Param("priority", 16),)),
        # ESA: what the switch needs of the (job, sub-model) holding a slot to evict it: its rank, its fan-in
        # here (a complete slot is never evicted), and its overflow target, where the evicted partial goes
        Action("esa_evict_to", (
            Param("priority", 16),
            Param("fanin", 16),
            Param("overflow_dst", 32, "ip"),
            Param("overflow_agg_node", 16),
            Param("overflow_fanin", 16),
            Param("overflow_slot_base", 32),
            Param("overflow_slot_count", 32),     # 0: the target is the PS, the header is left as it is
        )),
        # Rina (§IV-B): this ToR aggregates its rack's shards of a job (see RINA below)
        Action("rina_aggregate", (
            Param("switch_addr", 32, "ip"),       # IPv4 source of the rack's sums: this switch
            Param("slot_base", 32),               # the job's contiguous slots here
            Param("slot_count", 32),
            Param("pull_grp", 16),                # the rack's workers but the agent: where a task's pull goes
            Param("gather_grp", 16),              # every worker of the rack and the port toward the next member
        )),
    )
}

TABLES = {
    t.name: t for t in (
        Table("route", "Ingress",
              (Key("hdr.ipv4.srcAddr", "exact", 32, "ip"), Key("hdr.ipv4.dstAddr", "exact", 32, "ip")),
              ("route_forward", "route_ecmp", "NoAction"), "NoAction"),
        Table("ipv4_lpm", "Ingress", (Key("hdr.ipv4.dstAddr", "lpm", 32, "ip"),),
              ("ipv4_forward", "drop"), "drop"),
        Table("ina_filter", "Ingress",
              (Key("hdr.ina.job", "exact", 16), Key("hdr.ina.agg_node", "exact", 16),
               Key("hdr.ina.submodel", "exact", 16)),
              ("ina_aggregate", "ina_pass"), "ina_pass"),
        Table("ina_result", "Ingress",
              (Key("hdr.ina.job", "exact", 16), Key("hdr.ipv4.dstAddr", "exact", 32, "ip")),
              ("ina_multicast", "ina_release", "ina_shadow_result", "NoAction"), "NoAction"),
        Table("ina_mcast_rewrite", "Egress", (Key("standard_metadata.egress_port", "exact", 9),),
              ("mcast_rewrite", "NoAction"), "NoAction"),
        Table("pa_job", "Ingress", (Key("hdr.ina.job", "exact", 16),), ("pa_enable", "NoAction"), "NoAction"),
        # ESA: the colliding contribution's job (looked up on a collision only)
        Table("esa_job", "Ingress", (Key("hdr.ina.job", "exact", 16),), ("esa_enable", "NoAction"), "NoAction"),
        # ESA: the slot's occupant, by the job and sub-model the slot holds (agg_job, agg_submodel)
        Table("esa_evict", "Ingress", (Key("meta.held_job", "exact", 16), Key("meta.held_submodel", "exact", 16)),
              ("esa_evict_to", "NoAction"), "NoAction"),
        Table("rina_rack", "Ingress", (Key("hdr.ina.job", "exact", 16), Key("hdr.ina.agg_node", "exact", 16)),
              ("rina_aggregate", "NoAction"), "NoAction"),
        # Rina: a finished chunk (GATHER) addressed to this rack's agent goes to every worker of the rack
        Table("rina_gather", "Ingress", (Key("hdr.ina.job", "exact", 16), Key("hdr.ipv4.dstAddr", "exact", 32, "ip")),
              ("ina_multicast", "NoAction"), "NoAction"),
    )
}

REGISTERS = {
    r.name: r for r in (
        Register("agg_value", "Ingress", 32, "SLOTS*LANES"),
        Register("agg_bitmap", "Ingress", 64, "SLOTS"),
        Register("agg_count", "Ingress", 16, "SLOTS"),   # 0 = slot free
        Register("agg_job", "Ingress", 16, "SLOTS"),
        Register("agg_iteration", "Ingress", 32, "SLOTS"),
        Register("agg_seq", "Ingress", 32, "SLOTS"),
        Register("agg_resulted", "Ingress", 1, "SLOTS"),  # RELEASE_SHADOW: the PS's RESULT of the held tag passed
        Register("agg_submodel", "Ingress", 16, "SLOTS"),  # the claiming packet's sub-model (ESA: whom to evict)
        Register("agg_elems", "Ingress", 8, "SLOTS"),      # the claiming packet's lanes (ESA: an evicted partial's)
        Register("agg_collided_job", "Ingress", 16, "SLOTS"),        # the tag that last collided at the slot:
        Register("agg_collided_iteration", "Ingress", 32, "SLOTS"),  # its siblings follow it to the overflow
        Register("agg_collided_seq", "Ingress", 32, "SLOTS"),        # target rather than claim the slot
        Register("ecn_threshold", "Egress", 32, "1"),    # queue depth (packets) that marks CE; 0 = off
        Register("impair_drop", "Egress", 32, "PORTS"),       # per port: loss threshold out of IMPAIR_SCALE
        Register("impair_duplicate", "Egress", 32, "PORTS"),  # per port: duplication threshold
        Register("impair_reorder", "Egress", 32, "PORTS"),    # per port: reordering threshold
        Register("agg_used", "Ingress", 32, "PA_JOBS"),       # slots row pa_index's job holds (agg_count != 0)
        Register("pa_seq", "Ingress", 32, "PA_JOBS*PA_WORKERS"),   # S_n: worker n's last seq, row pa_index
        Register("pa_seq_sum", "Ingress", 32, "PA_JOBS"),     # S_sum of row pa_index (mod 2^32)
        Register("pa_overflow", "Ingress", 32, "PA_JOBS*PA_SEQS"),  # overflowed gradients per seq cell
        Register("pa_overflowed", "Ingress", 32, "PA_JOBS"),  # row pa_index's outstanding overflowed gradients
        Register("aecn_threshold", "Ingress", 32, "PA_JOBS"), # row's agg_used + pa_overflowed above it: AECN; 0 = off
        Register("switch_wait", "Egress", 64, "WAIT_CELLS"),  # WAIT_*: the host's delay inside the switch
    )
}

STAT_INDICES = {
    "ina_rx": 0,              # INA packets parsed
    "aggregated": 1,          # contributions summed into a slot
    "emitted": 2,             # aggregates emitted (fan-in reached, or a RETX flush)
    "duplicate_dropped": 3,   # contribution already in the slot's bitmap
    "collision_bypassed": 4,  # slot held by another tag: sent on to the PS
    "capacity_bypassed": 5,   # aggregation capacity (meter) exhausted
    "malformed_dropped": 6,   # short payload, elems > lanes, bad header
    "slot_range_dropped": 7,  # slot index outside the job's range
    "forwarded": 8,           # IPv4 packets forwarded (unicast)
    "no_route_dropped": 9,    # no route / lpm entry, or TTL expired
    "partial_flushed": 10,    # a RETX duplicate flushed (re-emitted) the slot's aggregate
    "stale_reclaimed": 11,    # slot of an older iteration of the same job reused
    "multicast": 12,          # replicated to a multicast group: a RESULT, a Rina pull, a Rina finished chunk
    "retx_bypassed": 13,      # a RETX the slot cannot take (its tag sent on; a partial lacking it), or a late one: to the PS
    "result_released": 14,    # a RESULT freed the slot holding its tag (RELEASE_ON_RESULT)
    "lead_bypassed": 15,      # iteration > the slot's (same job) + MAX_ITERATION_LEAD: to the PS, unchanged
    "gacked": 16,             # PA-ATP GACKs sent: absorbed gradients, and clones for completing ones
    "aecn_marked": 17,        # RESULTs marked AECN (PA-ATP)
    "shadow_answered": 18,    # RETX duplicates answered by a resulted shadow copy with its RESULT (SwitchML)
    "overflow_followed": 19,  # a contribution whose fragment's sibling overflowed (collided) followed it
    "rina_pulled": 20,        # Rina: tasks multicast to their rack as pulls (a resent task's re-pull too)
    "rina_stale_dropped": 21, # Rina: a shard or task for a tag its slot does not hold, or older than it holds
    "rina_reemitted": 22,     # Rina: a resent task of a complete slot sent the rack's sum again
    "esa_evicted": 23,        # ESA: a contribution of higher rank took a held slot; the partial left in its place
    "retx_held": 24,          # RELEASE_HOLD: a member's RETX duplicate of an incomplete partial, dropped (not a flush)
}

COUNTERS = {
    c.name: c for c in (
        Counter("ina_stats", "Ingress", "STATS", STAT_INDICES),
        Counter("port_ina_tx", "Egress", "PORTS"),      # INA gradient packets (flag DATA, not RESULT/GACK) out of each port
        Counter("port_ecn_marked", "Egress", "PORTS"),  # packets marked CE on each port (Egress sees enq_qdepth)
        Counter("port_impair_dropped", "Egress", "PORTS"),     # packets the port's impairment dropped
        Counter("port_impair_duplicated", "Egress", "PORTS"),  # packets it duplicated (the copy is not counted)
        Counter("port_impair_reordered", "Egress", "PORTS"),   # packets it sent round again (recirculated)
    )
}

METERS = {m.name: m for m in (Meter("agg_capacity", "Ingress", "1", "packets"),)}


def register_size(register, slots: int = DEFAULT_SLOTS, lanes: int = DEFAULT_LANES) -> int:
    """Entries of a register, counter or meter array (anything with a ``size_expr``)."""
    sizes = {"SLOTS": slots, "SLOTS*LANES": slots * lanes, "1": 1, "PORTS": MAX_PORTS,
             "STATS": len(STAT_INDICES), "PA_JOBS": PA_JOBS, "PA_JOBS*PA_WORKERS": PA_JOBS * PA_WORKERS,
             "PA_JOBS*PA_SEQS": PA_JOBS * PA_SEQS, "WAIT_CELLS": WAIT_CELLS}
    return sizes[register.size_expr]


def impair_threshold(probability: float) -> int:
    """The register value of an impairment probability in [0, 1]: round(p * IMPAIR_SCALE)."""
    return int(round(float(probability) * IMPAIR_SCALE))


def impair_session(port: int) -> int:
    """The mirror session the duplicates of ``port`` are cloned to (ina.p4: IMPAIR_SESSION_BASE + port)."""
    return IMPAIR_SESSION_BASE + int(port)


def gack_session(port: int) -> int:
    """The mirror session the GACK of a completing gradient from ``port`` is cloned to
    (ina.p4: GACK_SESSION_BASE + ingress port); the runtime maps it to ``port``."""
    return GACK_SESSION_BASE + int(port)


def pa_seq_cell(pa_index: int, seq: int) -> int:
    """The ``pa_overflow`` cell of seq ``seq`` in row ``pa_index``
    (ina.p4: ``pa_index * INA_PA_SEQS + (seq & (INA_PA_SEQS - 1))``)."""
    return pa_index * PA_SEQS + (seq & (PA_SEQS - 1))


def esa_preempts(priority: int, job: int, iteration: int, seq: int,
                 held_priority: int, held_job: int, held_iteration: int, held_seq: int) -> bool:
    """ESA's rank (ina.p4's collision branch): does a contribution evict the incomplete partial its slot holds?
    A higher job priority wins; at equal priority, only an older fragment of the same job and iteration (a
    lower ``seq``, ESA's aging: older first) does. Jobs of equal priority never evict each other."""
    if priority != held_priority:
        return priority > held_priority
    return job == held_job and iteration == held_iteration and seq < held_seq


def qualified_name(control: str, name: str) -> str:
    """The name bmv2 gives an object: ``Ingress.agg_count``; core.p4's NoAction stays ``NoAction``."""
    return name if name == "NoAction" else f"{control}.{name}"
