"""Ring all-reduce (scheme rar): its schedule, its scenario rules, its agents' plan and its metrics."""

import textwrap
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from testbed import controller, sim
from testbed.agents.ring_acks import Ack, DelayedAcks
from testbed.agents.ring_schedule import (RingStep, chunk_bounds, fragments_sent, har_steps, job_phases,
                                          rar_steps, worker_steps)
from testbed.dataplane.wire import RING_HEADER_BYTES, ring_frame_bytes
from testbed.errors import PlacementError, ScenarioError
from testbed.metrics.summary import job_metrics
from testbed.gradient_profiles import fragments_per_submodel
from testbed.schemes import compute_placement
from testbed.scenario import load_scenario, parse_scenario

RINA_TESTBED = Path(__file__).resolve().parents[2] / "scenarios" / "papers" / "rina" / "testbed.yaml"

RING = textwrap.dedent("""\
    version: 1
    scale: 0.0001
    topology: {kind: dumbbell, hosts_left: 4, hosts_right: 3, paths: 2, link_rate: 40Gbps, programmable: [s2]}
    jobs:
      - {name: ring, model: vgg19, workers: [hl1, hl2, hr1, hr2], policy: rar, iterations: 3}
      - {name: ina, model: resnet50, workers: [hl3, hl4], ps: hr3, policy: atp, iterations: 3}
    """)


def test_chunks_split_the_gradient_contiguously_and_evenly():
    assert chunk_bounds(10, 4) == [(0, 2), (2, 5), (5, 7), (7, 10)]
    assert chunk_bounds(2, 3) == [(0, 0), (0, 1), (1, 2)]       # fewer fragments than workers: an empty chunk
    assert chunk_bounds(5, 2, first=10) == [(10, 12), (12, 15)]


def test_the_steps_of_worker_0_of_three_as_the_paper_draws_them():
    # Rina Fig. 2 (chunks of 3 fragments): ScatterReduce sends one's own chunk, then the one just received;
    # AllGather passes on the chunk this worker completed (chunk 1 for worker 0 of 3), then the one received.
    assert rar_steps(0, 3, 9) == [RingStep(0, 1, 2, (0, 3), (6, 9), True), RingStep(1, 1, 2, (6, 9), (3, 6), True),
                                  RingStep(2, 1, 2, (3, 6), (0, 3), False), RingStep(3, 1, 2, (0, 3), (6, 9), False)]


def test_h_ar_reduces_within_the_rack_then_between_racks_then_gathers_within():
    # Two racks of two, 8 fragments: worker 0 (rack 0, position 0) ScatterReduces with worker 1, holds
    # the rack's sum of [4, 8), all-reduces it with worker 2 (position 0 of rack 1), then gathers.
    racks = [[0, 1], [2, 3]]
    assert har_steps(0, racks, 8) == [RingStep(0, 1, 1, (0, 4), (4, 8), True),
                                      RingStep(1, 2, 2, (4, 6), (6, 8), True),
                                      RingStep(2, 2, 2, (6, 8), (4, 6), False),
                                      RingStep(3, 1, 1, (4, 8), (0, 4), False)]
    assert worker_steps("h-ar", 0, 4, 8, racks) == har_steps(0, racks, 8)
    with pytest.raises(ValueError, match="unknown ring schedule 'x'"):
        worker_steps("x", 0, 4, 8)


def all_reduce(steps_of, workers, total):
    """Run every worker's steps on random gradients, as the agents exchange them; every buffer at the end."""
    rng = np.random.default_rng(workers * 100 + total)
    gradients = [rng.integers(-1000, 1000, size=(total, 4)) for _ in range(workers)]
    buffers = [g.copy() for g in gradients]
    schedules = [steps_of(r) for r in range(workers)]
    assert len({len(s) for s in schedules}) == 1
    for step in range(len(schedules[0])):
        # Every worker sends what it holds at the start of the step; its peer receives it.
        sent = {(r, s[step].send_to): buffers[r][slice(*s[step].send)].copy() for r, s in enumerate(schedules)}
        for r, s in enumerate(schedules):
            st = s[step]
            data = sent[(st.receive_from, r)]
            assert len(data) == st.receive[1] - st.receive[0]
            rows = slice(*st.receive)
            buffers[r][rows] = buffers[r][rows] + data if st.reduce else data
    return buffers, sum(gradients)


@pytest.mark.parametrize("workers, total", [(2, 7), (3, 10), (4, 4), (5, 23), (6, 3)])
def test_the_rar_schedule_sums_every_chunk_on_every_worker(workers, total):
    buffers, expected = all_reduce(lambda r: rar_steps(r, workers, total), workers, total)
    assert all(np.array_equal(b, expected) for b in buffers)
    assert sum(fragments_sent(rar_steps(r, workers, total)) for r in range(workers)) == 2 * (workers - 1) * total


@pytest.mark.parametrize("racks, total", [([[0, 1], [2, 3]], 10), ([[0, 1, 2, 3], [4, 5, 6, 7]], 111),
                                          ([[0, 1, 2], [3, 4, 5], [6, 7, 8]], 50), ([[0, 2], [1, 3]], 9),
                                          ([[0, 1, 2, 3]], 13), ([[0], [1], [2]], 5)])
def test_the_h_ar_schedule_sums_every_chunk_on_every_worker(racks, total):
    workers = sum(map(len, racks))
    buffers, expected = all_reduce(lambda r: har_steps(r, racks, total), workers, total)
    assert all(np.array_equal(b, expected) for b in buffers)


def test_a_ring_frame_is_the_udp_frame_around_its_header_and_lanes():
    assert RING_HEADER_BYTES == 16 and ring_frame_bytes(64) == 14 + 20 + 8 + 16 + 256


def test_a_ring_job_has_workers_and_no_ps():
    scenario = parse_scenario(RING, "ring.yaml")
    ring = scenario.jobs[0]
    assert ring.is_ring and ring.ps == [] and ring.transport == "atp"
    assert ring.completion_agents == ["hl1", "hl2", "hr1", "hr2"]
    assert not scenario.jobs[1].is_ring and scenario.jobs[1].completion_agents == ["hr3"]


@pytest.mark.parametrize("override, field, message", [
    ("jobs.0.ps=hr3", "jobs.0.ps", "scheme rar is a ring all-reduce of the workers: it has no parameter server"),
    ("jobs.0.workers=[hl1]", "jobs.0.workers", "a ring all-reduce (scheme rar) needs at least 2 workers"),
    ("jobs.0.transport=pa-atp", "jobs.0.transport", "expected one of atp, got 'pa-atp'"),
    ("jobs.0.aggregation_switches=[s2]", "jobs.0.aggregation_switches", "scheme rar aggregates nowhere"),
    ("jobs.1.policy=rar", "jobs.1.ps", "scheme rar is a ring all-reduce"),
    ("jobs.0.policy=atp", "jobs.0.ps", "missing (required)"),
])
def test_a_ring_job_is_refused_what_it_cannot_have(override, field, message):
    with pytest.raises(ScenarioError) as err:
        parse_scenario(RING, "ring.yaml", [override])
    assert err.value.field == field and err.value.message.startswith(message)


def test_the_controller_plans_ring_agents_and_no_aggregation_for_them():
    scenario = parse_scenario(RING, "ring.yaml")
    placement = compute_placement(scenario)
    assert placement.jobs["ring"].scheme == "rar" and placement.jobs["ring"].notes["ring"] == ["hl1", "hl2", "hr1", "hr2"]
    plan = controller.control_plan(scenario, placement)
    ring = [a for a in plan.agents if a.job == "ring"]
    assert [(a.role, a.name, a.worker_index) for a in ring] == [("ring", w, i) for i, w in
                                                              enumerate(["hl1", "hl2", "hr1", "hr2"])]
    ips = [scenario.topology.node(w).ip for w in ["hl1", "hl2", "hr1", "hr2"]]
    assert all(a.workers == list(enumerate(ips)) and a.submodels == [] and a.transport == "atp" for a in ring)
    assert not any(job == "ring" for job, _ in plan.slot_ranges)
    assert sorted(a.role for a in plan.agents if a.job == "ina") == ["ps", "worker", "worker"]


def ring_record(iteration, iteration_s, exact=True, mismatched=0):
    return {"iteration": iteration, "iteration_s": iteration_s, "comm_s": iteration_s / 2, "sending_rate_bps": 1e6,
            "sent_bytes": 3140, "sent_pkts": 10, "fragments": 10, "retx_pkts": 0, "exact": exact,
            "mismatched_fragments": mismatched}


def test_a_ring_jobs_completion_time_and_exactness_come_from_its_workers():
    job = SimpleNamespace(name="ring", scheme="rar", transport="atp", workers=["a", "b"], ps=[], ps_agents=[],
                          iterations=2, is_ring=True, completion_agents=["a", "b"], straggler_allowance=True,
                          training=None)
    records = {"a": [ring_record(0, 0.2), ring_record(1, 0.4)], "b": [ring_record(0, 0.3), ring_record(1, 0.3)]}
    m = job_metrics(job, records)
    assert m["iterations_completed"] == 2 and m["aggregation_exact"] and m["mismatched_fragments"] == 0
    assert m["iteration_time_s"] == pytest.approx(0.3)             # the slowest worker's mean
    assert m["ps_ingress_bytes"] == 0 and m["ina_amount_bytes"] == 0.0 and m["fragments_sent"] == 40
    records["b"][1] = ring_record(1, 0.3, exact=False, mismatched=3)
    m = job_metrics(job, records)
    assert not m["aggregation_exact"] and m["mismatched_fragments"] == 3
    m = job_metrics(job, {"a": records["a"], "b": records["b"][:1]})
    assert m["iterations_completed"] == 1 and not m["aggregation_exact"]


def test_acks_cover_runs_of_four_and_the_end_of_a_chunk():
    acks = DelayedAcks(every=4, delay_s=0.002)
    key = (0, 1)
    got = [acks.on_data(key, i, ce=False, duplicate=False, complete=i == 5, now_s=0.0) for i in range(6)]
    assert got == [[], [], [], [Ack(key, 0, 4, False)], [], [Ack(key, 4, 2, False)]]
    assert acks.next_due_s() is None


def test_a_ce_mark_a_gap_and_a_duplicate_are_answered_at_once():
    acks = DelayedAcks(every=4, delay_s=0.002)
    key = (3, 0)
    assert acks.on_data(key, 0, ce=False, duplicate=False, complete=False, now_s=0.0) == []
    assert acks.on_data(key, 1, ce=True, duplicate=False, complete=False, now_s=0.0) == [Ack(key, 0, 2, True)]
    assert acks.on_data(key, 2, ce=False, duplicate=False, complete=False, now_s=0.0) == []
    # 4 arrives before 3: the run [2] closes, [4] starts.
    assert acks.on_data(key, 4, ce=False, duplicate=False, complete=False, now_s=0.0) == [Ack(key, 2, 1, False)]
    assert acks.on_data(key, 1, ce=False, duplicate=True, complete=False, now_s=0.0) == \
        [Ack(key, 4, 1, False), Ack(key, 1, 1, False)]
    assert acks.runs == {}


def test_a_run_is_acknowledged_when_its_delay_runs_out_per_step():
    acks = DelayedAcks(every=4, delay_s=0.002)
    acks.on_data((0, 0), 7, ce=False, duplicate=False, complete=False, now_s=1.0)
    acks.on_data((0, 1), 0, ce=False, duplicate=False, complete=False, now_s=1.001)   # an early next step
    assert acks.next_due_s() == pytest.approx(1.002)
    assert acks.due(1.0015) == []
    assert acks.due(1.002) == [Ack((0, 0), 7, 1, False)]
    assert acks.due(1.003) == [Ack((0, 1), 0, 1, False)] and acks.next_due_s() is None


def test_the_simulator_models_a_ring():
    alone = RING.split("  - {name: ina")[0]
    scenario = parse_scenario(alone, "ring.yaml")
    result = sim.evaluate(scenario, compute_placement(scenario))
    ring = result["jobs"]["ring"]
    total = sum(fragments_per_submodel(scenario.jobs[0].submodel_elements, scenario.switch.lanes))
    assert ring["ring"] and ring["sent_fragments"] == 6 * total           # 2 (N - 1) chunks of N workers
    assert ring["ps_ingress_fragments"] == ring["switch_egress_fragments"] == ring["ina_amount_bytes"] == 0
    # Each worker's uplink carries its data (314-byte frames) and its ACKs to its predecessor (58 bytes per
    # 4 fragments): 4 Mb/s x 314 / 328.5.
    rate_bps = 4e6 * 314 / (314 + 58 / 4)
    assert ring["min_sending_rate_bps"] == pytest.approx(rate_bps, rel=1e-9)
    step_s = 8 * 314 / 4e6 + 8 * 58 / 4e6
    assert ring["comm_time_s"] == pytest.approx(max(fragments_sent(rar_steps(r, 4, total)) for r in range(4)) * 8 * 314
                                                / rate_bps + 6 * step_s)
    assert "ring all-reduce, " in sim.format_simulation(result)
    # Beside an INA job crossing the same two paths, the ring's two crossings share them with it.
    both = parse_scenario(RING, "ring.yaml")
    result = sim.evaluate(both, compute_placement(both))
    assert result["jobs"]["ina"]["ps_ingress_fragments"] > 0 and not result["jobs"]["ina"]["ring"]
    assert result["jobs"]["ring"]["min_sending_rate_bps"] < rate_bps


def test_h_ar_forms_its_racks_under_the_tors_and_refuses_uneven_ones():
    text = RING.split("  - {name: ina")[0].replace("policy: rar", "policy: h-ar")
    scenario = parse_scenario(text, "ring.yaml")
    placement = compute_placement(scenario)
    assert placement.jobs["ring"].notes["racks"] == [[0, 1], [2, 3]]          # hl1, hl2 under s1; hr1, hr2 under s2
    plan = controller.control_plan(scenario, placement)
    assert {(a.schedule, tuple(map(tuple, a.racks))) for a in plan.agents} == {("h-ar", ((0, 1), (2, 3)))}
    with pytest.raises(PlacementError, match=r"h-ar: job ring needs as many workers under every ToR .* s1: 3, s2: 1"):
        compute_placement(parse_scenario(text, "ring.yaml", ["jobs.0.workers=[hl1, hl2, hl3, hr1]"]))
    # The simulator rates its three phases apart: within the racks (one link each way per worker), then
    # between them, where hl1 -> hr1 and hl2 -> hr2 take the dumbbell's two paths.
    assert [p.peers for p in job_phases("h-ar", 4, 8, [[0, 1], [2, 3]])] == [(1, 0, 3, 2), (2, 3, 0, 1),
                                                                              (1, 0, 3, 2)]
    ring = sim.evaluate(scenario, placement)["jobs"]["ring"]
    total = sum(fragments_per_submodel(scenario.jobs[0].submodel_elements, scenario.switch.lanes))
    assert ring["ring"] and ring["sent_fragments"] == 6 * total and 0 < ring["comm_time_s"] < 1
    rar = parse_scenario(RING, "ring.yaml")
    assert {a.schedule for a in controller.control_plan(rar, compute_placement(rar)).agents if a.role == "ring"} == {"rar"}


def test_h_ars_middle_phase_needs_the_rack_to_rack_capacity_rings_do_not():
    """On Rina's testbed H-AR's middle phase sends each rack's four streams between the ToRs at once, RAR one
    stream each way: with one host link's rate between the ToRs H-AR is the slower, joined without
    oversubscription (the scenario's 400 Gb/s) it is the faster, and RAR is the same on both."""
    one_link = ["topology.links=[[w1, t1], [w2, t1], [w3, t1], [w4, t1], [w5, t2], [w6, t2], [w7, t2], [w8, t2], "
                "[t1, t2]]"]

    def comm_s(scheme, overrides=()):
        scenario = load_scenario(RINA_TESTBED, [f"policy={scheme}", *overrides])
        return sim.evaluate(scenario, compute_placement(scenario))["jobs"]["job"]["comm_time_s"]

    assert comm_s("rar") == pytest.approx(comm_s("rar", one_link), rel=1e-9)
    assert comm_s("h-ar") < comm_s("rar") < comm_s("h-ar", one_link)


def test_a_rings_step_overhead_reaches_its_agents_and_the_simulator():
    base = RING.split("  - {name: ina")[0]
    with_overhead = parse_scenario(base, "ring.yaml", ["jobs.0.policy_options={rar: {step_overhead: 2ms, "
                                                       "step_jitter: 1ms}}"])
    plain = parse_scenario(base, "ring.yaml")
    agents = controller.control_plan(with_overhead, compute_placement(with_overhead)).agents
    assert {(a.step_overhead_s, a.step_jitter_s) for a in agents} == {(0.002, 0.001)}
    assert {(a.step_overhead_s, a.step_jitter_s) for a in controller.control_plan(plain, compute_placement(plain)).agents} == \
        {(0.0, 0.0)}
    comm = [sim.evaluate(s, compute_placement(s))["jobs"]["ring"]["comm_time_s"] for s in (with_overhead, plain)]
    assert comm[0] - comm[1] == pytest.approx(6 * 0.002)           # the mean, per step: 2 (N - 1) steps
    with pytest.raises(ScenarioError, match="jobs.0.policy_options.rar.step_overhead"):
        parse_scenario(base, "ring.yaml", ["jobs.0.policy_options={rar: {step_overhead: -1ms}}"])
