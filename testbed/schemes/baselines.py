"""Baseline schemes: ``ps``, ``atp``, ``esa``, ``switchml``, ``geryon``, ``lbmm``, ``ksgd``.

Sub-models go to a job's PSs in contiguous, size-balanced order
(:func:`~testbed.schemes.common.split_submodels`) unless the scheme decides
the split itself (LBMM here, InArt in ``inart.py``).

``ps`` (BytePS-style, no INA): every worker sends every sub-model to its PS.

``atp`` (ATP, NSDI'21, as GOAT §III-B, GRID §Motivation and InArt §2.1 model
it). Options (``policy_options.atp``):

- ``levels`` (default 2): level 1 aggregates at the first programmable switch
  on each worker's default path to the sub-model's PS; level 2 aggregates
  the level-1 partial aggregates, and what overflowed at level 1, again at
  the programmable switch nearest the PS on that path (ATP's PS-side ToR),
  then the PS. ``levels: 1`` is the first-level-only ATP (partial aggregates
  and overflow go straight to the PS). A worker whose first programmable
  switch is already the level-2 switch aggregates there directly.
  ``levels: all`` aggregates at every programmable switch on the way: each
  sends its partial aggregate to the next programmable switch on its default
  route to the PS (one next hop per switch toward one destination, so the
  paths form a tree). That is PS-based INA as Rina §III-B's
  Bandwidth-Occupation Model has it ("the INA switch can fully aggregate
  incoming traffic", Lemma 2: an INA switch and its children are one
  worker); ATP itself aggregates at two levels. Overflow at the first level
  bypasses to the next programmable switch, above it to the PS;
  ``admission: flow`` takes one or two levels.
- ``admission`` (default ``fragment``): how a switch's limited capacity is
  shared. ``fragment`` is ATP's data plane: every fragment tries the switch,
  what the switch cannot take (slot held by another fragment, capacity
  exhausted) bypasses to ``bypass_hop`` (the level-2 switch) and then to the
  PS; the simulator models this best-effort overflow, so a saturated switch
  passes each worker's excess on (GRID Fig. 1: 9/4 aggregated at S1 plus
  0.75/4 over the rest of L1). ``flow`` is the reading InArt §2.1 gives: a
  switch admits whole (worker, sub-model) flows while its capacity lasts at
  the rate the workers send, the rest go to level 2 and then raw to the PS
  (InArt Fig. 1(b): W3 and W4 reach S1 without INA). The papers do not say
  at which rate ATP admits; we take the highest rate r at which the flows
  admitted at r can all be carried at r (a grid plus bisection over r), the
  fixed point of "admit at the rate you get". A flow is InArt's (§3.1): a
  worker's gradients toward one PS, all its sub-models together. Flows are
  admitted in the order their fragments arrive when workers are in step: PS
  by PS (a PS's sub-models are contiguous), workers in order; level-1 flows
  first, then child aggregates, then overflow at level 2. InArt's ATP is one
  level (``levels: 1``: "ATP performs best-effort aggregation on the ToR
  switch"); with it, Fig. 1(b)'s V1 admits W1-W4's flows to S1 and W1, W2's
  to S2, and W3, W4 reach S2 raw: 2 (the paper names W3, W4's flows to S1
  instead, the mirror image).

Slots are hashed per fragment (``seq mod slots``) from the job's window at
each switch. As in ATP, a slot is released when the PS's RESULT for its
fragment passes back through the switch (``RELEASE_ON_RESULT``; the
controller installs the ``ina_result`` entries). ``policy_options.atp.release:
emit`` frees it when the aggregate leaves instead (``RELEASE_ON_EMIT``), the
rule GOAT's and GRID's examples assume for ATP; GOAT Fig. 2(b)'s asynchronous
counts are the same under both (the simulator's fragment model implements
both).

``esa`` (ESA, Wang et al. 2022): ATP's two-level tree and hash slots; on a
slot collision a contribution of higher rank evicts the incomplete partial
in the slot, which goes on toward the occupant's overflow target (its level
2, or its PS) (``collision = "preempt"``), in the data plane of both
targets as in the simulator. ESA shares a switch's memory between jobs:
the ESA jobs aggregating at a switch share one slot range there, as large
as their ranges apart (``Placement.shared_slot_ranges``). ESA ranks jobs
(nearer completion first, with aging); here ``policy_options.esa.priority``
(default 0, higher wins) ranks jobs, and within one job and iteration the
lower ``seq`` (the older fragment, the aging rule) wins
(``program.esa_preempts``); jobs of equal priority never evict each other.
In a single-job run where fragments arrive in ``seq`` order ESA behaves as
ATP.

``switchml`` (SwitchML, NSDI'21): one rack: every worker's first programmable
switch must be the same switch (else PlacementError); a slot pool of
``policy_options.switchml.pool`` slots (default: the window, at most half the
switch's slots); workers are self-clocked (a worker reuses a slot only after
its result returned), so fragments wait for their slot instead of bypassing
(``collision = "wait"``; in the emulation the workers' sliding window over
``seq``, at most the pool, is that self-clocking). Each pool slot has two
copies (SwitchML §3, "shadow copies": ``RELEASE_SHADOW``, a range of twice
the pool): consecutive uses of a pool slot alternate copies
(``wire.shadow_slot``), a complete copy keeps its aggregate until the next
use but one claims it, and a retransmission that finds its copy complete is
answered by the switch with that aggregate as the RESULT, without the PS.
SwitchML has no PS; ours receives the aggregate, checks it and multicasts
the result as for every scheme.

``geryon`` (Geryon, INFOCOM'20, as GOAT §VII-A and GRID §Motivation use it):
no INA; each (worker, PS) flow takes one of its k shortest paths
(``policy_options.geryon.paths``, default 4, at most 2 hops longer than the
shortest). Every flow starts on its shortest (default) path; then, while
moving one flow to another candidate raises the common sending rate (or
keeps it with fewer saturated links), the best such move is made, ties going
to the flow scheduled last. GRID Fig. 1: W1-W3 stay on L1 (S1-S3), W4 moves
to S1-S2-S3, 1 Gbps.

``lbmm`` (load-balanced Min-Min, Rajput & Kushwah 2016, as InArt §2.1 uses
it): no INA, several PSs. Sub-models (tasks) go to PSs (machines) by
Min-Min on the time each PS needs to receive a sub-model from every worker
at its ingress rate, then, while it lowers the makespan, the best single
move of a sub-model off the most loaded PS. Flows are then placed in worker
order, each on the candidate path that keeps the common rate of the flows
placed so far highest ("the link with the lightest load"; ties: fewer
saturated links, the shorter path), then improved by moves as in ``geryon``.
A job with one PS is a PlacementError.

``ksgd`` (K-sync SGD, Dutta et al. AISTATS'18): PS aggregation without INA;
the PS uses the first K workers' gradients each iteration: ``participants``
are the K fastest workers by their iteration interval
(``policy_options.ksgd.intervals``, else :func:`estimated_intervals_s`).
``k`` defaults to ceil(|W| / 2).
"""

import math

import numpy as np

from testbed.dataplane import program
from testbed.errors import PlacementError
from testbed.schemes.base import JobPlacement, Scheme
from testbed.schemes.common import (RATE_TOLERANCE, LoadModel, NetworkView, Stream, allowed_switches,
                                   check_reachable, options, ps_shares, require_multiple_ps, require_path,
                                   rng_for, split_submodels, tree_loads, window_slots)

__all__ = ["ps_placement", "atp_placement", "esa_placement", "switchml_placement", "geryon_placement", "lbmm_placement",
           "ksgd_placement", "split_submodels", "estimated_intervals_s"]


# --- ps ------------------------------------------------------------------------------

def ps_placement(job, scenario, scheme: str = "ps") -> JobPlacement:
    owner = split_submodels(job)
    check_reachable(NetworkView(scenario), scheme, job, owner)
    first_hop = {w: {g: owner[g] for g in owner} for w in job.workers}
    return JobPlacement(job.name, scheme, owner, first_hop, notes={"ina": False})


# --- atp / esa ----------------------------------------------------------------------

def _atp_levels(net, job, scheme, owner, levels):
    """Level-1 switch of every (worker, sub-model), and the switch each aggregating switch sends its partial
    aggregate to (``upper[switch][g]``, None: the PS): with two levels the programmable switch nearest the
    PS, behind level-1 switches only; with ``all`` the next programmable switch on the default route, behind
    every aggregating switch."""
    allowed = set(allowed_switches(job, net.topology, scheme))
    first, upper = {}, {}
    for w in job.workers:
        first[w] = {}
        for g, ps in owner.items():
            path = require_path(net, scheme, job, w, ps)
            node = next((n for n in path[1:-1] if n in allowed), ps)
            first[w][g] = node
            if node == ps or levels == 1:
                continue
            later = [n for n in net.default_path(node, ps)[1:-1] if n in allowed]
            if levels == "all":
                for low, high in zip([node] + later, later + [None]):
                    upper.setdefault(low, {})[g] = high
            else:
                upper.setdefault(node, {})[g] = later[-1] if later else None
    return first, upper


def _tree_from_first_hops(first_hop, child_next, owner):
    """Complete next_hop: every switch that receives a contribution for g forwards its aggregate."""
    next_hop = {s: dict(h) for s, h in child_next.items()}
    for hops in first_hop.values():
        for g, node in hops.items():
            if node != owner[g]:
                next_hop.setdefault(node, {}).setdefault(g, owner[g])
    for hops in list(child_next.values()):
        for g, node in hops.items():
            if node != owner[g]:
                next_hop.setdefault(node, {}).setdefault(g, owner[g])
    return next_hop


def _fragment_tree(first, upper_of, owner):
    """ATP's tree with best-effort admission: every flow tries its level-1 switch; overflow goes to the next
    level. ``upper_of`` is :func:`_atp_levels`'s ``upper``."""
    child_next, bypass = {}, {}
    for hops in first.values():
        for g, node in hops.items():
            if node == owner[g]:
                continue
            upper = upper_of.get(node, {}).get(g)
            if upper:
                bypass.setdefault(node, {})[g] = upper
            while node is not None and g not in child_next.get(node, {}):
                child_next.setdefault(node, {})[g] = upper or owner[g]
                node, upper = upper, upper_of.get(upper, {}).get(g)
    return {w: dict(h) for w, h in first.items()}, _tree_from_first_hops(first, child_next, owner), bypass


def _flow_admission(job, owner, first, second, capacity_bps, rate_bps):
    """ATP admission at ``rate_bps``: whole (worker, PS) flows while capacity lasts (see the module docstring)."""
    share = ps_shares(job, owner)
    by_ps = {ps: [g for g in sorted(owner) if owner[g] == ps] for ps in job.ps}
    order = sorted((ps for ps in job.ps if by_ps[ps]), key=lambda ps: by_ps[ps][0])
    remaining = dict(capacity_bps)

    def take(switch, demand):
        if switch is None:
            return False
        left = remaining.get(switch, math.inf)
        if left + RATE_TOLERANCE * max(1.0, demand) >= demand:
            remaining[switch] = left - demand
            return True
        return False

    first_hop, overflow = {w: {} for w in job.workers}, []
    for ps in order:                    # arrival order when workers are in step: a PS's sub-models together
        for w in job.workers:
            node = first[w][by_ps[ps][0]]
            if node == ps or take(node, rate_bps * share[ps]):
                first_hop[w].update({g: node for g in by_ps[ps]})
            else:
                overflow.append((w, ps))
    child_next = {}
    for ps in order:
        for node in sorted({first_hop[w].get(by_ps[ps][0], ps) for w in job.workers} - {ps}):
            upper = second.get(node, {}).get(by_ps[ps][0])
            target = upper if upper and take(upper, rate_bps * share[ps]) else ps
            child_next.setdefault(node, {}).update({g: target for g in by_ps[ps]})
    for w, ps in overflow:
        upper = second.get(first[w][by_ps[ps][0]], {}).get(by_ps[ps][0])
        target = upper if upper and take(upper, rate_bps * share[ps]) else ps
        first_hop[w].update({g: target for g in by_ps[ps]})
    return first_hop, _tree_from_first_hops(first_hop, child_next, owner)


def _flow_tree(net, job, owner, first, second, capacity):
    """The flow admission at the highest self-consistent rate (see the module docstring)."""
    caps = {s: capacity for s in allowed_switches(job, net.topology, "atp")} if capacity > 0 else {}
    model = LoadModel(net, caps)

    def rate_of(rate_bps):
        fh, nh = _flow_admission(job, owner, first, second, caps, rate_bps)
        return model.rate(tree_loads(net, model, job, fh, nh, {}, owner))[0], fh, nh

    top = max(net.topology.host_link(w).rate_bps for w in job.workers)
    grid = np.geomspace(top * 1e-4, top, 160)
    ok = [r for r in grid if rate_of(r)[0] >= r * (1 - RATE_TOLERANCE)]
    if not ok:
        lam, fh, nh = rate_of(grid[0])
        return fh, nh, lam
    low = max(ok)
    high = next((r for r in grid if r > low), low)
    for _ in range(60):
        if high - low <= low * 1e-13:
            break
        mid = 0.5 * (low + high)
        if rate_of(mid)[0] >= mid * (1 - RATE_TOLERANCE):
            low = mid
        else:
            high = mid
    lam, fh, nh = rate_of(low)
    return fh, nh, lam


def _atp_like(job, scenario, scheme, levels, admission="fragment"):
    if admission == "flow" and levels == "all":
        raise PlacementError(f"{scheme}: job {job.name}: admission flow takes levels 1 or 2, not all")
    net = NetworkView(scenario)
    owner = split_submodels(job)
    first, upper = _atp_levels(net, job, scheme, owner, levels)
    notes = {"levels": levels, "admission": admission}
    bypass = {}
    if admission == "flow" and scenario.switch.aggregation_capacity_bps > 0:
        first_hop, next_hop, lam = _flow_tree(net, job, owner, first, upper,
                                              scenario.switch.aggregation_capacity_bps)
        notes["admission_rate_bps"] = lam
    else:
        first_hop, next_hop, bypass = _fragment_tree(first, upper, owner)
    slots = {s: window_slots(scenario, job) for s in next_hop}
    release = options(job, scheme).get("release", "result")
    return JobPlacement(job.name, scheme, owner, first_hop, next_hop, bypass_hop=bypass, slots=slots,
                     release_mode=program.RELEASE_ON_RESULT if release == "result" else program.RELEASE_ON_EMIT,
                     notes=notes)


def atp_placement(job, scenario) -> JobPlacement:
    opts = options(job, "atp")
    return _atp_like(job, scenario, "atp", opts.get("levels", 2), opts.get("admission", "fragment"))


def esa_placement(job, scenario) -> JobPlacement:
    opts = options(job, "esa")
    jp = _atp_like(job, scenario, "esa", opts.get("levels", 2))
    jp.collision = "preempt"
    jp.notes["priority"] = opts.get("priority", 0)
    return jp


# --- switchml ---------------------------------------------------------------------------

def switchml_placement(job, scenario) -> JobPlacement:
    net = NetworkView(scenario)
    owner = split_submodels(job)
    first, _ = _atp_levels(net, job, "switchml", owner, 1)
    racks = sorted({node for hops in first.values() for g, node in hops.items() if node != owner[g]})
    direct = sorted({w for w, hops in first.items() if any(node == owner[g] for g, node in hops.items())})
    if direct:
        raise PlacementError(f"switchml: job {job.name}: no programmable switch between worker {direct[0]} and its PS")
    if len(racks) != 1:
        raise PlacementError(f"switchml: job {job.name}: workers sit under {len(racks)} aggregation switches "
                          f"({', '.join(racks)}); SwitchML aggregates in a single rack")
    tor = racks[0]
    pool = min(options(job, "switchml").get("pool", window_slots(scenario, job)), scenario.switch.slots // 2)
    first_hop = {w: {g: tor for g in owner} for w in job.workers}
    next_hop = {tor: {g: owner[g] for g in owner}}
    jp = JobPlacement(job.name, "switchml", owner, first_hop, next_hop, slots={tor: 2 * pool},
                   release_mode=program.RELEASE_SHADOW, notes={"rack": tor, "synchronous": True, "pool": pool})
    jp.collision = "wait"
    return jp


# --- geryon / lbmm: no INA, path choice ------------------------------------------------------

def _route_flows(net, job, owner, scheme, k, greedy):
    """Path choice per (worker, PS) flow: greedy placement (LBMM) or default paths (Geryon), then moves."""
    share = ps_shares(job, owner)
    model = LoadModel(net)
    flows = [(w, ps) for w in job.workers for ps in job.ps if share[ps] > 0]
    candidates = {}
    for w, ps in flows:
        require_path(net, scheme, job, w, ps)
        candidates[(w, ps)] = [Stream(model.path_indices(p), share[ps]) for p in net.k_paths(w, ps, k)]
    loads = model.zeros()
    choice = {}
    for flow in flows:
        if not greedy:
            choice[flow] = 0
            model.add(loads, candidates[flow][0])
            continue
        best = None
        for i, stream in enumerate(candidates[flow]):
            model.add(loads, stream)
            rate, tight = model.rate(loads)
            model.add(loads, stream, -1.0)
            key = (rate, -tight, -len(stream.links), -i)
            if best is None or key > best[0]:
                best = (key, i)
        choice[flow] = best[1]
        model.add(loads, candidates[flow][best[1]])
    moves = 0
    for _ in range(50):
        current = model.rate(loads)
        best = None
        for flow in flows:
            old = candidates[flow][choice[flow]]
            for i, stream in enumerate(candidates[flow]):
                if i == choice[flow]:
                    continue
                model.add(loads, old, -1.0)
                model.add(loads, stream)
                rate, tight = model.rate(loads)
                model.add(loads, stream, -1.0)
                model.add(loads, old)
                if rate > current[0] * (1 + 1e-12) or (rate >= current[0] * (1 - 1e-12) and tight < current[1]):
                    key = (rate, -tight)
                    if best is None or key >= best[0]:      # ties: the flow scheduled last moves
                        best = (key, flow, i)
        if best is None:
            break
        _, flow, i = best
        model.add(loads, candidates[flow][choice[flow]], -1.0)
        choice[flow] = i
        model.add(loads, candidates[flow][i])
        moves += 1
    paths = {}
    for (w, ps), i in choice.items():
        if i:
            paths[f"{w}>{ps}"] = net.k_paths(w, ps, k)[i]
    return paths, model.rate(loads)[0], moves


def geryon_placement(job, scenario) -> JobPlacement:
    net = NetworkView(scenario)
    owner = split_submodels(job)
    k = options(job, "geryon").get("paths", 4)
    paths, rate, moves = _route_flows(net, job, owner, "geryon", k, greedy=False)
    first_hop = {w: {g: owner[g] for g in owner} for w in job.workers}
    return JobPlacement(job.name, "geryon", owner, first_hop, paths=paths,
                     notes={"ina": False, "predicted_rate_bps": rate, "path_moves": moves, "paths_per_flow": k})


def min_min_split(job, ingress_bps: dict) -> dict:
    """LBMM's split: Min-Min of sub-models onto PSs, then single moves off the busiest PS while the makespan drops."""
    sizes = job.submodel_elements
    cost = {(g, ps): 32.0 * sizes[g] * len(job.workers) / ingress_bps[ps] for g in range(len(sizes)) for ps in job.ps}
    ready = {ps: 0.0 for ps in job.ps}
    owner, left = {}, set(range(len(sizes)))
    while left:
        g, ps = min(((g, min(job.ps, key=lambda p: (ready[p] + cost[(g, p)], job.ps.index(p)))) for g in left),
                    key=lambda gp: (ready[gp[1]] + cost[gp], gp[0]))
        owner[g] = ps
        ready[ps] += cost[(g, ps)]
        left.discard(g)
    while True:
        busiest = max(job.ps, key=lambda p: ready[p])
        makespan = ready[busiest]
        best = None
        for g in [g for g, p in owner.items() if p == busiest]:
            for ps in job.ps:
                if ps == busiest:
                    continue
                after = max(makespan - cost[(g, busiest)], ready[ps] + cost[(g, ps)],
                            *(ready[p] for p in job.ps if p not in (busiest, ps)))
                if after < makespan * (1 - 1e-12) and (best is None or after < best[0]):
                    best = (after, g, ps)
        if best is None:
            break
        _, g, ps = best
        ready[busiest] -= cost[(g, busiest)]
        ready[ps] += cost[(g, ps)]
        owner[g] = ps
    for ps in job.ps:           # every PS serves something (as the default split guarantees)
        if ps not in owner.values():
            donor = max(job.ps, key=lambda p: sum(1 for q in owner.values() if q == p))
            owner[min((g for g in owner if owner[g] == donor), key=lambda g: sizes[g])] = ps
    return dict(sorted(owner.items()))


def lbmm_placement(job, scenario) -> JobPlacement:
    require_multiple_ps(job, "lbmm")
    net = NetworkView(scenario)
    ingress = {}
    for ps in job.ps:
        link = scenario.topology.host_link(ps)
        ingress[ps] = link.rate_bps
    owner = min_min_split(job, ingress)
    paths, rate, moves = _route_flows(net, job, owner, "lbmm", options(job, "lbmm").get("paths", 4), greedy=True)
    first_hop = {w: {g: owner[g] for g in owner} for w in job.workers}
    return JobPlacement(job.name, "lbmm", owner, first_hop, paths=paths,
                     notes={"ina": False, "predicted_rate_bps": rate, "split": ps_shares(job, owner),
                            "path_moves": moves})


# --- ksgd ------------------------------------------------------------------------------

def estimated_intervals_s(job, scenario, rng) -> dict:
    """Per worker, one iteration's interval from parameters out to its gradient in (an arrival history of one).

    compute time + one draw of the worker's straggler delay (``stragglers.compute_delay``,
    drawn with the scheme's seeded stream; a persistent delay is the worker's own, as its history would
    show it) + its gradient at its access link's rate.
    """
    delays = {w: 0.0 for w in job.workers}
    for spec in getattr(scenario.stragglers, "compute_delays", []):
        for w in spec.workers:
            if w not in delays:
                continue
            if spec.persistent_s:
                delays[w] += spec.persistent_s[w]
            elif spec.distribution == "normal":
                delays[w] += float(np.clip(rng.normal(spec.mean_s, spec.std_s), spec.low_s, spec.high_s))
            elif spec.distribution == "uniform":
                delays[w] += float(rng.uniform(spec.low_s, spec.high_s))
            else:
                delays[w] += spec.value_s
    out = {}
    for w in job.workers:
        rate = scenario.topology.host_link(w).rate_bps
        out[w] = job.compute_time_s + delays[w] + 8.0 * job.gradient_bytes / rate
    return out


def fastest_workers(job, intervals_s: dict, k: int) -> list:
    ranked = sorted(job.workers, key=lambda w: (intervals_s[w], job.workers.index(w)))
    return sorted(ranked[:k], key=job.workers.index)


def ksgd_placement(job, scenario) -> JobPlacement:
    opts = options(job, "ksgd")
    k = opts.get("k", math.ceil(len(job.workers) / 2))
    if k > len(job.workers):
        raise PlacementError(f"ksgd: job {job.name}: k = {k} exceeds its {len(job.workers)} workers")
    intervals = opts.get("intervals_s") or estimated_intervals_s(job, scenario, rng_for(scenario, job, "ksgd"))
    missing = [w for w in job.workers if w not in intervals]
    if missing:
        raise PlacementError(f"ksgd: job {job.name}: policy_options.ksgd.intervals has no entry for worker {missing[0]}")
    jp = ps_placement(job, scenario, "ksgd")
    jp.participants = fastest_workers(job, intervals, k)
    jp.notes.update({"k": k, "intervals_s": dict(intervals)})
    return jp


#: This family's schemes and the ``policy_options`` each takes.
SCHEMES = (
    Scheme("ps", ps_placement),
    Scheme("atp", atp_placement, {"levels": ("int_or", 1, 2, "all"), "admission": ("choice", ("fragment", "flow")),
                               "release": ("choice", ("result", "emit"))}),
    Scheme("switchml", switchml_placement, {"pool": ("int", 1, 1 << 20)}),
    Scheme("esa", esa_placement, {"levels": ("int", 1, 2), "priority": ("int", 0, 65535),
                               "release": ("choice", ("result", "emit"))}),
    Scheme("geryon", geryon_placement, {"paths": ("int", 1, 16)}),
    Scheme("lbmm", lbmm_placement, {"paths": ("int", 1, 16)}),
    Scheme("ksgd", ksgd_placement, {"k": ("int", 1, 64), "intervals": ("worker_durations",)}),
)
