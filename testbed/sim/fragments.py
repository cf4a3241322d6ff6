"""The fragment-level model of switch memory, where arrival order matters (GOAT §III-A/B, Fig. 2).

One iteration of every job, fragment by fragment, on a discrete clock: worker
w sends its fragments in ``seq`` order (the sub-models interleaved as the
agents interleave them, ``wire.fragment_seqs``) one per time
unit from ``simulation.worker_start[w]`` (fragment times; GOAT Fig. 2(b)'s
asynchronous arrivals), or with ``simulation.worker_pacing: host_link`` one
every r_max / r_w units (r_w its host link's rate: GOAT §VII-D's open-loop
senders at heterogeneous rates), and each link hop takes one time unit. Packets follow
the controller's routes (:mod:`testbed.sim.routes`); ties at a node keep the
order in which packets were sent.

A switch that is a packet's aggregation node (``agg_node``, as the data
plane's ``ina_filter`` matches it) puts it in slot ``seq mod slots`` of the
job's range there (``JobPlacement.slots``, the data plane's hash):

- free slot: the packet claims it; same fragment: contributions add up;
  once the summed ``count`` reaches the node's fan-in the aggregate goes to
  ``next_hop`` and the slot is released (``RELEASE_ON_EMIT``) or held until
  the PS's result for that fragment has travelled back
  (``RELEASE_ON_RESULT``, ATP proper: the PS completes a fragment when every
  (participating) worker's contribution is in, and its result reaches a
  switch one time unit per hop later);
- slot held by another fragment (``collision``): ``bypass`` sends the packet
  on unaggregated to ``bypass_hop`` (ATP's level 2, which may aggregate it)
  or the PS; ``preempt`` (ESA) lets a contribution that outranks the
  incomplete partial in the slot (``program.esa_preempts``: job priority,
  then, in one job, the lower seq) and would not complete on its own take the
  slot, and sends the evicted partial on toward the occupant's ``bypass_hop``
  or PS, as the data plane does; ``wait`` (SwitchML's self-clocked workers)
  queues the packet until the slot is free. Preempting jobs share one slot
  range where two or more of them aggregate (``Placement.shared_slot_ranges``,
  as the controller allocates it), so their fragments meet there.

A partial aggregate whose other contributions went elsewhere would wait
forever; the data plane flushes it on a retransmission. Here, once no packet
is in flight, slots are flushed level by level, leaves of the aggregation
trees first (so a level-2 switch still merges what its children flush), each
flushed partial counted as one more emitted fragment. GOAT Fig. 2(b) with
ATP: S1 emits B1, C1, A12, C2 and finally its stuck B2; S3 merges B1, B3, B2,
B4 into B; the PS receives 7 fragments and the switches emit 17.

Counts, per (node, job): every fragment a switch sends out (forwarded,
bypassed, aggregated or flushed) is one switch egress fragment; the PS
ingress counts what reaches a PS; ``sent`` what the workers sent. Above
``simulation.max_fragment_events`` fragment-hops :meth:`FragmentModel.analytic`
counts the same trees without collisions instead.
"""

import heapq
import itertools
from dataclasses import dataclass

from testbed.dataplane import program
from testbed.dataplane.wire import fragment_seqs
from testbed.gradient_profiles import fragments_per_submodel


@dataclass
class Packet:
    job: str
    src: str              # IPv4 source: the sending worker, or the switch that emitted the aggregate
    dst: str              # IPv4 destination: aggregation node or PS
    g: int
    seq: int
    count: int
    bitmap: frozenset


@dataclass
class Slot:
    job: str
    seq: int
    g: int
    count: int
    bitmap: frozenset
    done: bool = False    # completed, waiting for the PS's result (RELEASE_ON_RESULT)


class FragmentModel:
    def __init__(self, scenario, placement, routes):
        self.scenario = scenario
        self.placement = placement
        self.routes = routes
        self.lanes = scenario.switch.lanes
        # A ring all-reduce puts nothing in switch memory (testbed.sim.evaluate counts its fragments).
        self.jobs = {job.name: (job, placement.jobs[job.name]) for job in scenario.jobs if not job.is_ring}
        self.is_switch = {n.name: n.kind == "switch" for n in scenario.topology.nodes.values()}

    # -- sizing --------------------------------------------------------------------------
    def fragments(self, job):
        """Fragments per sub-model of ``job``."""
        return fragments_per_submodel(job.submodel_elements, self.lanes)

    def event_estimate(self) -> int:
        total = 0
        for job, jp in self.jobs.values():
            fragments = self.fragments(job)
            for w in job.workers:
                for g, node in jp.first_hop[w].items():
                    total += fragments[g] * (len(self.routes.walk(w, node)) + 2)
        return total

    def send_gaps(self) -> dict:
        """Time units between a worker's fragments (``simulation.worker_pacing``): 1 each (``uniform``), or
        the fastest worker's host link rate over its own (``host_link``)."""
        workers = [w for job, _ in self.jobs.values() for w in job.workers]
        if self.scenario.simulation.worker_pacing == "uniform":
            return {w: 1 for w in workers}
        topo = self.scenario.topology
        rates = {w: topo.host_link(w).rate_bps for w in workers}
        fastest = max(rates.values(), default=1.0)
        return {w: fastest / rate for w, rate in rates.items()}

    # -- analytic count (no collisions) ---------------------------------------------------
    def analytic(self):
        egress, ps_in, sent = {}, {}, {}
        for job, jp in self.jobs.values():
            fragments = self.fragments(job)
            owners = set(jp.ps_of_submodel.values())
            for w in job.workers:
                for g, node in jp.first_hop[w].items():
                    nodes = self.routes.walk(w, node)
                    sent[job.name] = sent.get(job.name, 0) + fragments[g]
                    for n in nodes[1:-1]:
                        egress[(n, job.name)] = egress.get((n, job.name), 0) + fragments[g]
                    if node in owners:
                        ps_in[(node, job.name)] = ps_in.get((node, job.name), 0) + fragments[g]
            for sw, hops in jp.next_hop.items():
                for g, nxt in hops.items():
                    if not jp.contributors(g, sw):
                        continue
                    nodes = self.routes.walk(sw, nxt)
                    for n in nodes[:-1]:
                        egress[(n, job.name)] = egress.get((n, job.name), 0) + fragments[g]
                    if nxt in owners:
                        ps_in[(nxt, job.name)] = ps_in.get((nxt, job.name), 0) + fragments[g]
        return {"switch_egress": egress, "ps_ingress": ps_in, "sent": sent, "model": "analytic (no collisions)"}

    # -- event model -----------------------------------------------------------------------
    def run(self):
        """Count one iteration fragment by fragment: every worker's fragments sent, the events run until no
        packet is in flight, then the slots flushed level by level, leaves first (the module docstring)."""
        events = _EventRun(self)
        events.send_fragments(self.send_gaps(), self.scenario.simulation.worker_start_fragments)
        now = events.drain(0)
        for level in self._flush_levels():
            events.flush(level, now)
            now = events.drain(now)
        return {"switch_egress": events.egress, "ps_ingress": events.ps_in, "sent": events.sent, "model": "event"}

    def _flush_levels(self) -> list:
        """Switches grouped by height in the aggregation trees, leaves first."""
        height = {}

        def up(sw, seen=()):
            if sw in height:
                return height[sw]
            parents = set()
            for _, jp in self.jobs.values():
                parents |= {n for n in jp.next_hop.get(sw, {}).values() if n in jp.next_hop}
                parents |= {n for n in jp.bypass_hop.get(sw, {}).values() if n in jp.next_hop}
            parents -= set(seen) | {sw}
            height[sw] = 1 + max((up(p, seen + (sw,)) for p in parents), default=0)
            return height[sw]

        switches = {sw for _, jp in self.jobs.values() for sw in jp.next_hop}
        for sw in switches:
            up(sw)
        levels = sorted({h for h in height.values()}, reverse=True)
        return [{sw for sw, h in height.items() if h == level} for level in levels]


class _EventRun:
    """The state of one :meth:`FragmentModel.run`: the event heap, the switches' slots and waiting packets, the
    PS's contributors per fragment, and the counts. An event is ``(time, order, kind, node, item)``: a
    ``"packet"`` (item: the Packet) reaching ``node``, or a ``"release"`` (item: ``(jp, index, seq)``) of a slot
    of ``node`` by the PS's result (``RELEASE_ON_RESULT``); ``order`` keeps ties in the order of sending."""

    def __init__(self, model: FragmentModel):
        self.model = model
        self.jobs = model.jobs
        self.routes = model.routes
        self.heap = []
        self.order = itertools.count()
        self.egress, self.ps_in, self.sent = {}, {}, {}
        self.slots = {}           # (switch, range) -> {index: Slot}; a range is a job, or the jobs sharing one
        self.waiting = {}         # (switch, range, index) -> [Packet]
        self.shared = model.placement.shared_slot_ranges(list(model.jobs))
        self.ranges = {}          # (switch, job) -> (range key, slots): slot_range's, once each
        self.ps_bits = {}         # (job, seq) -> frozenset
        self.fanins = {}

    # -- moving packets ----------------------------------------------------------------------
    def arrive(self, time, node, packet):
        heapq.heappush(self.heap, (time, next(self.order), "packet", node, packet))

    def forward(self, time, node, packet):
        """``packet`` leaves switch ``node`` (one egress fragment) toward its next hop."""
        egress, key = self.egress, (node, packet.job)
        egress[key] = egress.get(key, 0) + 1
        nodes = self.routes.walk(packet.src, packet.dst, node)
        heapq.heappush(self.heap, (time + 1, next(self.order), "packet", nodes[1], packet))   # arrive(), inlined

    def bypass(self, time, node, jp, packet):
        """``packet`` leaves ``node`` unaggregated toward its overflow hop."""
        self.forward(time, node, Packet(packet.job, packet.src, self.overflow_hop(jp, node, packet.g), packet.g,
                                        packet.seq, packet.count, packet.bitmap))

    def send_fragments(self, gaps: dict, starts: dict):
        """Every worker's fragments of the iteration, in seq order, ``gaps[w]`` time units apart from
        ``starts[w]`` (0 by default)."""
        for name, (job, jp) in self.jobs.items():
            in_seq_order = sorted((seq, g) for g, of_g in enumerate(fragment_seqs(self.model.fragments(job)))
                                  for seq in of_g)
            for w in job.workers:
                clock = starts.get(w, 0)
                for seq, g in in_seq_order:
                    packet = Packet(name, w, jp.first_hop[w][g], g, seq, 1, frozenset([w]))
                    nodes = self.routes.walk(w, packet.dst)
                    self.arrive(clock + 1, nodes[1] if len(nodes) > 1 else w, packet)   # a PS on w's own host: w
                    clock += gaps[w]
                    self.sent[name] = self.sent.get(name, 0) + 1

    # -- the placement at a switch -----------------------------------------------------------------
    def fanin(self, jp, g, node):
        key = (jp.job, g, node)
        if key not in self.fanins:
            self.fanins[key] = jp.fanin(g, node)
        return self.fanins[key]

    def slot_range(self, node, jp):
        """(key, slots) of ``jp``'s slot range at ``node``: its own, or the range it shares there."""
        key = (node, jp.job)
        if key not in self.ranges:
            together = self.shared.get(node, ())
            self.ranges[key] = (tuple(together), sum(self.jobs[name][1].slots[node] for name in together)) \
                if jp.job in together else (jp.job, jp.slots.get(node, 0))
        return self.ranges[key]

    @staticmethod
    def overflow_hop(jp, node, g):
        return jp.bypass_hop.get(node, {}).get(g, jp.ps_of_submodel[g])

    def preempts(self, jp, packet, node, slot):
        """ESA's eviction, on the data plane's conditions (p4/README.md): ranks, an incomplete occupant of
        a preempting job, a contribution that does not complete on its own."""
        held = self.jobs[slot.job][1]
        return jp.collision == held.collision == "preempt" and not slot.done and \
            packet.count < self.fanin(jp, packet.g, node) and program.esa_preempts(
                jp.notes.get("priority", 0), packet.job, 0, packet.seq,
                held.notes.get("priority", 0), slot.job, 0, slot.seq)

    # -- switch memory ----------------------------------------------------------------------------
    def emit(self, time, node, jp, slot):
        nxt = jp.next_hop[node][slot.g]
        self.forward(time, node, Packet(jp.job, node, nxt, slot.g, slot.seq, slot.count, slot.bitmap))

    def free(self, time, node, jp, index):
        key = self.slot_range(node, jp)[0]
        self.slots[(node, key)].pop(index, None)
        queue = self.waiting.get((node, key, index))
        if queue:
            self.aggregate(time, node, queue.pop(0))

    def aggregate(self, time, node, packet):
        """``packet`` at its aggregation node ``node``: into its slot, or on by the job's collision rule."""
        jp = self.jobs[packet.job][1]
        key, count = self.slot_range(node, jp)
        if count <= 0:
            self.bypass(time, node, jp, packet)
            return
        table = self.slots.setdefault((node, key), {})
        index = packet.seq % count
        slot = table.get(index)
        if slot is not None and (slot.job != packet.job or slot.seq != packet.seq or slot.done):
            if jp.collision == "wait":
                self.waiting.setdefault((node, key, index), []).append(packet)
                return
            if not self.preempts(jp, packet, node, slot):
                self.bypass(time, node, jp, packet)
                return
            held = self.jobs[slot.job][1]
            self.forward(time, node, Packet(slot.job, node, self.overflow_hop(held, node, slot.g), slot.g, slot.seq,
                                            slot.count, slot.bitmap))
            table.pop(index)
            slot = None
        if slot is None:
            slot = table[index] = Slot(packet.job, packet.seq, packet.g, packet.count, packet.bitmap)
        else:
            fresh = packet.bitmap - slot.bitmap
            if not fresh:
                return              # duplicate contribution: dropped, as the data plane does
            slot.count += len(fresh)
            slot.bitmap = slot.bitmap | fresh
        if slot.count >= self.fanin(jp, packet.g, node):
            self.emit(time, node, jp, slot)
            if jp.release_mode == program.RELEASE_ON_RESULT:
                slot.done = True
            else:
                self.free(time, node, jp, index)

    def at_ps(self, time, node, packet):
        """``packet`` reaches its PS; once the PS has every contribution of the fragment, its result heads
        back to the switches whose completed slot waits for it (``RELEASE_ON_RESULT``)."""
        ps_in, ps_bits = self.ps_in, self.ps_bits
        ps_in[(node, packet.job)] = ps_in.get((node, packet.job), 0) + 1
        job, jp = self.jobs[packet.job]
        key = (packet.job, packet.seq)
        bits = ps_bits[key] = ps_bits.get(key, frozenset()) | packet.bitmap
        if jp.release_mode == program.RELEASE_ON_RESULT and bits >= frozenset(jp.participants or job.workers):
            for (sw, _), table in self.slots.items():
                for index, slot in table.items():
                    if slot.job == packet.job and slot.seq == packet.seq and slot.done:
                        heapq.heappush(self.heap, (time + self.routes.hops(node, sw), next(self.order), "release",
                                                   sw, (jp, index, packet.seq)))

    # -- the clock ---------------------------------------------------------------------------------
    def drain(self, latest):
        """Run events until none is left; returns the time of the last one (``latest`` if there was none)."""
        heap, slots, is_switch, pop = self.heap, self.slots, self.model.is_switch, heapq.heappop
        aggregate, at_ps, forward = self.aggregate, self.at_ps, self.forward
        while heap:
            time, _, kind, node, item = pop(heap)
            if time > latest:
                latest = time
            if kind == "release":
                jp, index, seq = item
                slot = slots.get((node, self.slot_range(node, jp)[0]), {}).get(index)
                if slot is not None and slot.job == jp.job and slot.seq == seq and slot.done:
                    self.free(time, node, jp, index)
                continue
            packet = item
            if node == packet.dst:
                if is_switch[node]:
                    aggregate(time, node, packet)
                else:
                    at_ps(time, node, packet)
            else:
                forward(time, node, packet)
        return latest

    def flush(self, level, now):
        """At time ``now``, the switches of ``level`` emit the partial aggregates their slots hold and send on
        (to their overflow hop) the packets waiting for a slot."""
        for node, key in sorted(self.slots, key=str):
            if node not in level:
                continue
            table = self.slots[(node, key)]
            for index in sorted(table):
                slot = table[index]
                if not slot.done:
                    self.emit(now, node, self.jobs[slot.job][1], slot)
            table.clear()
        for key in list(self.waiting):
            if key[0] in level:
                for packet in self.waiting.pop(key):
                    self.bypass(now, key[0], self.jobs[packet.job][1], packet)
