"""PA-ATP and StrawAsyn on real runs (root; in CI): exact aggregation with the switch's GACKs and the
PS's, on one switch (pyswitch and bmv2) and on PA-ATP's two-switch testbed with two jobs."""

from pathlib import Path

import pytest
from support import require_bmv2
from test_quickstart import QUICKSTART, assert_clean

from testbed.emulation.orchestrator import run_scenario
from testbed.scenario import load_scenario

REPO = Path(__file__).resolve().parents[2]
PA_ATP_TESTBED = REPO / "scenarios" / "papers" / "pa-atp" / "testbed.yaml"


@pytest.mark.parametrize("target, transport", [("pyswitch", "pa-atp"), ("pyswitch", "strawasyn"),
                                               ("bmv2", "pa-atp")])
def test_quickstart_is_exact_and_every_gradient_is_gacked(target, transport, emulation, tmp_path, quiet):
    if target == "bmv2":
        require_bmv2()
    scenario = load_scenario(QUICKSTART, [f"transport={transport}", "jobs.0.iterations=5"])
    summary = run_scenario(scenario, out_root=tmp_path, target=target, stream=quiet).summary
    assert summary["aggregation_exact"] and summary["jobs"][0]["transport"] == transport
    # One switch aggregates every contribution: each one is answered by a GACK (the completing ones by
    # a clone), none by the PS.
    s1 = summary["switches"]["s1"]
    assert s1["gacked"] == s1["aggregated"] == summary["fragments_sent"] - summary["retransmitted_packets"] > 0
    assert_clean()


def test_two_jobs_on_the_pa_atp_testbed_are_exact(emulation, tmp_path, quiet):
    scenario = load_scenario(PA_ATP_TESTBED, ["transport=pa-atp", "background=[]", "jobs.0.iterations=3",
                                              "jobs.1.iterations=3"])
    summary = run_scenario(scenario, out_root=tmp_path, target="pyswitch", stream=quiet).summary
    assert summary["status"] == "ok" and summary["aggregation_exact"], summary["error"]
    assert [j["iterations_completed"] for j in summary["jobs"]] == [3, 3]
    assert summary["switches"]["s2"]["gacked"] > 0          # INA on S2 only: its GACKs
    assert "gacked" not in summary["switches"]["s1"] or summary["switches"]["s1"]["gacked"] == 0
    assert_clean()
