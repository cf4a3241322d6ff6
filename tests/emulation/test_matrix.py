"""Every scheme on every kind of topology: exact aggregation, or a one-line refusal before any network.

The matrix (matrix_scenarios.py) is every policy name x {one rack; dumbbell
with parallel paths; GOAT's testbed; leaf-spine with jobs spanning racks and
two jobs sharing switches; fat-tree k=4 with 20% programmable switches}, on
pyswitch; the GOAT-testbed row for ps, atp and goat runs on bmv2 too. A run
must complete every iteration with every aggregate bit-exact and leave
nothing behind; where a scheme cannot apply, the plan refuses it with the
reason asserted here, before the network exists.
"""

import pytest
from matrix_scenarios import SCHEME_NAMES, TOPOLOGIES, scenario_text
from support import require_bmv2
from test_quickstart import assert_clean

from testbed.emulation.orchestrator import run_scenario
from testbed.errors import PlacementError
from testbed.scenario import parse_scenario

REFUSED = {
    ("switchml", "goat-testbed"): "workers sit under 2 aggregation switches (s1, s2); SwitchML aggregates in a "
                                  "single rack",
    ("switchml", "leaf-spine"): "workers sit under 2 aggregation switches (lf1, lf2); SwitchML aggregates in a "
                                "single rack",
    ("switchml", "fat-tree"): "no programmable switch between worker h1 and its PS",
    ("lbmm", "goat-testbed"): "has one parameter server (ps); lbmm splits the model among several",
    ("inart", "goat-testbed"): "has one parameter server (ps); inart splits the model among several",
    ("inart-equal", "goat-testbed"): "has one parameter server (ps); inart-equal splits the model among several",
}

CASES = [(scheme, topology) for topology in TOPOLOGIES for scheme in SCHEME_NAMES]
BMV2_CASES = [("ps", "goat-testbed"), ("atp", "goat-testbed"), ("goat", "goat-testbed")]


def run_case(scheme, topology, target, tmp_path, quiet):
    scenario = parse_scenario(scenario_text(scheme, topology), f"matrix-{scheme}-{topology}.yaml")
    refusal = REFUSED.get((scheme, topology))
    if refusal:
        with pytest.raises(PlacementError, match=refusal.replace("(", r"\(").replace(")", r"\)")) as caught:
            run_scenario(scenario, out_root=tmp_path, target=target, stream=quiet)
        assert "\n" not in str(caught.value)
        assert not any(tmp_path.iterdir()), "a refused run created files"
        return
    summary = run_scenario(scenario, out_root=tmp_path, target=target, stream=quiet).summary
    assert summary["status"] == "ok", summary["error"]
    for job in summary["jobs"]:
        assert job["iterations_completed"] == job["iterations"] == 3, job
        assert job["aggregation_exact"], job
        assert job["retransmission_ratio"] is not None
    assert summary["aggregation_exact"]
    assert "distorted" in summary and "retransmission_ratio" in summary
    assert_clean()


@pytest.mark.parametrize("scheme,topology", CASES, ids=[f"{p}-{t}" for p, t in CASES])
def test_matrix_pyswitch(scheme, topology, emulation, tmp_path, quiet):
    run_case(scheme, topology, "pyswitch", tmp_path, quiet)


@pytest.mark.parametrize("scheme,topology", BMV2_CASES, ids=[f"{p}-{t}" for p, t in BMV2_CASES])
def test_matrix_bmv2(scheme, topology, emulation, tmp_path, quiet):
    require_bmv2()
    run_case(scheme, topology, "bmv2", tmp_path, quiet)
