"""The fluid (flow-level) model of gradient sending rates, as GRID §Motivation and InArt §2 reason.

Each worker sends its gradient at a rate r_w (bits of gradient per second);
sub-model g travels at r_w x phi_g (phi_g = g's share of the model's
elements) toward the node ``first_hop`` names, on the routes the controller
installs (:mod:`testbed.sim.routes`). A switch that aggregates g merges its
incoming streams of g into one aggregate stream whose rate is the largest
aggregated input rate (synchronous aggregation: one output fragment per input
fragment index), sent toward ``next_hop``. Aggregated flows therefore count
once downstream of their aggregation point.

Switch processing capacity (``switch.aggregation_capacity``, GRID's and
InArt's C(v)) bounds the input rate a switch aggregates, summed over every
stream it aggregates (raw gradients and child aggregates, all sub-models and
jobs). Beyond it the switch is best effort, as the data plane is: a share
beta = C / input of every input stream is aggregated and the rest bypasses,
unaggregated, toward ``bypass_hop`` (ATP's second level, which aggregates it
within its own capacity) or the sub-model's PS. GRID Fig. 1's ATP: S1 takes
9/4 Gb/s of each of W1-W4 and passes the rest over L1.

Links are full duplex; each direction carries at most its rate. The PS's
ingress limit is its access link. A transport that reads GACKs (PA-ATP,
StrawAsyn: ``program.PA_ATP_TRANSPORTS``) gets one back for every gradient
it sends, from the node its stream goes to first (a switch or its PS), a
header-only frame (``program.GACK_FRAME_BYTES``): each worker's stream of
GACKs loads the links toward it at r_w x phi_g x GACK bytes / frame bytes,
and a link it saturates stops that worker (a bypassed share is GACKed as
if absorbed at the first hop). PA-ATP's paper notes the cost (§V-C: its
GACKs take link bandwidth): with the RESULTs they share the direction
toward the workers, 416 bytes per fragment against the gradients' 336 at
64 lanes, so a job whose workers each have a path to themselves runs at
336/416 of the link rate. The RESULTs the PSs send back load links
too (``simulation.results``, default on), as the emulation sends them: each
PS's stream of results, at the rate aggregates complete (the job's slowest
worker's rate times the PS's share of the model), once over every edge of the
switches' multicast tree for schemes that aggregate in the network, or once
per worker along the default route without INA
(:func:`testbed.paths.result_multicast_tree` decides which). Results
mostly travel the other way, but a tree toward workers that share their
rack with the aggregation point crosses gradient links in the same
direction. The papers' motivating examples model the push only.

A ring all-reduce (``policy: rar``, ``h-ar``) has no PS and aggregates
nothing in the network: each worker's stream goes to the peer it sends to at
r_w (ring frames, ``wire.ring_frame_bytes``), and the peer's ACKs come back
at one 58-byte frame per ``ring_acks.ACK_EVERY`` fragments. Its peers change
from phase to phase (``ring_schedule.job_phases``: RAR has one, H-AR three);
a model rates one phase of each ring job (``ring_phase``, default the first).
Rina (``policy: rina``, :func:`rina_streams`) runs RAR over its members,
in three phases (:data:`RINA_PHASES`): in ScatterReduce a Rina rack's
workers each send their shard to their ToR, which sends the rack's sum on
to the next member's agent; in the first AllGather step a Rina rack's
workers send their shard of the chunk the member finishes, and its ToR
sends the finished chunk to every worker of the rack and on to the next
member (an autonomous worker sends its finished chunk on, as in RAR); in
the other AllGather steps each member's agent sends the finished chunk on,
and a Rina rack's ToR replicates it to every worker of its rack; an
autonomous worker sends to the next member as a RAR worker does. A stream
leaving a ToR runs at its rack agent's rate and counts every worker of the
rack as its contributor.

Rates: all workers rise together until a link saturates; the workers whose
streams (raw, bypassed, or inside an aggregate) cross a saturated link stop
there; the others keep rising (progressive filling, max-min fair). A worker
whose transport window caps its rate (SwitchML's pool per unloaded round
trip, ``paths.window_rate_cap_bps``) stops at that cap. The first
level is the minimum sending rate, the rate every worker reaches in
synchronous training. Each level is found by bisection to a relative 1e-13,
so results carry that round-off (2.4375 Gb/s comes out as 2.4375e9 to ~1e-4 bps).
"""

from collections import defaultdict

import networkx as nx

from testbed.agents.ring_acks import ACK_EVERY
from testbed.agents.ring_schedule import job_phases
from testbed.paths import result_multicast_tree, window_rate_cap_bps
from testbed.dataplane import program
from testbed.dataplane.wire import ina_frame_bytes, ring_frame_bytes
from testbed.gradient_profiles import fragments_per_submodel
from testbed.schemes.common import shares
from testbed.sim.routes import link_name
from testbed.topology import DefaultRoutes

SATURATED = 1e-9         # a link within this relative margin of its rate is saturated
RESULTS = "results"      # touch[RESULTS, link]: the workers setting the RESULT streams on a link
BISECTION_STEPS = 64


#: Rina's phases (:func:`rina_streams`, :func:`rina_phase_steps`): ScatterReduce, the first AllGather step (where a
#: Rina rack's own shards of the chunk its member finishes are summed, testbed.agents.rina), the other AllGather
#: steps.
RINA_PHASES = ("scatter-reduce", "reduce-gather", "all-gather")


def rina_phase_steps(members: int) -> tuple:
    """Steps of each of :data:`RINA_PHASES` in a ring of ``members`` members (RAR's 2 (M - 1) in all; one
    step, the rack's own sum, for a ring of one)."""
    return max(0, members - 1), 1, max(0, members - 2)


def ring_phases(job, jp, lanes: int) -> list:
    """The phases of one iteration of ring job ``job`` under its placement ``jp`` (racks for ``h-ar``)."""
    total = sum(fragments_per_submodel(job.submodel_elements, lanes))
    return job_phases(jp.scheme, len(job.workers), total, jp.notes.get("racks", []))


def rina_streams(jp, phase: str) -> list:
    """(source, destination, the worker whose rate it runs at, contributors) of every stream of one step of
    Rina's ``phase`` (one of :data:`RINA_PHASES`) under placement ``jp`` (its ``members``)."""
    members = jp.notes["members"]
    streams = []
    for member, following in zip(members, members[1:] + members[:1]):
        agent, tor, rack = member["workers"][0], member["tor"], frozenset(member["workers"])
        if phase == RINA_PHASES[0]:
            nxt = following["workers"][0]
            if tor is None:
                streams.append((agent, nxt, agent, rack))
            else:
                streams += [(w, tor, w, frozenset([w])) for w in member["workers"]]
                streams.append((tor, nxt, agent, rack))
            continue
        sender = agent
        if phase == RINA_PHASES[1] and tor is not None:
            # the rack's shards summed at its ToR, the finished chunk to the whole rack and on from the ToR
            streams += [(w, tor, w, frozenset([w])) for w in member["workers"]]
            streams += [(tor, w, agent, rack) for w in member["workers"]]
            sender = tor
            if following is member:
                continue
        if following["tor"] is None:
            streams.append((sender, following["workers"][0], agent, rack))
        else:
            streams.append((sender, following["tor"], agent, rack))
            streams += [(following["tor"], w, agent, rack) for w in following["workers"]]
    return streams


class FluidModel:
    def __init__(self, scenario, placement, routes, ring_phase: dict = None):
        self.scenario = scenario
        self.placement = placement
        self.routes = routes
        self.capacity_bps = scenario.switch.aggregation_capacity_bps
        self.workers = [w for job in scenario.jobs for w in job.workers]
        self._alone = {w: frozenset([w]) for w in self.workers}     # a raw stream's contributors
        self.jobs = [(job, placement.jobs[job.name]) for job in scenario.jobs]
        self._orders = {job.name: self._order(jp) for job, jp in self.jobs}
        default = DefaultRoutes(scenario.topology)
        #: A worker's transport window may cap its rate below any link's (SwitchML's pool); None: no cap.
        self.caps_bps = {w: window_rate_cap_bps(scenario, default, job, w) for job in scenario.jobs
                         for w in job.workers}
        #: A ring's ACK bytes per data frame byte (an ACK, a header alone, per ACK_EVERY fragments).
        self.ring_ack_share = ring_frame_bytes(0) / ACK_EVERY / ring_frame_bytes(scenario.switch.lanes)
        #: Per ring job, its streams in the phase this model rates: (source, destination, the worker whose
        #: rate it runs at, contributors).
        self.ring_streams = {}
        for job, jp in self.jobs:
            index = (ring_phase or {}).get(job.name, 0)
            if jp.scheme == "rina":
                self.ring_streams[job.name] = rina_streams(jp, RINA_PHASES[index])
            elif job.is_ring:
                self.ring_streams[job.name] = [(w, job.workers[peer], w, frozenset([w])) for w, peer in zip(
                    job.workers, ring_phases(job, jp, scenario.switch.lanes)[index].peers)]
        #: Per job whose transport reads GACKs: a GACK's bytes per gradient frame byte.
        self.gack_share = {job.name: program.GACK_FRAME_BYTES / ina_frame_bytes(scenario.switch.lanes)
                           for job in scenario.jobs if job.transport in program.PA_ATP_TRANSPORTS}
        self._trees = {(job.name, ps): result_multicast_tree(scenario.topology, default, job, jp, ps)
                       for job, jp in self.jobs for ps in set(jp.ps_of_submodel.values())}

    @staticmethod
    def _order(jp):
        """(switch, sub-model) pairs children first, so each one's inputs are final when it is processed."""
        dag = nx.DiGraph()
        for sw, hops in jp.next_hop.items():
            for g, nxt in hops.items():
                dag.add_node((sw, g))
                if nxt in jp.next_hop and g in jp.next_hop[nxt]:
                    dag.add_edge((sw, g), (nxt, g))
        for sw, hops in jp.bypass_hop.items():
            for g, nxt in hops.items():
                if (sw, g) in dag and nxt in jp.next_hop and g in jp.next_hop[nxt]:
                    dag.add_edge((sw, g), (nxt, g))
        try:
            return list(nx.topological_sort(dag))
        except nx.NetworkXUnfeasible:       # cyclic trees: the outer fixed point settles them
            return sorted(dag.nodes)

    def evaluate(self, rates: dict, beta: dict = None, iterations: int = 60):
        """Loads for worker ``rates``: (link loads, link contributors, switch inputs, PS ingress, beta)."""
        beta = dict(beta or {})
        for _ in range(iterations):
            result = self._pass(rates, beta)
            inputs = result[2]
            new_beta = {}
            for sw, total in inputs.items():
                new_beta[sw] = min(1.0, self.capacity_bps / total) if self.capacity_bps > 0 and total > 0 else 1.0
            if all(abs(new_beta[s] - beta.get(s, 1.0)) <= 1e-15 for s in new_beta):
                return result + (new_beta,)
            beta = new_beta
        return result + (beta,)

    def _pass(self, rates, beta):
        loads = defaultdict(float)
        touch = defaultdict(set)
        inputs = defaultdict(float)
        ps_in = defaultdict(float)
        # Streams with the same route and contributors add up before they load links: (source, destination,
        # start, contributors) -> rate, laid on the links once at the end of the pass.
        pending = defaultdict(float)
        alone = self._alone

        def send(src, dst, start, rate, who):
            if rate > 0:
                pending[(src, dst, start, who)] += rate

        for job, jp in self.jobs:
            if job.is_ring:
                for src, dst, w, who in self.ring_streams[job.name]:
                    send(src, dst, src, rates[w], who)
                    send(dst, src, dst, rates[w] * self.ring_ack_share, who)
                continue
            phi = shares(job)
            owners = set(jp.ps_of_submodel.values())
            arriving = defaultdict(list)          # (switch, g) -> [(rate, contributors)]
            gack_share = self.gack_share.get(job.name)
            for w in job.workers:
                for g, node in jp.first_hop[w].items():
                    rate = rates[w] * phi[g]
                    send(w, node, w, rate, alone[w])
                    if gack_share:
                        send(node, w, node, rate * gack_share, alone[w])
                    if node in owners:
                        ps_in[node] += rate
                    else:
                        arriving[(node, g)].append((rate, alone[w], w))
            for sw, g in self._orders[job.name]:
                streams = arriving.get((sw, g), [])
                if not streams:
                    continue
                b = beta.get(sw, 1.0)
                inputs[sw] += sum(r for r, _, _ in streams)
                out = max(b * r for r, _, _ in streams)
                who = frozenset().union(*(c for _, c, _ in streams))
                ps = jp.ps_of_submodel[g]
                nxt = jp.next_hop[sw][g]
                send(sw, nxt, sw, out, who)
                if nxt in owners:
                    ps_in[nxt] += out
                else:
                    arriving[(nxt, g)].append((out, who, sw))
                if b < 1.0:
                    by = jp.bypass_hop.get(sw, {}).get(g, ps)
                    for r, c, src in streams:
                        spill = (1.0 - b) * r
                        send(src, by, sw, spill, c)
                        if by in owners:
                            ps_in[by] += spill
                        else:
                            arriving[(by, g)].append((spill, c, src))
            if self.scenario.simulation.results:
                self._results(job, jp, phi, rates, loads, touch)
        links = self.routes.links
        for (src, dst, start, who), rate in pending.items():
            for link in links(src, dst, start):
                loads[link] += rate
                touch[link].update(who)
        return loads, touch, inputs, ps_in

    def _results(self, job, jp, phi, rates, loads, touch):
        """Each PS's RESULT stream: over its multicast tree's edges, or to every worker by unicast."""
        slowest = min(rates[w] for w in job.workers)    # an aggregate completes with its last contribution
        # Only the slowest workers set the stream's rate: a saturated RESULT link stops them, not the others.
        who = frozenset(w for w in job.workers if rates[w] <= slowest * (1 + 1e-12))
        for ps in sorted(set(jp.ps_of_submodel.values())):
            rate = slowest * sum(phi[g] for g, owner in jp.ps_of_submodel.items() if owner == ps)
            if rate <= 0:
                continue
            tree = self._trees[(job.name, ps)]
            if tree is None:
                edges = [link for w in job.workers for link in self.routes.links(ps, w)]
            else:
                first = self.scenario.topology.neighbor(ps, self.scenario.topology.host_link(ps))
                edges = [(ps, first)] + [self.routes.multicast_link(sw, c, ps)
                                         for sw, children in tree.items() for c in children]
            for edge in edges:
                loads[edge] += rate
                touch[RESULTS, edge].update(who)

    def feasible(self, loads) -> bool:
        cap = self.routes.capacity_bps
        return all(load <= cap[link] * (1 + 1e-12) for link, load in loads.items())

    def _capped(self, worker, rate_bps):
        cap = self.caps_bps[worker]
        return rate_bps if cap is None else min(rate_bps, cap)

    def max_min_rates(self):
        """Progressive filling: (rates per worker, saturated links at the first level)."""
        rates = {w: 0.0 for w in self.workers}
        active = set(self.workers)
        top = max(self.routes.capacity_bps.values())
        first_bottlenecks = None
        beta = {}
        while active:
            low, high = min(rates[w] for w in active), top
            for _ in range(BISECTION_STEPS):
                mid = 0.5 * (low + high)
                trial = dict(rates)
                trial.update({w: self._capped(w, mid) for w in active})
                if self.feasible(self.evaluate(trial, beta)[0]):
                    low = mid
                else:
                    high = mid
                if high - low <= high * 1e-13:
                    break
            rates.update({w: self._capped(w, low) for w in active})
            loads, touch, _, _, beta = self.evaluate(rates, beta)
            cap = self.routes.capacity_bps
            saturated = [l for l, load in loads.items() if load >= cap[l] * (1 - SATURATED)]
            if first_bottlenecks is None:
                first_bottlenecks = sorted(link_name(link) for link in saturated)
            # A saturated push link stops the workers whose streams cross it. A RESULT stream runs at its
            # job's slowest rate: it stops its slowest workers only where no push link stopped anyone (the
            # slowest are then no longer rising, and the stream with them).
            stopped = set().union(*(touch[l] for l in saturated)) & active if saturated else set()
            if not stopped and saturated:
                stopped = set().union(*(touch[RESULTS, l] for l in saturated)) & active
            capped = {w for w in active if self.caps_bps[w] is not None and rates[w] >= self.caps_bps[w]}
            active -= (stopped | capped) or set(active)
        return rates, first_bottlenecks or []
