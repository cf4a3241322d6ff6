"""ESA on real runs (root; in CI): two jobs share one switch's slots (scenarios/esa-two-jobs.yaml), the one
of higher priority evicts the other's partial aggregates, and both stay exact, on pyswitch and bmv2."""

from pathlib import Path

import pytest
from support import require_bmv2
from test_quickstart import assert_clean

from testbed.emulation.orchestrator import run_scenario
from testbed.scenario import load_scenario

ESA_TWO_JOBS = Path(__file__).resolve().parents[2] / "scenarios" / "esa-two-jobs.yaml"


@pytest.mark.parametrize("target", ("pyswitch", "bmv2"))
def test_the_job_of_higher_priority_evicts_the_others_partials_and_both_are_exact(target, emulation, tmp_path,
                                                                                   quiet):
    if target == "bmv2":
        require_bmv2()
    # The scenario's ten iterations a job: each iteration of `low` holds partials for w2's 20 ms, and with
    # four iterations a loaded machine once shifted the jobs so that `high` met none of them (bmv2, in CI).
    scenario = load_scenario(ESA_TWO_JOBS)
    summary = run_scenario(scenario, out_root=tmp_path, target=target, stream=quiet).summary
    assert summary["status"] == "ok" and summary["aggregation_exact"], summary["error"]
    assert [j["iterations_completed"] for j in summary["jobs"]] == [10, 10]
    s1 = summary["switches"]["s1"]
    assert s1["esa_evicted"] > 0, s1
    ingress = {j["job"]: j["ps_ingress_bytes"] for j in summary["jobs"]}
    assert ingress["high"] < ingress["low"], ingress      # the higher priority keeps more of its aggregation
    assert_clean()
