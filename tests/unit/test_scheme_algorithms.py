"""The pieces of the control-plane algorithms, and the invariants every scheme's placement keeps."""

import math
import textwrap

import numpy as np
import pytest
from support import ATP_CHAIN_TOPOLOGY

from testbed import controller
from testbed.dataplane import program
from testbed.dataplane.entries import validate_entry
from testbed.errors import PlacementError, ScenarioError
from testbed.schemes import SCHEMES, Placement, compute_placement
from testbed.schemes import goat, inart, routing_lp
from testbed.schemes.baselines import min_min_split
from testbed.schemes.common import NetworkView, allowed_switches, ps_shares, realize_split, split_submodels
from testbed.scenario import RING_SCHEMES, parse_scenario

TWO_RACKS = textwrap.dedent("""\
    version: 1
    scale: 1
    seed: 7
    topology:
      kind: explicit
      link_rate: 10Gbps
      switches: [t1, t2, c1]
      hosts: [w1, w2, w3, w4, p1, p2]
      links: [[w1, t1], [w2, t1], [w3, t2], [w4, t2], [p1, c1], [p2, c1], [t1, c1], [t2, c1], [t1, t2]]
    switch: {aggregation_capacity: 10Gbps, slots: 64}
    jobs:
      - name: j
        workers: [w1, w2, w3, w4]
        ps: [p1, p2]
        policy: ps
        submodel_elements: [640, 640, 1280, 640]
        window: 8
    """)


def scenario_with(scheme, text=TWO_RACKS, *overrides):
    return parse_scenario(text, "t.yaml", [f"policy={scheme}", *overrides])


# --- registry ------------------------------------------------------------------------------------

def test_the_registry_holds_every_scheme_of_the_papers_and_the_checker_reads_it():
    assert list(SCHEMES) == ["ps", "atp", "switchml", "esa", "geryon", "lbmm", "ksgd", "goat", "goat-async",
                             "grid", "inart", "inart-equal", "rar", "h-ar", "rina"]
    assert [name for name, scheme in SCHEMES.items() if scheme.ring] == list(RING_SCHEMES) == ["rar", "h-ar", "rina"]
    with pytest.raises(ScenarioError, match="expected one of ps, atp, switchml"):
        scenario_with("nosuch")
    with pytest.raises(ScenarioError, match="roundings"):          # an option the scheme declares, out of bounds
        scenario_with("goat", TWO_RACKS, "jobs.0.policy_options.goat.roundings=0")


# Ring schemes have no PS (tests/unit/test_ring.py).
@pytest.mark.parametrize("name", sorted(set(SCHEMES) - {"switchml"} - set(RING_SCHEMES)))
def test_every_scheme_yields_a_valid_controller_plan_and_round_trips_json(name):
    scenario = scenario_with(name)
    placement = compute_placement(scenario)
    job = placement.jobs["j"]
    owners = set(job.ps_of_submodel.values())
    programmable = {s.name for s in scenario.topology.programmable_switches()}
    for w, hops in job.first_hop.items():
        assert set(hops) == set(job.ps_of_submodel)
        for g, node in hops.items():
            assert node in programmable or node == job.ps_of_submodel[g]
    for sw, hops in job.next_hop.items():       # every chain ends at the sub-model's PS
        assert sw in job.slots and job.slots[sw] > 0
        for g in hops:
            node, seen = sw, set()
            while node not in owners:
                assert node not in seen
                seen.add(node)
                node = job.next_hop[node][g]
            assert node == job.ps_of_submodel[g]
    again = Placement.from_json(placement.to_json())
    assert again.to_json() == placement.to_json()
    plan = controller.control_plan(scenario, again)
    for config in plan.switches.values():
        for entry in config.entries:
            validate_entry(entry)


def test_schemes_are_deterministic_for_a_seed():
    def decisions(placement):
        job = placement.jobs["j"]
        return (job.ps_of_submodel, job.first_hop, job.next_hop, job.bypass_hop, job.paths, job.slots,
                job.participants)

    for name in ("goat", "goat-async", "grid", "inart", "atp"):
        assert decisions(compute_placement(scenario_with(name))) == decisions(compute_placement(scenario_with(name)))
    # Another seed may round differently, but stays a valid policy.
    compute_placement(scenario_with("grid", TWO_RACKS.replace("seed: 7", "seed: 8")))


# --- GOAT KRGS ------------------------------------------------------------------------------------

@pytest.mark.parametrize("values, expected", [
    ([0.5, 0.4], 0),              # k(g) = 0: the PS aggregates g
    ([0.6, 0.7], 1),              # 1.3 -> 1 (Alg. 1 line 6 without the floor would say 1.3)
    ([1.0, 1.0, 0.999999999], 3),  # round-off of the solver does not lose a knapsack
    ([0.9, 0.9, 0.9], 2),
])
def test_knapsack_count_is_the_floor_of_the_sum(values, expected):
    assert goat.knapsack_count(values) == expected


def test_minmax_knapsacks_minimise_the_largest_sum():
    values = [0.9, 0.6, 0.5, 0.4, 0.3]
    bins = goat.minmax_knapsacks(values, 2)
    assert sorted(i for b in bins for i in b) == list(range(5))
    assert max(sum(values[i] for i in b) for b in bins) == pytest.approx(1.4)
    # Lemma 3: with k(g) = floor(sum), every knapsack sums to more than 0.5.
    values = [0.8, 0.7, 0.3, 0.3, 0.2]
    bins = goat.minmax_knapsacks(values, goat.knapsack_count(values))
    assert len(bins) == 2 and all(sum(values[i] for i in b) > 0.5 for b in bins)
    # Exact search beats longest-processing-time first here (LPT gives 7 + 5 vs 6 + 6).
    values = [3, 3, 2, 2, 2]
    assert max(sum(values[i] for i in b) for b in goat.minmax_knapsacks(values, 2)) == 6


def test_minmax_knapsacks_large_inputs_use_lpt():
    rng = np.random.default_rng(1)
    values = list(rng.uniform(0.05, 1.0, 40))
    bins = goat.minmax_knapsacks(values, 5)
    sums = [sum(values[i] for i in b) for b in bins]
    assert max(sums) <= sum(values) / 5 + max(values)


def test_draw_switches_takes_one_switch_per_knapsack():
    rng = np.random.default_rng(3)
    row = {"s1": 0.7, "s2": 0.6, "s3": 0.4, "s4": 0.3}
    for _ in range(20):
        chosen = goat.draw_switches(row, rng)
        assert len(chosen) == 2 and len(set(chosen)) == 2
    assert goat.draw_switches({"s1": 0.4, "s2": 0.3}, rng) == []


@pytest.mark.parametrize("y_row, x_row, chosen", [
    ({"s1": 0.3, "s2": 0.2, "ps": 0.5}, {"s1": 0.6, "s2": 0.4, "ps": 1.0}, ["s1"]),
    ({"s1": 0.5, "s2": 0.5}, {"s1": 0.5, "s2": 0.5, "ps": 1.0}, ["s1", "s2"]),   # sum y/x = 2: normalised
    ({"ps": 1.0}, {"s1": 0.2, "ps": 1.0}, []),
])
def test_assignment_probabilities_sum_to_one(y_row, x_row, chosen):
    probs = goat.assignment_probabilities(y_row, x_row, chosen, "ps")
    assert sum(probs.values()) == pytest.approx(1.0)
    assert all(p >= 0 for p in probs.values())
    assert set(probs) <= set(chosen) | {"ps"}


def test_krgs_respects_switch_memory_after_rounding():
    text = TWO_RACKS.replace("slots: 64", "slots: 25")        # 25 fragments per switch
    scenario = scenario_with("goat", text)
    job = compute_placement(scenario).jobs["j"]
    fragments = {0: 10, 1: 10, 2: 20, 3: 10}
    for sw, hops in job.next_hop.items():
        assert sum(fragments[g] for g in hops) <= 25
    assert job.notes["solver"] and job.notes["solve_s"] >= 0


def test_goat_eq1_objective_prefers_switches_near_the_workers():
    job = compute_placement(scenario_with("goat", TWO_RACKS, "jobs.0.policy_options.goat.objective=eq1")).jobs["j"]
    assert {job.first_hop["w1"][0], job.first_hop["w3"][0]} <= {"t1", "t2", "c1"}
    assert job.notes["objective"] == "eq1"


@pytest.mark.parametrize("scheme, depth", [("ps", 1), ("goat", 2), ("atp", 3)])
def test_aggregation_depth_counts_the_nodes_a_gradient_passes_up_to_its_ps(scheme, depth):
    """PS: the PS alone; GOAT: one switch, then the PS; ATP: the ToR, the level-2 switch, the PS."""
    assert compute_placement(scenario_with(scheme, TWO_RACKS)).jobs["j"].aggregation_depth() == depth


@pytest.mark.parametrize("scheme", ["goat", "goat-async"])
def test_goat_switches_hold_their_partials_unless_told_to_flush_them(scheme):
    assert compute_placement(scenario_with(scheme, TWO_RACKS)).jobs["j"].release_mode == program.RELEASE_HOLD
    job = compute_placement(scenario_with(scheme, TWO_RACKS, f"jobs.0.policy_options.{scheme}.release=emit")).jobs["j"]
    assert job.release_mode == program.RELEASE_ON_EMIT


# --- GOAT-Async -------------------------------------------------------------------------------------

def test_goat_async_search_leaves_a_slow_straggler_out():
    k, table = goat.search_participants([1.0, 1.0, 1.0, 10.0])
    assert k == 3
    assert dict(table)[3] < dict(table)[4]


def test_goat_async_search_keeps_everyone_when_nobody_straggles():
    k, _ = goat.search_participants([2.0] * 6)
    assert k == 6


def test_mean_round_time_carries_the_stragglers_remaining_time():
    # K = 1 of [1, 3]: rounds take 1 each; the slow worker's estimate 3 -> 2 -> 1 -> 3 ...
    assert goat.mean_round_time([1.0, 3.0], 1, 3) == pytest.approx(1.0)
    assert goat.mean_round_time([1.0, 3.0], 2, 2) == pytest.approx(3.0)


def test_psi_is_infinite_when_k_cannot_converge():
    assert math.isinf(goat.psi(1, 4, epsilon=0.5, sigma2=0.5))
    assert goat.psi(4, 4) < goat.psi(2, 4)


def test_goat_async_takes_the_k_fastest_as_participants():
    text = TWO_RACKS + "    policy_options: {goat-async: {intervals: {w1: 1s, w2: 1s, w3: 1s, w4: 30s}}}\n"
    job = compute_placement(scenario_with("goat-async", text)).jobs["j"]
    assert job.participants == ["w1", "w2", "w3"]
    assert job.notes["k"] == 3
    for sw in job.next_hop:                    # K_t^s: a switch waits for its participating workers only
        for g in job.next_hop[sw]:
            assert job.fanin(g, sw) == len(job.workers_behind(g, sw))
            assert "w4" not in job.workers_behind(g, sw)


def test_ksgd_takes_k_fastest_workers():
    text = TWO_RACKS + "    policy_options: {ksgd: {k: 2, intervals: {w1: 3s, w2: 1s, w3: 2s, w4: 9s}}}\n"
    job = compute_placement(scenario_with("ksgd", text)).jobs["j"]
    assert job.participants == ["w2", "w3"]
    assert not job.next_hop


# --- GRID / R-InArt rounding ---------------------------------------------------------------------------

def test_routing_rounding_probabilities_sum_to_one_per_flow():
    scenario = scenario_with("grid")
    job = scenario.jobs[0]
    net = NetworkView(scenario)
    owner = split_submodels(job)
    problem = routing_lp.build_problem(net, job, scenario, "grid", owner, ps_shares(job, owner),
                                       allowed_switches(job, scenario.topology, "grid"), 3)
    solution = routing_lp.solve_lp(problem, "grid", "auto", 30)
    for flow in problem.flows:
        probs = routing_lp.rounding_probabilities(problem, solution, flow)
        assert sum(probs) == pytest.approx(1.0)
        # Each flow's option rates add up to its demand x_s f (the substitution is exact).
        assert sum(solution.option_rates[flow]) == pytest.approx(problem.share[flow[0]] * solution.rate_bps,
                                                                rel=1e-6)


def test_grid_notes_record_solver_lp_optimum_and_final_rate():
    job = compute_placement(scenario_with("grid")).jobs["j"]
    notes = job.notes
    assert notes["solver"] in ("HiGHS (ipm)", "CBC")
    assert notes["lp_status"] == "Optimal"
    assert 0 < notes["predicted_rate_bps"] <= notes["lp_rate_bps"] * (1 + 1e-9)


# --- InArt -----------------------------------------------------------------------------------------------

def test_l_inart_split_is_a_distribution_over_the_pss():
    scenario = scenario_with("inart")
    job = scenario.jobs[0]
    split, rate, records = inart.l_inart_split(job, scenario, allowed_switches(job, scenario.topology, "inart"))
    assert sum(split.values()) == pytest.approx(1.0)
    assert all(0 <= x <= 1 for x in split.values())
    assert rate > 0 and records[0].status == "Optimal"


def test_realize_split_and_neighbours():
    job = scenario_with("inart").jobs[0]
    owner = realize_split(job, {"p1": 0.6, "p2": 0.4})
    assert ps_shares(job, owner) == pytest.approx({"p1": 0.6, "p2": 0.4})
    splits = [ps_shares(job, o) for o in inart.neighbour_splits(job, owner)]
    assert {round(s["p1"], 6) for s in splits} == {0.4, 0.8}  # the smallest sub-model moved either way
    assert all(set(o.values()) == {"p1", "p2"} for o in inart.neighbour_splits(job, owner))


def test_min_min_balances_by_ps_ingress():
    job = scenario_with("lbmm").jobs[0]
    owner = min_min_split(job, {"p1": 10e9, "p2": 10e9})
    assert ps_shares(job, owner) == pytest.approx({"p1": 0.6, "p2": 0.4}) or \
        ps_shares(job, owner) == pytest.approx({"p1": 0.4, "p2": 0.6})
    owner = min_min_split(job, {"p1": 30e9, "p2": 10e9})
    assert ps_shares(job, owner)["p1"] >= 0.6


# --- ATP ----------------------------------------------------------------------------------------------------

def test_atp_two_levels_aggregate_partial_aggregates_and_overflow_near_the_ps():
    job = compute_placement(scenario_with("atp")).jobs["j"]
    assert job.first_hop["w1"][0] == "t1" and job.first_hop["w3"][0] == "t2"
    assert job.next_hop["t1"][0] == "c1" and job.next_hop["c1"][0] == "p1"
    assert job.bypass_hop["t1"][0] == "c1"
    # Fan-in counts workers: c1 waits for all four behind t1 and t2; the PS for its one stream.
    assert job.fanin(0, "t1") == 2 and job.fanin(0, "c1") == 4 and job.fanin(0, "p1") == 1


def test_atp_one_level_sends_aggregates_straight_to_the_ps():
    job = compute_placement(scenario_with("atp", TWO_RACKS, "jobs.0.policy_options.atp.levels=1")).jobs["j"]
    assert job.next_hop["t1"][0] == "p1" and not job.bypass_hop
    assert job.fanin(0, "p1") == 2


CHAIN = "version: 1\nscale: 1\n" + ATP_CHAIN_TOPOLOGY + textwrap.dedent("""\
    jobs:
      - {name: j, workers: [w1, w2, w3, w4], ps: [p1], policy: atp, gradient_size: 1MB}
    """)


def test_atp_every_level_aggregates_at_each_programmable_switch_on_the_way():
    """Two levels skip a1 (level 2 is the switch nearest the PS); every level chains t1, t2 -> a1 -> c1 -> p1, an
    INA switch and the workers behind it one worker to the next (Rina §III-B, Lemma 2)."""
    two = compute_placement(scenario_with("atp", CHAIN)).jobs["j"]
    assert two.next_hop["t1"][0] == two.next_hop["t2"][0] == "c1" and "a1" not in two.next_hop
    every = compute_placement(scenario_with("atp", CHAIN, "jobs.0.policy_options.atp.levels=all")).jobs["j"]
    assert {sw: hops[0] for sw, hops in every.next_hop.items()} == {"t1": "a1", "t2": "a1", "a1": "c1", "c1": "p1"}
    assert {sw: set(hops.values()) for sw, hops in every.bypass_hop.items()} == {"t1": {"a1"}, "t2": {"a1"}}
    assert [every.fanin(0, n) for n in ("t1", "a1", "c1", "p1")] == [2, 4, 4, 1]
    assert every.aggregation_depth() == 4 and two.aggregation_depth() == 3
    with pytest.raises(PlacementError, match="admission flow takes levels 1 or 2, not all"):
        compute_placement(scenario_with("atp", CHAIN, "jobs.0.policy_options.atp={levels: all, admission: flow}"))


def test_switchml_needs_one_rack():
    text = TWO_RACKS.replace("[w3, t2], [w4, t2]", "[w3, t1], [w4, t1]")
    job = compute_placement(scenario_with("switchml", text)).jobs["j"]
    assert set(job.next_hop) == {"t1"} and job.collision == "wait"
    with pytest.raises(PlacementError, match="single rack"):
        compute_placement(scenario_with("switchml"))


def test_switchml_takes_two_shadow_copies_per_pool_slot_and_the_controller_says_so():
    """SwitchML §3: a pool of s slots, two copies each: the range at the switch is 2s, the workers' window
    at most s, each worker told the pool; RESULTs mark the copy resulted (ina_shadow_result)."""
    text = TWO_RACKS.replace("[w3, t2], [w4, t2]", "[w3, t1], [w4, t1]")
    scenario = scenario_with("switchml", text, "jobs.0.policy_options.switchml.pool=6")
    placement = compute_placement(scenario)
    job = placement.jobs["j"]
    assert job.slots == {"t1": 12} and job.release_mode == program.RELEASE_SHADOW and job.notes["pool"] == 6
    plan = controller.control_plan(scenario, placement)
    workers = [a for a in plan.agents if a.role == "worker"]
    assert {(p.shadow_pool, p.slot_count) for a in workers for p in a.submodels} == {(6, 12)}
    assert {a.window for a in workers} == {min(6, scenario.jobs[0].window)}
    results = [e for e in plan.switches["t1"].entries if e.table == "ina_result"]
    assert results and {e.action for e in results} == {"ina_shadow_result"}
    assert all(dict(e.params)["pool"] == 6 for e in results)
    # The pool is at most half the switch's slots.
    small = scenario_with("switchml", text, "switch.slots=8", "jobs.0.policy_options.switchml.pool=6")
    assert compute_placement(small).jobs["j"].slots == {"t1": 8}
