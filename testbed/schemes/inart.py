"""InArt: in-network aggregation with route selection over several PSs (InArt §3-4, Alg. 1-2, Eq. 1-5).

``inart`` = L-InArt (the model split) then R-InArt (INA points and paths);
``inart-equal`` = R-InArt with the model split equally (InArt §5.1.2's first
benchmark). A job with one PS is a PlacementError for both.

L-InArt (§4.2, Alg. 1). Eq. 2 keeps the switch and PS capacity constraints
of Eq. 1, relaxes y, z to [0, 1] and drops links and paths; it multiplies
the sending rate f by the split x_s. The paper derives x_s from the KKT
conditions of its Lagrangian. We solve the same program exactly instead: with
rate variables F_s = f x_s, a_{s,w} = f x_s y^{s,w}, b_{s,w,v} = f x_s y_v^{s,w}
and o_{v,s} = f x_s z_v^s, Eq. 2 becomes the linear program

    max f  s.t.  sum_s F_s = f;  a_{s,w} + sum_v b_{s,w,v} = F_s;
                 b_{s,w,v} <= o_{v,s} <= F_s;  sum_{s,w} b_{s,w,v} <= C(v);
                 sum_w a_{s,w} + sum_v o_{v,s} <= B(s)

which is Eq. 2 for f > 0 (x_s = F_s / f), so its optimum is the extreme
point the Lagrangian method seeks; no scipy iteration is needed. Here C(v) is
``switch.aggregation_capacity`` (none = unlimited), B(s) the rate of the
PS's access link (its ingress), and v ranges over the job's programmable
switches (Eq. 2 has no topology). Eq. 2's optimum is usually a face, not a
point; among its optimal splits we take the one closest (L1) to the split
proportional to PS ingress, by a second LP with f held at its optimum.

Sub-models are whole layers, so the split is realised by assigning
sub-models to PSs (:func:`~testbed.schemes.common.realize_split`). With
``split_search`` (default on) R-InArt also runs for the neighbouring
realisable splits (one sub-model moved between two PSs): every candidate's
LP is solved, the L-InArt split and up to three neighbours whose LP optimum
ties the best are rounded, and the best result is kept. Rounding the
continuous x_s to sub-models is our step; the neighbour R-InArt serves best
is the rounding we choose. InArt Fig. 1:
Eq. 2's optimum (3.0, no links) is flat in x_1 over [0.22, 0.78]; the split
closest to equal is 0.5, whose R-InArt result is 2.4; its neighbour 0.6/0.4
(the paper's split) reaches 2.5, the optimum of Eq. 1 on that topology.

R-InArt (§4.3, Alg. 2) is the path-based LP of Eq. 5 with the split fixed,
linearised by substituting rates, then randomized rounding of aggregation
points and paths: :mod:`testbed.schemes.routing_lp` (candidate paths
``policy_options.<scheme>.paths``, default 3; best of ``roundings``
draws, default 8; single-move improvement, ``improve``, default on). InArt's
"aggregated in-network once at most" holds: each (worker, PS) flow has one
aggregation point, and its aggregate goes to the PS.

§2.2's typo: "gradients from W4, W5, W6 to S2 are aggregated on S_2" must be
V_2 (the switch), as the loads in Fig. 1(c) show; our scenario and test use V2.
"""

import pulp

from testbed.schemes import lp
from testbed.schemes.common import (NetworkView, allowed_switches, options, ps_shares, realize_split,
                                   require_multiple_ps, rng_for)
from testbed.schemes.base import Scheme
from testbed.schemes.routing_lp import ROUTING_OPTIONS, relax, round_to_placement, route_and_round

DEFAULT_PATHS = 3
#: Neighbouring splits whose LP optimum is within this fraction of the best are rounded (at most SHORTLIST_SIZE,
#: the L-InArt split always): rounding and improving every neighbour costs seconds each at fat-tree scale.
SHORTLIST_GAP = 1e-6
SHORTLIST_SIZE = 4


def _ps_ingress_bps(scenario, job) -> dict:
    return {ps: scenario.topology.host_link(ps).rate_bps for ps in job.ps}


def l_inart_split(job, scenario, allowed, solver="auto", time_limit_s=lp.DEFAULT_TIME_LIMIT_S):
    """Eq. 2 solved exactly (see the module docstring): (split {PS: x_s}, optimum f in bps, [SolveRecord])."""
    ingress = _ps_ingress_bps(scenario, job)
    capacity = scenario.switch.aggregation_capacity_bps
    unit = max(ingress.values())
    prob = pulp.LpProblem("l_inart", pulp.LpMaximize)
    f = lp.variable(prob, "f")
    big_f = {s: lp.variable(prob, f"F_{k}") for k, s in enumerate(job.ps)}
    agg_load = {v: [] for v in allowed}
    ps_load = {s: [] for s in job.ps}
    prob += f
    prob += pulp.lpSum(big_f.values()) == f, "split"
    for k, s in enumerate(job.ps):
        out = {v: lp.variable(prob, f"o_{k}_{j}") for j, v in enumerate(allowed)}
        for v, o in out.items():
            prob += o <= big_f[s]
            ps_load[s].append(o)
        for i, w in enumerate(job.workers):
            raw = lp.variable(prob, f"a_{k}_{i}")
            ps_load[s].append(raw)
            aggs = []
            for j, v in enumerate(allowed):
                b = lp.variable(prob, f"b_{k}_{i}_{j}")
                aggs.append(b)
                agg_load[v].append(b)
                prob += b <= out[v]
            prob += raw + pulp.lpSum(aggs) == big_f[s]
    if capacity > 0:
        for v, terms in agg_load.items():
            prob += pulp.lpSum(terms) <= capacity / unit
    for s, terms in ps_load.items():
        prob += pulp.lpSum(terms) <= ingress[s] / unit
    records = [lp.solve(prob, "inart", f"L-InArt (Eq. 2) of job {job.name}", solver, time_limit_s)]
    best = lp.value(f)
    if best <= 0:
        return {s: 1.0 / len(job.ps) for s in job.ps}, 0.0, records
    # Tie-break on the optimal face: the split closest to PS-ingress-proportional.
    total_ingress = sum(ingress.values())
    dev = {s: lp.variable(prob, f"d_{k}") for k, s in enumerate(job.ps)}
    for s in job.ps:
        target = ingress[s] / total_ingress
        prob += dev[s] >= big_f[s] - target * f
        prob += dev[s] >= target * f - big_f[s]
    prob += f >= best * (1 - 1e-7), "keep_optimum"
    prob.sense = pulp.LpMinimize
    prob.setObjective(pulp.lpSum(dev.values()))
    records.append(lp.solve(prob, "inart", f"L-InArt tie-break of job {job.name}", solver, time_limit_s))
    rate = lp.value(f)
    split = {s: lp.value(big_f[s]) / rate for s in job.ps}
    return split, best * unit, records


def neighbour_splits(job, owner: dict) -> list:
    """Realisable splits one sub-model away: for each ordered PS pair, the smallest sub-model moved."""
    sizes = job.submodel_elements
    out, seen = [], {tuple(sorted(ps_shares(job, owner).items()))}
    for src in job.ps:
        mine = [g for g in owner if owner[g] == src]
        if len(mine) < 2:
            continue
        g = min(mine, key=lambda g: (sizes[g], g))
        for dst in job.ps:
            if dst == src:
                continue
            candidate = dict(owner)
            candidate[g] = dst
            key = tuple(sorted(ps_shares(job, candidate).items()))
            if key not in seen:
                seen.add(key)
                out.append(candidate)
    return out


def _r_inart(job, scenario, scheme, owner, allowed, opts, rng, net):
    return route_and_round(net, job, scenario, scheme, owner, ps_shares(job, owner), allowed, opts, rng,
                           default_paths=DEFAULT_PATHS)


def inart_placement(job, scenario):
    require_multiple_ps(job, "inart")
    opts = options(job, "inart")
    net = NetworkView(scenario)
    allowed = allowed_switches(job, scenario.topology, "inart")
    split, eq2_rate, records = l_inart_split(job, scenario, allowed, opts.get("solver", "auto"),
                                             opts.get("time_limit_s", lp.DEFAULT_TIME_LIMIT_S))
    owner = realize_split(job, split)
    candidates = [owner] + (neighbour_splits(job, owner) if opts.get("split_search", True) else [])
    share_of = lambda o: ps_shares(job, o)  # noqa: E731
    relaxed = [relax(net, job, scenario, "inart", o, share_of(o), allowed, opts, DEFAULT_PATHS) for o in candidates]
    top_lp = max(solution.rate_bps for _, solution in relaxed)
    shortlist = [k for k, (_, solution) in enumerate(relaxed) if k == 0 or
                 solution.rate_bps >= top_lp * (1 - SHORTLIST_GAP)][:SHORTLIST_SIZE]
    rng = rng_for(scenario, job, "inart")
    best, tried = None, []
    solve_s = sum(r.solve_s for r in records) + sum(solution.record.solve_s for _, solution in relaxed)
    for k, (problem, solution) in enumerate(relaxed):
        entry = {"split": {ps: problem.share.get(ps, 0.0) for ps in job.ps}, "lp_rate_bps": solution.rate_bps}
        if k in shortlist:
            placement, rate = round_to_placement(problem, solution, "inart", scenario, opts, rng)
            entry["rate_bps"] = rate
            if best is None or rate > best[1] * (1 + 1e-12):
                best = (placement, rate)
        tried.append(entry)
    placement = best[0]
    placement.notes.update({"l_inart_split": split, "l_inart_rate_bps": eq2_rate,
                         "l_inart_solver": records[0].solver, "l_inart_solve_s": sum(r.solve_s for r in records),
                         "splits_tried": tried, "solve_s": solve_s})
    return placement


def inart_equal_placement(job, scenario):
    require_multiple_ps(job, "inart-equal")
    opts = options(job, "inart-equal")
    net = NetworkView(scenario)
    allowed = allowed_switches(job, scenario.topology, "inart-equal")
    owner = realize_split(job, {ps: 1.0 / len(job.ps) for ps in job.ps})
    placement, _ = _r_inart(job, scenario, "inart-equal", owner, allowed, opts, rng_for(scenario, job, "inart-equal"),
                         net)
    return placement


#: This family's schemes and the ``policy_options`` each takes.
SCHEMES = (
    Scheme("inart", inart_placement, {**ROUTING_OPTIONS, "split_search": ("bool",)}),
    Scheme("inart-equal", inart_equal_placement, dict(ROUTING_OPTIONS)),
)
