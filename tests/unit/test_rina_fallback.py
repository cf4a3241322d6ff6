"""Rina §IV-C2's fallback after a worker's error, pure parts: the members after it, the next ring
generation's configs, the refusals before a run, the generation on the wire, the agents' stop-and-resume
exchange with the orchestrator, and the records of a redone iteration."""

import json
import os
import signal
import threading
import time

import pytest

from testbed.agents.ring_generation import (HaltRequest, RingHalted, await_next_generation, generation_path,
                                            halted_path)
from testbed.atomic_io import write_text_atomic
from testbed.controller import control_plan, rina_fallback_configs
from testbed.dataplane.wire import WireError, rina_generation_iteration, rina_iteration
from testbed.emulation.events import InjectionScheduler
from testbed.emulation.failover import RingFallback
from testbed.errors import PlacementError, ScenarioError
from testbed.metrics.summary import job_metrics, load_records
from testbed.schemes import compute_placement
from testbed.schemes.ring import fallback_members
from testbed.reports.text import format_summary
from testbed.scenario import parse_scenario
from testbed.sim import evaluate

TWO_RACKS = """version: 1
topology:
  kind: explicit
  link_rate: 1Gbps
  switches: [t1, t2, {name: t3, programmable: false}]
  hosts: [w1, w2, w3, w4, w5, w6, w7]
  links: [[w1, t1], [w2, t1], [w3, t1], [w4, t2], [w5, t2], [w6, t3], [w7, t3], [t1, t3], [t2, t3]]
jobs:
  - {name: j, gradient_size: 1MB, workers: [w1, w2, w3, w4, w5, w6, w7], policy: %s, iterations: 4, window: 256}
switch: {slots: 64}
stragglers: {failures: %s}
"""


def two_racks(failures="[]", scheme="rina"):
    return parse_scenario(TWO_RACKS % (scheme, failures))


def test_after_a_workers_error_the_ring_goes_on_as_rina_iv_c2_says():
    members = [{"workers": ["w6"], "tor": None}, {"workers": ["w1", "w2", "w3"], "tor": "t1"},
               {"workers": ["w4", "w5"], "tor": "t2"}]
    # an agent: its rack's other workers default to RAR, autonomous members in its place
    assert fallback_members(members, "w1") == [
        {"workers": ["w6"], "tor": None}, {"workers": ["w2"], "tor": None}, {"workers": ["w3"], "tor": None},
        {"workers": ["w4", "w5"], "tor": "t2"}]
    # a rack's other worker: the agent excludes it, the rack goes on
    assert fallback_members(members, "w2") == [
        {"workers": ["w6"], "tor": None}, {"workers": ["w1", "w3"], "tor": "t1"},
        {"workers": ["w4", "w5"], "tor": "t2"}]
    # an autonomous worker: the others bypass it
    assert fallback_members(members, "w6") == members[1:]
    with pytest.raises(ValueError, match="w9 is not a member's worker"):
        fallback_members(members, "w9")


def test_the_next_generations_configs_leave_the_failed_worker_out_and_keep_the_other_rack():
    scenario = two_racks()
    configs = control_plan(scenario, compute_placement(scenario)).agents
    topo = scenario.topology
    ip = {w: topo.node(w).ip for w in scenario.jobs[0].workers}
    # generation 0: [t1's rack (w1 w2 w3), t2's rack (w4 w5), w6, w7]; w1 fails in iteration 2
    after = {c.name: c for c in rina_fallback_configs(configs, "w1", window=256, redo_from=2)}
    assert sorted(after) == ["w2", "w3", "w4", "w5", "w6", "w7"]
    ring = [(0, ip["w2"]), (1, ip["w3"]), (2, ip["w4"]), (3, ip["w6"]), (4, ip["w7"])]
    assert all(c.workers == ring and c.generation == 1 and c.first_iteration == 2 for c in after.values())
    assert all(c.contributors == [1, 2, 3, 4, 5, 6] for c in after.values())      # w1 is index 0
    assert all(c.member_tors == [(0, ""), (1, ""), (2, topo.node("t2").ip), (3, ""), (4, "")] for c in after.values())
    assert [(c.member_index, c.rack_tor_node, c.rack_rank, c.agent_ip, c.window) for c in (after["w2"], after["w3"])] \
        == [(0, 0, 0, ip["w2"], 256), (1, 0, 0, ip["w3"], 256)]          # autonomous, the job's window
    t2 = topo.node("t2").node_id
    assert [(c.member_index, c.rack_tor_node, c.rack_size, c.rack_rank, c.agent_ip, c.window)
            for c in (after["w4"], after["w5"])] == [(2, t2, 2, 0, ip["w4"], 64), (2, t2, 2, 1, ip["w4"], 64)]
    # A second failure goes on from the first's configs: t2's rack falls back too, w1 stays out of the sum.
    again = {c.name: c for c in rina_fallback_configs(list(after.values()), "w4", window=256, redo_from=3)}
    assert [c.workers for c in again.values()][0] == [(m, ip[w]) for m, w in enumerate(["w2", "w3", "w5", "w6", "w7"])]
    assert all(c.generation == 2 and c.contributors == [1, 2, 4, 5, 6] and not c.rack_tor_node
               for c in again.values())
    # A rack worker's error: its rack goes on with one shard fewer, the others' bits as they were.
    rest = {c.name: c for c in rina_fallback_configs(configs, "w2", window=256, redo_from=1)}
    t1 = topo.node("t1").node_id
    assert [(c.member_index, c.rack_tor_node, c.rack_size, c.rack_rank, c.agent_ip, c.window)
            for c in (rest["w1"], rest["w3"])] == [(0, t1, 2, 0, ip["w1"], 64), (0, t1, 2, 2, ip["w1"], 64)]
    assert rest["w1"].workers == [(0, ip["w1"]), (1, ip["w4"]), (2, ip["w6"]), (3, ip["w7"])]
    assert rest["w1"].contributors == [0, 2, 3, 4, 5, 6]


@pytest.mark.parametrize("failures,scheme,expected", [
    ("[{worker: w1, at: 1s}]", "rar", "stragglers.failures.0.worker: w1 is a worker of job j (scheme rar)"),
    ("[{worker: w6, at: 1s}, {worker: w7, at: 2s}, {worker: w1, at: 3s}, {worker: w2, at: 4s}, {worker: w3, at: 5s}]",
     "rina", "stragglers.failures.4.worker: after w3's error job j would be a ring of one member"),
])
def test_a_failure_the_emulation_would_not_run_as_rina_says_is_refused_before_the_run(failures, scheme, expected):
    scenario = two_racks(failures, scheme)
    with pytest.raises(PlacementError) as err:
        control_plan(scenario, compute_placement(scenario))
    assert expected in str(err.value) and "\n" not in str(err.value)


def test_a_fallback_that_would_need_another_gather_port_is_refused():
    """t2's rack sends its finished chunks toward the next member, w1, over one of two parallel links (static
    ECMP by the successor's node id); after w1's error its next member is w2, which the other link reaches."""
    text = """version: 1
topology:
  kind: explicit
  link_rate: 1Gbps
  switches: [t1, t2]
  hosts: [w1, w2, w3, w4]
  links: [[w1, t1], [w2, t1], [w3, t2], [w4, t2], [t1, t2], [t1, t2]]
jobs:
  - {name: j, gradient_size: 1MB, workers: [w1, w2, w3, w4], policy: rina, iterations: 4}
stragglers: {failures: [{worker: w1, at: 1s}]}
"""
    scenario = parse_scenario(text)
    with pytest.raises(PlacementError, match="stragglers.failures.0.worker: after w1's error the next member of t2's "
                                          "Rina rack is reached through another port of t2"):
        control_plan(scenario, compute_placement(scenario))


def test_a_failure_is_a_worker_at_a_time_once():
    scenario = two_racks("[{worker: w1, at: 1.5s}]")
    (inj,) = scenario.stragglers.injections
    assert (inj.kind, inj.target, inj.at_s, inj.duration_s) == ("failure", ("w1",), 1.5, 0.0)
    assert evaluate(scenario, compute_placement(scenario))["not_modelled"] == ["stragglers: failures"]
    for failures, field in (("[{worker: w9, at: 1s}]", "stragglers.failures.0.worker"),
                            ("[{worker: w1, at: 1s, duration: 1s}]", "stragglers.failures.0"),
                            ("[{worker: w1, at: 1s}, {worker: w1, at: 2s}]", "stragglers.failures.1.worker")):
        with pytest.raises(ScenarioError, match=field):
            two_racks(failures)


def test_the_generation_rides_in_the_iteration_field():
    assert rina_iteration(0, 7) == 7 and rina_iteration(2, 7) == (2 << 24) | 7
    assert rina_generation_iteration(rina_iteration(3, 12345)) == (3, 12345)
    assert rina_iteration(1, 0) > rina_iteration(0, (1 << 24) - 1)       # a redone iteration is newer to a slot
    for generation, iteration in ((0, 1 << 24), (256, 0), (-1, 0)):
        with pytest.raises(WireError):
            rina_iteration(generation, iteration)


def test_a_halt_request_stops_the_ring_at_its_next_wake_up_once():
    previous = signal.getsignal(signal.SIGUSR2)
    try:
        halt = HaltRequest()
        halt.check()                               # nothing asked: nothing happens
        os.kill(os.getpid(), signal.SIGUSR2)
        with pytest.raises(RingHalted):
            halt.check()
        halt.check()                               # the request is forgotten once raised
    finally:
        signal.signal(signal.SIGUSR2, previous)


def test_a_stopped_agent_says_what_it_completed_and_resumes_with_its_next_config(tmp_path):
    scenario = two_racks()
    config = next(c for c in control_plan(scenario, compute_placement(scenario)).agents if c.name == "w2")
    config.run_dir = str(tmp_path)
    (tmp_path / "agents").mkdir()
    with pytest.raises(TimeoutError, match="no config of ring generation 1"):
        await_next_generation(config, 3, timeout_s=0.05)
    assert json.loads(halted_path(tmp_path, "w2", 1).read_text()) == {"completed": 3}
    (after,) = [c for c in rina_fallback_configs(control_plan(scenario, compute_placement(scenario)).agents, "w1", 256, 3)
                if c.name == "w2"]

    def orchestrator():
        time.sleep(0.05)
        generation_path(tmp_path, "w2", 1).write_text(after.to_json())

    threading.Thread(target=orchestrator).start()
    resumed = await_next_generation(config, 3, timeout_s=5)
    assert resumed == after and resumed.first_iteration == 3


def test_the_orchestrator_redoes_the_iteration_the_ring_had_not_completed_everywhere(tmp_path):
    scenario = two_racks()
    configs = {c.name: c for c in control_plan(scenario, compute_placement(scenario)).agents}
    (tmp_path / "agents").mkdir()
    completed = {"w2": 3, "w3": 3, "w4": 2, "w5": 3, "w6": 3, "w7": 3}
    signalled = []

    def signal_agent(name, signum):           # each agent answers at once with what it completed
        signalled.append((name, signum))
        halted_path(tmp_path, name, 1).write_text(json.dumps({"completed": completed[name]}))

    fallback = RingFallback(tmp_path, configs, {"j": 256}, signal_agent, lambda name: None, timeout_s=5)
    outcome = fallback.after_failure("w1")
    assert outcome == {"job": "j", "generation": 1, "redo_from_iteration": 2, "members": 5, "completed": completed}
    assert sorted(signalled) == [(w, signal.SIGUSR2) for w in sorted(completed)]
    written = json.loads(generation_path(tmp_path, "w4", 1).read_text())
    assert written["generation"] == 1 and written["first_iteration"] == 2 and written["member_index"] == 2
    # a job already ended needs no new ring
    ended = RingFallback(tmp_path, configs, {"j": 256}, signal_agent, lambda name: 0, timeout_s=5)
    assert ended.after_failure("w1") == {"job": "j", "fallback": "none: the job had ended"}


def test_a_worker_that_ends_instead_of_stopping_fails_the_fallback(tmp_path):
    from testbed.errors import EmulationError

    scenario = two_racks()
    configs = {c.name: c for c in control_plan(scenario, compute_placement(scenario)).agents}
    fallback = RingFallback(tmp_path, configs, {"j": 256}, lambda name, signum: None,
                            lambda name: 1 if name == "w3" else None, timeout_s=5)
    with pytest.raises(EmulationError, match="w3 ended \\(exit 1\\) before it stopped for ring generation 1"):
        fallback.after_failure("w1")


def test_a_failure_is_applied_once_and_never_reverted():
    scenario = two_racks("[{worker: w1, at: 0s}]")
    applied, reverted = [], []

    class Log:
        def write(self, *args, **fields):
            pass

    scheduler = InjectionScheduler(scenario.stragglers.injections, applied.append, reverted.append, Log())
    scheduler.begin(time.monotonic())
    scheduler.join(timeout=5)
    scheduler.stop()
    assert [i.kind for i in applied] == ["failure"] and reverted == []


def record(iteration, generation, exact=True, iteration_s=0.2):
    return {"iteration": iteration, "generation": generation, "exact": exact, "mismatched_fragments": 0,
            "iteration_s": iteration_s, "comm_s": 0.1, "sending_rate_bps": 1e6, "sent_bytes": 1000, "sent_pkts": 10,
            "fragments": 10, "retx_pkts": 0}


def test_a_redone_iteration_keeps_its_later_record_and_the_failed_worker_times_nothing(tmp_path):
    scenario = two_racks()
    job = scenario.jobs[0]
    (tmp_path / "records").mkdir()
    rows = {w: [record(0, 0), record(1, 0), record(1, 1, iteration_s=0.3), record(2, 1), record(3, 1)]
            for w in job.workers if w != "w1"}
    rows["w1"] = [record(0, 0, iteration_s=5.0)]
    for w, lines in rows.items():
        (tmp_path / "records" / f"{w}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in lines))
    records = load_records(tmp_path)
    assert [(r["iteration"], r["generation"]) for r in records["w2"]] == [(0, 0), (1, 1), (2, 1), (3, 1)]
    metrics = job_metrics(job, records, failed={"w1"})
    assert metrics["iterations_completed"] == 4 and metrics["aggregation_exact"] is True
    assert metrics["failed_workers"] == ["w1"] and "w1" not in metrics["participants"]
    assert metrics["iteration_time_s"] == pytest.approx((0.2 + 0.3 + 0.2 + 0.2) / 4)   # w1's 5 s counts not
    assert metrics["fragments_sent"] == 6 * 40 + 10                                   # what it sent does


def test_the_report_says_what_a_failure_led_to():
    summary = {"scenario": "s", "status": "ok", "target": "pyswitch", "wall_s": 1.0, "jobs": [],
               "aggregation_exact": True,
               "stragglers": {"injections": [{"kind": "failure", "target": ["w1"], "at_s": 0.5, "duration_s": 0.0,
                                              "rate_bps": None}]},
               "failures": [{"worker": "w1", "job": "j", "generation": 1, "redo_from_iteration": 2, "members": 5}]}
    text = format_summary(summary)
    assert "failure w1 at 0.5 s (events.jsonl)" in text
    assert "w1 failed: job j fell back to a ring of 5 members (generation 1), redoing iteration 2" in text
