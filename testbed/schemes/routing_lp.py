"""Gradient routing with INA as a path-based LP, randomized rounding and improvement (GRID; InArt's R-InArt).

GRID's LP (authors' ``routing/algs/GRID.py``: per worker a split over the PS
or switches summing to 1, rates bounded by that split and by switch use,
switch computation capacity, PS bandwidth) and InArt's LP-InArt (Eq. 5) are
the same problem once InArt's model split ``x_s`` is fixed: maximise the
common worker sending rate ``f`` (GRID's lambda) subject to link bandwidth,
switch processing capacity and PS ingress, choosing for every (PS s, worker
w) flow either the PS (no INA) or a switch that aggregates it, and paths.
This module solves that problem for both.

Linearisation. Eq. 5 multiplies ``f``, ``x_s``
and the fractional decisions ``y``, ``q``. With ``x_s`` fixed we substitute
rates: every decision variable here is a rate (bits/s of gradient),
``r = f * x_s * y`` per option and ``o = f * x_s * z`` per aggregate stream;
the constraints become linear in (r, o, f) and exactly equivalent to Eq. 5
for f > 0 (``y = r / (f x_s)``). Rates are scaled by the largest link rate
inside the LP so coefficients stay near 1.

Variables, per flow (s, w), are its options:

- raw: the flow goes to the PS on one of its k candidate paths (``paths``
  option, default 4 for GRID, 3 for InArt; the default path first, others at
  most 2 hops longer);
- aggregate at v: v a programmable switch on one of those candidate paths;
  the flow reaches v on its default route (so one worker-to-switch route
  serves every PS and the route table stays consistent), and v's aggregate
  for s takes one of v's k candidate paths to s (one stream per (v, s),
  whose rate is at least each contributor's aggregated rate: InArt's
  ``y_v^{s,w} <= z_v^s``, GRID's ``r_s <= y``).

Constraints: each flow's option rates sum to ``x_s f``; per directed link
the raw, to-switch and aggregate streams crossing it stay within its rate
(the PS's access link is its ingress limit B(s), GRID's "band"); per switch
the raw gradients it aggregates stay within its processing capacity
(``switch.aggregation_capacity``; none = unlimited).

Rounding (GRID, InArt Alg. 2 step 2): each flow picks one option with
probability ``r_option / (x_s f)`` (the aggregation point and the path in one
draw, the joint of InArt's "choose v, then a path"), each aggregate stream
picks one path with probability ``q_path / o``. Where the papers are silent:
we draw ``roundings`` times (default 8, seeded from the scenario seed); with
``improve`` (default on) each draw is improved by single changes (a flow's
option, an aggregate's path) while they raise the common rate
(:class:`~testbed.schemes.common.LoadModel`; ties: fewer saturated resources),
then by a tabu search over flow changes (the best change not made in the last
few steps, even when it lowers the rate, keeping the best assignment seen),
within an evaluation budget shared by the draws; the best result is kept.
The papers' rounding only bounds the loss in expectation; InArt Fig. 1's
2.5 needs three flows changed at once, which single changes cannot find.
``notes`` keep the LP optimum, the best plain draw and the final rate.
"""

from dataclasses import dataclass, field

import numpy as np
import pulp

from testbed.dataplane import program
from testbed.errors import InfeasibleError
from testbed.schemes import lp
from testbed.schemes.base import JobPlacement
from testbed.schemes.common import LoadModel, Stream, require_path, window_slots

#: The ``policy_options`` of the schemes that route with this LP (GRID, R-InArt).
ROUTING_OPTIONS = {"paths": ("int", 1, 16), "roundings": ("int", 1, 1000), "improve": ("bool",), **lp.LP_OPTIONS}
LP_RATE_FLOOR = 1e-9   # an LP optimum below this (relative to the unit rate) means no positive rate exists


@dataclass
class FlowOption:
    switch: str            # "" = raw to the PS
    path: list             # worker -> PS (raw) or worker -> switch
    stream: Stream

    @property
    def resources(self) -> frozenset:
        return _resources(self.stream)


def _resources(stream: Stream) -> frozenset:
    found = set(int(i) for i in stream.links)
    if stream.switch >= 0:
        found.add(int(stream.switch))
    return frozenset(found)


@dataclass
class RoutingProblem:
    net: object
    job: object
    owner: dict                      # sub-model -> PS
    share: dict                      # PS -> x_s (fraction of the model)
    model: LoadModel
    flows: list                      # [(ps, worker)]
    options: dict                    # (ps, worker) -> [FlowOption]
    agg_paths: dict                  # (switch, ps) -> [path]
    agg_streams: dict                # (switch, ps) -> [Stream]
    capacity_bps: float              # per-switch processing capacity (0 = unlimited)
    allowed: list


@dataclass
class LpSolution:
    rate_bps: float
    option_rates: dict               # (ps, worker) -> [rate per option]
    agg_rates: dict                  # (switch, ps) -> [rate per path]
    record: lp.SolveRecord


@dataclass
class Assignment:
    choice: dict                     # (ps, worker) -> option index
    agg_choice: dict = field(default_factory=dict)   # (switch, ps) -> path index


def build_problem(net, job, scenario, scheme, owner, share, allowed, k) -> RoutingProblem:
    capacity = scenario.switch.aggregation_capacity_bps
    model = LoadModel(net, {s: capacity for s in allowed} if capacity > 0 else {})
    allowed_set = set(allowed)
    flows, options, agg_paths, agg_streams = [], {}, {}, {}
    for ps in job.ps:
        x = share.get(ps, 0.0)
        if x <= 0:
            continue
        for w in job.workers:
            require_path(net, scheme, job, w, ps)
            opts, seen = [], set()
            for path in net.k_paths(w, ps, k):
                opts.append(FlowOption("", path, Stream(model.path_indices(path), x)))
            for path in net.k_paths(w, ps, k):
                for v in path[1:-1]:
                    if v in allowed_set and v not in seen:
                        seen.add(v)
                        to_v = net.default_path(w, v)
                        opts.append(FlowOption(v, to_v, Stream(model.path_indices(to_v), x, model.switch_index(v))))
                        if (v, ps) not in agg_paths:
                            agg_paths[(v, ps)] = net.k_paths(v, ps, k)
                            agg_streams[(v, ps)] = [Stream(model.path_indices(p), x) for p in agg_paths[(v, ps)]]
            flows.append((ps, w))
            options[(ps, w)] = opts
    return RoutingProblem(net, job, owner, share, model, flows, options, agg_paths, agg_streams, capacity,
                          list(allowed))


def solve_lp(problem: RoutingProblem, scheme: str, solver: str, time_limit_s: float) -> LpSolution:
    model = problem.model
    unit = float(model.capacity.max())
    prob = pulp.LpProblem(f"{scheme}_routing", pulp.LpMaximize)
    f = lp.variable(prob, "f")
    prob += f
    rate_vars = {}
    per_resource = {}

    def charge(var, stream):
        for i in stream.links:
            per_resource.setdefault(int(i), []).append((var, 1.0))
        if stream.switch >= 0:
            per_resource.setdefault(int(stream.switch), []).append((var, 1.0))

    agg_out = {}
    for key, paths in problem.agg_paths.items():
        v, ps = key
        qs = [lp.variable(prob, f"q_{v}_{ps}_{j}") for j in range(len(paths))]
        agg_out[key] = qs
        for q, stream in zip(qs, problem.agg_streams[key]):
            charge(q, stream)
    for n, (ps, w) in enumerate(problem.flows):
        opts = problem.options[(ps, w)]
        rs = [lp.variable(prob, f"r_{n}_{i}") for i in range(len(opts))]
        rate_vars[(ps, w)] = rs
        prob += pulp.lpSum(rs) == problem.share[ps] * f, f"demand_{n}"
        for i, (r, opt) in enumerate(zip(rs, opts)):
            charge(r, opt.stream)
            if opt.switch:
                prob += r <= pulp.lpSum(agg_out[(opt.switch, ps)]), f"z_{n}_{i}"
    for i, terms in per_resource.items():
        prob += pulp.LpAffineExpression(terms) <= float(model.capacity[i]) / unit, f"cap_{i}"
    record = lp.solve(prob, scheme, f"the routing LP of job {problem.job.name}", solver, time_limit_s)
    rate = lp.value(f) * unit
    if lp.value(f) <= LP_RATE_FLOOR:
        raise InfeasibleError(f"{scheme}: job {problem.job.name}: no positive sending rate fits the links, "
                              f"switch capacities and PS ingress")
    option_rates = {key: [lp.value(r) * unit for r in rs] for key, rs in rate_vars.items()}
    agg_rates = {key: [lp.value(q) * unit for q in qs] for key, qs in agg_out.items()}
    return LpSolution(rate, option_rates, agg_rates, record)


def _pick(rng, weights):
    total = sum(max(0.0, w) for w in weights)
    if total <= 0:
        return 0
    probs = [max(0.0, w) / total for w in weights]
    return int(rng.choice(len(probs), p=probs))


def rounding_probabilities(problem: RoutingProblem, solution: LpSolution, flow) -> list:
    """Probability of each option of ``flow``: its LP rate over the flow's demand ``x_s f``."""
    rates = [max(0.0, r) for r in solution.option_rates[flow]]
    total = sum(rates)
    return [r / total for r in rates] if total > 0 else [1.0] + [0.0] * (len(rates) - 1)


def round_once(problem: RoutingProblem, solution: LpSolution, rng) -> Assignment:
    choice = {flow: _pick(rng, solution.option_rates[flow]) for flow in problem.flows}
    used = {(problem.options[flow][i].switch, flow[0]) for flow, i in choice.items() if problem.options[flow][i].switch}
    agg_choice = {key: _pick(rng, solution.agg_rates[key]) for key in sorted(used)}
    return Assignment(choice, agg_choice)


class _Loads:
    """Incremental per-unit loads of an assignment, for rounding evaluation and local search."""

    def __init__(self, problem: RoutingProblem, assignment: Assignment):
        self.p = problem
        self.a = Assignment(dict(assignment.choice), dict(assignment.agg_choice))
        self.loads = problem.model.zeros()
        self.users = {}
        self.option_resources = {flow: [o.resources for o in opts] for flow, opts in problem.options.items()}
        self.agg_resources = {key: [_resources(s) for s in streams] for key, streams in problem.agg_streams.items()}
        for flow, i in self.a.choice.items():
            self._add_option(flow, i, 1.0)

    def _add_option(self, flow, i, sign):
        opt = self.p.options[flow][i]
        self.p.model.add(self.loads, opt.stream, sign)
        if not opt.switch:
            return
        key = (opt.switch, flow[0])
        if sign > 0:
            before = self.users.get(key, 0)
            self.users[key] = before + 1
            if before == 0:
                j = self.a.agg_choice.setdefault(key, 0)
                self.p.model.add(self.loads, self.p.agg_streams[key][j], 1.0)
        else:
            self.users[key] -= 1
            if self.users[key] == 0:
                self.p.model.add(self.loads, self.p.agg_streams[key][self.a.agg_choice[key]], -1.0)

    def rate(self):
        return self.p.model.rate(self.loads)

    def move(self, flow, i):
        self._add_option(flow, self.a.choice[flow], -1.0)
        self.a.choice[flow] = i
        self._add_option(flow, i, 1.0)

    def move_agg(self, key, j):
        streams = self.p.agg_streams[key]
        self.p.model.add(self.loads, streams[self.a.agg_choice[key]], -1.0)
        self.a.agg_choice[key] = j
        self.p.model.add(self.loads, streams[j], 1.0)

    def binding(self) -> set:
        """Resources at the common rate: only changes that unload one of them can raise it."""
        used = self.loads > 1e-15
        if not used.any():
            return set()
        ratios = np.full(len(self.loads), np.inf)
        ratios[used] = self.p.model.capacity[used] / self.loads[used]
        return set(np.flatnonzero(ratios <= ratios.min() * (1 + 1e-9)).tolist())

    def critical(self, binding: set):
        """Flows and live aggregate streams that use a binding resource."""
        flows = []
        for flow in self.p.flows:
            i = self.a.choice[flow]
            if self.option_resources[flow][i] & binding:
                flows.append(flow)
                continue
            opt = self.p.options[flow][i]
            if opt.switch:
                key = (opt.switch, flow[0])
                if self.agg_resources[key][self.a.agg_choice[key]] & binding:
                    flows.append(flow)
        aggs = [key for key in sorted(k for k, n in self.users.items() if n > 0)
                if self.agg_resources[key][self.a.agg_choice[key]] & binding]
        return flows, aggs


def _key(rate_tight):
    return (rate_tight[0], -rate_tight[1])


def _better(new, old):
    return new[0] > old[0] * (1 + 1e-12) or (new[0] >= old[0] * (1 - 1e-12) and new[1] < old[1])


def _best_change(state: _Loads, start: int, choices: int, move, counter) -> int:
    """The choice among ``choices`` whose single move (``move(i)``) gives the best rate; ``start`` if none."""
    best, best_i = state.rate(), start
    for i in range(choices):
        if i == start:
            continue
        move(i)
        trial = state.rate()
        counter[0] += 1
        if _better(trial, best):
            best, best_i = trial, i
        move(start)
    return best_i


def _best_flow_change(state: _Loads, flow, counter):
    return _best_change(state, state.a.choice[flow], len(state.p.options[flow]),
                        lambda i: state.move(flow, i), counter)


def _best_agg_change(state: _Loads, key, counter):
    return _best_change(state, state.a.agg_choice[key], len(state.p.agg_streams[key]),
                        lambda j: state.move_agg(key, j), counter)


def _descend(state: _Loads, problem: RoutingProblem, counter: list, max_moves: int = 10000) -> int:
    """Single changes (a flow's option, an aggregate's path) while one raises (rate, -saturated resources).

    Only flows and aggregates on a binding resource are tried: no other change can raise the rate or
    free a binding resource, so the restriction loses nothing.
    """
    moves = 0
    while moves < max_moves:
        flows, aggs = state.critical(state.binding())
        for flow in flows:
            i = _best_flow_change(state, flow, counter)
            if i != state.a.choice[flow]:
                state.move(flow, i)
                break
        else:
            for key in aggs:
                j = _best_agg_change(state, key, counter)
                if j != state.a.agg_choice[key]:
                    state.move_agg(key, j)
                    break
            else:
                return moves
        moves += 1
    return moves


def _tabu(state: _Loads, problem: RoutingProblem, budget: int, counter: list):
    """Tabu search over flow changes on binding resources: the best change not made in the last few steps,
    even when it lowers the rate; the best assignment seen is restored."""
    tenure = max(3, min(7, len(problem.flows) // 3))
    best = (_key(state.rate()), dict(state.a.choice))
    blocked, stale, iteration = {}, 0, 0
    while counter[0] < budget and stale < 30:
        flows, _ = state.critical(state.binding())
        candidate = None
        for flow in flows:
            if blocked.get(flow, -1) >= iteration:
                continue
            start = state.a.choice[flow]
            for i in range(len(problem.options[flow])):
                if i == start:
                    continue
                state.move(flow, i)
                trial = _key(state.rate())
                counter[0] += 1
                state.move(flow, start)
                if candidate is None or trial > candidate[0]:
                    candidate = (trial, flow, i)
        if candidate is None:
            break
        trial, flow, i = candidate
        state.move(flow, i)
        blocked[flow] = iteration + tenure
        iteration += 1
        if trial > best[0]:
            best, stale = (trial, dict(state.a.choice)), 0
        else:
            stale += 1
    for flow, i in best[1].items():
        if state.a.choice[flow] != i:
            state.move(flow, i)
    return iteration


def improve(problem: RoutingProblem, assignment: Assignment, budget: int = 20000):
    """Descent, tabu search within ``budget`` evaluations, descent again; returns (assignment, rate, moves)."""
    state = _Loads(problem, assignment)
    counter = [0]
    moves = _descend(state, problem, counter)
    moves += _tabu(state, problem, counter[0] + budget, counter)
    moves += _descend(state, problem, counter)
    live = {k: j for k, j in state.a.agg_choice.items() if state.users.get(k, 0) > 0}
    return Assignment(dict(state.a.choice), live), state.rate()[0], moves


#: Rate evaluations the improvement of all roundings of one LP may spend (about 20 us each).
IMPROVE_BUDGET = 48_000


def best_assignment(problem, solution, rng, roundings: int, do_improve: bool):
    """Draw ``roundings`` times; improve each (budget shared); keep the highest (rate, -saturated)."""
    roundings = max(1, roundings)
    best, best_rounded, total_moves = None, 0.0, 0
    for _ in range(roundings):
        candidate = round_once(problem, solution, rng)
        rate, tight = _Loads(problem, candidate).rate()
        best_rounded = max(best_rounded, rate)
        if do_improve:
            candidate, _, moves = improve(problem, candidate, IMPROVE_BUDGET // roundings)
            total_moves += moves
            rate, tight = _Loads(problem, candidate).rate()
        if best is None or (rate, -tight) > (best[1], -best[2]):
            best = (candidate, rate, tight)
    return best[0], best_rounded, best[1], total_moves


def to_job_placement(problem: RoutingProblem, assignment: Assignment, scheme: str, scenario, notes: dict) -> JobPlacement:
    net, job, owner = problem.net, problem.job, problem.owner
    first_hop = {w: {} for w in job.workers}
    next_hop, paths = {}, {}
    for (ps, w), i in assignment.choice.items():
        opt = problem.options[(ps, w)][i]
        node = opt.switch or ps
        for g, owner_ps in owner.items():
            if owner_ps == ps:
                first_hop[w][g] = node
        if opt.path != net.default_path(w, node):
            paths[f"{w}>{node}"] = list(opt.path)
    for (v, ps), j in assignment.agg_choice.items():
        for g, owner_ps in owner.items():
            if owner_ps == ps:
                next_hop.setdefault(v, {})[g] = ps
        path = problem.agg_paths[(v, ps)][j]
        if path != net.default_path(v, ps):
            paths[f"{v}>{ps}"] = list(path)
    for w in job.workers:            # sub-models of a PS no flow serves (share 0) go to their PS raw
        for g, ps in owner.items():
            first_hop[w].setdefault(g, ps)
    slots = {v: window_slots(scenario, job) for v in next_hop}
    return JobPlacement(job.name, scheme, dict(owner), first_hop, next_hop, paths=paths, slots=slots,
                     release_mode=program.RELEASE_ON_EMIT, notes=notes)


def relax(net, job, scenario, scheme, owner, share, allowed, opts, default_paths=4):
    """Build and solve the LP: (problem, solution)."""
    problem = build_problem(net, job, scenario, scheme, owner, share, allowed, opts.get("paths", default_paths))
    solution = solve_lp(problem, scheme, opts.get("solver", "auto"), opts.get("time_limit_s", lp.DEFAULT_TIME_LIMIT_S))
    return problem, solution


def round_to_placement(problem, solution, scheme, scenario, opts, rng):
    """Round and improve: (JobPlacement with the LP record in its notes, final rate)."""
    roundings = opts.get("roundings", 8)
    assignment, rounded, final, moves = best_assignment(problem, solution, rng, roundings, opts.get("improve", True))
    notes = {**solution.record.as_notes(), "solver": solution.record.solver, "solve_s": solution.record.solve_s,
             "lp_rate_bps": solution.rate_bps, "rounded_rate_bps": rounded, "predicted_rate_bps": final,
             "roundings": roundings, "improvement_moves": moves,
             "split": {ps: problem.share.get(ps, 0.0) for ps in problem.job.ps}, "seed": scenario.seed}
    return to_job_placement(problem, assignment, scheme, scenario, notes), final


def route_and_round(net, job, scenario, scheme, owner, share, allowed, opts, rng, default_paths=4):
    """Build, solve, round, improve; returns (JobPlacement, final rate)."""
    problem, solution = relax(net, job, scenario, scheme, owner, share, allowed, opts, default_paths)
    return round_to_placement(problem, solution, scheme, scenario, opts, rng)
