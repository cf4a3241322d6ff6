"""The ``paced`` transport on real runs (root; in CI): workers send at the rate given, or at the rate their
scheme plans, and the fidelity figure holds (InArt §5.3's fixed-rate workers)."""

import pytest
from test_quickstart import QUICKSTART, assert_clean

from testbed import sim
from testbed.emulation.orchestrator import run_scenario
from testbed.fidelity import compare, format_fidelity
from testbed.schemes import compute_placement
from testbed.scenario import load_scenario


def run(scenario, out, quiet, undistorted=True):
    summary = run_scenario(scenario, out_root=out, target="pyswitch", stream=quiet).summary
    assert summary["status"] == "ok" and summary["aggregation_exact"], summary["error"]
    assert not (undistorted and summary["distorted"]), summary["distortion_reasons"]
    assert_clean()
    return summary


def test_paced_workers_send_at_the_given_rate(emulation, tmp_path, quiet):
    # The quickstart's links run at 5 Mb/s: paced at a fifth of that (1 Mb/s after scale), each worker's
    # frames leave at that rate, whatever the window would allow.
    scenario = load_scenario(QUICKSTART, ["transport=paced", "jobs.0.transport_options={rate: 20Gbps}",
                                          "jobs.0.iterations=4", "metrics.warmup_iterations=1"])
    rate_bps = scenario.jobs[0].transport_options["rate_bps"]
    summary = run(scenario, tmp_path, quiet)
    job = summary["jobs"][0]
    assert job["transport"] == "paced" and job["retransmitted_packets"] == 0
    assert job["min_gradient_sending_rate_bps"] == pytest.approx(rate_bps, rel=0.1)
    assert job["gradient_sending_rate_bps"] == pytest.approx(rate_bps, rel=0.1)     # every worker, not a burst


def test_paced_at_the_planned_rate_holds_the_fidelity_bounds(emulation, tmp_path, quiet):
    # Three measured iterations of 15 ms: one stall of a few milliseconds moves the mean past the bound (one run in
    # five read 1.34x, unmarked) or a round trip's wait past the host-delay mark (19% of the communication in one
    # full-suite run, against 15%), so a run outside the bounds or marked is repeated once, as the fidelity tests
    # do. At the dilation the planner picks for this machine (held to one core: 2; at N = 1 a round trip waited
    # 43% of a window there, marked by host delay).
    scenario = load_scenario(QUICKSTART, ["transport=paced", "jobs.0.iterations=4", "metrics.warmup_iterations=1",
                                          "time_dilation=auto"])
    simulation = sim.evaluate(scenario, compute_placement(scenario))
    tables = []
    for attempt in range(2):
        summary = run(scenario, tmp_path / f"run{attempt}", quiet, undistorted=False)
        fidelity = compare(summary, simulation)
        if fidelity["all_within"] and not summary["distorted"]:
            return
        tables.append(format_fidelity(fidelity) + "".join(f"\n{reason}" for reason in summary["distortion_reasons"]))
    raise AssertionError("outside the bounds or distorted in both runs:\n" + "\n\n".join(tables))
