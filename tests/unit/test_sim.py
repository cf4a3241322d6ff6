"""The flow-level simulator: fluid rates, fragment counts, the result's schema and its table."""

import json
import textwrap
from pathlib import Path

import pytest

from testbed import controller, sim
from testbed.schemes import compute_placement
from testbed.errors import ScenarioError
from testbed.scenario import load_scenario, parse_scenario
from testbed.sim.fragments import FragmentModel
from testbed.sim.routes import Routes
from testbed.dataplane.wire import ina_frame_bytes

PA_ATP_FIDELITY = Path(__file__).resolve().parents[2] / "scenarios" / "papers" / "pa-atp" / "fidelity.yaml"

STAR = textwrap.dedent("""\
    version: 1
    scale: 1
    topology:
      kind: explicit
      link_rate: 10Gbps
      switches: [s1]
      hosts: [w1, w2, w3, w4, ps]
      links: [[w1, s1], [w2, s1], [w3, s1], [w4, s1], [ps, s1]]
    switch: {slots: 64}
    jobs:
      - name: j
        workers: [w1, w2, w3, w4]
        ps: ps
        policy: ps
        submodel_elements: [640, 1280]
        window: 8
    """)
KEYS = {"min_sending_rate_bps", "worker_sending_rate_bps", "ps_ingress_fragments", "ps_ingress_bytes",
        "switch_egress_fragments", "communication_overhead_bytes", "ina_amount_bytes", "switch_load", "solve_s"}


def run(text, *overrides):
    scenario = parse_scenario(text, "t.yaml", overrides)
    return sim.evaluate(scenario, compute_placement(scenario))


def test_result_has_the_documented_keys_and_is_json():
    result = run(STAR)
    assert KEYS <= set(result)
    json.dumps(result)
    assert result["fragment_model"] == "event"


def test_without_ina_the_ps_link_is_shared():
    result = run(STAR)
    assert result["min_sending_rate_bps"] == pytest.approx(2.5e9, rel=1e-9)
    assert result["bottleneck_links"] == ["ps>s1", "s1>ps"]     # the push in, and the RESULTs out by unicast
    assert result["ps_ingress_fragments"] == 4 * 30 and result["ina_amount_bytes"] == 0
    push_only = run(STAR + "simulation: {results: false}\n")
    assert push_only["bottleneck_links"] == ["s1>ps"] and push_only["min_sending_rate_bps"] == pytest.approx(2.5e9)


def test_multicast_results_share_links_with_gradients_in_the_same_direction():
    # The PS sits behind s2; w1 and w2 behind s1, where ATP aggregates; w3 behind s2 with the PS, so the
    # RESULT tree (s2 -> s1, s2 -> w3) is the push's opposite except the s2 -> w3 link, which carries
    # RESULTs only: every link still fits the rate at 10 Gb/s per worker.
    text = STAR.replace("hosts: [w1, w2, w3, w4, ps]", "hosts: [w1, w2, w3, ps]").replace(
        "switches: [s1]", "switches: [s1, s2]").replace(
        "links: [[w1, s1], [w2, s1], [w3, s1], [w4, s1], [ps, s1]]",
        "links: [[w1, s1], [w2, s1], [w3, s1], [s1, s2], [ps, s2]]").replace("workers: [w1, w2, w3, w4]",
                                                                           "workers: [w1, w2, w3]")
    result = run(text, "policy=atp")
    assert result["min_sending_rate_bps"] == pytest.approx(10e9, rel=1e-9)
    loads = result["link_load"]
    assert loads["s2>s1"]["load_bps"] == pytest.approx(10e9, rel=1e-9)     # one RESULT stream down the tree
    assert loads["s1>w1"]["load_bps"] == pytest.approx(10e9, rel=1e-9)


def test_aggregation_counts_once_downstream():
    result = run(STAR, "policy=atp")
    assert result["min_sending_rate_bps"] == pytest.approx(10e9, rel=1e-9)
    assert result["ps_ingress_rate_bps"]["ps"] == pytest.approx(10e9, rel=1e-9)
    assert result["ps_ingress_fragments"] == 30
    assert result["switch_egress_fragments"] == 30
    assert result["ina_amount_bytes"] == 3 * 30 * ina_frame_bytes(64)


def test_capacity_overflow_is_best_effort():
    # 8 Gb/s of aggregation for 4 workers: 2 Gb/s each aggregated, the rest bypasses on the PS link:
    # PS link: 2 + 4 (r - 2) <= 10  ->  r = 4 Gb/s.
    result = run(STAR.replace("switch: {slots: 64}", "switch: {slots: 64, aggregation_capacity: 8Gbps}"),
                 "policy=atp")
    assert result["min_sending_rate_bps"] == pytest.approx(4e9, rel=1e-9)
    load = result["switch_load"]["s1"]
    assert load["load_bps"] == pytest.approx(8e9) and load["offered_bps"] == pytest.approx(16e9)


def test_max_min_rates_let_unconstrained_workers_go_faster():
    text = STAR.replace("[w4, s1]", "[w4, s1, 1Gbps]")
    result = run(text)
    rates = result["worker_sending_rate_bps"]
    assert result["min_sending_rate_bps"] == pytest.approx(1e9, rel=1e-9)
    assert rates["w1"] == pytest.approx(3e9, rel=1e-9)      # (10 - 1) / 3


def test_event_and_analytic_fragment_counts_agree_without_collisions():
    scenario = parse_scenario(STAR, "t.yaml", ["policy=atp"])
    placement = compute_placement(scenario)
    model = FragmentModel(scenario, placement, Routes(scenario.topology, placement))
    event, analytic = model.run(), model.analytic()
    assert event["switch_egress"] == analytic["switch_egress"]
    assert event["ps_ingress"] == analytic["ps_ingress"]


def test_large_runs_fall_back_to_the_analytic_count():
    result = run(STAR + "simulation: {max_fragment_events: 10}\n", "policy=atp")
    assert result["fragment_model"].startswith("analytic")
    assert result["ps_ingress_fragments"] == 30


def test_collisions_bypass_to_the_ps():
    # One slot, four in-step workers: each fragment's contributions arrive together, so nothing collides;
    # with W2, W4 late by two fragments, fragments collide and bypass.
    one_slot = STAR.replace("switch: {slots: 64}", "switch: {slots: 1}").replace("window: 8", "window: 1")
    emit = "jobs.0.policy_options={atp: {release: emit}}"
    assert run(one_slot, "policy=atp", emit)["ps_ingress_fragments"] == 30
    late = run(one_slot + "simulation: {worker_start: {w2: 2, w4: 2}}\n", "policy=atp", emit)
    assert late["ps_ingress_fragments"] > 30


def test_host_link_pacing_lets_a_fast_worker_run_slots_ahead_of_a_slow_one():
    # GOAT §VII-D's open-loop senders: W2 at half W1's rate sends a fragment every 2 time units, so W1's
    # fragment k + 4 reaches a 4-slot switch while fragment k still waits there for W2: it bypasses.
    slow = STAR.replace("switch: {slots: 64}", "switch: {slots: 4}").replace("window: 8", "window: 4") \
        .replace("[w2, s1],", "[w2, s1, 5Gbps],")
    emit = "jobs.0.policy_options={atp: {release: emit}}"
    assert run(slow, "policy=atp", emit)["ps_ingress_fragments"] == 30                     # in lockstep
    paced = run(slow + "simulation: {worker_pacing: host_link}\n", "policy=atp", emit)
    assert paced["ps_ingress_fragments"] > 30 and paced["fragment_model"] != "analytic (no collisions)"
    equal = run(STAR + "simulation: {worker_pacing: host_link}\n", "policy=atp", emit)
    assert equal["ps_ingress_fragments"] == 30                                             # equal links: 1 each
    scenario = parse_scenario(slow + "simulation: {worker_pacing: host_link}\n", "t.yaml", ["policy=atp"])
    placement = compute_placement(scenario)
    gaps = FragmentModel(scenario, placement, Routes(scenario.topology, placement)).send_gaps()
    assert gaps == {"w1": 1.0, "w2": 2.0, "w3": 1.0, "w4": 1.0}
    with pytest.raises(ScenarioError, match="simulation.worker_pacing"):
        parse_scenario(STAR + "simulation: {worker_pacing: rate}\n", "t.yaml")


def test_format_simulation_prints_rates_and_counts():
    text = sim.format_simulation(run(STAR, "policy=atp"))
    assert "minimum sending rate" in text and "10 Gb/s" in text
    assert "PS ingress             30 fragments" in text
    assert "s1" in text and "w4" in text


def test_switchmls_pool_caps_a_workers_rate_at_one_pool_per_unloaded_round_trip():
    """PA-ATP's testbed with unicast RESULTs: each PS's link carries three copies of every RESULT, so every
    worker gets 4/3 Mb/s. SwitchML's default pool (twice the path's bandwidth-delay product) never binds;
    a pool of one frame does: 2688 frame bits per unloaded round trip of hl1-s1-s2-hr1 (six serialisations
    of 0.672 ms), 2/3 Mb/s for job a, which leaves job b its 4/3 Mb/s."""

    def rates(*overrides):
        scenario = load_scenario(PA_ATP_FIDELITY, ["topology.result_multicast=programmable", *overrides])
        result = sim.evaluate(scenario, compute_placement(scenario))
        return {name: job["min_sending_rate_bps"] for name, job in result["jobs"].items()}

    assert rates("transport=switchml") == {"job-a": pytest.approx(4e6 / 3), "job-b": pytest.approx(4e6 / 3)}
    assert rates("transport=switchml", "jobs.0.transport_options.pool=1") == \
        {"job-a": pytest.approx(4e6 / 6), "job-b": pytest.approx(4e6 / 3)}
    assert rates("transport=atp") == rates("transport=switchml")


def test_result_multicast_all_lets_a_switch_without_ina_replicate_results():
    """PA-ATP's testbed aggregates at S2 only. With ``programmable`` (the default) S1 cannot replicate: each PS
    sends a copy of every RESULT per worker and its own link caps every worker at 4/3 Mb/s; with
    ``topology.result_multicast: all`` S1 replicates (IP multicast), the PS sends one copy, and the gradients'
    shared paths set the rate: 2 Mb/s for the workers that share one, in the controller's plan and the model."""

    def plan_and_rate(*overrides):
        scenario = load_scenario(PA_ATP_FIDELITY, list(overrides))
        placement = compute_placement(scenario)
        plan = controller.control_plan(scenario, placement)
        s1 = [e.action for e in plan.switches["s1"].entries if e.table == "ina_result"]
        return s1, len(plan.switches["s1"].multicast_groups), sim.evaluate(scenario, placement)["min_sending_rate_bps"]

    assert plan_and_rate("topology.result_multicast=programmable") == ([], 0, pytest.approx(4e6 / 3))
    assert plan_and_rate() == (["ina_multicast"] * 2, 2, pytest.approx(2e6))      # the scenario says all
    with pytest.raises(ScenarioError, match="^--set topology.result_multicast=yes: expected one of programmable, all"):
        load_scenario(PA_ATP_FIDELITY, ["topology.result_multicast=yes"])


@pytest.mark.parametrize("transport, modelled", [("atp", True), ("switchml", True), ("pa-atp", False),
                                                 ("strawasyn", False), ("atp-unbound", False)])
def test_an_asynchronous_transports_overflow_is_reported_as_not_modelled(transport, modelled):
    overrides = [f"transport={transport}"]
    if transport == "atp-unbound":      # ATP's window allowed past the slots
        overrides = ["transport=atp", "jobs.0.transport_options={slot_bound: false}",
                     "jobs.1.transport_options={slot_bound: false}"]
    scenario = load_scenario(PA_ATP_FIDELITY, overrides)
    result = sim.evaluate(scenario, compute_placement(scenario))
    assert [j["overflow_modelled"] for j in result["jobs"].values()] == [modelled, modelled]
    assert ("sends past the job's slots by design: its workers' overflow to the PS is not modelled"
            in sim.format_simulation(result)) is not modelled


@pytest.mark.parametrize("transport, rate_bps", [("atp", 4e6), ("switchml", 4e6), ("pa-atp", 4e6 * 336 / 416),
                                                 ("strawasyn", 4e6 * 336 / 416)])
def test_gacks_share_the_links_toward_the_workers_with_the_results(transport, rate_bps):
    # PA-ATP's single job (three workers, each on a path of its own, 4 Mb/s links) without background: with
    # GACKs, each link toward a worker carries its RESULTs (336-byte frames at 64 lanes) and its GACKs (80
    # bytes) per fragment.
    scenario = load_scenario(PA_ATP_FIDELITY.with_name("single-job.yaml"), [f"transport={transport}",
                                                                            "background=[]"])
    result = sim.evaluate(scenario, compute_placement(scenario))
    assert ina_frame_bytes(scenario.switch.lanes) == 336
    assert result["min_sending_rate_bps"] == pytest.approx(rate_bps, rel=1e-9)
    if rate_bps < 4e6:
        assert sorted(sim.format_simulation(result).splitlines()[1].split("bottleneck: ")[1].rstrip(")")
                      .split(", ")) == ["s1>hl1", "s1>hl2", "s1>hl3"]


def test_goats_simulation_suite_shows_atps_overhead_growing_with_the_rates_spread():
    # GOAT §VII-D, Fig. 16 (scenarios/papers/goat/exp7-std.yaml), smaller: 15 workers at scale 0.002.
    base = Path(__file__).resolve().parents[2] / "scenarios" / "papers" / "goat" / "simulation-leaf-spine.yaml"
    workers = "jobs.0.workers=[" + ",".join(f"h{i}" for i in range(1, 16)) + "]"

    def overhead(scheme, std):
        scenario = load_scenario(base, [workers, "scale=0.002", f"policy={scheme}",
                                        f"stragglers.heterogeneous_links.normal.std={std}"])
        result = sim.evaluate(scenario, compute_placement(scenario))
        assert result["fragment_model"] == "event"
        return result["communication_overhead_bytes"], result["ps_ingress_bytes"]

    atp_even, atp_spread = overhead("atp", 0), overhead("atp", 0.3)
    goat_spread = overhead("goat", 0.3)
    assert atp_spread[0] > 1.1 * atp_even[0] and atp_spread[1] > atp_even[1]     # collisions go to the PS
    assert goat_spread[0] < atp_spread[0] and goat_spread[1] < 0.5 * atp_spread[1]


def test_simulate_json_stays_json_when_an_lp_solver_runs(capfd):
    # HiGHS prints a banner on standard output when PuLP creates it, whatever msg says (testbed/schemes/lp.py).
    from testbed.cli import main
    motivation = Path(__file__).resolve().parents[2] / "scenarios" / "papers" / "inart" / "motivation.yaml"
    assert main(["simulate", str(motivation), "--set", "policy=inart", "--json"]) == 0
    result = json.loads(capfd.readouterr().out)
    assert result["schemes"] == {"fig1": "inart"} and result["min_sending_rate_bps"] == pytest.approx(2.5e9)


ESA_TWO_JOBS = textwrap.dedent("""\
    version: 1
    scale: 1
    topology:
      kind: explicit
      link_rate: 10Gbps
      switches: [s1]
      hosts: [w1, w2, w3, w4, pa, pb]
      links: [[w1, s1], [w2, s1], [w3, s1], [w4, s1], [pa, s1], [pb, s1]]
    switch: {slots: 64}
    simulation: {worker_start: {w2: 3, w3: 1, w4: 1}}
    jobs:
      - {name: a, workers: [w1, w2], ps: pa, policy: esa, submodel_elements: [64], window: 1,
         policy_options: {esa: {release: emit}}}
      - {name: b, workers: [w3, w4], ps: pb, policy: esa, submodel_elements: [64], window: 1,
         policy_options: {esa: {release: emit}}}
    """)


@pytest.mark.parametrize("priority_b,ps_ingress", [
    # b outranks a: w3 (time 2) evicts a's partial of w1 (to pa) and completes with w4; w2 (time 4) starts a
    # partial alone, flushed at the end: pa receives 2, pb 1
    (1, {("pa", "a"): 2, ("pb", "b"): 1}),
    # equal ranks: w3 and w4 collide with a's partial and bypass to pb; w2 completes a's: pa 1, pb 2
    (0, {("pa", "a"): 1, ("pb", "b"): 2}),
])
def test_esa_jobs_share_slots_and_the_higher_priority_evicts_in_the_fragment_model(priority_b, ps_ingress):
    scenario = parse_scenario(ESA_TWO_JOBS, "t.yaml", [f"jobs.1.policy_options.esa.priority={priority_b}"])
    placement = compute_placement(scenario)
    assert placement.shared_slot_ranges(["a", "b"]) == {"s1": ["a", "b"]}
    counts = FragmentModel(scenario, placement, Routes(scenario.topology, placement)).run()
    assert counts["ps_ingress"] == ps_ingress
    assert counts["switch_egress"] == {("s1", "a"): ps_ingress[("pa", "a")], ("s1", "b"): ps_ingress[("pb", "b")]}
