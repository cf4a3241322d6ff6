"""Flow-level simulator: evaluate a scenario's placement without root or network (``inatb simulate``).

:func:`evaluate` runs two models over the same Scenario and Placement the
emulation uses, on the routes the controller would install:

- the fluid model (:mod:`testbed.sim.fluid`): per-worker gradient sending
  rates under link bandwidth, switch processing capacity (best-effort
  overflow) and PS ingress, aggregated flows counting once downstream of
  their aggregation point -- the model of GRID §Motivation and InArt §2;
- the fragment-level model of switch memory (:mod:`testbed.sim.fragments`):
  one iteration fragment by fragment, with hash slots, collisions, release
  modes and the arrival order of ``simulation.worker_start`` -- GOAT Fig. 2.

The result is a JSON-able dict whose keys end in their unit:

- ``min_sending_rate_bps``: the rate every worker reaches (synchronous
  training's rate); per job ``comm_time_s``: its slowest worker's frames at
  its rate plus one frame's store-and-forward round trip to its PS;
  ``worker_sending_rate_bps``: max-min fair rate per worker;
  ``bottleneck_links``: links saturated at the minimum rate;
- ``ps_ingress_fragments`` / ``ps_ingress_bytes``: gradient fragments (and
  their frame bytes, Ethernet to the last lane, as ``inatb run`` counts
  them: 336 B at 64 lanes) reaching the PSs in one iteration;
- ``switch_egress_fragments`` / ``communication_overhead_bytes``: everything switches
  send (GOAT's count of communication overhead in Fig. 2);
- ``sent_fragments`` / ``sent_bytes``: what the workers send;
  ``ina_amount_bytes``: GOAT §VII-A's in-network aggregation amount, sent
  minus PS ingress (frame bytes, as ``inatb run``'s);
- ``switch_load``: per switch with a capacity or an aggregation role,
  ``load_bps`` aggregated, ``offered_bps`` arriving for aggregation,
  ``capacity_bps`` (None = unlimited) and ``utilisation``, at the synchronous
  operating point (every worker at the minimum rate); ``link_load`` likewise
  for every loaded directed link; ``ps_ingress_rate_bps`` per PS;
- ``solve_s``: the schemes' LP solve time (``placement_s``: their wall time),
  ``evaluate_s``: this evaluation's;
- ``jobs``: the same per job, with its scheme, solver, participants and
  transport; ``bom_rate_bps`` is Rina §III-B's Bandwidth-Occupation Model's
  rate for a job with one PS (:mod:`testbed.sim.bom`: every programmable
  switch aggregating, as PS-based INA's reference curve of Rina Fig. 5);
  ``overflow_modelled`` is false for an asynchronous transport
  (PA-ATP, StrawAsyn), and for ATP's with ``slot_bound: false``, whose
  workers run ahead of the job's slowest and overflow to the PS by design: the fragment model sends every worker's
  fragments in lockstep, so its counts leave that overflow out; ``ring``
  is true for a ring all-reduce (``policy: rar``, ``h-ar``): nothing at a
  PS or aggregated, ``sent_fragments`` its ring frames, ``comm_time_s``
  phase by phase its frames at their rate plus each step's host-link times
  and mean delay (:func:`_ring_job`).
"""

import time
from dataclasses import dataclass

from testbed.agents.transport import TRANSPORTS
from testbed.dataplane import program
from testbed.dataplane.wire import ina_frame_bytes, ring_frame_bytes
from testbed.gradient_profiles import fragments_per_submodel
from testbed.sim.bom import bom_rate_bps
from testbed.sim.fluid import RINA_PHASES, FluidModel, rina_phase_steps, rina_streams, ring_phases
from testbed.sim.fragments import FragmentModel
from testbed.sim.routes import Routes, link_name

__all__ = ["evaluate", "format_simulation", "node_packet_rates"]


def node_packet_rates(scenario, placement) -> dict:
    """Packets per second each node handles while its jobs communicate, by the fluid model (the packet
    budget's input, testbed.budget.packet_budget): a switch the packets arriving on all its links,
    a host those it sends plus those it receives. Every worker runs at its job's slowest worker's rate: the
    job's RESULTs (or a ring's steps) clock them all, so a worker with a faster path waits rather than
    sending faster. Frames count as full INA frames (a ring's ACKs as their share of a data frame's bits); a
    worker whose transport reads GACKs (PA-ATP's) also takes one per fragment it sends."""
    return packet_rates(scenario, placement).node_pps


@dataclass(frozen=True)
class PacketRates:
    """What the packet budget reads of the fluid model, from one solve (:func:`packet_rates`)."""
    node_pps: dict           # :func:`node_packet_rates`
    switch_link_pps: dict    # {(from_switch, to_switch): packets/s} a switch sends a neighbour, parallel links summed
    job_rates_bps: dict      # per job, its slowest worker's rate (:func:`synchronous_rates_bps`)


def packet_rates(scenario, placement) -> PacketRates:
    """The :class:`PacketRates` of ``scenario`` under ``placement``, from one solve of the fluid model."""
    routes = Routes(scenario.topology, placement)
    fluid = FluidModel(scenario, placement, routes)
    rates, _ = fluid.max_min_rates()
    job_rates_bps = {job.name: min(rates[w] for w in job.workers) for job in scenario.jobs}
    synchronous = {w: job_rates_bps[job.name] for job in scenario.jobs for w in job.workers}
    loads = fluid.evaluate(synchronous)[0]
    frame_bits = 8 * ina_frame_bytes(scenario.switch.lanes)
    nodes = scenario.topology.nodes
    packets = {name: 0.0 for name in nodes}
    between_switches = {}
    for link, load_bps in loads.items():
        src, dst = link[0], link[1]
        packets[dst] += load_bps / frame_bits
        if nodes[src].kind == "host":
            packets[src] += load_bps / frame_bits
        elif nodes[dst].kind == "switch":
            between_switches[src, dst] = between_switches.get((src, dst), 0.0) + load_bps / frame_bits
    for job in scenario.jobs:
        if job.transport in program.PA_ATP_TRANSPORTS:
            for w in job.workers:
                packets[w] += synchronous[w] / frame_bits
    return PacketRates(packets, between_switches, job_rates_bps)


def _fragment_counts(scenario, placement, routes):
    model = FragmentModel(scenario, placement, routes)
    if model.event_estimate() <= scenario.simulation.max_fragment_events:
        return model.run()
    return model.analytic()


def synchronous_rates_bps(scenario, placement) -> dict:
    """Per job, its slowest worker's rate in the fluid model, frame bits per second (what :func:`evaluate`
    reports as the job's ``min_sending_rate_bps``): the rate a scheme plans, which the ``paced`` transport
    sends at by default (``controller.planned_rates_bps``)."""
    rates, _ = FluidModel(scenario, placement, Routes(scenario.topology, placement)).max_min_rates()
    return {job.name: min(rates[w] for w in job.workers) for job in scenario.jobs}


def evaluate(scenario, placement) -> dict:
    start = time.perf_counter()
    routes = Routes(scenario.topology, placement)
    fluid = FluidModel(scenario, placement, routes)
    rates, bottlenecks = fluid.max_min_rates()
    min_rate = min(rates.values()) if rates else 0.0
    loads, _, inputs, ps_in_bps, beta = fluid.evaluate({w: min_rate for w in rates})
    counts = _fragment_counts(scenario, placement, routes)
    fragment_bytes = ina_frame_bytes(scenario.switch.lanes)     # frame bytes, as the emulation counts them
    capacity = scenario.switch.aggregation_capacity_bps

    switch_load = {}
    aggregating = {sw for jp in placement.jobs.values() for sw in jp.next_hop}
    for sw in sorted(aggregating | set(inputs)):
        offered = inputs.get(sw, 0.0)
        load = offered * beta.get(sw, 1.0)
        switch_load[sw] = {"load_bps": load, "offered_bps": offered,
                           "capacity_bps": capacity if capacity > 0 else None,
                           "utilisation": load / capacity if capacity > 0 else None}
    link_load = {}
    for link, load in sorted(loads.items()):
        if load > 0:
            cap = routes.capacity_bps[link]
            link_load[link_name(link)] = {"load_bps": load, "capacity_bps": cap, "utilisation": load / cap}

    jobs = {}
    for job in scenario.jobs:
        jp = placement.jobs[job.name]
        if jp.scheme == "rina":
            jobs[job.name] = _rina_job(scenario, placement, jp, job, routes, rates)
            continue
        if job.is_ring:
            jobs[job.name] = _ring_job(scenario, placement, jp, job, routes, rates)
            continue
        ps_frag = sum(n for (node, name), n in counts["ps_ingress"].items() if name == job.name)
        egress = sum(n for (node, name), n in counts["switch_egress"].items() if name == job.name)
        sent = counts["sent"].get(job.name, 0)
        jobs[job.name] = {
            "scheme": jp.scheme,
            "solver": jp.notes.get("solver"),
            "solve_s": jp.notes.get("solve_s", 0.0),
            "placement_s": jp.notes.get("placement_s", 0.0),
            "min_sending_rate_bps": min(rates[w] for w in job.workers),
            "comm_time_s": _comm_time_s(scenario, jp, routes, rates, fragment_bytes, sent / len(job.workers)),
            "ps_ingress_fragments": ps_frag, "ps_ingress_bytes": ps_frag * fragment_bytes,
            "switch_egress_fragments": egress, "communication_overhead_bytes": egress * fragment_bytes,
            "sent_fragments": sent, "sent_bytes": sent * fragment_bytes,
            "ina_amount_bytes": (sent - ps_frag) * fragment_bytes,
            "participants": list(jp.participants),
            "transport": job.transport,
            "bom_rate_bps": bom_rate_bps(scenario.topology, job.workers, job.ps[0],
                                         [sw.name for sw in scenario.topology.programmable_switches()])
            if len(job.ps) == 1 else None,
            # Workers that run ahead of the job's slowest overflow to the PS by design; the fragment model
            # sends them in lockstep, so its counts leave that overflow out (testbed.fidelity).
            "overflow_modelled": not TRANSPORTS[job.transport].overflows_by_design(job.transport_options),
            "ring": False,
        }
    total = lambda key: sum(j[key] for j in jobs.values())  # noqa: E731
    return {
        "scenario": scenario.name,
        "seed": scenario.seed,
        "schemes": {name: j["scheme"] for name, j in jobs.items()},
        "fragment_model": counts["model"],
        "min_sending_rate_bps": min_rate,
        "worker_sending_rate_bps": dict(rates),
        "bottleneck_links": bottlenecks,
        "ps_ingress_fragments": total("ps_ingress_fragments"),
        "ps_ingress_bytes": total("ps_ingress_bytes"),
        "switch_egress_fragments": total("switch_egress_fragments"),
        "communication_overhead_bytes": total("communication_overhead_bytes"),
        "sent_fragments": total("sent_fragments"),
        "sent_bytes": total("sent_bytes"),
        "ina_amount_bytes": total("ina_amount_bytes"),
        "ps_ingress_rate_bps": dict(sorted(ps_in_bps.items())),
        "switch_load": switch_load,
        "link_load": link_load,
        "solve_s": total("solve_s"),
        "placement_s": total("placement_s"),
        "evaluate_s": time.perf_counter() - start,
        "jobs": jobs,
        # The model is one steady iteration: timed injections (pauses, rate changes, failures) happen only in
        # an emulated run.
        "not_modelled": sorted({f"stragglers: {inj.kind.replace('_', ' ')}s"
                                for inj in scenario.stragglers.injections}),
    }


def _comm_time_s(scenario, jp, routes, rates, frame_bytes, fragments_per_worker) -> float:
    """GOAT's communication time of one iteration: the slowest worker's frames at its sending rate,
    plus one frame's store-and-forward round trip to its PS and back (every link on the way
    serialises the frame once: the latency a run at small scale cannot hide)."""
    worst = 0.0
    for w in jp.first_hop:
        rate = rates[w]
        if rate <= 0:
            return float("inf")
        latency = 0.0
        for ps in sorted(set(jp.ps_of_submodel.values())):
            latency = max(latency, sum(8 * frame_bytes / routes.capacity_bps[link]
                                       for link in routes.links(w, ps) + routes.links(ps, w)))
        worst = max(worst, fragments_per_worker * 8 * frame_bytes / rate + latency)
    return worst


def _ring_job(scenario, placement, jp, job, routes, rates) -> dict:
    """A ring all-reduce's figures: what its workers send (ring frames), nothing at a PS, nothing aggregated
    or counted as INA egress by the switches (their INA counters see INA packets only), and its
    communication time, phase by phase (RAR has one, H-AR three; each rated by the fluid model with the
    job's streams of that phase, the other jobs' as ever): the slowest worker's frames at its rate plus,
    per step (a barrier), its last frame's time on its own host link, the ACK's on its peer's, and the
    step's mean delay (the scheme's ``step_overhead``). Not a store-and-forward time per hop: the links'
    shapers (htb) pass a frame through an idle link at once from their bucket, and the 14 steps of Rina's
    eight-worker testbed measured 0.104 s against 0.102 s of frames at the modelled rate. Not Rina Eq. 1's
    wait for the slowest of N delays per step either: a worker waits only for its peer, so neighbours'
    delays overlap (2 ms +- 1 ms per step there: 0.123 s against 0.104 s without; Eq. 1's bound gives
    0.167 s, the mean 0.139 s). ``min_sending_rate_bps``: the slowest worker's frames over its sending
    time summed over the phases."""
    frame_bytes, ack_bytes = ring_frame_bytes(scenario.switch.lanes), ring_frame_bytes(0)
    step_delay_s = job.policy_options.get(job.scheme, {}).get("step_overhead_s", 0.0)
    comm_time_s, sending_s = 0.0, {w: 0.0 for w in job.workers}
    phases = ring_phases(job, jp, scenario.switch.lanes)
    for index, phase in enumerate(phases):
        phase_rates = _phase_rates(scenario, placement, routes, job, index, rates)
        slowest_s = 0.0
        for w, peer, fragments in zip(job.workers, phase.peers, phase.fragments):
            if phase_rates[w] <= 0:
                return _ring_result(jp, job, _ring_sent(phases), frame_bytes, 0.0, float("inf"))
            frames_s = fragments * 8 * frame_bytes / phase_rates[w]
            sending_s[w] += frames_s
            peer = job.workers[peer]
            step_s = 8 * frame_bytes / routes.capacity_bps[routes.links(w, peer)[0]] + \
                8 * ack_bytes / routes.capacity_bps[routes.links(peer, w)[0]]
            slowest_s = max(slowest_s, frames_s + phase.steps * (step_s + step_delay_s))
        comm_time_s += slowest_s
    sent_bits = {w: sum(p.fragments[r] for p in phases) * 8 * frame_bytes for r, w in enumerate(job.workers)}
    return _ring_result(jp, job, _ring_sent(phases), frame_bytes,
                        min(sent_bits[w] / sending_s[w] for w in job.workers), comm_time_s)


def _phase_rates(scenario, placement, routes, job, index: int, rates: dict) -> dict:
    """Every worker's rate while ring job ``job`` is in its phase ``index``, the other jobs as ever: the
    evaluation's own ``rates`` for the first phase (the one a FluidModel rates by default)."""
    if index == 0:
        return rates
    return FluidModel(scenario, placement, routes, ring_phase={job.name: index}).max_min_rates()[0]


def _ring_sent(phases) -> int:
    return sum(sum(p.fragments) for p in phases)


def _rina_job(scenario, placement, jp, job, routes, rates) -> dict:
    """Rina's figures (§IV): RAR over its M members (``notes["members"]``, :func:`testbed.sim.fluid.rina_streams`),
    M - 1 ScatterReduce steps, the first AllGather step (where a Rina rack's ToR sums the rack's own shards
    of the chunk its member finishes and sends it to the rack and on) and M - 2 more AllGather steps
    (:func:`testbed.sim.fluid.rina_phase_steps`), each moving the largest M-th of the model per member, at
    the rate the fluid model gives that phase's streams (the slowest worker's). In INA frames
    (``wire.ina_frame_bytes``: Rina's wire). Per step, as :func:`_ring_job`, a frame's and an ACK's time on
    the slowest host link and the step's mean delay, and in a step that pulls a Rina rack's shards two
    header frames more on it: the agent's task to its ToR and the ToR's pull to the rack's workers
    (§IV-B). Sent: every worker's shard in each step that pulls them (a Rina rack's workers, an autonomous
    worker's chunk), only a member's agent in the other AllGather steps (its ToR replicates to the rack).
    ``min_sending_rate_bps`` as :func:`_ring_job`'s: the slowest worker's frames over its sending time
    summed over the phases it sends in. Switch egress: every stream's fragments once per switch port they
    leave by (:func:`_switch_egress`; a Rina rack's sum and finished chunk are INA gradients, its pulls
    headers alone)."""
    lanes = scenario.switch.lanes
    members = jp.notes["members"]
    agents = {m["workers"][0] for m in members}
    chunk = -(-sum(fragments_per_submodel(job.submodel_elements, lanes)) // len(members))
    frame_bytes, header_bytes = ina_frame_bytes(lanes), ina_frame_bytes(0)
    step_delay_s = job.policy_options.get(job.scheme, {}).get("step_overhead_s", 0.0)
    slowest_link_bps = min(scenario.topology.host_link(w).rate_bps for w in job.workers)
    pulls = 2 if any(m["tor"] for m in members) else 0
    sent = egress = 0
    comm_time_s, sending_s, sent_bits = 0.0, dict.fromkeys(job.workers, 0.0), dict.fromkeys(job.workers, 0)
    for index, steps in enumerate(rina_phase_steps(len(members))):
        if not steps:
            continue
        phase_rates = _phase_rates(scenario, placement, routes, job, index, rates)
        # ScatterReduce and the first AllGather step send every worker's shard; the other AllGather steps the agents'
        senders = [w for w in job.workers if RINA_PHASES[index] != "all-gather" or w in agents]
        sent += steps * chunk * len(senders)
        egress += steps * chunk * _switch_egress(scenario.topology, routes, rina_streams(jp, RINA_PHASES[index]))
        rate_bps = min(phase_rates[w] for w in job.workers)
        if rate_bps <= 0:
            return _ring_result(jp, job, sent, frame_bytes, 0.0, float("inf"))
        headers = 1 + (pulls if RINA_PHASES[index] != "all-gather" else 0)
        step_s = 8 * (frame_bytes + header_bytes * headers) / slowest_link_bps + step_delay_s
        comm_time_s += steps * (chunk * 8 * frame_bytes / rate_bps + step_s)
        for w in senders:
            sent_bits[w] += steps * chunk * 8 * frame_bytes
            sending_s[w] += steps * chunk * 8 * frame_bytes / phase_rates[w]
    return _ring_result(jp, job, sent, frame_bytes, min(sent_bits[w] / sending_s[w] for w in job.workers),
                        comm_time_s, egress)


def _switch_egress(topology, routes, streams) -> int:
    """Switch ports one fragment of each of ``streams`` (:func:`testbed.sim.fluid.rina_streams`) leaves by."""
    return sum(sum(1 for node in routes.walk(src, dst)[:-1] if topology.nodes[node].kind == "switch")
               for src, dst, _, _ in streams)


def _ring_result(jp, job, sent, frame_bytes, rate_bps, comm_time_s, switch_egress_fragments=0) -> dict:
    return {"scheme": jp.scheme, "solver": None, "solve_s": 0.0, "placement_s": jp.notes.get("placement_s", 0.0),
            "min_sending_rate_bps": rate_bps, "comm_time_s": comm_time_s,
            "ps_ingress_fragments": 0, "ps_ingress_bytes": 0, "switch_egress_fragments": switch_egress_fragments,
            "communication_overhead_bytes": switch_egress_fragments * frame_bytes, "sent_fragments": sent,
            "sent_bytes": sent * frame_bytes,
            "ina_amount_bytes": 0, "participants": [], "transport": job.transport, "bom_rate_bps": None,
            "overflow_modelled": True, "ring": True}


def _rate(bps) -> str:
    if bps is None:
        return "-"
    for unit, factor in (("Gb/s", 1e9), ("Mb/s", 1e6), ("kb/s", 1e3)):
        if abs(bps) >= factor:
            return f"{bps / factor:.6g} {unit}"
    return f"{bps:.6g} b/s"


def format_simulation(result: dict) -> str:
    """A human-readable report of :func:`evaluate`'s result."""
    lines = [f"scenario {result['scenario']} (seed {result['seed']}): "
             + ", ".join(f"{job} {scheme}" for job, scheme in result["schemes"].items()),
             f"  minimum sending rate   {_rate(result['min_sending_rate_bps'])}"
             + (f"  (bottleneck: {', '.join(result['bottleneck_links'])})" if result["bottleneck_links"] else ""),
             f"  PS ingress             {result['ps_ingress_fragments']} fragments, {result['ps_ingress_bytes']} B"
             f" per iteration",
             f"  switch egress          {result['switch_egress_fragments']} fragments, "
             f"{result['communication_overhead_bytes']} B  ({result['fragment_model']} fragment model)",
             f"  in-network aggregation {result['ina_amount_bytes']} B of {result['sent_bytes']} B sent",
             f"  placement              {result['placement_s']:.3f} s (LP {result['solve_s']:.3f} s); "
             f"evaluation {result['evaluate_s']:.3f} s",
             "", f"  {'worker':<12}{'sending rate':>18}"]
    for w, r in result["worker_sending_rate_bps"].items():
        lines.append(f"  {w:<12}{_rate(r):>18}")
    if result["switch_load"]:
        lines += ["", "  at the minimum rate:", f"  {'switch':<12}{'aggregated':>16}{'offered':>16}{'capacity':>16}"
                                                            f"{'load':>8}"]
        for sw, s in result["switch_load"].items():
            util = "-" if s["utilisation"] is None else f"{s['utilisation']:.0%}"
            lines.append(f"  {sw:<12}{_rate(s['load_bps']):>16}{_rate(s['offered_bps']):>16}"
                         f"{_rate(s['capacity_bps']) if s['capacity_bps'] else 'unlimited':>16}{util:>8}")
    if result["link_load"]:
        lines += ["", f"  {'link':<14}{'load':>16}{'capacity':>16}{'load':>8}"]
        for link, s in result["link_load"].items():
            lines.append(f"  {link:<14}{_rate(s['load_bps']):>16}{_rate(s['capacity_bps']):>16}"
                         f"{s['utilisation']:>8.0%}")
    if len(result["jobs"]) > 1:
        lines += ["", "  per job:"]
        for name, j in result["jobs"].items():
            lines.append(f"  {name} ({j['scheme']}): {_rate(j['min_sending_rate_bps'])}, PS ingress "
                         f"{j['ps_ingress_fragments']} fragments, switch egress {j['switch_egress_fragments']}")
    for name, j in result["jobs"].items():
        if j["participants"]:
            lines.append(f"  {name}: participants {', '.join(j['participants'])}")
        if j["ring"]:
            lines.append(f"  {name}: ring all-reduce, {j['sent_fragments']} ring fragments sent per iteration, "
                         f"communication {j['comm_time_s'] * 1e3:.1f} ms")
        if not j["overflow_modelled"]:
            lines.append(f"  {name}: transport {j['transport']} sends past the job's slots by design: its "
                         f"workers' overflow to the PS is not modelled (fragment counts as if in lockstep)")
    for what in result.get("not_modelled", ()):
        lines.append(f"  {what}: not modelled (the simulator's is one steady iteration; inatb run emulates them)")
    return "\n".join(lines)
