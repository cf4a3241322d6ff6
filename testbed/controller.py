"""Controller: Placement + Topology -> what each switch and each agent must do.

:func:`plan` returns a :class:`ControlPlan`: one :class:`SwitchConfig` per
switch (routes, INA filter entries, slot ranges, port shaping, impairments,
meters, ECN threshold) and one :class:`AgentConfig` per worker and PS. The
plan is plain data; :func:`testbed.dataplane.runtime.install` pushes a switch
config through whichever SwitchRuntime the target provides, so nothing here
knows the target.

Choices:

- Default routes are /32 ``ipv4_lpm`` entries along BFS shortest paths toward
  every host and every switch INA address (deterministic: ties broken by
  node order); parallel links between two switches are spread by destination
  (static ECMP, as PA-ATP's testbed routes over its four paths); a placement's
  explicit ``paths`` become exact ``route`` entries, which the program
  applies before ``ipv4_lpm``. Exact ``route`` entries spread flows over
  parallel links by (source, destination), or follow the source's pinned
  path (``topology.pinned_paths``).
- The destination MAC written by every hop is the final host's MAC, so the
  frame needs no further rewrite at the last hop (switch INA addresses get
  the switch's MAC).
- Slot release: RELEASE_ON_RESULT jobs (ATP) get an ``ina_result`` entry per
  worker at each switch they aggregate on, so the PS's RESULT frees the slot;
  RELEASE_SHADOW jobs (SwitchML) the same, marking the shadow copy resulted.
- RESULTs of jobs that aggregate in the network are multicast by the
  switches (:func:`_result_multicast`); the others are pulled by unicast.
- Slots: each job gets a contiguous range at each switch it aggregates on,
  in job order; more than the switch has is a PlacementError naming the switch.
  A RELEASE_SHADOW job (SwitchML) has two copies per pool slot: its range is
  twice its pool, and its workers get the pool (``shadow_pool``, the copies'
  layout is ``wire.shadow_slot``) and a window of at most the pool. Jobs that
  preempt (ESA) share one range where two or more of them aggregate
  (``Placement.shared_slot_ranges``): each gets the whole shared range.
- ESA (:func:`_esa_preemption`): at each switch aggregating a job whose
  policy preempts, an ``esa_job`` entry (its ``policy_options.esa.priority``)
  and, per sub-model it aggregates there, an ``esa_evict`` entry: the same
  priority, its fan-in there, and its overflow target (as ``ina_aggregate``'s
  ``overflow_*``), where a partial of it that a higher rank evicts goes.
- A switch egress is shaped by the switch itself at the link's rate (hosts
  shape their own egress with htb): no link direction is shaped twice.
- Workers get their job's ``transport`` and ``transport_options`` as the
  scenario resolved them (by default the transport each paper pairs with
  the scheme, ``testbed.agents.transport.default_transport``), their host
  link rate for pacing, and a first-RESULT allowance covering the job's
  compute-delay spread (:func:`straggler_allowance_s`; none for a job with
  ``straggler_allowance: false``); SwitchML's workers
  get their fixed timeout scaled to the run (:func:`testbed.paths.transport_options_of`).
- Aggregation capacity (GRID's switch processing capacity) becomes the
  ``agg_capacity`` meter in fragments/s: capacity_bps / (lanes x 32 bits).
- Time dilation N (testbed/dilation.py): the switches shape their ports and
  meter aggregation at the rates divided by N; the agents get N and the
  scenario's virtual times and rates (their clock runs N times slower).
- PA-ATP's switch side (:func:`_pa_atp`), for jobs whose transport reads
  GACKs (``program.PA_ATP_TRANSPORTS``: ``pa-atp``, ``strawasyn``): at each
  switch aggregating such a job, a ``pa_job`` entry giving it a row of the
  PA-ATP registers (``pa_index``, in job order) and ``aecn`` 1 where the job's
  RESULTs cross the switch (for every sub-model aggregated there, the switch
  lies on the default path from its PS to a worker: only there are its
  overflowed gradients counted, a RESULT of theirs ending the count, and its
  RESULTs marked); a GACK mirror session on every port of the switch
  (``program.gack_session(port)`` -> port, for the completing gradients'
  GACKs); and per job its ``aecn_threshold`` (:func:`aecn_threshold_pkts`,
  over its own slots).
  Their PS gets the job's transport, and answers raw gradients with GACKs.
- Rina (:func:`_rina_racks`, Rina §IV-B): at the ToR of each Rina rack (a
  member of the placement's ring with a ToR), a ``rina_rack`` entry (the job's
  slot range there, the agent's address, the pull group of the rack's other
  workers and the gather group of the whole rack plus the port toward the
  next member) and a ``rina_gather`` entry (the agent's address -> the
  rack's group); the copies toward the rack's hosts are addressed to them
  (``ina_mcast_rewrite``). Each worker gets its member's place in the ring
  (:func:`_rina_agents`).
"""

import math
from dataclasses import asdict, dataclass, field, replace

from testbed.agents.config import AgentConfig, SubmodelAssignment
from testbed.agents.transport import TRANSPORTS
from testbed.agents.transport.pa_atp import aecn_threshold_factor
from testbed.agents.transport.paced import PacedTransport
from testbed.dataplane import program
from testbed.dataplane.entries import (MulticastGroup, PortImpairment, PortShaping, SwitchConfig, TableEntry,
                                      check_switch_limits, validate_entry)
from testbed.errors import PlacementError, TopologyError
from testbed.gradient_profiles import fragments_per_submodel
from testbed.paths import (bdp_pkts, link_rates_along, paced_rate, result_multicast_tree,
                           transport_options_of)
from testbed.schemes.ring import fallback_members
from testbed.dataplane.wire import ina_frame_bytes
from testbed.topology import DefaultRoutes, result_group_ip

CAPACITY_BURST_OPS = 16
FIRST_RESULT_MARGIN_S = 0.3
#: PA-ATP's AECN threshold takes the aggregation throughput C_A of Eq. 9 (the most stalled workers' rates, per
#: round trip) as this share of the BDP: the controller cannot know those rates before the run, and PA-ATP
#: §III-C (Fig. 6) analyses C_A from 0.1 to 0.9 BDP; this is the middle of that range.
AECN_AGGREGATION_SHARE = 0.5


@dataclass
class ControlPlan:
    switches: dict = field(default_factory=dict)       # switch name -> SwitchConfig
    agents: list = field(default_factory=list)         # AgentConfig
    slot_ranges: dict = field(default_factory=dict)    # (job, switch) -> (base, count)
    result_groups: dict = field(default_factory=dict)  # (job, PS) -> group address its RESULTs go to
    host_neighbors: list = field(default_factory=list)  # (host, address, MAC): static neighbours beyond nodes


def control_plan(scenario, placement, time_dilation: float = 1.0) -> ControlPlan:
    """The switches' and agents' configs of ``scenario`` under ``placement``. Under a ``time_dilation`` N
    (testbed/dilation.py) the switches shape their ports and meter aggregation N times slower, and every
    agent gets N with its virtual times (its clock runs N times slower)."""
    topo = scenario.topology
    routes = DefaultRoutes(topo)
    result = ControlPlan()
    for sw in topo.switches():
        result.switches[sw.name] = SwitchConfig(sw.name, sw.node_id, lanes=scenario.switch.lanes)
    _default_routes(topo, routes, result)
    _placement_routes(topo, placement, result)
    _parallel_link_routes(topo, routes, result, _agent_hosts(scenario))
    _allocate_slots(scenario, placement, result)
    _ina_filters(scenario, placement, result)
    _result_releases(scenario, placement, result)
    _result_multicast(scenario, routes, placement, result)
    _pa_atp(scenario, routes, placement, result)
    _esa_preemption(scenario, placement, result)
    _rina_racks(scenario, routes, placement, result)
    _check_rina_fallbacks(scenario, routes, placement)
    _ports(scenario, result, time_dilation)
    _agents(scenario, routes, placement, result, time_dilation)
    _validate(scenario, result)
    return result


def _validate(scenario, result):
    """Every entry against the program's declarations and the switches' limits, before any network exists."""
    for config in result.switches.values():
        for entry in config.entries:
            validate_entry(entry)
            check_switch_limits(entry, scenario.switch.slots)


def _forward_entry(table, action, match, mac, port):
    return TableEntry(table, action, match, (("dstAddr", mac), ("port", port)))


def _port_toward(topo, switch, neighbor, flow_key: int = 0):
    """Port of the link to ``neighbor``; parallel links are chosen by ``flow_key`` (static ECMP)."""
    return topo.port(switch, topo.link_for(switch, neighbor, flow_key))


def _default_routes(topo, routes, result):
    for dst in topo.hosts() + topo.switches():
        for sw in topo.switches():
            next_node = routes.next_hop(sw.name, dst.name)
            if next_node is None:
                continue
            for address in topo.addresses(dst.name):
                result.switches[sw.name].entries.append(_forward_entry(
                    "ipv4_lpm", "ipv4_forward", (f"{address}/32",), dst.mac,
                    _port_toward(topo, sw.name, next_node, dst.node_id)))


def _placement_routes(topo, placement, result):
    for job in placement.jobs.values():
        for key, nodes in sorted(job.paths.items()):
            src, dst = (topo.node(n) for n in key.split(">"))
            for here, nxt in zip(nodes, nodes[1:]):
                node = topo.node(here)
                if node.kind != "switch":
                    continue
                if nxt not in [topo.neighbor(here, l) for l in topo.links_of(here)]:
                    raise PlacementError(f"{job.scheme}: path {key} uses {here}-{nxt}, which is not a link")
                port = _port_toward(topo, here, nxt, topo.flow_key(src.name, dst.name))
                for pair in _address_pairs(topo, src.name, dst.name):
                    result.switches[here].entries.append(_forward_entry("route", "route_forward", pair, dst.mac,
                                                                        port))


def _address_pairs(topo, src: str, dst: str) -> list:
    """Every (source, destination) address pair of two nodes (a co-located PS answers at two)."""
    return [(a, b) for a in topo.addresses(src) for b in topo.addresses(dst)]


def _agent_hosts(scenario) -> set:
    """The hosts that run a job's worker or PS."""
    return {host for job in scenario.jobs for host in (*job.workers, *job.ps)}


def _parallel_link_routes(topo, routes, result, agent_hosts=frozenset()):
    """Spread flows over parallel links by (source, destination), as ECMP hashing would.

    Default routes choose a parallel link by destination only, which would put
    every worker's traffic to one aggregation switch on one link; exact
    ``route`` entries choose by the pair. Placement routes already present win.
    Under ``topology.ecmp: flow`` a host outside ``agent_hosts`` (and not
    pinned) gets ``route_ecmp`` entries instead: each of its flows hashed by
    its five-tuple over the parallel links, whose ports must be consecutive.
    """
    endpoints = topo.hosts() + topo.switches()
    for sw in topo.switches():
        counts = {}
        for link in topo.links_of(sw.name):
            other = topo.neighbor(sw.name, link)
            counts[other] = counts.get(other, 0) + 1
        if not any(c > 1 and topo.nodes[n].kind == "switch" for n, c in counts.items()):
            continue
        config = result.switches[sw.name]
        taken = {e.match for e in config.entries if e.table == "route"}
        for dst in endpoints:
            if dst.name == sw.name:
                continue
            next_node = routes.next_hop(sw.name, dst.name)
            if counts.get(next_node, 0) < 2:
                continue
            for src in endpoints:
                if src.name in (dst.name, sw.name):
                    continue
                if topo.ecmp == "flow" and src.kind == "host" and src.name not in agent_hosts \
                        and src.name not in topo.pinned_paths:
                    entry = _ecmp_entry(topo, sw.name, next_node, dst.mac)
                else:
                    entry = _forward_entry("route", "route_forward", (), dst.mac,
                                           _port_toward(topo, sw.name, next_node, topo.flow_key(src.name, dst.name)))
                for pair in _address_pairs(topo, src.name, dst.name):
                    if pair not in taken:
                        config.entries.append(replace(entry, match=pair))


def _ecmp_entry(topo, switch, neighbor, mac):
    """A ``route_ecmp`` entry over the parallel links from ``switch`` to ``neighbor`` (no match yet)."""
    ports = [topo.port(switch, link) for link in topo.links_between(switch, neighbor)]
    if ports != list(range(ports[0], ports[0] + len(ports))):
        raise TopologyError(f"topology.ecmp: flow needs the links from {switch} to {neighbor} on consecutive "
                            f"ports, they are on {', '.join(map(str, ports))}")
    return TableEntry("route", "route_ecmp", (), (("dstAddr", mac), ("first_port", ports[0]),
                                                   ("ports", len(ports))))


def _allocate_slots(scenario, placement, result):
    used = {}
    shared = placement.shared_slot_ranges([job.name for job in scenario.jobs])
    for job in scenario.jobs:
        for sw in sorted(placement.jobs[job.name].slots):
            if (job.name, sw) in result.slot_ranges:
                continue            # a range it shares, allocated with the first job sharing it
            together = shared[sw] if job.name in shared.get(sw, ()) else [job.name]
            count = sum(placement.jobs[name].slots[sw] for name in together)
            base = used.get(sw, 0)
            if base + count > scenario.switch.slots:
                raise PlacementError(f"{job.scheme}: switch {sw} needs {base + count} aggregator slots for its jobs, "
                                  f"it has {scenario.switch.slots} (switch.slots)")
            for name in together:
                result.slot_ranges[(name, sw)] = (base, count)
            used[sw] = base + count


def _ina_filters(scenario, placement, result):
    topo = scenario.topology
    for job in scenario.jobs:
        jp = placement.jobs[job.name]
        for sw in jp.aggregating_switches():
            node = topo.node(sw)
            if not node.programmable:
                raise PlacementError(f"{jp.scheme}: job {job.name} aggregates on {sw}, which is not programmable")
            base, count = result.slot_ranges[(job.name, sw)]
            for g, nxt in sorted(jp.next_hop[sw].items()):
                ps = jp.ps_of_submodel[g]
                values = {"switch_addr": node.ip, "slot_base": base, "slot_count": count,
                          "release_mode": jp.release_mode, "bypass_dst": topo.ps_ip(ps),
                          **_addressed(topo, jp, job, g, nxt, result, "next_"),
                          **_overflow_target(topo, jp, job, g, sw, result)}
                result.switches[sw].entries.append(TableEntry(
                    "ina_filter", "ina_aggregate", (job.job_id, node.node_id, g),
                    tuple((param.name, values[param.name]) for param in program.ACTIONS["ina_aggregate"].params)))


def _esa_preemption(scenario, placement, result):
    """ESA's entries (the module docstring has the choices): who may evict, and where an evicted partial goes."""
    topo = scenario.topology
    for job in scenario.jobs:
        jp = placement.jobs[job.name]
        if jp.collision != "preempt":
            continue
        priority = jp.notes.get("priority", 0)
        for sw in jp.aggregating_switches():
            config = result.switches[sw]
            config.entries.append(TableEntry("esa_job", "esa_enable", (job.job_id,), (("priority", priority),)))
            for g in sorted(jp.next_hop[sw]):
                values = {"priority": priority, "fanin": jp.fanin(g, sw),
                          **_overflow_target(topo, jp, job, g, sw, result)}
                config.entries.append(TableEntry(
                    "esa_evict", "esa_evict_to", (job.job_id, g),
                    tuple((param.name, values[param.name]) for param in program.ACTIONS["esa_evict_to"].params)))


def _overflow_target(topo, jp, job, g, sw, result) -> dict:
    """The ``overflow_*`` parameters of sub-model ``g`` at switch ``sw``: its ``bypass_hop`` there (ATP's level 2),
    else its PS."""
    return _addressed(topo, jp, job, g, jp.bypass_hop.get(sw, {}).get(g, jp.ps_of_submodel[g]), result, "overflow_")


def _addressed(topo, jp, job, g, node_name, result, prefix: str) -> dict:
    """``ina_aggregate``'s parameters (``prefix`` + name) that address sub-model ``g`` to an aggregation node:
    its IPv4 address (a PS's INA address), its ``agg_node`` id, its fan-in for ``g`` and the job's slot range
    there (none at a PS, where a packet is not re-addressed to a slot)."""
    node = topo.node(node_name)
    slot_base, slot_count = result.slot_ranges.get((job.name, node_name), (0, 0))
    return {prefix + "dst": topo.ps_ip(node_name) if node.kind == "host" else node.ip,
            prefix + "agg_node": node.node_id, prefix + "fanin": jp.fanin(g, node_name),
            prefix + "slot_base": slot_base, prefix + "slot_count": slot_count}


def fragment_slots(jp, count: int) -> int:
    """The slots a job's fragments cycle through in its range of ``count`` at a switch: the range, or under
    shadow copies (SwitchML, two copies per pool slot) the pool, half of it."""
    return count // 2 if jp.release_mode == program.RELEASE_SHADOW else count


def result_action(jp, base: int, count: int, group: int) -> tuple:
    """The ``ina_result`` action and parameters of a job's RESULTs at a switch where it holds slots
    ``[base, base + count)``: ATP frees the slot (``ina_release``), SwitchML marks its shadow copy resulted
    (``ina_shadow_result``, a pool of half the range), the others only replicate (``ina_multicast``)."""
    if count and jp.release_mode == program.RELEASE_ON_RESULT:
        return "ina_release", (("slot_base", base), ("slot_count", count), ("mcast_grp", group))
    if count and jp.release_mode == program.RELEASE_SHADOW:
        return "ina_shadow_result", (("slot_base", base), ("pool", fragment_slots(jp, count)), ("mcast_grp", group))
    return "ina_multicast", (("mcast_grp", group),)


def _result_releases(scenario, placement, result):
    """Unicast RESULTs (a PS answering a retransmission, BytePS's pull) do what the job's multicast
    RESULTs do at every switch it aggregates on: free the slot (ATP, ``ina_release``) or mark the shadow
    copy resulted (SwitchML, ``ina_shadow_result``); one ``ina_result`` entry per worker address."""
    topo = scenario.topology
    for job in scenario.jobs:
        jp = placement.jobs[job.name]
        if jp.release_mode not in (program.RELEASE_ON_RESULT, program.RELEASE_SHADOW):
            continue
        for sw in jp.aggregating_switches():
            base, count = result.slot_ranges[(job.name, sw)]
            action, params = result_action(jp, base, count, 0)
            for worker in job.workers:
                result.switches[sw].entries.append(TableEntry(
                    "ina_result", action, (job.job_id, topo.node(worker).ip), params))


def _result_multicast(scenario, routes, placement, result):
    """RESULTs multicast by the switches, as ATP and SwitchML deliver them: the PS of a job that
    aggregates in the network sends each RESULT once, to the job's group address; every switch of
    the default-route tree toward the workers replicates it (``ina_result`` -> ``ina_multicast``, or
    ``ina_release`` where the job releases slots on RESULT), and a copy leaving toward a host is
    addressed to that host (``ina_mcast_rewrite``). Only where every switch of the tree is
    programmable, or every switch replicates (``topology.result_multicast: all``); schemes without INA
    (``ps``, ``geryon``, ``lbmm``, ``ksgd``) keep BytePS's unicast pull from the PS, and a PS always
    answers a single worker's retransmission by unicast."""
    topo = scenario.topology
    for job in scenario.jobs:
        jp = placement.jobs[job.name]
        for k, ps in enumerate(job.ps):
            tree = result_multicast_tree(topo, routes, job, jp, ps)
            if tree is None:
                continue
            group_ip = result_group_ip(job.job_id, k)
            result.result_groups[(job.name, ps)] = group_ip
            first = topo.node(topo.neighbor(ps, topo.host_link(ps)))
            result.host_neighbors.append((ps, group_ip, first.mac))
            for sw, children in sorted(tree.items()):
                # over parallel links, the copy toward a child takes the link ECMP picks for (PS, child)
                ports = tuple(_port_toward(topo, sw, c, topo.flow_key(ps, c)) for c in children)
                config = result.switches[sw]
                group = _new_group(config, ports)
                base, count = result.slot_ranges.get((job.name, sw), (0, 0))
                action, params = result_action(jp, base, count, group)
                config.entries.append(TableEntry("ina_result", action, (job.job_id, group_ip), params))
                for child, port in zip(children, ports):
                    node = topo.node(child)
                    if node.kind == "host":
                        _host_rewrite(config, port, node)


def _host_rewrite(config, port: int, node):
    """An ``ina_mcast_rewrite`` entry addressing multicast copies leaving ``port`` to host ``node``, unless the
    switch has one for the port already (the key is the port alone)."""
    if not any(e.table == "ina_mcast_rewrite" and e.match == (port,) for e in config.entries):
        config.entries.append(TableEntry("ina_mcast_rewrite", "mcast_rewrite", (port,),
                                         (("dstAddr", node.mac), ("ipDstAddr", node.ip))))


def _new_group(config, ports) -> int:
    """A new multicast group of ``ports`` at the switch of ``config`` (0, and none made, for no port)."""
    if not ports:
        return 0
    group = max((g.group_id for g in config.multicast_groups), default=0) + 1
    config.multicast_groups.append(MulticastGroup(group, tuple(ports)))
    return group


def _rina_racks(scenario, routes, placement, result):
    """Rina's switch side at each Rina rack's ToR (module docstring; p4/README.md has the semantics)."""
    topo = scenario.topology
    for job in scenario.jobs:
        jp = placement.jobs[job.name]
        if jp.scheme != "rina":
            continue
        members = jp.notes["members"]
        for m, member in enumerate(members):
            tor = member["tor"]
            if tor is None:
                continue
            config = result.switches[tor]
            hosts = [topo.node(w) for w in member["workers"]]
            ports = [topo.port(tor, topo.host_link(h.name)) for h in hosts]
            for host, port in zip(hosts, ports):
                _host_rewrite(config, port, host)
            uplink = _rina_uplink(topo, routes, members, m)
            pull_grp = _new_group(config, ports[1:])
            rack_grp = _new_group(config, ports)
            gather_grp = _new_group(config, ports + ([uplink] if uplink not in ports else []))
            base, count = result.slot_ranges[(job.name, tor)]
            config.entries.append(TableEntry("rina_rack", "rina_aggregate", (job.job_id, topo.node(tor).node_id), (
                ("switch_addr", topo.node(tor).ip), ("slot_base", base), ("slot_count", count), ("pull_grp", pull_grp),
                ("gather_grp", gather_grp))))
            config.entries.append(TableEntry("rina_gather", "ina_multicast", (job.job_id, hosts[0].ip),
                                             (("mcast_grp", rack_grp),)))


def _rina_uplink(topo, routes, members, m: int) -> int:
    """The port of Rina rack ``m``'s ToR toward the next member of ``members`` (its agent's address)."""
    successor = topo.node(members[(m + 1) % len(members)]["workers"][0])
    return _port_toward(topo, members[m]["tor"], routes.next_hop(members[m]["tor"], successor.name),
                        successor.node_id)


def _check_rina_fallbacks(scenario, routes, placement):
    """Refuse a failure (``stragglers.failures``) that the emulation would not run as Rina §IV-C2 says: of a
    worker of another scheme's job, one that would leave a ring of one member, or one after whose fallback a
    Rina rack's finished chunks would leave its ToR by another port toward the next member than the one
    installed (its gather group is not reinstalled mid-run)."""
    failures = [inj for inj in scenario.stragglers.injections if inj.kind == "failure"]
    topo = scenario.topology
    rings = {}          # job -> its members after the failures so far
    for i, inj in sorted(enumerate(failures), key=lambda pair: pair[1].at_s):
        worker, path = inj.target[0], f"stragglers.failures.{i}.worker"
        job = next(j for j in scenario.jobs if worker in j.workers)
        jp = placement.jobs[job.name]
        if jp.scheme != "rina":
            raise PlacementError(f"{path}: {worker} is a worker of job {job.name} (scheme {job.scheme}); only a Rina "
                              f"job's worker may fail (Rina §IV-C2's fallback: scheme rina)")
        installed = jp.notes["members"]
        after = fallback_members(rings.get(job.name, installed), worker)
        if len(after) < 2:
            raise PlacementError(f"{path}: after {worker}'s error job {job.name} would be a ring of one member")
        for m, member in enumerate(after):
            if member["tor"] is None:
                continue
            before = next(k for k, old in enumerate(installed) if old["tor"] == member["tor"])
            if _rina_uplink(topo, routes, after, m) != _rina_uplink(topo, routes, installed, before):
                raise PlacementError(f"{path}: after {worker}'s error the next member of {member['tor']}'s Rina rack is "
                                  f"reached through another port of {member['tor']}; the emulation does not reinstall "
                                  f"its gather group mid-run")
        rings[job.name] = after


def aecn_threshold_pkts(aggregators: int, bdp: float, jobs: int) -> int:
    """An ``aecn_threshold``: eta x (M + BDP) packets, eta at the upper bound of PA-ATP's Eq. 9
    (``aecn_threshold_factor``) with C_A = ``AECN_AGGREGATION_SHARE`` x BDP, so M + BDP - C_A - N. The switch
    marks once its used aggregators plus overflowed gradients exceed it, an integer count, so the floor is
    exact; at least 1 (the register's 0 turns AECN off). ValueError when no eta fits (N >= M + BDP - C_A)."""
    eta = aecn_threshold_factor(aggregators, bdp, AECN_AGGREGATION_SHARE * bdp, jobs)
    return max(1, math.floor(eta * (aggregators + bdp) + 1e-9))


def _pa_atp(scenario, routes, placement, result):
    """PA-ATP's switch side for the jobs whose transport reads GACKs (the module docstring has the choices).

    Each opted-in job gets its own threshold (``aecn_threshold[pa_index]``): a job's aggregators are its
    own slot range there, which no other job's traffic can use or fill, so PA-ATP's switch of M
    aggregators shared by N jobs is, per job, M = the job's slots at the switch, BDP the largest of
    :func:`bdp_pkts` over the default paths from its workers to its PSs, and N = 1."""
    topo = scenario.topology
    rates = topo.capacity_bps()
    frame_bytes = ina_frame_bytes(scenario.switch.lanes)
    opted = {}    # switch -> [job], in job order
    job_bdp = {}  # job -> the largest BDP of its workers' default paths to its PSs
    for job in scenario.jobs:
        if job.transport in program.PA_ATP_TRANSPORTS:
            for sw in placement.jobs[job.name].aggregating_switches():
                opted.setdefault(sw, []).append(job)
            paths = [routes.path(w, ps) for w in job.workers for ps in job.ps]
            job_bdp[job.name] = max(bdp_pkts(link_rates_along(rates, path), frame_bytes,
                                             scenario.switch.ecn_threshold_pkts) for path in paths)
    for sw, jobs in sorted(opted.items()):
        if len(jobs) > program.PA_JOBS:
            raise PlacementError(f"switch {sw} aggregates {len(jobs)} jobs whose transport reads GACKs "
                              f"({', '.join(j.name for j in jobs)}); the program tracks the progress of "
                              f"{program.PA_JOBS} per switch")
        config = result.switches[sw]
        for pa_index, job in enumerate(jobs):
            jp = placement.jobs[job.name]
            aecn = all(any(sw in routes.path(jp.ps_of_submodel[g], w) for w in job.workers) for g in jp.next_hop[sw])
            config.entries.append(TableEntry("pa_job", "pa_enable", (job.job_id,),
                                             (("pa_index", pa_index), ("aecn", int(aecn)))))
            aggregators = result.slot_ranges.get((job.name, sw), (0, 0))[1]
            try:
                threshold = aecn_threshold_pkts(aggregators, job_bdp[job.name], 1)
            except ValueError as exc:
                raise PlacementError(f"switch {sw}: no AECN threshold for PA-ATP job {job.name} with {aggregators} "
                                  f"aggregator slots and a BDP of {job_bdp[job.name]:.1f} packets: {exc}") from None
            config.register_writes.append(("aecn_threshold", pa_index, threshold))
        config.mirror_sessions.extend((program.gack_session(port), port)
                                      for port in sorted(topo.port(sw, link) for link in topo.links_of(sw)))


def _ports(scenario, result, time_dilation: float = 1.0):
    topo, settings = scenario.topology, scenario.switch
    for link in topo.links:
        for end in (link.a, link.b):
            if topo.nodes[end].kind == "switch":
                result.switches[end].port_shaping.append(
                    PortShaping(topo.port(end, link), link.rate_bps / time_dilation, settings.queue_depth_pkts))
    for k, imp in enumerate(scenario.impairments):
        for link in topo.links:
            if imp.link != ("*", "*") and {link.a, link.b} != set(imp.link):
                continue
            for end in (link.a, link.b):
                if topo.nodes[end].kind == "switch":
                    port = topo.port(end, link)
                    result.switches[end].port_impairments.append(PortImpairment(
                        port, imp.drop, imp.duplicate, imp.reorder, seed=scenario.seed * 7919 + link.index * 31 + k))
    for config in result.switches.values():
        if settings.aggregation_capacity_bps > 0:
            ops = settings.aggregation_capacity_bps / time_dilation / (settings.lanes * 32)
            config.meter_rates.append(("agg_capacity", 0, ops, CAPACITY_BURST_OPS))
        if settings.ecn_threshold_pkts:
            config.register_writes.append(("ecn_threshold", 0, settings.ecn_threshold_pkts))


def straggler_allowance_s(scenario, job) -> float:
    """How long a worker waits for the first RESULT of an iteration before it counts fragments as lost.

    The first RESULT needs every worker's first fragment, so it comes only after the slowest worker
    finished computing: the allowance is the widest spread of the job's compute delays (the upper
    bound of each distribution; a normal's clip bound) plus ``FIRST_RESULT_MARGIN_S`` for start-up
    jitter and the round trip. Later fragments time out on the measured RTT alone. A job with
    ``straggler_allowance: false`` has none (0): its workers time out on their RTO from the start.
    """
    if not job.straggler_allowance:
        return 0.0
    return compute_delay_spread_s(scenario, job) + FIRST_RESULT_MARGIN_S + 4 * job.retransmit_timeout_s


def compute_delay_spread_s(scenario, job) -> float:
    """The widest compute-delay spread among ``job``'s workers: each distribution's upper bound (a
    normal's clip bound, a fixed delay's value); 0 without stragglers."""
    return max((d.value_s if d.distribution == "fixed" else d.high_s
                for d in scenario.stragglers.compute_delays if any(w in d.workers for w in job.workers)),
               default=0.0)


def planned_rates_bps(scenario, placement) -> dict:
    """Per job whose transport is ``paced`` without a ``rate``, the rate its scheme plans: the synchronous rate
    of its slowest worker in the flow-level simulator's fluid model, under ``placement`` (the simulator's
    ``min_sending_rate_bps``; frame bits per second)."""
    paced = [job for job in scenario.jobs
             if job.transport == PacedTransport.name and "rate_bps" not in job.transport_options]
    if not paced:
        return {}
    from testbed.sim import synchronous_rates_bps      # the simulator builds on this module
    rates = synchronous_rates_bps(scenario, placement)
    return {job.name: rates[job.name] for job in paced}


def _compute_delay_of(scenario, worker) -> dict:
    """``worker``'s straggler delay distribution for its agent config (empty: none); a persistent one is the
    worker's own delay, fixed."""
    spec = next((d for d in scenario.stragglers.compute_delays if worker in d.workers), None)
    if spec is None:
        return {}
    if spec.persistent_s:
        return {"distribution": "fixed", "value_s": spec.persistent_s[worker]}
    delay = asdict(spec)
    for key in ("workers", "persistent_s"):
        delay.pop(key)
    return delay


def _ring_agents(scenario, job, jp, common: dict, result, planned_rate_bps: float = None):
    """A ring job's workers (testbed/agents/ring.py): its scheme's schedule over the job's ``workers`` (and
    the placement's racks, for ``h-ar``), nothing aggregated anywhere. The receiving peer acknowledges within
    2 ms (testbed.agents.ring_acks), computing or not, so no first-RESULT allowance: timeouts run on the
    measured RTT from the first fragment."""
    topo = scenario.topology
    ring = [(index, topo.node(w).ip) for index, w in enumerate(job.workers)]
    for index, w in enumerate(job.workers):
        result.agents.append(AgentConfig(
            role="ring", worker_index=index, workers=ring, schedule=jp.scheme, racks=jp.notes.get("racks", []),
            window=job.window, **_ring_worker_fields(scenario, job, w, planned_rate_bps), **common))


def _ring_worker_fields(scenario, job, w: str, planned_rate_bps: float = None) -> dict:
    """What every ring worker's config (RAR, H-AR, Rina) says alike: its name and address, its steps'
    overhead and jitter (the scheme's options), compute, start, straggler delay, transport and host link;
    no sub-models, and no first-RESULT allowance (a peer acknowledges within 2 ms)."""
    options = job.policy_options.get(job.scheme, {})
    node = scenario.topology.node(w)
    return dict(name=w, ip=node.ip, submodels=[], step_overhead_s=options.get("step_overhead_s", 0.0),
                step_jitter_s=options.get("step_jitter_s", 0.0), compute_time_s=job.compute_time_s,
                start_s=job.start_s, compute_delay=_compute_delay_of(scenario, w), transport=job.transport,
                transport_options=paced_rate(job, planned_rate_bps),
                link_rate_bps=scenario.topology.host_link(w).rate_bps, first_result_timeout_s=0.0)


def _rina_agents(scenario, job, jp, common: dict, result, planned_rate_bps: float = None):
    """A Rina job's workers (testbed/agents/rina.py): RAR over the placement's members (a Rina rack: its agent,
    the lowest-rank worker, sends for the rack; an autonomous worker for itself), each worker knowing its
    member's place in that ring and, in a Rina rack, the ToR that sums the rack's shards, its bit there and
    its agent. A Rina rack's window is at most the job's slots at its ToR."""
    topo = scenario.topology
    members = jp.notes["members"]
    ring = [(m, topo.node(member["workers"][0]).ip) for m, member in enumerate(members)]
    tors = [(m, topo.node(member["tor"]).ip if member["tor"] else "") for m, member in enumerate(members)]
    for m, member in enumerate(members):
        tor = member["tor"]
        window = job.window
        if tor is not None:
            window = min(window, result.slot_ranges[(job.name, tor)][1])
        for rank, w in enumerate(member["workers"]):
            result.agents.append(AgentConfig(
                role="rina", worker_index=job.workers.index(w), workers=ring, member_index=m, schedule="rar",
                rack_tor_node=topo.node(tor).node_id if tor else 0, rack_size=len(member["workers"]) if tor else 0,
                rack_rank=rank, agent_ip=ring[m][1], member_tors=tors, window=window,
                **_ring_worker_fields(scenario, job, w, planned_rate_bps), **common))


def rina_fallback_configs(configs, failed: str, window: int, redo_from: int) -> list:
    """Rina §IV-C2's fallback after the error of worker ``failed``: the configs of the next ring generation
    of every other worker of its job, from the current ones (``configs``, any agents).

    The members are :func:`testbed.schemes.ring.fallback_members`' (a failed agent's rack's other workers
    autonomous in its place, a failed rack worker's rack without it, a failed autonomous worker gone). A
    worker that turns autonomous gets the job's ``window`` (it sends for itself now, with no ToR slots to
    fit); a rack that lost a worker keeps its workers' bits and expects one shard fewer (``rack_size``, the
    fan-in its tasks carry). The sum leaves the failed worker's gradient out (``contributors``), and every
    worker starts from ``redo_from`` (the iteration the old ring had not completed everywhere). The Rina
    racks' switch entries stay as installed: :func:`_check_rina_fallbacks` refused, before the run, a
    fallback after which a rack's finished chunks would need another port toward the next member.
    """
    dead = next((c for c in configs if c.name == failed), None)
    if dead is None or dead.role != "rina":
        raise ValueError(f"{failed} is not a worker of a Rina job")
    job = [c for c in configs if c.role == "rina" and c.job == dead.job]
    tors = dict(dead.member_tors)
    racks = {}
    for c in job:
        racks.setdefault(c.member_index, []).append(c)
    members = [{"workers": [c.name for c in sorted(racks[m], key=lambda c: c.rack_rank)], "tor": tors[m] or None}
               for m in sorted(racks)]
    members = fallback_members(members, failed)
    by_name = {c.name: c for c in job}
    addresses = [(m, by_name[member["workers"][0]].ip) for m, member in enumerate(members)]
    member_tors = [(m, member["tor"] or "") for m, member in enumerate(members)]
    contributors = sorted(set(dead.contributors or range(dead.total_workers)) - {dead.worker_index})
    out = []
    for m, member in enumerate(members):
        for name in member["workers"]:
            c = by_name[name]
            changes = dict(workers=addresses, member_index=m, member_tors=member_tors, generation=c.generation + 1,
                           first_iteration=redo_from, contributors=contributors, agent_ip=addresses[m][1])
            if member["tor"] is None and c.rack_tor_node:
                changes.update(rack_tor_node=0, rack_size=0, rack_rank=0, window=window)
            elif member["tor"] is not None:
                changes.update(rack_size=len(member["workers"]))
            out.append(replace(c, **changes))
    return out


def _agents(scenario, routes, placement, result, time_dilation: float = 1.0):
    topo, lanes = scenario.topology, scenario.switch.lanes
    planned = planned_rates_bps(scenario, placement)
    for job in scenario.jobs:
        jp = placement.jobs[job.name]
        fragments = fragments_per_submodel(job.submodel_elements, lanes)
        total = sum(fragments)
        common = dict(job=job.name, job_id=job.job_id, seed=scenario.seed, iterations=job.iterations, lanes=lanes,
                      scale_bits=job.scale_bits, gradient_bound=job.gradient_bound, total_workers=len(job.workers),
                      total_fragments=total, layout=list(zip(job.submodel_elements, fragments)),
                      retransmit_timeout_s=job.retransmit_timeout_s,
                      deadline_s=scenario.run_timeout_s, ready_timeout_s=scenario.run_timeout_s * time_dilation,
                      time_dilation=time_dilation, training=asdict(job.training) if job.training else {})

        if jp.scheme == "rina":
            _rina_agents(scenario, job, jp, common, result, planned.get(job.name))
            continue
        if job.is_ring:
            _ring_agents(scenario, job, jp, common, result, planned.get(job.name))
            continue
        counted = set(jp.participants or job.workers)

        def plan_of(g, worker=None):
            ps = jp.ps_of_submodel[g]
            sp = SubmodelAssignment(g, job.submodel_elements[g], fragments[g], ps, topo.ps_ip(ps),
                              ps_node=topo.node(ps).node_id)
            if worker is not None:
                # A worker left out of a K-of-N iteration sends straight to its PS, which discards
                # its gradient: it must not take part in any switch's fan-in.
                agg = topo.node(jp.first_hop[worker][g] if worker in counted else ps)
                sp.agg_node, sp.agg_ip, sp.fanin = (agg.node_id, topo.ps_ip(agg.name) if agg.kind == "host" else agg.ip,
                                                    jp.fanin(g, agg.name))
                sp.slot_base, sp.slot_count = result.slot_ranges.get((job.name, agg.name), (0, 0))
                if jp.release_mode == program.RELEASE_SHADOW:
                    sp.shadow_pool = fragment_slots(jp, sp.slot_count)
            return sp

        first_result_timeout_s = straggler_allowance_s(scenario, job)
        for index, w in enumerate(job.workers):
            window = job.window
            if TRANSPORTS[job.transport].window_within_slots(job.transport_options):
                for g in range(len(fragments)):
                    count = fragment_slots(jp, result.slot_ranges.get((job.name, jp.first_hop[w][g]), (0, 0))[1])
                    if count:
                        window = min(window, count)
            result.agents.append(AgentConfig(
                role="worker", name=w, ip=topo.node(w).ip, worker_index=index,
                submodels=[plan_of(g, w) for g in range(len(fragments))], compute_time_s=job.compute_time_s,
                start_s=job.start_s,
                compute_delay=_compute_delay_of(scenario, w), window=window, participant=w in counted,
                transport=job.transport,
                transport_options=transport_options_of(scenario, routes, job, w, planned.get(job.name)),
                link_rate_bps=topo.host_link(w).rate_bps, first_result_timeout_s=first_result_timeout_s, **common))
        workers = [(i, topo.node(w).ip) for i, w in enumerate(job.workers)]
        for ps in job.ps:
            owned = [plan_of(g) for g in range(len(fragments)) if jp.ps_of_submodel[g] == ps]
            group_ip = result.result_groups.get((job.name, ps), "")
            result.agents.append(AgentConfig(role="ps", name=job.ps_agent(ps), host=ps, ip=topo.ps_ip(ps),
                                             submodels=owned,
                                             bind_ip=topo.ps_ip(ps) if ps in topo.colocated_ps else "",
                                             # the switches never send a copy back out of the PS's port
                                             local_worker_ip=topo.node(ps).ip if group_ip and ps in job.workers
                                             else "",
                                             start_s=job.start_s,
                                             result_group_ip=group_ip,
                                             workers=workers, ps_id=topo.node(ps).node_id, transport=job.transport,
                                             participants=[i for i, w in enumerate(job.workers) if w in counted],
                                             **common))
