"""The packet budget (testbed/budget.py): validate resolves the target as run does, budgets each target by its
own rate, predicts each switch's and agent's packet rate from the fluid model, and ``time_dilation: auto``
picks the smallest whole N inside every budget."""

from pathlib import Path

import pytest

from testbed import budget, sim
from testbed.budget import (AGENT_BUDGET_PPS, AGENT_CORE_PPS, PROCESS_IDLE_CORES, SWITCH_CORE_PPS, TARGET_BUDGET_PPS,
                            USABLE_CORE_SHARE, PacketBudget, dilation_factor, expected_wall_s, packet_budget,
                            resolve_target)
from testbed.dataplane.wire import ina_frame_bytes
from testbed.policy import compute_policy
from testbed.scenario import load_scenario

REPO = Path(__file__).resolve().parents[2]
QUICKSTART = REPO / "scenarios" / "quickstart.yaml"
GOAT_1000 = REPO / "scenarios" / "papers" / "goat" / "testbed-1000.yaml"


def frames_per_s(rate_bps):
    return rate_bps / (8 * ina_frame_bytes(64))


def test_auto_resolves_to_bmv2_only_where_simple_switch_and_p4c_are_found(monkeypatch):
    found = {"simple_switch": "/x/simple_switch", "p4c": "/x/p4c"}
    monkeypatch.setattr(budget.shutil, "which", lambda name: found.get(name))
    assert resolve_target("auto") == "bmv2"
    assert resolve_target("pyswitch") == "pyswitch"
    del found["p4c"]
    assert resolve_target("auto") == "pyswitch"


def test_each_target_is_budgeted_by_its_own_measured_rate(monkeypatch):
    scenario = load_scenario(QUICKSTART)                 # 5 links of 5 Mb/s: 4 workers' frames and the RESULTs
    plan = packet_budget(scenario, "pyswitch", cores=2)
    assert plan.switch_pps["s1"] == pytest.approx(5 * frames_per_s(5e6))
    assert TARGET_BUDGET_PPS["bmv2"] < plan.switch_pps["s1"] < TARGET_BUDGET_PPS["pyswitch"]
    assert plan.warnings(1) == []
    switch, machine = packet_budget(scenario, "bmv2", cores=2).warnings(1)
    assert switch.startswith("switch s1 (9,301 packets/s at time dilation 1, bmv2 budget 2,500/s) needs time "
                             "dilation 3.72, the run uses 1")
    assert machine.startswith("the machine (1.8 cores' work at time dilation 1 and 6 processes idling on 0.02, 80% "
                              "of 2 cores usable) needs time dilation 1.15")
    monkeypatch.setattr(budget.shutil, "which", lambda name: f"/x/{name}")
    assert packet_budget(scenario, "auto", cores=2).target == "bmv2"      # auto resolves to bmv2 here
    monkeypatch.setattr(budget.shutil, "which", lambda name: None)
    assert packet_budget(scenario, "auto", cores=2).target == "pyswitch"


def test_auto_takes_the_smallest_whole_dilation_inside_every_budget():
    # At 1/1000 the quickstart's links are 100 Mb/s: 37,202 frames/s. s1 takes four workers' and the RESULTs:
    # 186,012/s, 9.3 x its budget; each agent sends and receives 74,405/s, 3.7 x its own; the machine holds
    # 186,012 / 45,000 + 5 x 74,405 / 40,000 = 13.43 cores' work, 8.5 x 80% of two cores less six processes'
    # idling.
    scenario = load_scenario(QUICKSTART, ["scale=0.001", "time_dilation=auto"])
    plan = packet_budget(scenario, "pyswitch", cores=2)
    link = frames_per_s(100e6)
    assert plan.switch_pps == {"s1": pytest.approx(5 * link)}
    assert plan.agent_pps == {h: pytest.approx(2 * link) for h in ("w1", "w2", "w3", "w4", "ps")}
    needs = sorted(plan.needs().values())
    cores = 5 * link / SWITCH_CORE_PPS["pyswitch"] + 5 * 2 * link / AGENT_CORE_PPS
    assert needs == pytest.approx(sorted([5 * link / TARGET_BUDGET_PPS["pyswitch"], 2 * link / AGENT_BUDGET_PPS,
                                          cores / (USABLE_CORE_SHARE * 2 - 6 * PROCESS_IDLE_CORES)]))
    assert plan.binding().startswith("switch s1 (186,012 packets/s")
    assert dilation_factor(scenario, plan) == 10.0 == plan.auto_factor()
    assert plan.warnings(10) == [] and len(plan.warnings(9)) == 1
    assert dilation_factor(load_scenario(QUICKSTART, ["time_dilation=3"]), plan) == 3.0   # a number is kept
    # With four cores the machine needs 4.2, the switch still 9.3.
    assert packet_budget(scenario, "pyswitch", cores=4).auto_factor() == 10.0
    assert packet_budget(scenario, "bmv2", cores=2).binding().startswith("switch s1 (186,012 packets/s at time "
                                                                         "dilation 1, bmv2 budget 2,500/s)")


def test_a_jobs_workers_are_predicted_at_its_slowest_workers_rate():
    # GOAT's testbed at 1/1000: w5-w8 share S2's uplink at 25 Mb/s; w1-w4 could send at 100 Mb/s, but the
    # job's RESULTs clock every worker at the slowest's rate, so each agent sends and receives 2 x 25 Mb/s.
    scenario = load_scenario(GOAT_1000)
    policy = compute_policy(scenario)
    rates = sim.node_packet_rates(scenario, policy)
    for w in ("w1", "w5", "ps"):
        assert rates[w] == pytest.approx(2 * frames_per_s(25e6), rel=1e-6)
    plan = packet_budget(scenario, "pyswitch", policy, cores=2)
    assert set(plan.switch_pps) == {"s1", "s2", "s3"} and set(plan.agent_pps) == {f"w{i}" for i in range(1, 9)} | {
        "ps"}
    assert plan.auto_factor() == 5.0


def test_the_expected_wall_time_is_the_simulated_iterations_times_the_dilation():
    scenario = load_scenario(QUICKSTART, ["scale=0.001", "jobs.0.iterations=10"])
    simulation = {"jobs": {"resnet50": {"comm_time_s": 0.01}}}
    assert expected_wall_s(scenario, simulation, 1.0) == pytest.approx(10 * (0.02 + 0.01))
    assert expected_wall_s(scenario, simulation, 8.0) == pytest.approx(8 * 10 * (0.02 + 0.01))


def test_idle_processes_take_their_share_of_the_machine_before_the_packets_do():
    # InArt's fat-tree: 45 switches and 54 agents idle on 0.3 cores whatever N, which the packets' work
    # cannot use; without that share auto's N left its VGG19 and LSTM runs CPU-bound (90-98% of two cores).
    busy = {f"w{i}": 8000.0 for i in range(8)}                        # 64,000 packets/s: 1.6 cores' work
    few = PacketBudget("pyswitch", 2, {"s1": 0.0}, busy)
    many = PacketBudget("pyswitch", 2, {f"s{i}": 0.0 for i in range(45)}, {**busy, **{
        f"h{i}": 0.0 for i in range(46)}})
    work = 64000.0 / AGENT_CORE_PPS
    assert few.needed() == pytest.approx(work / (1.6 - 9 * PROCESS_IDLE_CORES))
    assert many.needed() == pytest.approx(work / (1.6 - 99 * PROCESS_IDLE_CORES))
    assert many.auto_factor() == 2.0 and "99 processes idling on 0.30" in many.binding()
    crowd = PacketBudget("pyswitch", 2, {f"s{i}": 0.0 for i in range(1000)}, busy)
    assert crowd.needed() == pytest.approx(work / (0.05 * 2))          # never planned on less than 5% of it
