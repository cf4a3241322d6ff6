"""Parser and ``Ingress`` control of the INA program (p4/ina.p4), as Python.

Per packet, in the order the P4 program applies them:

1. Parse Ethernet / IPv4 (IHL 5) / UDP; a UDP packet to port 40000 carries the
   INA header and ``elems`` lanes. Malformed INA packets (short, ``elems`` >
   LANES) are dropped and counted (``malformed_dropped``), never a crash.
2. RESULT packets: ``ina_result`` on (job, IPv4 destination). ``ina_release``
   first frees the slot ``slot_base + seq mod slot_count`` if it holds the
   RESULT's tag (job, iteration, seq) -- release on RESULT, ATP's rule;
   ``ina_shadow_result`` marks the shadow copy holding it resulted (SwitchML,
   step 3); the three then replicate the packet to their
   multicast group (TTL - 1, never back out of the ingress port; the Egress
   ``ina_mcast_rewrite`` addresses each copy to the host behind its port);
   group 0, or no entry: the RESULT is forwarded as unicast (step 4).
3. DATA packets: ``ina_filter`` on (job, agg_node, submodel). ``ina_aggregate`` sums the
   lanes into the slot the packet names (range-checked against the job's
   slots here), with duplicate suppression by bitmap:

   - a packet whose iteration is more than ``MAX_ITERATION_LEAD`` (2) ahead
     of the slot's tag of its own job -- held, or left by the last release --
     claims nothing: it goes unchanged to ``bypass_dst`` (``lead_bypassed``).
     Synchronous training has one iteration in flight per job, plus one for a
     worker that fell behind and catches up (K-of-N workers that skip ahead
     send to the PS, not to a switch), so such a packet is garbage; let in,
     its tag would be "newer" than every genuine packet's and pin the slot,
     with every later fragment bypassing it, until the run ends. A slot no
     job used yet (tag job 0: job ids start at 1; its iteration register is
     0) is measured from iteration 0, where every job starts; a slot last used
     by another job has no reference for this one and accepts any iteration;
   - free slot, or slot of an older iteration of the same job: claim it
     (``stale_reclaimed`` counts the latter);
   - same tag, contributors disjoint: add lanes, OR bitmaps, add counts --
     but a RETX contribution joins no partial (``retx_bypassed``): it goes
     to ``bypass_dst`` alone, since its original may sit in another
     aggregate (overflowed to the level above, or at the PS) and two
     aggregates holding one gradient can never be merged; the partial's
     members' own RETX duplicates flush it (next rule). Every aggregate is
     then built of originals only, each in one aggregate, so any two that
     reach the PS are disjoint or nested (the PS's merge relies on it).
     PA-ATP's jobs keep the join (a GACKed member retransmits only on an
     AACK gap or its hold timer, so a partial left behind would wait for
     one), and so do SwitchML's shadow copies (no overflow: a worker's
     every contribution goes to its own pool slot) and RELEASE_HOLD (below);
   - same tag, contributor already in: drop (``duplicate_dropped``); a RETX
     duplicate instead flushes what the slot holds (``partial_flushed``) so a
     lost aggregate or a contribution that bypassed elsewhere cannot wedge the
     slot: a complete slot (kept until its RESULT) sends its aggregate again
     toward the next node, still flagged RETX, so a switch above re-emits it
     too; an incomplete one sends its partial to ``bypass_dst`` (the PS) and is
     freed (ATP's loss recovery). No partial aggregate ever goes up a level,
     so an upper level never holds contributions a fuller aggregate overlaps.
     RELEASE_HOLD (GOAT, whose switch aggregates its sub-models exclusively,
     §I) drops an incomplete partial's member's RETX duplicate instead
     (``retx_held``): the partial waits for its missing members, so a fast
     worker's resends while a straggler has not started do not send the
     fast workers' partial to the PS. For the partial to complete, a RETX
     it lacks joins it (its original was lost on the way; had it gone to
     the PS alone, the aggregate nests over it), and a RETX that finds the
     slot free under another tag claims it; one that finds its own tag (the
     aggregate left, its RESULT or the aggregate was lost) goes to the PS;
   - slot held by another tag: COLLISION, the packet overflows (below),
     ATP's best-effort rule, and the slot remembers its tag
     (``agg_collided_*``): a sibling that later finds the slot free or stale
     follows it to the overflow target (``overflow_followed``) rather than
     start a partial it never joins (GOAT Fig. 2(b): ATP's B2 follows B1;
     PA-ATP's jobs follow their seq cell instead, below; SwitchML's shadow
     copies have no overflow; an ESA eviction remembers the evicted tag, so
     the evicted partial's siblings follow it too); unless it evicts the
     holder (ESA, per job:
     ``esa_job`` for the packet's job, ``esa_evict`` for the holder's job and
     sub-model; :meth:`Ingress._eviction` has the conditions, p4/README.md
     the rule): the packet claims the slot as if free, and leaves carrying
     the evicted partial (its tag, sub-model, count, bitmap and lanes, flags
     DATA | EVICTED) toward the holder's overflow target (``esa_evicted``);
   - a RETX packet that finds no slot holding its tag goes to ``bypass_dst``
     too (``retx_bypassed``; ATP forwards resent packets to the PS;
     RELEASE_HOLD only under its own tag, above), and any
     other contribution that finds its own tag in a free slot overflows: its
     siblings already left the switch, so a new partial would only wait for
     another timeout;
   - *overflow* goes where the placement sends it (``bypass_hop``, ATP's
     level-2 switch; else the PS): to ``overflow_dst``, and to a switch
     with ``agg_node``, ``fanin`` and ``slot`` rewritten to that switch's
     (``overflow_*``), so it aggregates the packet as its own contribution;
     collisions, capacity refusals, the siblings that follow them and
     PA-ATP's followed overflow are overflow;
   - when ``count`` reaches ``fanin`` the packet becomes the aggregate:
     lanes = slot sums, source = switch address, destination, agg_node,
     fanin and slot rewritten for the next level, ``level`` + 1, UDP
     checksum 0.

   Slot release: RELEASE_ON_EMIT and RELEASE_HOLD free the slot whenever an
   aggregate (or a flush) leaves; RELEASE_ON_RESULT keeps it, full, until
   the RESULT of its tag passes back (``ina_release``), so a RETX re-emits
   the aggregate and a late sibling is a duplicate; the next iteration
   reclaims it anyway if the RESULT was lost. RELEASE_SHADOW (SwitchML's
   shadow copies; the worker names copy ``version`` of its pool slot,
   ``wire.shadow_slot``) keeps a complete
   copy too, until a newer use of the same job (later iteration, or same
   iteration and higher seq) reclaims it (``stale_reclaimed``). A RESULT of
   the job (``ina_shadow_result``) marks the copy holding its tag resulted
   (``agg_resulted``: its PS has the aggregate). A RETX duplicate of a
   complete, resulted copy is answered from it: the packet becomes the
   RESULT (the copy's count, bitmap and lanes) from the switch back to its
   sender (``shadow_answered``); of a complete copy not resulted yet, the
   aggregate goes to the PS again (its RESULT was lost before this switch);
   a RETX that finds the copy free or older claims it like any contribution
   (only its own, already sent tag bypasses).

   The ``agg_capacity`` meter (GRID §Motivation: a saturated switch passes
   gradients on) takes a token for every contribution that reaches the slot
   logic, but refuses only a fragment's first one, which would claim a free
   slot: exhausted, that contribution overflows with the CAPACITY flag
   (``capacity_bypassed``) and the slot takes its tag with nothing held, so
   its siblings follow it (``retx_bypassed``, the tag rule above). A fragment is aggregated at the switch whole or not at all: a
   per-packet cut would strand its siblings' partial in the slot until a
   retransmission flushed it, a timeout per fragment refused.
4. ``route`` (exact src, dst) then ``ipv4_lpm`` (dst): set the destination MAC
   and egress port, TTL - 1. No entry, or TTL <= 1: drop (``no_route_dropped``).
   ``route_ecmp`` picks the port per flow: ``first_port`` plus the CRC-16 of
   the five-tuple (:func:`ecmp_member`) modulo ``ports``.

Arithmetic is 32-bit two's complement per lane, wrapping as bit<32> does.

PA-ATP's switch side (PA-ATP §III-B, §IV), for the jobs ``pa_job`` opts in
(``pa_enable(pa_index, aecn)``; every INA packet looks its job up):

- GACKs on their way back to a worker are forwarded, never aggregated;
- progress (§IV Fig. 7): a raw gradient (level 0, one-hot bitmap) that
  ``ina_aggregate`` takes here, in its job's slot range, moves its worker's
  ``pa_seq`` entry (row ``pa_index``, the bitmap's bit) to its seq and
  ``pa_seq_sum[pa_index]`` by the difference, and carries the new sum in its
  ``progress`` field whatever becomes of it (aggregated, bypassed);
- GACK: such a gradient absorbed into its slot goes back out of its ingress
  port, Egress turning it into the GACK (:attr:`Ingress.gack`); the one that
  completes the aggregate leaves as the aggregate and its GACK is an ingress
  clone to mirror session ``program.gack_session(in_port)``
  (:attr:`Ingress.clone`); bypassed, flushed or duplicate gradients get none
  from the switch (the PS answers the raw ones it receives);
- AECN: with ``aecn`` 1, a COLLISION of the job's packet counts as an
  overflowed gradient (``pa_overflow`` cell of its seq, ``pa_overflowed`` of
  its row), and a RESULT of the job gets FLAG_AECN when its row's
  ``agg_used`` (slots the job holds: kept on every free/held transition of
  one of its slots) plus ``pa_overflowed`` exceeds its row's
  ``aecn_threshold`` (not 0) as it finds them; then its seq's cell stops
  counting. A contribution that would start a partial in a free slot while
  its seq's cell counts overflowed siblings follows them to the PS
  (``overflow_followed``, counted as an overflowed gradient too): the
  siblings never come to the slot, so the partial would wait until a
  worker's hold timer released it.

A GACK's lanes never leave the switch (ina.p4's Egress invalidates them);
pyswitch cuts them when the gradient is queued, so the port's byte shaper
charges the GACK's own bytes.

Rina's switch side (Rina §IV-B, §V-1), at a rack's ToR, for the DATA packets
``rina_rack`` matches on (job, agg_node = this ToR) (``rina_aggregate(switch_addr,
slot_base, slot_count, pull_grp, gather_grp)``; :meth:`Ingress._rina`):

- the slot is ``slot_base + seq mod slot_count`` (contiguous, no hash; seq is
  ``wire.rina_seq``, the ring step over the index in its chunk);
- a shard of the tag the slot holds, its worker not yet in: summed (bitmap,
  count); when the count reaches ``fanin`` the packet leaves as the rack's sum
  (flags DATA, plus GATHER if it had it; level 1, agg_node 0, the slot's count,
  bitmap and lanes, source ``switch_addr``) toward its destination, the next
  member, and a finished chunk (GATHER) to ``gather_grp`` (the whole rack, the
  completing worker included, and the port toward the next member);
- a task (flag TASK: the agent's own shard) newer than the slot's tag (a free
  slot, another job's, a later iteration, or the same iteration and a higher
  seq) claims the slot and leaves as its pull: flags PULL (plus GATHER), no
  lanes, to ``pull_grp`` (``rina_pulled``);
- a shard already in is dropped (``duplicate_dropped``), but a resent task
  (TASK and RETX) pulls again an incomplete slot and sends a complete slot's
  sum again (``rina_reemitted``): the slot keeps it until a newer task;
- anything else (a shard of a tag the slot does not hold, an older task) is
  dropped (``rina_stale_dropped``).

A DATA packet with flag GATHER that no INA entry takes, addressed to a Rina
rack's agent, is multicast to the rack by ``rina_gather`` (job, IPv4
destination) -> ``ina_multicast``. As for a GACK, pyswitch cuts a pull's lanes
in Ingress, where ina.p4's Egress invalidates them in each copy.
"""

import struct
import time

import numpy as np

from testbed.dataplane import program
from testbed.dataplane.entries import encode_value
from testbed.dataplane.pyswitch.ecmp import ecmp_member
from testbed.dataplane.pyswitch.egress import headers_alone
from testbed.dataplane.pyswitch.fields import (ETH_DST, ETH_TYPE_HI, ETH_TYPE_IPV4_HI, ETH_TYPE_IPV4_LO, ETH_TYPE_LO,
                                               INA_AGG_NODE, INA_JOB, INA_PORT_HI, INA_PORT_LO, INA_SUBMODEL,
                                               IPV4_ADDRS, IPV4_DST, IPV4_SRC, UDP_CHECKSUM_HI, UDP_CHECKSUM_LO,
                                               UDP_DST_PORT_HI, UDP_DST_PORT_LO)
from testbed.dataplane.pyswitch.tables import Table
from testbed.dataplane.wire import (FLAG_AECN, FLAG_CAPACITY, FLAG_COLLISION, FLAG_DATA, FLAG_EVICTED, FLAG_GACK,
                                    FLAG_GATHER, FLAG_PULL, FLAG_RESULT, FLAG_RETX, FLAG_TASK, INA_AGG_NODE_OFFSET,
                                    INA_BITMAP_OFFSET, INA_COUNT_OFFSET, INA_FANIN_OFFSET, INA_FLAGS_OFFSET, INA_HEADER,
                                    INA_ITERATION_OFFSET, INA_JOB_OFFSET, INA_LEVEL_OFFSET, INA_OFFSET,
                                    INA_PROGRESS_OFFSET, INA_SEQ_OFFSET, INA_SLOT_OFFSET, INA_SUBMODEL_OFFSET,
                                    IPPROTO_UDP, IPV4_ADDR_BYTES, IPV4_PROTOCOL_OFFSET, IPV4_TTL_OFFSET,
                                    IPV4_VERSION_IHL, IPV4_VERSION_IHL_OFFSET, PAYLOAD_OFFSET, UDP_OFFSET, slot_index)

S = program.STAT_INDICES
ST_INA_RX, ST_AGG, ST_EMIT, ST_DUP = S["ina_rx"], S["aggregated"], S["emitted"], S["duplicate_dropped"]
ST_COLL, ST_CAP, ST_MAL, ST_RANGE = (S["collision_bypassed"], S["capacity_bypassed"], S["malformed_dropped"],
                                     S["slot_range_dropped"])
ST_FWD, ST_NOROUTE = S["forwarded"], S["no_route_dropped"]
ST_FLUSH, ST_STALE = S["partial_flushed"], S["stale_reclaimed"]
ST_MCAST, ST_RETX_BYPASS, ST_RELEASED = S["multicast"], S["retx_bypassed"], S["result_released"]
ST_LEAD_BYPASS, ST_GACKED, ST_AECN = S["lead_bypassed"], S["gacked"], S["aecn_marked"]
ST_SHADOW, ST_HELD = S["shadow_answered"], S["retx_held"]
ST_FOLLOWED = S["overflow_followed"]
ST_RINA_PULLED, ST_RINA_STALE, ST_RINA_REEMIT = S["rina_pulled"], S["rina_stale_dropped"], S["rina_reemitted"]
ST_EVICTED = S["esa_evicted"]
_TASK_RETX = FLAG_TASK | FLAG_RETX
RELEASE_ON_EMIT, RELEASE_SHADOW, RELEASE_HOLD = program.RELEASE_ON_EMIT, program.RELEASE_SHADOW, program.RELEASE_HOLD
MAX_ITERATION_LEAD = program.MAX_ITERATION_LEAD
PA_WORKERS = program.PA_WORKERS

_U16 = struct.Struct("!H")
_U32 = struct.Struct("!I")
_U64 = struct.Struct("!Q")
_CLEAR_RETX = 0xFFFF & ~FLAG_RETX


class TokenBucket:
    """A v1model-style meter as pyswitch runs it: ``rate_per_s`` tokens/s, ``burst`` deep, full at start."""

    def __init__(self, rate_per_s: float, burst: int):
        self.rate_per_s = float(rate_per_s)
        self.burst = float(max(1, burst))
        self.tokens = self.burst
        self.last = time.monotonic()

    def take(self, now: float) -> bool:
        self.tokens = min(self.burst, self.tokens + (now - self.last) * self.rate_per_s)
        self.last = now
        if self.tokens >= 1.0:
            self.tokens -= 1.0
            return True
        return False


class Ingress:
    """State and logic of the Ingress control of one switch."""

    def __init__(self, lanes: int = 64, slots: int = program.DEFAULT_SLOTS, tables=None):
        self.lanes = lanes
        self.slots = slots
        self.tables = tables if tables is not None else {name: Table(decl) for name, decl in program.TABLES.items()}
        self._ina_filter = self.tables["ina_filter"].exact
        self._ina_result = self.tables["ina_result"]
        self._route = self.tables["route"].exact
        self._ipv4_lpm = self.tables["ipv4_lpm"]
        self._pa_job = self.tables["pa_job"].exact
        self._rina_rack = self.tables["rina_rack"].exact
        self._rina_gather = self.tables["rina_gather"].exact
        self._esa_job = self.tables["esa_job"].exact
        self._esa_evict = self.tables["esa_evict"].exact
        # Registers, named as in ina.p4; agg_value is [slot][lane] here, flat in P4.
        self.agg_value = np.zeros((slots, lanes), dtype=np.int32)
        self.agg_bitmap = [0] * slots
        self.agg_count = [0] * slots
        self.agg_job = [0] * slots
        self.agg_iteration = [0] * slots
        self.agg_seq = [0] * slots
        self.agg_resulted = [0] * slots                       # RELEASE_SHADOW: the held tag's RESULT passed
        self.agg_submodel = [0] * slots                       # the claimant's sub-model (ESA: whom to evict)
        self.agg_elems = [0] * slots                          # the claimant's lanes
        self.agg_collided_job = [0] * slots                   # the tag that last collided at the slot
        self.agg_collided_iteration = [0] * slots
        self.agg_collided_seq = [0] * slots
        self.agg_used = [0] * program.PA_JOBS                 # slots with agg_count != 0, per pa_index
        self.pa_seq = [0] * (program.PA_JOBS * PA_WORKERS)    # S_n at pa_index * PA_WORKERS + worker
        self.pa_seq_sum = [0] * program.PA_JOBS               # S_sum per pa_index
        self.pa_overflow = [0] * (program.PA_JOBS * program.PA_SEQS)   # overflowed gradients per seq cell
        self.pa_overflowed = [0] * program.PA_JOBS            # their sum per pa_index
        self.aecn_threshold = [0] * program.PA_JOBS           # per pa_index; 0 = no AECN
        self.stats = [0] * len(program.STAT_INDICES)
        self.agg_capacity = None           # TokenBucket when the scenario sets a capacity
        self.mc_groups = {}                # group id -> tuple of ports
        # What Egress needs of the packet process() ran last (ina.p4's metadata that crosses to Egress):
        # ``gack``: the progress of the GACK the packet leaves as (meta.pa_gack, meta.pa_progress), or None;
        # ``clone``: (mirror session, frame, progress) of its ingress clone (a completing gradient's GACK), or None.
        # ``to_ingress_port``: the multicast copies include one back out of the ingress port (a Rina finished chunk).
        self.gack = None
        self.clone = None
        self.to_ingress_port = False

    # -- control-plane helpers ------------------------------------------------
    @staticmethod
    def prepare_params(action: str, params: tuple) -> tuple:
        """Turn declared (name, value) pairs into the tuple the fast path uses (addresses as bytes)."""
        values = []
        for decl, (_, value) in zip(program.ACTIONS[action].params, params):
            values.append(encode_value(decl.kind, decl.bits, value) if decl.kind in ("ip", "mac") else int(value))
        return tuple(values)

    def release(self, slot: int):
        self.agg_count[slot] = 0
        self.agg_bitmap[slot] = 0

    # -- fast path ---------------------------------------------------------------
    def process(self, buf: bytearray, now: float, in_port: int):
        """Run parser + Ingress on ``buf`` (modified in place), arrived on ``in_port``.

        Returns ``None`` (dropped/absorbed), an egress port (int), or a tuple of
        ports (multicast group; may be empty); :attr:`gack` and :attr:`clone`
        say what Egress must do besides.
        """
        self.gack = self.clone = None
        self.to_ingress_port = False
        n = len(buf)
        if n < UDP_OFFSET or buf[ETH_TYPE_HI] != ETH_TYPE_IPV4_HI or buf[ETH_TYPE_LO] != ETH_TYPE_IPV4_LO or \
                buf[IPV4_VERSION_IHL_OFFSET] != IPV4_VERSION_IHL:
            return None
        if buf[IPV4_PROTOCOL_OFFSET] == IPPROTO_UDP and n >= INA_OFFSET and buf[UDP_DST_PORT_HI] == INA_PORT_HI and \
                buf[UDP_DST_PORT_LO] == INA_PORT_LO:
            verdict = self._ina(buf, n, now, in_port)
            if verdict is not True:
                return verdict
        return self._forward(buf)

    def _ina(self, buf, n, now, in_port):
        """INA processing. True = continue to forwarding; otherwise the final verdict."""
        stats = self.stats
        if n < PAYLOAD_OFFSET:
            stats[ST_MAL] += 1
            return None
        (job, flags, elems, level, agg_node, fanin, count, submodel, iteration, seq, slot, bitmap,
         _progress) = INA_HEADER.unpack_from(buf, INA_OFFSET)
        if elems > self.lanes or n < PAYLOAD_OFFSET + 4 * elems:
            stats[ST_MAL] += 1
            return None
        stats[ST_INA_RX] += 1
        pa = self._pa_job.get(bytes(buf[INA_JOB])) if self._pa_job else None
        if pa is not None:
            pa = pa[1] if pa[0] == "pa_enable" else None      # (pa_index, aecn)
        if flags & FLAG_RESULT:
            return self._result(buf, job, flags, iteration, seq, pa)
        if flags & FLAG_GACK:
            return True     # a GACK on its way back to a worker: forwarded, never aggregated
        job_node = bytes(buf[INA_JOB]) + bytes(buf[INA_AGG_NODE])
        if flags & FLAG_DATA and self._rina_rack:
            rack = self._rina_rack.get(job_node)
            if rack is not None and rack[0] == "rina_aggregate":
                return self._rina(buf, rack[1], job, flags, elems, fanin, count, iteration, seq, bitmap)
        # ina_filter key: job, agg_node, submodel
        entry = self._ina_filter.get(job_node + bytes(buf[INA_SUBMODEL]))
        if entry is None or entry[0] != "ina_aggregate":
            if flags & FLAG_GATHER and self._rina_gather:
                # Rina: a finished chunk arriving for a Rina rack's agent: to every worker of the rack.
                gather = self._rina_gather.get(bytes(buf[INA_JOB]) + bytes(buf[IPV4_DST]))
                if gather is not None and gather[0] == "ina_multicast" and gather[1][0]:
                    return self._multicast(buf, gather[1][0])
            return True
        (switch_addr, slot_base, slot_count, release_mode, next_agg_node, next_fanin, next_dst,
         next_slot_base, next_slot_count, bypass_dst, *overflow) = entry[1]
        if not slot_base <= slot < slot_base + slot_count:
            stats[ST_RANGE] += 1
            return None
        raw = pa is not None and level == 0 and bitmap and not bitmap & (bitmap - 1)
        if raw:
            # PA-ATP's progress (§IV Fig. 7): S_n of the bitmap's worker moves to seq, S_sum by the difference.
            pa_index = pa[0]
            index = pa_index * PA_WORKERS + bitmap.bit_length() - 1
            last_seq = self.pa_seq[index]
            self.pa_seq[index] = seq
            progress = (self.pa_seq_sum[pa_index] + seq - last_seq) & 0xFFFFFFFF
            self.pa_seq_sum[pa_index] = progress
            _U32.pack_into(buf, INA_PROGRESS_OFFSET, progress)
        # Every contribution that gets this far takes a capacity token; only one that would start an
        # aggregate in a free slot is refused for the lack of one (below): a fragment aggregates whole or not.
        capacity_left = self.agg_capacity is None or self.agg_capacity.take(now)
        agg_count = self.agg_count
        held = agg_count[slot]
        was_held = held != 0
        held_iteration = self.agg_iteration[slot]
        if self.agg_job[slot] in (job, 0) and iteration > held_iteration and \
                iteration - held_iteration > MAX_ITERATION_LEAD:
            # Implausibly far ahead of the slot's tag (held or last held) of its own job, or of
            # iteration 0 in a slot no job used yet: no claim.
            stats[ST_LEAD_BYPASS] += 1
            return self._bypass(buf, flags, bypass_dst)
        shadow = release_mode == RELEASE_SHADOW
        hold = release_mode == RELEASE_HOLD
        evict = None
        if held:
            if shadow and self.agg_job[slot] == job and (held_iteration < iteration or (
                    held_iteration == iteration and self.agg_seq[slot] < seq)):
                # SwitchML: a newer use of this copy; its last use's result reached every worker.
                stats[ST_STALE] += 1
                held = 0
            elif self.agg_job[slot] != job or held_iteration > iteration or \
                    (self.agg_seq[slot] != seq and held_iteration >= iteration):
                if self._esa_evict and not flags & FLAG_RETX and pa is None and count < fanin:
                    evict = self._eviction(buf, slot, job, iteration, seq, elems)
                if evict is None:
                    stats[ST_COLL] += 1
                    self.agg_collided_job[slot] = job
                    self.agg_collided_iteration[slot] = iteration
                    self.agg_collided_seq[slot] = seq
                    if pa is not None and pa[1]:
                        self._count_overflow(pa[0], seq)
                    return self._overflow(buf, flags | FLAG_COLLISION, overflow, seq)
                # ESA: this contribution claims the slot (below); the packet leaves with the evicted partial,
                # whose siblings follow it once the slot is free again, as a collided fragment's do.
                stats[ST_EVICTED] += 1
                self.agg_collided_job[slot] = self.agg_job[slot]
                self.agg_collided_iteration[slot] = held_iteration
                self.agg_collided_seq[slot] = self.agg_seq[slot]
                held = 0
            elif held_iteration < iteration:
                stats[ST_STALE] += 1
                held = 0
        if not held and ((flags & FLAG_RETX and not shadow and not hold) or (
                self.agg_seq[slot] == seq and self.agg_iteration[slot] == iteration and self.agg_job[slot] == job)):
            # A retransmission finds no slot holding its tag: on to the PS (ATP's rule for resent
            # fragments; RELEASE_HOLD: only where the slot keeps its own tag, since a fragment that never
            # reached the slot starts its partial with it, as its lost original would have). A contribution
            # arrives at a free slot still tagged with its very tag (a release keeps the tag, and so does a
            # capacity refusal): its siblings already left, so it goes on to the overflow target, where a
            # refused sibling went, rather than starting a partial that would wait a whole timeout for
            # contributions that never come.
            stats[ST_RETX_BYPASS] += 1
            if flags & FLAG_RETX:
                return self._bypass(buf, flags, bypass_dst)
            return self._overflow(buf, flags, overflow, seq)
        if not held and pa is None and not shadow and self.agg_collided_seq[slot] == seq and \
                self.agg_collided_iteration[slot] == iteration and self.agg_collided_job[slot] == job:
            # A sibling of this fragment collided here and went on to the overflow target: follow it there
            # rather than start a partial it never joins, which would wait for a retransmission to flush it
            # (GOAT Fig. 2(b): ATP's B2 after B1). PA-ATP's jobs follow their seq cell's overflow (next).
            stats[ST_FOLLOWED] += 1
            return self._overflow(buf, flags, overflow, seq)
        if not held and pa is not None and pa[1] and self.pa_overflow[program.pa_seq_cell(pa[0], seq)]:
            # PA-ATP: a sibling of this seq overflowed and no RESULT of its cell passed since: this contribution
            # follows it to the overflow target (an overflowed gradient too) rather than starting a partial the
            # sibling will never join, which would stall the job until a hold timer released it.
            stats[ST_FOLLOWED] += 1
            self._count_overflow(pa[0], seq)
            return self._overflow(buf, flags, overflow, seq)
        if not was_held and not capacity_left:
            # Aggregation capacity exhausted: the fragment starts no aggregate here and overflows. The slot
            # takes its tag with nothing held, as a release leaves it, so its siblings follow it there (the tag
            # rule above) instead of starting a partial that would wait for the contribution that went ahead.
            stats[ST_CAP] += 1
            self.agg_job[slot], self.agg_iteration[slot], self.agg_seq[slot] = job, iteration, seq
            return self._overflow(buf, flags | FLAG_CAPACITY, overflow, seq)
        if not held:
            row = self.agg_value[slot]
            if evict is not None:
                evicted_lanes = row[:elems].astype(">i4").tobytes()
            row[:elems] = np.frombuffer(buf, dtype=">i4", count=elems, offset=PAYLOAD_OFFSET)
            if elems < self.lanes:
                row[elems:] = 0
            self.agg_bitmap[slot] = bitmap
            agg_count[slot] = count
            self.agg_job[slot] = job
            self.agg_iteration[slot] = iteration
            self.agg_seq[slot] = seq
            self.agg_resulted[slot] = 0
            self.agg_submodel[slot] = submodel
            self.agg_elems[slot] = elems
        elif self.agg_bitmap[slot] & bitmap:
            stats[ST_DUP] += 1
            if not flags & FLAG_RETX:
                return None
            if hold:
                # GOAT: the slot is the sub-model's own, so the partial (incomplete: a complete one left)
                # waits for its missing members instead of going to the PS; the resend is dropped.
                stats[ST_HELD] += 1
                return None
            # A retransmission of a contribution the slot already holds: the
            # others' contributions may never come here (they bypassed, or the
            # aggregate was lost): send what the slot holds on. Complete (kept
            # until the RESULT): the aggregate again, toward the next level, still
            # RETX. Incomplete: the partial goes to the PS and the slot is freed
            # (ATP's loss recovery), so no level above ever holds a partial that a
            # fuller aggregate could overlap.
            if shadow and agg_count[slot] >= fanin and self.agg_resulted[slot]:
                # SwitchML: the copy is complete and its PS has it (its RESULT passed): the aggregate is the
                # result, back to the sender as its RESULT.
                stats[ST_SHADOW] += 1
                return self._shadow_answer(buf, slot, elems, switch_addr)
            stats[ST_FLUSH] += 1
            if agg_count[slot] < fanin:
                stats[ST_EMIT] += 1
                self._write_aggregate(buf, slot, level, elems, flags | FLAG_DATA, switch_addr)
                buf[IPV4_DST] = bypass_dst
                self.release(slot)
                self._track_used(was_held, slot, pa)
                return True
            verdict = self._emit(buf, slot, level, elems, flags | FLAG_DATA, switch_addr, release_mode,
                                 next_agg_node, next_fanin, next_dst, next_slot_base, next_slot_count, seq)
            self._track_used(was_held, slot, pa)
            return verdict
        elif flags & FLAG_RETX and not shadow and not hold and pa is None:
            # A retransmission of a contribution the partial lacks joins no aggregate: its original may be in
            # another one (overflowed to the level above, or at the PS), and two aggregates holding the same
            # gradient could never be merged. On to the PS alone; the partial waits for its members' own
            # retransmissions, which flush it (above). RELEASE_HOLD keeps the join (GOAT: a partial that waits
            # for its members must take the one whose original was lost on the way; had the original gone to
            # the PS alone, the aggregate nests over it).
            stats[ST_RETX_BYPASS] += 1
            return self._bypass(buf, flags, bypass_dst)
        else:
            row = self.agg_value[slot, :elems]
            np.add(row, np.frombuffer(buf, dtype=">i4", count=elems, offset=PAYLOAD_OFFSET), out=row,
                   casting="unsafe")
            self.agg_bitmap[slot] |= bitmap
            agg_count[slot] = (held + count) & 0xFFFF     # bit<16> in ina.p4
        stats[ST_AGG] += 1
        if agg_count[slot] >= fanin:
            if raw:
                # PA-ATP: the completing gradient's GACK is an ingress clone of it as it arrived (its lanes cut,
                # see the module docstring), back out of its ingress port; queued before the aggregate, as bmv2 does.
                stats[ST_GACKED] += 1
                self.clone = (program.GACK_SESSION_BASE + in_port,
                              buf[:PAYLOAD_OFFSET] + buf[PAYLOAD_OFFSET + 4 * elems:], progress)
            verdict = self._emit(buf, slot, level, elems, (flags & _CLEAR_RETX) | FLAG_DATA, switch_addr,
                                 release_mode, next_agg_node, next_fanin, next_dst, next_slot_base, next_slot_count,
                                 seq)
            self._track_used(was_held, slot, pa)
            return verdict
        self._track_used(was_held, slot, pa)
        if evict is not None:
            buf[PAYLOAD_OFFSET:PAYLOAD_OFFSET + 4 * elems] = evicted_lanes
            return self._evicted(buf, level, switch_addr, evict)
        if raw:
            # PA-ATP: absorbed, the gradient goes back out of its ingress port as its sender's GACK.
            stats[ST_GACKED] += 1
            self.gack = progress
            del buf[PAYLOAD_OFFSET:PAYLOAD_OFFSET + 4 * elems]
            return in_port
        return None

    def _rina(self, buf, params, job, flags, elems, fanin, count, iteration, seq, bitmap):
        """Rina's rack aggregation at its ToR (ina.p4's Rina branch; the module docstring has the rules)."""
        switch_addr, slot_base, slot_count, pull_grp, gather_grp = params
        stats = self.stats
        if not slot_count:
            stats[ST_RANGE] += 1
            return None
        slot = slot_index(seq, slot_base, slot_count)
        if slot >= self.slots:
            stats[ST_RANGE] += 1
            return None
        held = self.agg_count[slot]
        emit = pull = False
        if held and self.agg_job[slot] == job and self.agg_iteration[slot] == iteration and self.agg_seq[slot] == seq:
            if self.agg_bitmap[slot] & bitmap:
                # A shard the slot has: dropped, but a resent task pulls again (incomplete) or resends the sum.
                stats[ST_DUP] += 1
                if flags & _TASK_RETX != _TASK_RETX:
                    return None
                if held >= fanin:
                    emit = True
                    stats[ST_RINA_REEMIT] += 1
                else:
                    pull = True
            else:
                row = self.agg_value[slot, :elems]
                np.add(row, np.frombuffer(buf, dtype=">i4", count=elems, offset=PAYLOAD_OFFSET), out=row,
                       casting="unsafe")
                self.agg_bitmap[slot] |= bitmap
                self.agg_count[slot] = (held + count) & 0xFFFF     # bit<16> in ina.p4
                stats[ST_AGG] += 1
                emit = self.agg_count[slot] >= fanin
        elif flags & FLAG_TASK and (not held or self.agg_job[slot] != job or iteration > self.agg_iteration[slot] or (
                iteration == self.agg_iteration[slot] and seq > self.agg_seq[slot])):
            # A newer task claims the slot (its last use was acknowledged before the agent sent this) and is pulled.
            if held and self.agg_job[slot] == job:
                stats[ST_STALE] += 1
            row = self.agg_value[slot]
            row[:elems] = np.frombuffer(buf, dtype=">i4", count=elems, offset=PAYLOAD_OFFSET)
            row[elems:] = 0
            self.agg_bitmap[slot] = bitmap
            self.agg_count[slot] = count
            self.agg_job[slot], self.agg_iteration[slot], self.agg_seq[slot] = job, iteration, seq
            stats[ST_AGG] += 1
            emit = count >= fanin
            pull = not emit
        else:
            stats[ST_RINA_STALE] += 1
            return None
        if emit:
            # The rack's sum, from this switch, on to the next member; a finished chunk to the whole rack as well.
            stats[ST_EMIT] += 1
            gather = flags & FLAG_GATHER
            self._write_slot(buf, slot, elems, FLAG_DATA | gather, switch_addr)
            buf[INA_LEVEL_OFFSET] = 1
            _U16.pack_into(buf, INA_AGG_NODE_OFFSET, 0)
            if gather:
                self.to_ingress_port = True
                return self._multicast(buf, gather_grp)
            return True
        if pull:
            # The task's pull: its header alone to the rack's other workers.
            stats[ST_RINA_PULLED] += 1
            _U16.pack_into(buf, INA_FLAGS_OFFSET, FLAG_PULL | (flags & FLAG_GATHER))
            del buf[PAYLOAD_OFFSET:]
            headers_alone(buf)
            return self._multicast(buf, pull_grp)
        return None     # absorbed into the slot

    def _eviction(self, buf, slot, job, iteration, seq, elems):
        """ESA: the occupant of ``slot`` that a colliding contribution evicts, as (job, sub-model, iteration,
        seq, count, bitmap, its esa_evict_to parameters), or None (the contribution collides as in ATP):
        its job opted in (``esa_job``), the occupant's has an ``esa_evict`` entry, is incomplete, has the
        same lanes and is outranked (:func:`program.esa_preempts`)."""
        esa = self._esa_job.get(bytes(buf[INA_JOB]))
        if esa is None or esa[0] != "esa_enable":
            return None
        held_job, held_submodel = self.agg_job[slot], self.agg_submodel[slot]
        target = self._esa_evict.get(_U16.pack(held_job) + _U16.pack(held_submodel))
        if target is None or target[0] != "esa_evict_to":
            return None
        held_priority, held_fanin = target[1][0], target[1][1]
        count = self.agg_count[slot]
        if self.agg_elems[slot] != elems or count >= held_fanin or not program.esa_preempts(
                esa[1][0], job, iteration, seq, held_priority, held_job, self.agg_iteration[slot], self.agg_seq[slot]):
            return None
        return (held_job, held_submodel, self.agg_iteration[slot], self.agg_seq[slot], count, self.agg_bitmap[slot],
                target[1][2:])

    def _evicted(self, buf, level, switch_addr, evict):
        """``buf`` (its lanes already the evicted partial's) becomes the partial ESA evicted: the occupant's
        tag, count and bitmap, flags DATA and EVICTED, level one above the evicting packet's, from this switch
        toward the occupant's overflow target."""
        job, submodel, iteration, seq, count, bitmap, overflow = evict
        _U16.pack_into(buf, INA_JOB_OFFSET, job)
        if level != 255:
            buf[INA_LEVEL_OFFSET] = level + 1
        _U16.pack_into(buf, INA_COUNT_OFFSET, count)
        _U16.pack_into(buf, INA_SUBMODEL_OFFSET, submodel)
        _U32.pack_into(buf, INA_ITERATION_OFFSET, iteration)
        _U32.pack_into(buf, INA_SEQ_OFFSET, seq)
        _U64.pack_into(buf, INA_BITMAP_OFFSET, bitmap)
        buf[IPV4_SRC] = switch_addr
        return self._overflow(buf, FLAG_DATA | FLAG_EVICTED, overflow, seq)

    def _multicast(self, buf, group):
        """Replicate ``buf`` to multicast ``group`` (TTL - 1): the ports of the group."""
        ttl = buf[IPV4_TTL_OFFSET]
        if ttl <= 1:
            self.stats[ST_NOROUTE] += 1
            return None
        buf[IPV4_TTL_OFFSET] = ttl - 1
        self.stats[ST_MCAST] += 1
        return self.mc_groups.get(group, ())

    def _track_used(self, was_held: bool, slot: int, pa):
        """A PA-ATP job's agg_used follows its ``slot`` from free to held and back (ina.p4: slot_was_held /
        slot_held); ``pa`` is the job's (pa_index, aecn), None for other jobs."""
        held = self.agg_count[slot] != 0
        if pa is not None and held != was_held:
            used = self.agg_used[pa[0]]
            if held:
                self.agg_used[pa[0]] = (used + 1) & 0xFFFFFFFF
            elif used:
                self.agg_used[pa[0]] = used - 1

    def _count_overflow(self, pa_index: int, seq: int):
        """PA-ATP: one more overflowed gradient, outstanding until a RESULT of its seq cell passes."""
        cell = program.pa_seq_cell(pa_index, seq)
        self.pa_overflow[cell] = (self.pa_overflow[cell] + 1) & 0xFFFFFFFF
        self.pa_overflowed[pa_index] = (self.pa_overflowed[pa_index] + 1) & 0xFFFFFFFF

    def _write_slot(self, buf, slot, elems, flags, switch_addr):
        """Flags, count, bitmap, lanes and source of what ``slot`` holds into ``buf``; UDP checksum 0."""
        _U16.pack_into(buf, INA_FLAGS_OFFSET, flags)
        _U16.pack_into(buf, INA_COUNT_OFFSET, self.agg_count[slot])
        _U64.pack_into(buf, INA_BITMAP_OFFSET, self.agg_bitmap[slot])
        buf[PAYLOAD_OFFSET:PAYLOAD_OFFSET + 4 * elems] = self.agg_value[slot, :elems].astype(">i4").tobytes()
        buf[IPV4_SRC] = switch_addr
        buf[UDP_CHECKSUM_HI] = buf[UDP_CHECKSUM_LO] = 0  # UDP checksum: the payload changed

    def _write_aggregate(self, buf, slot, level, elems, flags, switch_addr):
        """:meth:`_write_slot`, one level up: the aggregate of ``slot`` leaving this switch."""
        self._write_slot(buf, slot, elems, flags, switch_addr)
        if level != 255:
            buf[INA_LEVEL_OFFSET] = level + 1

    def _emit(self, buf, slot, level, elems, flags, switch_addr, release_mode, next_agg_node, next_fanin, next_dst,
              next_slot_base, next_slot_count, seq):
        """Rewrite ``buf`` into the aggregate of ``slot`` toward the next level."""
        self.stats[ST_EMIT] += 1
        self._write_aggregate(buf, slot, level, elems, flags, switch_addr)
        self._address_to(buf, next_agg_node, next_fanin, next_slot_base, next_slot_count, seq)
        buf[IPV4_DST] = next_dst
        if release_mode == RELEASE_ON_EMIT or release_mode == RELEASE_HOLD:
            self.agg_count[slot] = 0
            self.agg_bitmap[slot] = 0
        return True

    def _shadow_answer(self, buf, slot, elems, switch_addr):
        """SwitchML: ``buf`` (a RETX duplicate) becomes the RESULT of its complete shadow copy ``slot``, from
        this switch back to its sender: flags RESULT, the copy's count, bitmap and lanes, source the switch,
        destination the sender; every other header field as it arrived."""
        buf[IPV4_DST] = buf[IPV4_SRC]
        self._write_slot(buf, slot, elems, FLAG_RESULT, switch_addr)
        return True

    @staticmethod
    def _bypass(buf, flags, bypass_dst):
        _U16.pack_into(buf, INA_FLAGS_OFFSET, flags)
        buf[IPV4_DST] = bypass_dst
        buf[UDP_CHECKSUM_HI] = buf[UDP_CHECKSUM_LO] = 0
        return True

    @staticmethod
    def _address_to(buf, agg_node, fanin, slot_base, slot_count, seq):
        """``buf`` addressed to an aggregation node: its ``agg_node``, ``fanin`` and the slot of ``seq`` in its
        range (``wire.slot_index``)."""
        _U16.pack_into(buf, INA_AGG_NODE_OFFSET, agg_node)
        _U16.pack_into(buf, INA_FANIN_OFFSET, fanin)
        _U32.pack_into(buf, INA_SLOT_OFFSET, slot_index(seq, slot_base, slot_count) & 0xFFFFFFFF)

    @classmethod
    def _overflow(cls, buf, flags, overflow, seq):
        """On to the overflow target (the placement's bypass_hop): ATP's level-2 switch, addressed as a contribution
        of its own (its agg_node, fan-in and slot), or the PS with the header as it is (slot count 0)."""
        dst, agg_node, fanin, slot_base, slot_count = overflow
        if slot_count:
            cls._address_to(buf, agg_node, fanin, slot_base, slot_count, seq)
        return cls._bypass(buf, flags, dst)

    def _result(self, buf, job, flags, iteration, seq, pa):
        """RESULT packets: AECN (PA-ATP), release (ina_release), then multicast when the entry names a group."""
        if pa is not None and pa[1]:
            row = pa[0]
            overflowed = self.pa_overflowed[row]
            threshold = self.aecn_threshold[row]
            if threshold and (self.agg_used[row] + overflowed) & 0xFFFFFFFF > threshold:
                _U16.pack_into(buf, INA_FLAGS_OFFSET, flags | FLAG_AECN)
                # UDP checksum: the header changed (a stale one drops it at the worker)
                buf[UDP_CHECKSUM_HI] = buf[UDP_CHECKSUM_LO] = 0
                self.stats[ST_AECN] += 1
            cell = program.pa_seq_cell(row, seq)
            count = self.pa_overflow[cell]
            if count:
                self.pa_overflowed[row] = overflowed - count if overflowed > count else 0
                self.pa_overflow[cell] = 0
        action, p = self._ina_result.lookup(bytes(buf[INA_JOB]) + bytes(buf[IPV4_DST]))
        if action == "ina_shadow_result":
            slot_base, pool, group = p
            first = slot_base + 2 * (seq % pool) if pool else slot_base
            for slot in (first, first + 1):
                if self.agg_count[slot] and self.agg_job[slot] == job and self.agg_iteration[slot] == iteration \
                        and self.agg_seq[slot] == seq:
                    self.agg_resulted[slot] = 1
        elif action == "ina_release":
            slot_base, slot_count, group = p
            slot = slot_index(seq, slot_base, slot_count)
            if self.agg_count[slot] and self.agg_job[slot] == job and self.agg_iteration[slot] == iteration \
                    and self.agg_seq[slot] == seq:
                self.release(slot)
                if pa is not None and self.agg_used[pa[0]]:
                    self.agg_used[pa[0]] -= 1
                self.stats[ST_RELEASED] += 1
        elif action == "ina_multicast":
            group = p[0]
        else:
            return True
        if not group:
            return True
        return self._multicast(buf, group)

    def _forward(self, buf):
        stats = self.stats
        key = bytes(buf[IPV4_ADDRS])
        entry = self._route.get(key)
        if entry is not None and entry[0] == "route_ecmp":
            p = entry[1]
            entry = ("route_forward", (p[0], p[1] + ecmp_member(buf, p[2])))
        elif entry is None or entry[0] != "route_forward":
            entry = self._ipv4_lpm.lookup(key[IPV4_ADDR_BYTES:])     # the destination
            if entry[0] != "ipv4_forward":
                stats[ST_NOROUTE] += 1
                return None
        ttl = buf[IPV4_TTL_OFFSET]
        if ttl <= 1:
            stats[ST_NOROUTE] += 1
            return None
        buf[IPV4_TTL_OFFSET] = ttl - 1
        p = entry[1]
        buf[ETH_DST] = p[0]
        stats[ST_FWD] += 1
        return p[1]
