"""The packet budget (testbed/budget.py): validate resolves the target as run does, budgets each target by its
own rate, predicts each switch's and agent's packet rate from the fluid model, and ``time_dilation: auto``
picks the smallest whole N inside every budget."""

import dataclasses
import os
from pathlib import Path
from types import SimpleNamespace

import pytest

from testbed import budget, sim
from testbed.budget import (AGENT_BUDGET_PPS, CONTENTION_KNEE_SHARE, CONTENTION_SLOPE, PACKET_COST_CURVES,
                            PROCESS_IDLE_CORES, RUN_SET_UP_PER_NODE_S, RUN_SET_UP_S, TARGET_BUDGET_PPS,
                            USABLE_CORE_SHARE, PacketBudget, dilation_factor, expected_run_wall_s, expected_wall_s,
                            packet_budget, packets_per_cpu_s, resolve_target)
from testbed.calibration import (REFERENCE_CONTRIBUTIONS_PER_S, REFERENCE_WAKE_ROUND_TRIP_S, Calibration,
                                 measure, wake_round_trip_s)
from testbed.dataplane.wire import ina_frame_bytes
from testbed.schemes import compute_placement
from testbed.provenance import machine_id
from testbed.scenario import load_scenario

REPO = Path(__file__).resolve().parents[2]
QUICKSTART = REPO / "scenarios" / "quickstart.yaml"
GOAT_1000 = REPO / "scenarios" / "papers" / "goat" / "testbed-1000.yaml"


#: The share of the working cores busy at which the contended work fills them:
#: u (1 + CONTENTION_SLOPE (u - CONTENTION_KNEE_SHARE)) = 1.
FULL_SHARE = ((-(1 - CONTENTION_SLOPE * CONTENTION_KNEE_SHARE)
               + ((1 - CONTENTION_SLOPE * CONTENTION_KNEE_SHARE) ** 2 + 4 * CONTENTION_SLOPE) ** 0.5)
              / (2 * CONTENTION_SLOPE))


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
    switch, machine, latency = packet_budget(scenario, "bmv2", cores=2).warnings(1)
    assert switch.startswith("switch s1 (9,301 packets/s at time dilation 1, bmv2 budget 2,500/s) needs time "
                             "dilation 3.72, the run uses 1")
    # bmv2 at 6,900 packets per CPU-second: 1.35 cores; the agents' 3,720 packets/s each, below their curves'
    # first points, at the floor: 4 x 3,720 / 36,300 + 3,720 / 33,100 = 0.52 cores; 1.87 / (1.4 - 6 x 0.003)
    # = 1.35 without the contention, with it where the working cores are FULL_SHARE (0.896) busy: 1.51.
    assert machine.startswith("the machine (1.9 cores' work at time dilation 1 and 6 processes idling on 0.02, 70% "
                              "of 2 cores usable, dearer past 75% of that busy) needs time dilation 1.51")
    # A round trip visits the worker's timer, the PS and the worker and s1 both ways, where bmv2 is a queue: at
    # N = 4.57 s1 takes 9,301 / 4.57 = 2,035 packets/s, 0.885 of the 2,300/s it serves, a sojourn of 0.435 ms /
    # 0.115 = 3.8 ms; the agents' visits 0.24 ms with the machine 0.30 busy: (3 x 0.24 + 2 x 3.8) / 4.57 = 1.81
    # ms, 12% of the quickstart's 15.1 ms communication.
    assert latency.startswith("job resnet50's round trips (3 visits of 0.24 ms and 2 of bmv2 switches, 3.8 ms, at "
                              "4.57, 12% of its 15.1 ms communication) needs time dilation 4.57")
    monkeypatch.setattr(budget.shutil, "which", lambda name: f"/x/{name}")
    assert packet_budget(scenario, "auto", cores=2).target == "bmv2"      # auto resolves to bmv2 here
    monkeypatch.setattr(budget.shutil, "which", lambda name: None)
    assert packet_budget(scenario, "auto", cores=2).target == "pyswitch"


def test_auto_takes_the_smallest_whole_dilation_inside_every_budget():
    # At 1/1000 the quickstart's links are 100 Mb/s: 37,202 frames/s. s1 takes four workers' and the RESULTs:
    # 186,012/s, 9.3 x its budget; each agent sends and receives 74,405/s, 3.7 x its own; the machine holds
    # 186,012 / 42,700 + 4 x 74,405 / 48,600 + 74,405 / 39,600 = 12.36 cores' work at N = 1 (every rate above
    # its curve's last point), and fits 70% of two cores less six processes' idling from N = 9.66 on, from 11.78
    # with the contention past 75% of them busy (there 0.896 of them busy: FULL_SHARE).
    scenario = load_scenario(QUICKSTART, ["scale=0.001", "time_dilation=auto"])
    plan = packet_budget(scenario, "pyswitch", cores=2)
    link = frames_per_s(100e6)
    assert plan.switch_pps == {"s1": pytest.approx(5 * link)}
    assert plan.agent_pps == {h: pytest.approx(2 * link) for h in ("w1", "w2", "w3", "w4", "ps")}
    assert plan.cores_busy(1.0) == pytest.approx(5 * link / 42700 + 4 * 2 * link / 48600 + 2 * link / 39600)
    working = USABLE_CORE_SHARE * 2 - 6 * PROCESS_IDLE_CORES
    machine = plan.machine_needs()
    assert plan.contended_cores_busy(machine) == pytest.approx(working, rel=1e-5)
    assert plan.cores_busy(machine) == pytest.approx(FULL_SHARE * working, rel=1e-5)
    assert machine == pytest.approx(11.78, abs=0.01)
    needs = sorted(need for what, need in plan.needs().items() if not what.startswith("job "))
    assert needs == pytest.approx(sorted([5 * link / TARGET_BUDGET_PPS["pyswitch"], 2 * link / AGENT_BUDGET_PPS,
                                          machine]))
    # A window of 32 frames lasts 0.86 ms; a round trip visits the worker's timer, s1 both ways, the PS and the
    # worker: 5 visits, each of 0.15 + 0.3 x u ms of wall time with the machine u busy, and past u = 0.75
    # (VISIT_WAIT_KNEE_SHARE) 0.25 / (1 - u) times that: along the line alone they would fit a fifth of the window
    # from N = 12.07 on (u = 0.88 there, a visit 0.90 ms with the knee); with it from N = 14.57 (u = 0.80, 0.50 ms).
    ((what, latency),) = plan.latency_needs().items()
    assert plan.cores_busy(14.57) / working == pytest.approx(0.80, abs=0.005)
    assert what.startswith("job resnet50's round trips (5 visits of 0.5 ms at 14.6") and "0.86 ms window" in what
    assert latency == pytest.approx(14.57, abs=0.01) and plan.binding() == what
    assert dilation_factor(scenario, plan) == 15.0 == plan.auto_factor()
    assert plan.warnings(15) == [] and len(plan.warnings(14)) == 1 and len(plan.warnings(9)) == 3
    assert "bound by the processes' delay" in plan.warnings(14)[0]
    assert dilation_factor(load_scenario(QUICKSTART, ["time_dilation=3"]), plan) == 3.0   # a number is kept
    # With four cores the machine needs 4.4, the round trips 8.9, the switch still 9.3.
    assert packet_budget(scenario, "pyswitch", cores=4).auto_factor() == 10.0
    # On bmv2 the switch's budget asks 74.4 (186,012 / 2,500), its queue more: at N = 86.2 s1 is 0.94 busy and a
    # packet stays 7 ms in it, two such visits and the agents' a fifth of the 0.86 ms window in virtual time.
    on_bmv2 = packet_budget(scenario, "bmv2", cores=2)
    assert on_bmv2.binding().startswith("job resnet50's round trips (3 visits of 0.24 ms and 2 of bmv2 switches, "
                                        "7 ms, at 86.2, 20% of its 0.86 ms window)")
    assert on_bmv2.auto_factor() == 87.0


def test_a_jobs_workers_are_predicted_at_its_slowest_workers_rate():
    # GOAT's testbed at 1/1000: w5-w8 share S2's uplink at 25 Mb/s; w1-w4 could send at 100 Mb/s, but the
    # job's RESULTs clock every worker at the slowest's rate, so each agent sends and receives 2 x 25 Mb/s.
    scenario = load_scenario(GOAT_1000)
    placement = compute_placement(scenario)
    rates = sim.node_packet_rates(scenario, placement)
    for w in ("w1", "w5", "ps"):
        assert rates[w] == pytest.approx(2 * frames_per_s(25e6), rel=1e-6)
    plan = packet_budget(scenario, "pyswitch", placement, cores=2)
    assert set(plan.switch_pps) == {"s1", "s2", "s3"} and set(plan.agent_pps) == {f"w{i}" for i in range(1, 9)} | {
        "ps"}
    # One process for the three switches (auto: the fewest that need the least dilation), its throughput budget
    # binding at 7.44: N = 8. Two processes, S1 and S3 together (the packets S3 hands S1 wake no process),
    # need 8.34 and a process per switch 8.62, both for their round trips' visits with the machine 0.84 busy.
    assert plan.switch_groups == (("s1", "s2", "s3"),) and plan.auto_factor() == 8.0
    two = packet_budget(load_scenario(GOAT_1000, ["switch.processes=2"]), "pyswitch", placement, cores=2)
    assert two.switch_groups == (("s1", "s3"), ("s2",)) and two.needed() == pytest.approx(8.34, abs=0.01)
    per_switch = packet_budget(load_scenario(GOAT_1000, ["switch.processes=per-switch"]), "pyswitch", placement, cores=2)
    assert per_switch.switch_groups == (("s1",), ("s2",), ("s3",)) and per_switch.auto_factor() == 9.0


def test_a_bmv2_switch_is_planned_as_a_queue_and_a_step_its_tors_sum_as_a_burst():
    """A bmv2 switch keeps a packet ``service / (1 - utilisation)``: GOAT's testbed at 1/1000, s1 at 83,705
    packets/s, is planned at 40 on two cores, past the 34 its throughput budget asks (where its round trips
    waited 54% of a window in bmv2); Rina's steps, which its ToRs sum, twelve times that; a ring whose switches
    only forward waits as any process does, and a pyswitch switch too, but seven times that in a step it sums."""
    goat = packet_budget(load_scenario(GOAT_1000), "bmv2", cores=2)
    assert goat.auto_factor() == 40.0 and goat.needs()[next(w for w in goat.needs() if w.startswith("switch s1"))] \
        == pytest.approx(83705 / 2500, rel=1e-3)
    service_s = 1 / budget.BMV2_SERVICE_PPS
    utilisation = max(goat.switch_pps["s1"] / 40 * service_s, goat.cores_busy(40) / goat.working_cores())
    assert goat.switch_visit_wait_s(40) == pytest.approx(service_s / (1 - utilisation))
    assert goat.switch_visit_wait_s(40, summed_steps=True) == pytest.approx(12 * goat.switch_visit_wait_s(40))
    assert goat.switch_visit_wait_s(30) == pytest.approx(service_s / (1 - budget.BMV2_MAX_UTILISATION))
    rina = REPO / "scenarios" / "papers" / "rina" / "testbed.yaml"
    summed = packet_budget(load_scenario(rina, ["policy=rina", "topology.programmable=all"]), "bmv2", cores=2)
    assert [r.steps_summed_in_switches for r in summed.rounds] == [True] and summed.auto_factor() == 8.0
    forwarded = packet_budget(load_scenario(rina, ["policy=rar"]), "bmv2", cores=2)
    assert [r.steps_summed_in_switches for r in forwarded.rounds] == [False] and forwarded.auto_factor() == 6.0
    on_pyswitch = packet_budget(load_scenario(GOAT_1000), "pyswitch", cores=2)
    assert on_pyswitch.switch_visit_wait_s(7) == on_pyswitch.visit_wait_s(7)
    assert on_pyswitch.switch_visit_wait_s(7, summed_steps=True) == \
        pytest.approx(budget.PYSWITCH_RING_STEP_BURST * on_pyswitch.visit_wait_s(7))
    # Rina's steps, summed by pyswitch ToRs, ask for N = 2 where a ToR's visit waited 3.36 ms at N = 1.
    on_pyswitch = packet_budget(load_scenario(rina, ["policy=rina", "topology.programmable=all",
                                                     "jobs.0.iterations=6"]), "pyswitch", cores=2)
    assert on_pyswitch.auto_factor() == 2.0


def test_a_pyswitch_switch_that_merges_partial_sums_waits_a_burst_once_a_round_trip():
    """ATP at every level of Rina's fat-tree (4 switches merging partial sums) is planned at 5 with the reference
    costs, where 4 waited 19% of its communication on an AMD EPYC; one merging switch adds little."""
    fat_tree = REPO / "scenarios" / "papers" / "rina" / "fat-tree-k4.yaml"
    base = ["scale=0.00005", "policy=atp", "jobs.0.ps=[h16]", "jobs.0.model=vgg16", "topology.programmable.count=20",
            "jobs.0.iterations=6"]
    every_level = packet_budget(load_scenario(fat_tree, base + ["jobs.0.policy_options.atp.levels=all"]), "pyswitch",
                                cores=2)
    assert [r.merging_switches for r in every_level.rounds] == [4] and every_level.auto_factor() == 5.0
    assert "4 merging partial sums 23.5 times that once" in next(iter(every_level.latency_needs()))
    default = packet_budget(load_scenario(fat_tree, base), "pyswitch", cores=2)
    assert [r.merging_switches for r in default.rounds] == [1] and next(iter(default.latency_needs().values())) == 1.0


def test_the_expected_wall_time_is_the_simulated_iterations_times_the_dilation():
    scenario = load_scenario(QUICKSTART, ["scale=0.001", "jobs.0.iterations=10"])
    simulation = {"jobs": {"resnet50": {"comm_time_s": 0.01}}}
    assert expected_wall_s(scenario, simulation, 1.0) == pytest.approx(10 * (0.02 + 0.01))
    assert expected_wall_s(scenario, simulation, 8.0) == pytest.approx(8 * 10 * (0.02 + 0.01))
    # the whole run: plus the set-up and teardown of its 6 nodes (a switch, four workers and the PS)
    assert len(scenario.topology.nodes) == 6
    assert expected_run_wall_s(scenario, simulation, 8.0) == pytest.approx(
        8 * 10 * (0.02 + 0.01) + RUN_SET_UP_S + 6 * RUN_SET_UP_PER_NODE_S)


def test_a_run_lasts_as_long_as_a_background_of_its_own_duration():
    """The run ends when its workers are done and every background with a duration of its own has ended
    (the monitor waits for both): PA-ATP's testbed runs its Hadoop flows 60 s."""
    path = REPO / "scenarios" / "papers" / "pa-atp" / "testbed.yaml"
    simulation = {"jobs": {"job-a": {"comm_time_s": 0.01}, "job-b": {"comm_time_s": 0.01}}}
    timed = load_scenario(path)
    assert [b.duration_s for b in timed.background] == [60.0]
    assert expected_wall_s(timed, simulation, 3.0) == pytest.approx(3 * (timed.background[0].start_s + 60.0))
    untimed = load_scenario(path, ["background.0.duration=0s"])          # as long as the jobs
    jobs_s = max(j.start_s + j.iterations * (j.compute_time_s + 0.01) for j in untimed.jobs)
    assert jobs_s < 60 and expected_wall_s(untimed, simulation, 3.0) == pytest.approx(3 * jobs_s)


def test_an_iteration_waits_for_its_slowest_workers_straggler_delay():
    """Four workers each drawing a delay afresh: the iteration waits for the largest of four draws, not the
    mean of one (GOAT's delays, normal of std 0.2 s about 0 clipped to [0 s, 1 s]: a mean of 0)."""
    from testbed.stragglers import expected_slowest_delay_s
    simulation = {"jobs": {"resnet50": {"comm_time_s": 0.01}}}
    base = ["scale=0.001", "jobs.0.iterations=10"]
    scenario = load_scenario(QUICKSTART, base + ["stragglers.compute_delay=[{workers: all}]"])
    delay = {"distribution": "normal", "mean_s": 0.0, "std_s": 0.2, "low_s": 0.0, "high_s": 1.0}
    slowest_s = expected_slowest_delay_s(delay, 4)
    assert 0.2 < slowest_s < 0.22           # E[max of 4 normals] = 1.029 std, a little more when clipped at 0
    assert expected_wall_s(scenario, simulation, 1.0) == pytest.approx(10 * (0.02 + slowest_s + 0.01))
    fixed = load_scenario(QUICKSTART, base + ["stragglers.compute_delay=[{workers: [w1], distribution: fixed, "
                                              "value: 50ms}]"])
    assert expected_wall_s(fixed, simulation, 1.0) == pytest.approx(10 * (0.02 + 0.05 + 0.01))
    persistent = load_scenario(QUICKSTART, base + ["stragglers.compute_delay=[{workers: all, persistent: true}]"])
    worst_s = max(persistent.stragglers.compute_delays[0].persistent_s.values())
    assert expected_wall_s(persistent, simulation, 1.0) == pytest.approx(10 * (0.02 + worst_s + 0.01))


def test_the_expected_slowest_delay_matches_the_draws_it_expects():
    import random
    from testbed.stragglers import expected_slowest_delay_s, straggler_delay_s
    normal = {"distribution": "normal", "mean_s": 0.1, "std_s": 0.2, "low_s": 0.0, "high_s": 0.4}
    uniform = {"distribution": "uniform", "low_s": 0.1, "high_s": 0.3}
    rng = random.Random(5)
    for delay in (normal, uniform):
        for draws in (1, 3, 16):
            drawn = sum(max(straggler_delay_s(delay, rng) for _ in range(draws)) for _ in range(20000)) / 20000
            assert expected_slowest_delay_s(delay, draws) == pytest.approx(drawn, abs=0.004)
    assert expected_slowest_delay_s(uniform, 3) == pytest.approx(0.1 + 0.2 * 3 / 4)
    assert expected_slowest_delay_s({**normal, "std_s": 0.0, "mean_s": 0.7}, 5) == 0.4       # clipped
    assert expected_slowest_delay_s({"distribution": "fixed", "value_s": 0.05}, 9) == 0.05
    assert expected_slowest_delay_s({}, 4) == 0.0


def test_idle_processes_take_their_share_of_the_machine_before_the_packets_do():
    # InArt's fat-tree: 45 switches and 54 agents idle on 0.3 cores whatever N, which the packets' work
    # cannot use; without that share auto's N left its VGG19 and LSTM runs CPU-bound (90-98% of two cores).
    busy = {f"w{i}": 4000.0 for i in range(16)}       # 64,000 packets/s, 4,000 each: 1.76 cores at N = 1
    few = PacketBudget("pyswitch", 2, {"s1": 0.0}, busy)
    many = PacketBudget("pyswitch", 2, {f"s{i}": 0.0 for i in range(45)}, {**busy, **{
        f"h{i}": 0.0 for i in range(38)}})
    # Below 4,650 packets/s a worker's packet costs the floor, 1/36,300 of a core-second.
    assert few.cores_busy(2.0) == pytest.approx(32000.0 / 36300)
    # The work falls as 1/N, so the machine fits where the working cores are FULL_SHARE busy (the contention).
    assert few.needed() == pytest.approx(64000.0 / 36300 / (1.4 - 17 * PROCESS_IDLE_CORES) / FULL_SHARE, rel=1e-5)
    assert many.needed() == pytest.approx(64000.0 / 36300 / (1.4 - 99 * PROCESS_IDLE_CORES) / FULL_SHARE, rel=1e-5)
    assert many.auto_factor() == 2.0 and "99 processes idling on 0.30" in many.binding()
    crowd = PacketBudget("pyswitch", 2, {f"s{i}": 0.0 for i in range(1000)}, busy)
    assert crowd.needed() == pytest.approx(64000.0 / 36300 / (0.05 * 2) / FULL_SHARE, rel=1e-5)  # >= 5% of it


def test_past_the_knee_a_busy_machine_makes_every_packet_dearer():
    # 16 workers at 4,000 packets/s each, every packet at the floor: 1.763 cores' work at N = 1, falling as 1/N,
    # on 1.4 - 17 x 0.003 = 1.349 working cores. Up to 75% of them busy a packet costs its curve; past it 0.8
    # times the excess more: at N = 1.5 (1.175 cores, 0.871 of them) 1.097 times, at N = 3 (0.44 of them) 1.
    plan = PacketBudget("pyswitch", 2, {"s1": 0.0}, {f"w{i}": 4000.0 for i in range(16)})
    work, working = 64000.0 / 36300, 1.4 - 17 * PROCESS_IDLE_CORES
    assert plan.working_cores() == pytest.approx(working)
    assert plan.contention(3.0) == 1.0 and plan.contended_cores_busy(3.0) == plan.cores_busy(3.0)
    assert plan.contention(1.5) == pytest.approx(1 + 0.8 * (work / 1.5 / working - 0.75))
    assert plan.contention(1.5) == pytest.approx(1.097, abs=1e-3)
    # The machine fits where the contended work is the working cores: 0.8 u^2 + 0.4 u - 1 = 0, u = 0.896.
    assert FULL_SHARE == pytest.approx(0.896, abs=1e-3)
    need = plan.machine_needs()
    assert plan.contended_cores_busy(need) == pytest.approx(working, rel=1e-5)
    assert need == pytest.approx(work / working / FULL_SHARE, rel=1e-5) and need > work / working
    assert "70% of 2 cores usable, dearer past 75% of that busy" in plan.binding()


def test_on_ebpf_the_machine_budget_adds_the_kernels_work_in_the_agents_system_calls():
    # 16 workers at 4,000 packets/s each: 1.763 cores of their own work at N = 1 (the floor of their curve). On
    # ebpf each packet costs the kernel 1/87,700 of a core-second more at 2,325 packets/s and above, 1/23,700
    # at 394 and below: at N = 1 64,000 / 87,700, at N = 20 (200 packets/s each) 3,200 / 23,700.
    agents = {f"w{i}": 4000.0 for i in range(16)}
    pyswitch = PacketBudget("pyswitch", 2, {"s1": 0.0}, agents)
    ebpf = PacketBudget("ebpf", 2, {"s1": 0.0}, agents)
    curve = budget.EBPF_AGENT_KERNEL_CURVE
    assert pyswitch.agent_kernel_cores(1.0) == 0.0
    assert ebpf.agent_kernel_cores(1.0) == pytest.approx(64000.0 / 87700.0)
    assert ebpf.agent_kernel_cores(20.0) == pytest.approx(3200.0 / 23700.0)
    assert packets_per_cpu_s(curve, 394.0) < packets_per_cpu_s(curve, 1000.0) < packets_per_cpu_s(curve, 2325.0)
    # The machine budget weighs it beside the processes' own work; the visits' waits do not (their fit is against
    # the processes' share of the cores).
    assert ebpf.cores_busy(4.0) == pyswitch.cores_busy(4.0)
    assert ebpf.utilisation(4.0) == pytest.approx(ebpf.cores_busy(4.0) / ebpf.working_cores())
    need = ebpf.machine_needs()
    assert need > pyswitch.machine_needs()
    assert ebpf.contended_cores_busy(need) + ebpf.agent_kernel_cores(need) == pytest.approx(ebpf.working_cores(),
                                                                                            rel=1e-5)
    assert ", of them the kernel's" not in pyswitch.binding() and "the kernel's in the agents' system calls" in \
        " ".join(ebpf.needs())


def test_a_packet_costs_more_the_slower_packets_come_to_its_process():
    # pyswitch: 28,100 packets per CPU-second at 11,600 packets/s and below, 42,700 at 23,300 and above,
    # log-linear between: at their geometric mean, the mean of the two.
    curve = PACKET_COST_CURVES["pyswitch"]
    assert packets_per_cpu_s(curve, 1000.0) == 28100.0 == packets_per_cpu_s(curve, 11600.0)
    assert packets_per_cpu_s(curve, 1e6) == 42700.0 == packets_per_cpu_s(curve, 23300.0)
    assert packets_per_cpu_s(curve, (11600.0 * 23300.0) ** 0.5) == pytest.approx((28100.0 + 42700.0) / 2)
    assert packets_per_cpu_s(PACKET_COST_CURVES["bmv2"], 10.0) == 6900.0 == packets_per_cpu_s(
        PACKET_COST_CURVES["bmv2"], 1e6)
    # A PS's packets cost by the PS's curve, a worker's by the workers'.
    as_worker = PacketBudget("pyswitch", 2, {}, {"h1": 9300.0})
    as_ps = PacketBudget("pyswitch", 2, {}, {"h1": 9300.0}, frozenset({"h1"}))
    assert as_worker.cores_busy(1.0) == pytest.approx(9300.0 / 48600) and as_ps.cores_busy(1.0) == pytest.approx(
        9300.0 / 39600)
    # Doubling N halves the packets and raises a packet's cost by less than twice: the work falls.
    plan = PacketBudget("pyswitch", 2, {"s1": 186012.0}, {"w1": 74405.0})
    assert all(plan.cores_busy(2 * n) < plan.cores_busy(n) for n in (1, 2, 4, 8, 16, 32))


def test_the_reference_curves_are_the_measured_points_fastest_and_floor():
    """curve_from_points derives the reference pyswitch and worker curves from their measurements at N = 8-64."""
    assert budget.curve_from_points([(23_300, 42_700), (11_600, 30_300), (5_800, 28_100), (2_900, 26_500)]) == \
        PACKET_COST_CURVES["pyswitch"]
    assert budget.curve_from_points([(9_300, 48_600), (4_650, 38_600), (2_325, 31_600), (1_163, 36_300)]) == \
        PACKET_COST_CURVES["worker"]
    assert budget.curve_from_points([(2_500, 6_900)]) == PACKET_COST_CURVES["bmv2"]
    with pytest.raises(ValueError):
        budget.curve_from_points([])


def test_this_machines_measured_costs_replace_the_reference_and_another_machines_do_not(tmp_path):
    path = tmp_path / "packet_costs.json"
    assert budget.load_packet_costs(path, calibrate=False) == budget.REFERENCE_PACKET_COSTS
    budget.write_packet_costs({"pyswitch": [(23_300, 21_350), (11_600, 15_150), (5_800, 14_050)]}, path)
    budget.write_packet_costs({"worker": [(9_300, 24_300), (4_650, 19_300)]}, path)     # kept beside pyswitch
    costs = budget.load_packet_costs(path)
    assert costs.curves == {**PACKET_COST_CURVES, "pyswitch": ((11_600.0, 14_600.0), (23_300.0, 21_350.0)),
                            "worker": ((4_650.0, 19_300.0), (9_300.0, 24_300.0))}
    assert costs.source.startswith("measured on this machine (pyswitch, worker; ") and costs.measured_here
    assert costs.source.endswith("; the reference for the other roles")
    # Costs twice the reference's double the work the planner sees: every rate's cost halved.
    half = {role: tuple((r, c / 2) for r, c in curve) for role, curve in PACKET_COST_CURVES.items()}
    plan = PacketBudget("pyswitch", 2, {"s1": 40_000.0}, {"w1": 10_000.0, "ps": 10_000.0}, frozenset({"ps"}))
    slow = PacketBudget("pyswitch", 2, {"s1": 40_000.0}, {"w1": 10_000.0, "ps": 10_000.0}, frozenset({"ps"}),
                        budget.PacketCosts(half, "half"))
    assert slow.cores_busy(4.0) == pytest.approx(2 * plan.cores_busy(4.0))
    assert slow.machine_needs() > plan.machine_needs()
    doc = path.read_text().replace(machine_id(), "Another CPU x 64")
    path.write_text(doc)
    other = budget.load_packet_costs(path, calibrate=False)
    assert other.curves == PACKET_COST_CURVES and "holds Another CPU x 64's" in other.source
    assert not other.measured_here
    path.write_text("{not json")
    broken = budget.load_packet_costs(path, calibrate=False)
    assert broken.curves == PACKET_COST_CURVES and f"{path} is unreadable: " in broken.source
    budget.write_packet_costs({"ps": [(9_300, 20_000)]}, path)      # an unreadable file is replaced
    assert budget.load_packet_costs(path).curves["ps"] == ((9_300.0, 20_000.0),)


def test_the_planner_reads_the_costs_measured_here(tmp_path, monkeypatch):
    scenario = load_scenario(QUICKSTART, ["scale=0.001"])
    reference = packet_budget(scenario, "pyswitch", cores=2)
    assert reference.to_dict(reference.auto_factor())["packet_costs"] == budget.REFERENCE_COSTS
    assert reference.to_dict(reference.auto_factor())["packet_costs_measured_here"] is False
    path = tmp_path / "costs.json"
    budget.write_packet_costs({"pyswitch": [(23_300, 21_350), (11_600, 14_050)]}, path)
    monkeypatch.setenv("INATB_PACKET_COSTS", str(path))
    measured = packet_budget(scenario, "pyswitch", cores=2)
    assert measured.costs.curves["pyswitch"] == ((11_600.0, 14_050.0), (23_300.0, 21_350.0))
    assert measured.auto_factor() > reference.auto_factor()
    assert measured.to_dict(measured.auto_factor())["packet_costs_measured_here"] is True


SLOWER = Calibration(contributions_per_s=64_000.0, wake_round_trip_s=2 * REFERENCE_WAKE_ROUND_TRIP_S, seconds=2.9)


def test_a_machine_without_costs_of_its_own_is_calibrated_once_and_keeps_it(tmp_path, monkeypatch):
    path = tmp_path / "packet_costs.json"
    monkeypatch.setattr(budget, "measure_calibration", lambda: SLOWER)
    costs = budget.load_packet_costs(path)
    # 64,000 contributions/s against the reference's 80,000: packet work 1.25x; wake-ups 2x. The fastest point
    # costs 1.25x the reference's, the slower points, where each packet wakes its process, 2x.
    assert SLOWER.work_ratio == pytest.approx(REFERENCE_CONTRIBUTIONS_PER_S / 64_000) == pytest.approx(1.25)
    assert costs.curves["pyswitch"] == ((11_600.0, 28_100.0 / 2), (23_300.0, 42_700.0 / 1.25))
    assert costs.curves["bmv2"] == ((2_500.0, 6_900.0 / 1.25),)
    assert costs.source.startswith("calibrated on this machine in 2.9 s: packet work 1.25x and wake-ups 2.00x")
    assert costs.measured_here
    monkeypatch.setattr(budget, "measure_calibration", lambda: pytest.fail("calibrated twice"))
    assert budget.load_packet_costs(path) == costs                 # kept: the next command reads it
    # Curves measured by the benchmark take their roles; the calibration keeps the others.
    budget.write_packet_costs({"ps": [(9_300, 20_000)]}, path)
    both = budget.load_packet_costs(path)
    assert both.curves["ps"] == ((9_300.0, 20_000.0),) and both.curves["pyswitch"] == costs.curves["pyswitch"]
    assert both.source.startswith("measured on this machine (ps; ") and "; the other roles calibrated on" in both.source
    # A slower machine's plan: more time dilation, and each round trip's visits wait longer.
    scenario = load_scenario(QUICKSTART, ["scale=0.001"])
    reference = packet_budget(scenario, "pyswitch", cores=2)
    monkeypatch.setenv("INATB_PACKET_COSTS", str(path))
    slower = packet_budget(scenario, "pyswitch", cores=2)
    assert slower.slowness() == pytest.approx(2.0) and reference.slowness() == 1.0
    assert slower.auto_factor() > reference.auto_factor()


def test_a_slower_machine_gives_each_bmv2_switch_as_much_longer_to_start(tmp_path, monkeypatch):
    from testbed.dataplane.bmv2 import BMV2_START_TIMEOUT_S, start_timeout_s
    from testbed.emulation.nodes import switch_node_params
    monkeypatch.setattr(budget, "measure_calibration", lambda: SLOWER)
    costs = budget.load_packet_costs(tmp_path / "packet_costs.json")
    assert budget.slowness(costs, "bmv2") == pytest.approx(1.25)               # bmv2's one point: packet work
    assert budget.slowness(budget.REFERENCE_PACKET_COSTS, "bmv2") == 1.0
    assert start_timeout_s(1.0) == BMV2_START_TIMEOUT_S and start_timeout_s(0.5) == BMV2_START_TIMEOUT_S
    monkeypatch.setenv("INATB_PACKET_COSTS", str(tmp_path / "packet_costs.json"))
    plan = SimpleNamespace(target="bmv2", scenario=load_scenario(QUICKSTART, ["scale=0.001"]),
                           budget=packet_budget(load_scenario(QUICKSTART, ["scale=0.001"]), "bmv2", cores=2))
    state = SimpleNamespace(dir=tmp_path)
    assert switch_node_params(plan, tmp_path, state)["start_timeout_s"] == pytest.approx(1.25 * BMV2_START_TIMEOUT_S)
    plan.target = "pyswitch"
    assert "start_timeout_s" not in switch_node_params(plan, tmp_path, state)


def test_a_faster_machine_plans_as_the_reference_does_and_reference_alone_is_asked_for_by_name(tmp_path, monkeypatch):
    path = tmp_path / "packet_costs.json"
    monkeypatch.setattr(budget, "measure_calibration",
                        lambda: Calibration(2 * REFERENCE_CONTRIBUTIONS_PER_S, REFERENCE_WAKE_ROUND_TRIP_S / 2, 2.5))
    assert budget.load_packet_costs(path).curves == PACKET_COST_CURVES          # never cheaper than the reference
    monkeypatch.setenv("INATB_PACKET_COSTS", budget.REFERENCE_ONLY)
    assert budget.load_packet_costs() == budget.REFERENCE_PACKET_COSTS


def test_the_calibration_measures_its_figures_in_a_few_seconds_with_the_wake_ups_pinned():
    allowed = os.sched_getaffinity(0)
    calibration = measure()
    assert os.sched_getaffinity(0) == allowed                       # the pinning is undone
    assert calibration.contributions_per_s > 1000 and 0 < calibration.wake_round_trip_s < 0.05
    assert (0 < calibration.cross_core_wake_round_trip_s < 0.05) if len(allowed) > 1 else \
        calibration.cross_core_wake_round_trip_s == 0.0
    assert calibration.seconds < 20
    assert Calibration.from_dict(calibration.to_dict()) == dataclasses.replace(
        calibration, contributions_per_s=round(calibration.contributions_per_s), seconds=round(calibration.seconds, 2))
    # A cache written before the figure across two cores existed still reads.
    old = {k: v for k, v in calibration.to_dict().items() if k != "cross_core_wake_round_trip_s"}
    assert Calibration.from_dict(old).cross_core_wake_round_trip_s == 0.0
    assert "across two cores" in calibration.describe() if len(allowed) > 1 else True


def test_the_wake_up_round_trip_runs_each_process_on_the_core_it_is_given():
    cpus = sorted(os.sched_getaffinity(0))
    assert 0 < wake_round_trip_s(cpus[0], cpus[-1], round_trips=20) < 0.05
