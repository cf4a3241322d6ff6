"""Emulation test: workers that do not know their stragglers (``straggler_allowance: false``) resend while the
job waits for its slowest worker, as a deployed transport does, and the run stays a result.

Two of four ATP workers start the iteration 1.2 s late; the fast ones' timers (1 s before the first RTT
sample) fire first and they resend. Each resend of a contribution a ToR's partial holds
flushes that partial toward the PS (ATP's loss recovery), so the PS aggregates what the switches held (GOAT
§III-A's asynchronous ATP). The resends sent before an iteration's first RESULT are counted apart
(``straggler_wait_retransmissions``) and do not mark the run distorted; every iteration is exact. Pyswitch
(the data plane is the one the packet suite pins on both targets); root only.
"""

from pathlib import Path

from test_quickstart import assert_clean

from testbed.emulation.orchestrator import run_scenario
from testbed.scenario import load_scenario

GOAT_TESTBED = Path(__file__).resolve().parents[2] / "scenarios" / "papers" / "goat" / "testbed-1000.yaml"


def test_fast_workers_resend_while_a_job_without_allowance_waits_and_the_run_stays_a_result(emulation, tmp_path,
                                                                                          quiet):
    scenario = load_scenario(GOAT_TESTBED, [
        "jobs.0.model=resnet18", "jobs.0.compute_time=10ms", "jobs.0.iterations=1", "metrics.warmup_iterations=0",
        "switch.memory=5MB",
        "topology.workers_per_rack=2", "jobs.0.workers=[w1,w2,w3,w4]", "policy=atp",
        "stragglers.compute_delay=[{workers: [w2, w4], distribution: fixed, value: 1.2s}]",
        "jobs.0.straggler_allowance=false"])
    result = run_scenario(scenario, out_root=tmp_path, target="pyswitch", stream=quiet)
    summary, job = result.summary, result.summary["jobs"][0]
    assert summary["status"] == "ok" and summary["aggregation_exact"] is True, summary["error"]
    assert job["iterations_completed"] == 1
    waits = job["straggler_wait_retransmissions"]
    assert waits > 0 and waits == job["transport_events"]["retx_before_first_result"]
    assert sum(int(s["partial_flushed"]) for s in summary["switches"].values()) > 0   # resends flushed partials
    assert summary["distorted"] is False, summary["distortion_reasons"]
    assert_clean()
