"""Emulation test: workers that do not know their stragglers (``straggler_allowance: false``) resend while the
job waits for its slowest worker, as a deployed transport does, and the run stays a result.

Two of four workers start the iteration 1.2 s late; the fast ones' timers (1 s before the first RTT
sample) fire first and they resend. Under ATP each resend of a contribution a ToR's partial holds
flushes that partial toward the PS (ATP's loss recovery), so the PS aggregates what the switches held (GOAT
§III-A's asynchronous ATP). Under GOAT (``release: hold``) the switch drops those resends and its partials
wait for the stragglers, so nothing is flushed. The resends sent before an iteration's first RESULT are
counted apart (``straggler_wait_retransmissions``) and do not mark the run distorted; every iteration is
exact. ATP on pyswitch, GOAT's hold on pyswitch and bmv2 (the packet suite pins the data plane on both); root
only.
"""

from pathlib import Path

import pytest
from support import require_bmv2
from test_quickstart import assert_clean

from testbed.emulation.orchestrator import run_scenario
from testbed.scenario import load_scenario

GOAT_TESTBED = Path(__file__).resolve().parents[2] / "scenarios" / "papers" / "goat" / "testbed-1000.yaml"


# ATP's 19 slots a switch (5 MB); GOAT's 78 (20 MB, exp3.yaml's), which its sub-models need to go to switches at all.
# Links at a tenth of the testbed's rate (10 Mb/s at 1/1000): what is tested is timers against a 1.2 s wait, not
# rates, and the slower links let the dilation ``auto`` picks fall from 15-57 to 2-6 (the wait lasts 1.2 s times
# that on the wall clock).
@pytest.mark.parametrize("scheme, memory, target", [("atp", "5MB", "pyswitch"), ("goat", "20MB", "pyswitch"),
                                                    ("goat", "20MB", "bmv2")])
def test_fast_workers_resend_while_a_job_without_allowance_waits_and_the_run_stays_a_result(
        emulation, tmp_path, quiet, scheme, memory, target):
    if target == "bmv2":
        require_bmv2()
    scenario = load_scenario(GOAT_TESTBED, [
        "jobs.0.model=resnet18", "jobs.0.compute_time=10ms", "jobs.0.iterations=1", "metrics.warmup_iterations=0",
        f"switch.memory={memory}", "topology.link_rate=10Gbps",
        "topology.workers_per_rack=2", "jobs.0.workers=[w1,w2,w3,w4]", f"policy={scheme}",
        "stragglers.compute_delay=[{workers: [w2, w4], distribution: fixed, value: 1.2s}]",
        "jobs.0.straggler_allowance=false"])
    result = run_scenario(scenario, out_root=tmp_path, target=target, stream=quiet)
    summary, job = result.summary, result.summary["jobs"][0]
    assert summary["status"] == "ok" and summary["aggregation_exact"] is True, summary["error"]
    assert job["iterations_completed"] == 1
    waits = job["straggler_wait_retransmissions"]
    assert waits > 0 and waits == job["transport_events"]["retx_before_first_result"]
    flushed = sum(int(s["partial_flushed"]) for s in summary["switches"].values())
    held = sum(int(s["retx_held"]) for s in summary["switches"].values())
    if scheme == "atp":
        assert flushed > 0 and held == 0      # resends flushed partials
    else:
        assert flushed == 0 and held > 0      # the partials waited for the stragglers
    assert summary["distorted"] is False, summary["distortion_reasons"]
    assert_clean()
