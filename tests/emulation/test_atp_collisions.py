"""Emulation test: ATP's window beyond its slots (``transport_options.slot_bound: false``), with workers
that arrive apart, collides at every switch and still ends each iteration with the exact sum.

A worker that starts 3 ms ahead runs a window of 40 fragments over 19 slots: its fragments meet their slots
still held by the ones a window earlier and overflow (ToR -> level-2 switch -> PS), its siblings follow
them there, and timed-out members flush what the slots kept. Every aggregate holds first sends only, so the
PS merges what arrives without an overlap it cannot resolve (p4/README.md "The slot logic";
testbed/agents/fragment_sum.py). With retransmissions joining partials, the same collisions left the PS of
GOAT's 16-worker testbed unable to complete a fragment, and the run stood still. On pyswitch and bmv2;
root only.
"""

import json
from pathlib import Path

import pytest
from support import require_bmv2
from test_quickstart import assert_clean

from testbed.emulation.orchestrator import run_scenario
from testbed.scenario import load_scenario

GOAT_TESTBED = Path(__file__).resolve().parents[2] / "scenarios" / "papers" / "goat" / "testbed-1000.yaml"


@pytest.mark.parametrize("target", ("pyswitch", "bmv2"))
def test_atps_window_beyond_its_slots_overflows_at_every_switch_and_stays_exact(target, emulation, tmp_path, quiet):
    if target == "bmv2":
        require_bmv2()
    scenario = load_scenario(GOAT_TESTBED, [
        "jobs.0.model=resnet18", "jobs.0.compute_time=10ms", "jobs.0.iterations=3", "switch.memory=5MB",
        "topology.workers_per_rack=2", "jobs.0.workers=[w1,w2,w3,w4]", "policy=atp", "jobs.0.window=40",
        "jobs.0.transport_options={slot_bound: false, initial_window: 40}",
        "stragglers.compute_delay=[{workers: [w2, w4], distribution: fixed, value: 3ms}]"])
    assert scenario.switch.slots == 19
    result = run_scenario(scenario, out_root=tmp_path, target=target, stream=quiet)
    summary, job = result.summary, result.summary["jobs"][0]
    assert summary["status"] == "ok" and summary["aggregation_exact"] is True, summary["error"]
    assert job["iterations_completed"] == 3
    switches = summary["switches"]
    assert all(switches[s]["collision_bypassed"] > 0 for s in ("s1", "s2", "s3")), switches
    assert sum(switches[s]["overflow_followed"] for s in ("s1", "s2")) > 0
    ps_rows = [json.loads(line) for line in (result.run_dir / "records" / "ps.jsonl").read_text().splitlines()]
    assert len(ps_rows) == 3 and all(row["exact"] for row in ps_rows)
    assert sum(row["raw_pkts"] for row in ps_rows) > 0            # overflowed gradients reached the PS
    assert sum(row["overlap_drops"] for row in ps_rows) == 0
    assert_clean()
