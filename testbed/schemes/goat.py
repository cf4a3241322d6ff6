"""GOAT: gradient scheduling with collaborative INA (Fang et al., ToN 2024): KRGS and GOAT-Async.

``goat`` is KRGS (§IV-C, Alg. 1) on the GINA problem in its converted form,
Eq. 4; ``goat-async`` is KRGS plus the participants search of §V-C, Alg. 2.

Model (§IV-A/B). Nodes are the job's programmable switches S and the PS
alpha (of each sub-model; a job with several PSs keeps the default split and
each sub-model's alpha is its owner). b(g) is sub-model g's gradient padded to
whole fragments (lanes x 4 bytes each); B(s) a switch's aggregation memory,
``switch.slots`` x lanes x 4 bytes (one slot holds one fragment);
B(alpha) the job's ``ps_memory`` (none = unlimited, as in the paper).
D_s(alpha) and D_w(s) are hop counts of the default routes.

Step 1: the LP relaxation of Eq. 4 (x, y in [0, 1]), in PuLP:

    max  sum_g sum_{s in S} (sum_w y_{w,g}^s - x_g^s) D_s(alpha) b(g)
    s.t. sum_{s in S+alpha} x_g^s >= 1;  sum_{s in S+alpha} y_{w,g}^s = 1;
         y_{w,g}^s <= x_g^s;  sum_g x_g^s b(g) <= B(s)  (and B(alpha) when given).

Eq. 4 is how §IV-C restates Eq. 1, but subtracting Eq. 2 drops the
worker-to-switch distance D_w(s): Eq. 4 prefers switches far from the PS
whatever the workers' position. ``policy_options.goat.objective: eq1`` solves
Eq. 1 itself (minimise the gradient traffic: sum y D_w(s) + x D_s(alpha), times
b(g)) under the same constraints; ``eq4`` (the paper's algorithm) is the default.

Step 2: for each g, k(g) = floor(sum_{s in S} x~_g^s) -- Alg. 1 line 6 omits
the floor that Eq. 5 and Theorem 1 use; k(g) = 0 means g is aggregated at the
PS only. The positive x~_g^s go into k(g) knapsacks with min-max sum (exact
search up to :data:`EXACT_KNAPSACK_ITEMS` values, else longest-processing-time
first, a 4/3-approximation); in each knapsack a, one switch is drawn with
probability x~_g^s / S_a. S(g) is the set drawn.

Memory repair (beyond the paper, whose Theorem 5 bounds the overflow in
expectation only): while a switch holds more than B(s), its sub-model with
the least LP support x~ leaves it, for the free switch with the most LP
support if one fits, else the PS. ``notes.memory_repairs`` counts the moves.

Step 3: each worker sends g to s in S(g) with probability y~_{w,g}^s / x~_g^s
and to the PS with 1 - sum; when two drawn switches both carry y~ = x~ the
sum exceeds 1 and we normalise (the PS then gets 0).

``roundings`` (default 1, the paper's single draw): with more, the draw with
the best Eq. 4 objective after repair is kept. Randomness comes from the
scenario seed. Every aggregating switch sends its aggregate to the PS (one
level) and gets as many slots as its sub-models have fragments (at most
``switch.slots``); slots are released when the aggregate leaves.

Loss recovery (the paper is silent on it): a switch aggregates its
sub-models "exclusively" (§I), so an incomplete partial has no reason to
leave its slot; ``release: hold`` (the default, ``program.RELEASE_HOLD``)
makes a member's retransmission of it a drop, not a flush to the PS, so
workers that time out while a straggler has not started (§VI's generated
delays with no allowance for them) leave the PS's load unchanged.
``release: emit`` applies ATP's recovery instead (the flush; p4/README.md,
"Slot release modes").

GOAT-Async (§V-C, Alg. 2): from each worker's history interval p_w (time from
parameters out to its gradient in; ``policy_options.goat-async.intervals``,
else one draw of :func:`~testbed.schemes.baselines.estimated_intervals_s`), for
each K in 1..|W| simulate M rounds (``rounds``, default |W| as §V-C suggests):
the round takes h = the K-th smallest estimate; a worker still in flight
(estimate > h; the text's "p_w >= h" would also count the K-th worker as in
flight) carries estimate - h into the next round (the text's "p_w - h_t" read
as the running estimate), the others restart at p_w. H = psi(K) x mean(h) with
psi(K) = 4 K^2 (F(x0) - F*)^2 / (n (eps K - sigma^2)^2) (Eq. 36, n = |W|); the
smallest H wins, ties to the larger K (the "<=" of line 16). The paper gives
no loss values: ``loss_gap`` (F(x0) - F*) defaults to 1, ``epsilon`` to 1 and
``sigma2`` to 0.5, so psi is finite for every K >= 1; K with eps K <= sigma^2
cannot converge and is skipped. ``participants`` are the K fastest workers by
p_w; a switch's fan-in counts its participating workers (K_t^s).
"""

import math

import numpy as np
import pulp

from testbed.dataplane import program
from testbed.errors import InfeasibleError, PlacementError
from testbed.gradient_profiles import fragments_per_submodel
from testbed.schemes import lp
from testbed.schemes.base import JobPlacement, Scheme
from testbed.schemes.baselines import estimated_intervals_s, fastest_workers
from testbed.schemes.common import NetworkView, allowed_switches, options, require_path, rng_for, split_submodels

EXACT_KNAPSACK_ITEMS = 12
SUPPORT_EPS = 1e-9


# --- the pieces of Alg. 1 -------------------------------------------------------------

def knapsack_count(x_values) -> int:
    """k(g) = floor(sum of x~_g^s over switches), with a tolerance for solver round-off."""
    return int(math.floor(sum(x_values) + 1e-7))


def minmax_knapsacks(values, k: int) -> list:
    """Partition item indices into ``k`` bins minimising the largest bin sum; each bin non-empty when possible."""
    n = len(values)
    if k <= 0:
        return []
    order = sorted(range(n), key=lambda i: (-values[i], i))
    bins = [[] for _ in range(k)]
    sums = [0.0] * k
    for i in order:                     # longest processing time first
        b = min(range(k), key=lambda j: (sums[j], j))
        bins[b].append(i)
        sums[b] += values[i]
    if n > EXACT_KNAPSACK_ITEMS:
        return [sorted(b) for b in bins]
    best = [max(sums), [list(b) for b in bins]]
    current = [[] for _ in range(k)]
    totals = [0.0] * k

    def place(pos):
        if pos == n:
            if max(totals) < best[0] - 1e-12 and (n < k or all(current)):
                best[0], best[1] = max(totals), [list(b) for b in current]
            return
        item = order[pos]
        tried = set()
        for b in range(k):
            if totals[b] in tried:      # bins with equal sums are interchangeable
                continue
            tried.add(totals[b])
            if totals[b] + values[item] >= best[0] - 1e-12:
                continue
            current[b].append(item)
            totals[b] += values[item]
            place(pos + 1)
            totals[b] -= values[item]
            current[b].pop()

    place(0)
    return [sorted(b) for b in best[1]]


def draw_switches(x_row: dict, rng) -> list:
    """Step 2 for one sub-model: S(g) from x~_g^s over switches (k(g) knapsacks, one draw per knapsack)."""
    items = [(s, v) for s, v in x_row.items() if v > SUPPORT_EPS]
    k = knapsack_count([v for _, v in items])
    chosen = []
    for knapsack in minmax_knapsacks([v for _, v in items], k):
        if not knapsack:
            continue
        weights = np.array([items[i][1] for i in knapsack])
        pick = knapsack[int(rng.choice(len(knapsack), p=weights / weights.sum()))]
        chosen.append(items[pick][0])
    return chosen


def assignment_probabilities(y_row: dict, x_row: dict, chosen: list, ps: str) -> dict:
    """Step 3 for one (worker, sub-model): p(s) = y~/x~ over S(g), the PS the rest (normalised, sums to 1)."""
    probs = {s: min(1.0, y_row.get(s, 0.0) / x_row[s]) for s in chosen if x_row.get(s, 0.0) > SUPPORT_EPS}
    total = sum(probs.values())
    if total > 1.0:
        probs = {s: p / total for s, p in probs.items()}
        total = 1.0
    probs[ps] = probs.get(ps, 0.0) + max(0.0, 1.0 - total)
    return probs


# --- Step 1: the LP --------------------------------------------------------------------

def _memory(job, scenario):
    lanes = scenario.switch.lanes
    fragments = fragments_per_submodel(job.submodel_elements, lanes)
    size = [n * lanes * 4 for n in fragments]
    return fragments, size, scenario.switch.slots * lanes * 4


def krgs_lp(job, scenario, net, switches, owner, objective="eq4", solver="auto",
            time_limit_s=lp.DEFAULT_TIME_LIMIT_S, scheme="goat"):
    """Solve the relaxation; returns (x~ {g: {node: v}}, y~ {(w, g): {node: v}}, SolveRecord, objective)."""
    fragments, size, switch_memory = _memory(job, scenario)
    ps_memory = job.ps_memory_bytes
    total = sum(size)
    if ps_memory > 0:
        largest = max(size)
        if largest > max(switch_memory, ps_memory):
            raise InfeasibleError(f"{scheme}: job {job.name}: sub-model of {largest} B fits neither a switch "
                                  f"({switch_memory} B) nor the PS ({ps_memory:.0f} B)")
        if total > switch_memory * len(switches) + ps_memory:
            raise InfeasibleError(f"{scheme}: job {job.name}: model of {total} B exceeds the memory of its "
                                  f"{len(switches)} switches and the PS ({switch_memory * len(switches)} B + "
                                  f"{ps_memory:.0f} B)")
    unit = float(max(size))
    dist_ps = {}
    for g, ps in owner.items():
        for s in switches:
            d = net.hops(s, ps)
            if d is not None:
                dist_ps[(s, ps)] = d
    prob = pulp.LpProblem(f"{scheme}_krgs", pulp.LpMaximize)
    x, y = {}, {}
    terms = []
    for g, ps in owner.items():
        nodes = [s for s in switches if (s, ps) in dist_ps] + [ps]
        b = size[g] / unit
        for n in nodes:
            x[(g, n)] = lp.variable(prob, f"x_{g}_{n}", 0, 1)
        prob += pulp.lpSum(x[(g, n)] for n in nodes) >= 1, f"cover_{g}"
        for w in job.workers:
            require_path(net, scheme, job, w, ps)
            reach = [n for n in nodes if net.hops(w, n) is not None]
            for n in reach:
                y[(w, g, n)] = lp.variable(prob, f"y_{w}_{g}_{n}", 0, 1)
                prob += y[(w, g, n)] <= x[(g, n)]
            prob += pulp.lpSum(y[(w, g, n)] for n in reach) == 1, f"one_{w}_{g}"
            if objective == "eq1":
                terms.extend((y[(w, g, n)], -net.hops(w, n) * b) for n in reach)
            else:
                terms.extend((y[(w, g, n)], dist_ps[(n, ps)] * b) for n in reach if n != ps)
        terms.extend((x[(g, n)], -dist_ps[(n, ps)] * b) for n in nodes if n != ps)   # both objectives
    prob += pulp.LpAffineExpression(terms)
    for s in switches:
        prob += pulp.lpSum(x[(g, s)] * (size[g] / unit) for g in owner if (g, s) in x) <= switch_memory / unit
    if ps_memory > 0:
        for ps in sorted(set(owner.values())):
            prob += pulp.lpSum(x[(g, ps)] * (size[g] / unit) for g in owner if owner[g] == ps) <= ps_memory / unit
    record = lp.solve(prob, scheme, f"the KRGS relaxation of job {job.name}", solver, time_limit_s)
    x_val = {}
    for (g, n), var in x.items():
        x_val.setdefault(g, {})[n] = lp.value(var)
    y_val = {}
    for (w, g, n), var in y.items():
        y_val.setdefault((w, g), {})[n] = lp.value(var)
    return x_val, y_val, record, lp.value(prob.objective) * unit


def _eq4_value(job, net, owner, size, first_hop):
    value = 0.0
    for g, ps in owner.items():
        used = {}
        for w in job.workers:
            node = first_hop[w][g]
            if node != ps:
                used[node] = used.get(node, 0) + 1
        value += sum((n - 1) * net.hops(s, ps) * size[g] for s, n in used.items())
    return value


def _repair_memory(chosen, x_val, size, switch_memory, owner):
    """Move sub-models off over-full switches (least LP support first) to a free switch or the PS."""
    moves = 0
    load = {}
    for g, nodes in chosen.items():
        for s in nodes:
            load[s] = load.get(s, 0) + size[g]
    for s in sorted(load):
        while load[s] > switch_memory:
            held = [g for g, nodes in chosen.items() if s in nodes]
            g = min(held, key=lambda g: (x_val[g].get(s, 0.0), -size[g], g))
            chosen[g].remove(s)
            load[s] -= size[g]
            moves += 1
            spare = [t for t in x_val[g] if t != owner[g] and t not in chosen[g]
                     and load.get(t, 0) + size[g] <= switch_memory]
            if spare:
                t = max(spare, key=lambda t: (x_val[g][t], t))
                chosen[g].append(t)
                load[t] = load.get(t, 0) + size[g]
    return moves


def krgs(job, scenario, scheme="goat"):
    """Alg. 1: returns the JobPlacement (one-level trees toward the PS)."""
    opts = options(job, scheme)
    net = NetworkView(scenario)
    switches = allowed_switches(job, scenario.topology, scheme)
    owner = split_submodels(job)
    fragments, size, switch_memory = _memory(job, scenario)
    x_val, y_val, record, lp_objective = krgs_lp(
        job, scenario, net, switches, owner, opts.get("objective", "eq4"), opts.get("solver", "auto"),
        opts.get("time_limit_s", lp.DEFAULT_TIME_LIMIT_S), scheme)
    rng = rng_for(scenario, job, scheme)
    best = None
    for _ in range(max(1, opts.get("roundings", 1))):
        chosen, ks = {}, {}
        for g, ps in owner.items():
            row = {s: v for s, v in x_val[g].items() if s != ps}
            ks[g] = knapsack_count([v for v in row.values() if v > SUPPORT_EPS])
            chosen[g] = draw_switches(row, rng)
        repairs = _repair_memory(chosen, x_val, size, switch_memory, owner)
        first_hop = {w: {} for w in job.workers}
        for w in job.workers:
            for g, ps in owner.items():
                probs = assignment_probabilities(y_val.get((w, g), {}), x_val[g], chosen[g], ps)
                nodes = sorted(probs)
                weights = np.array([probs[n] for n in nodes])
                first_hop[w][g] = nodes[int(rng.choice(len(nodes), p=weights / weights.sum()))]
        value = _eq4_value(job, net, owner, size, first_hop)
        if best is None or value > best[0]:
            best = (value, first_hop, ks, repairs, chosen)
    value, first_hop, ks, repairs, chosen = best
    next_hop, slots = {}, {}
    for w, hops in first_hop.items():
        for g, node in hops.items():
            if node != owner[g]:
                next_hop.setdefault(node, {})[g] = owner[g]
    for s, hops in next_hop.items():
        slots[s] = min(scenario.switch.slots, sum(fragments[g] for g in hops))
    if job.ps_memory_bytes > 0:
        for ps in sorted(set(owner.values())):
            held = sum(size[g] for g in owner if owner[g] == ps and any(first_hop[w][g] == ps for w in job.workers))
            if held > job.ps_memory_bytes:
                raise InfeasibleError(f"{scheme}: job {job.name}: after rounding the PS {ps} must hold {held} B, "
                                      f"more than its {job.ps_memory_bytes:.0f} B (ps_memory)")
    notes = {**record.as_notes(), "solver": record.solver, "solve_s": record.solve_s,
             "objective": opts.get("objective", "eq4"), "lp_objective_bytes_hops": lp_objective,
             "rounded_eq4_bytes_hops": value, "k_per_submodel": ks, "memory_repairs": repairs,
             "switches_per_submodel": {g: sorted(v) for g, v in chosen.items()},
             "roundings": max(1, opts.get("roundings", 1)), "seed": scenario.seed}
    release = program.RELEASE_HOLD if opts.get("release", "hold") == "hold" else program.RELEASE_ON_EMIT
    return JobPlacement(job.name, scheme, owner, first_hop, next_hop, slots=slots, release_mode=release, notes=notes)


def goat_placement(job, scenario) -> JobPlacement:
    return krgs(job, scenario, "goat")


# --- GOAT-Async: Alg. 2 ----------------------------------------------------------------

def psi(k: int, workers: int, loss_gap: float = 1.0, epsilon: float = 1.0, sigma2: float = 0.5) -> float:
    """Eq. 36: epochs needed with K_m = k participants (inf when eps k <= sigma^2)."""
    margin = epsilon * k - sigma2
    if margin <= 0:
        return math.inf
    return 4.0 * k * k * loss_gap * loss_gap / (workers * margin * margin)


def mean_round_time(intervals, k: int, rounds: int) -> float:
    """Alg. 2 lines 3-12: the mean of h over ``rounds`` simulated rounds when the PS takes the k fastest."""
    history = list(intervals)
    estimate = list(intervals)
    total = 0.0
    for _ in range(rounds):
        h = sorted(estimate)[k - 1]
        total += h
        estimate = [e - h if e > h else p for e, p in zip(estimate, history)]
    return total / rounds


def search_participants(intervals, rounds: int = None, loss_gap=1.0, epsilon=1.0, sigma2=0.5):
    """Alg. 2: (K minimising psi(K) x mean round time, table of (K, H))."""
    n = len(intervals)
    if n == 0:
        raise PlacementError("goat-async: no workers")
    rounds = rounds or n
    best, table = None, []
    for k in range(1, n + 1):
        epochs = psi(k, n, loss_gap, epsilon, sigma2)
        if math.isinf(epochs):
            continue
        total = epochs * mean_round_time(intervals, k, rounds)
        table.append((k, total))
        if best is None or total <= best[1]:
            best = (k, total)
    if best is None:
        raise PlacementError(f"goat-async: epsilon x K <= sigma2 for every K <= {n}; no participant count converges "
                          f"(policy_options.goat-async.epsilon / sigma2)")
    return best[0], table


def goat_async_placement(job, scenario) -> JobPlacement:
    opts = options(job, "goat-async")
    jp = krgs(job, scenario, "goat-async")
    intervals = opts.get("intervals_s") or estimated_intervals_s(job, scenario,
                                                                 rng_for(scenario, job, "goat-async/history"))
    missing = [w for w in job.workers if w not in intervals]
    if missing:
        raise PlacementError(f"goat-async: job {job.name}: policy_options.goat-async.intervals has no entry "
                          f"for worker {missing[0]}")
    k, table = search_participants([intervals[w] for w in job.workers], opts.get("rounds"),
                                   opts.get("loss_gap", 1.0), opts.get("epsilon", 1.0), opts.get("sigma2", 0.5))
    jp.participants = fastest_workers(job, intervals, k)
    jp.notes.update({"k": k, "intervals_s": dict(intervals), "k_search": table})
    return jp


#: KRGS's ``policy_options`` (GOAT §V): the LP's objective, its roundings, how a held partial goes on.
KRGS_OPTIONS = {"objective": ("choice", ("eq4", "eq1")), "roundings": ("int", 1, 1000),
                "release": ("choice", ("hold", "emit")), **lp.LP_OPTIONS}
#: This family's schemes and the ``policy_options`` each takes.
SCHEMES = (
    Scheme("goat", goat_placement, dict(KRGS_OPTIONS)),
    Scheme("goat-async", goat_async_placement, {**KRGS_OPTIONS, "intervals": ("worker_durations",),
                                             "rounds": ("int", 1, 100000), "loss_gap": ("number", 0, None),
                                             "epsilon": ("number", 0, None), "sigma2": ("number", 0, None)}),
)
