"""A scenario's plan is made once (testbed/plan.py): the placement is solved once per command, for the run and the
simulator alike (``simulate`` and a simulated sweep point too), and ``validate`` plans what ``run`` would."""

import dataclasses
import json
from pathlib import Path

import pytest
from report_fixtures import job_summary, write_run

from testbed import cli, schemes
from testbed.emulation import orchestrator
from testbed.errors import EnvironmentMissingError
from testbed.plan import make_plan, resolve_target
from testbed.scenario import load_scenario

REPO = Path(__file__).resolve().parents[2]
GRID_MOTIVATION = REPO / "scenarios" / "papers" / "grid" / "motivation.yaml"   # an LP scheme (GRID)


@pytest.fixture
def solves(monkeypatch):
    """How many times a command solves GRID's LP: the registry's GRID, counting the jobs it places."""
    calls = []
    grid = schemes.SCHEMES["grid"]

    def counting(job, scenario):
        calls.append(scenario.name)
        return grid.place(job, scenario)

    monkeypatch.setitem(schemes.SCHEMES, "grid", dataclasses.replace(grid, place=counting))
    return calls


def test_a_plan_solves_its_placement_once_for_the_run_and_the_simulator(solves):
    scenario = load_scenario(GRID_MOTIVATION, ["scale=0.001"])
    plan = make_plan(scenario, "pyswitch")
    assert plan.target == "pyswitch" and plan.time_dilation >= 1
    assert set(plan.control.switches) == {"s1", "s2", "s3"}
    assert plan.simulation()["min_sending_rate_bps"] == pytest.approx(3e6)     # GRID's 3 Gb/s, scaled
    assert plan.simulation() is plan.simulation()
    assert solves == [scenario.name]


def test_fidelity_runs_and_simulates_one_placement(solves, monkeypatch, tmp_path, capsys):
    """``inatb fidelity`` on an LP scheme: one solve, the run given the plan the simulator evaluated."""
    ran = []

    def fake_run(scenario, out_root, target=None, stream=None, plan=None, on_finished=None):
        ran.append(plan)
        run_dir = write_run(tmp_path / "run")
        summary = {**json.loads((run_dir / "summary.json").read_text()), "switch_egress_fragments": 0,
                   "jobs": [{**job_summary(name="fig1", scheme="grid"), "ps_ingress_fragments_per_iteration": 1.0}]}
        result = orchestrator.RunResult(run_dir, summary)
        if on_finished is not None:
            on_finished(result)
        return result

    monkeypatch.setattr(orchestrator, "run_scenario", fake_run)
    assert cli.main(["fidelity", str(GRID_MOTIVATION), "--set", "scale=0.001", "--target", "pyswitch",
                     "--out", str(tmp_path)]) == 0
    assert len(ran) == 1 and ran[0] is not None
    assert len(solves) == 1
    assert "min_sending_rate_bps" in capsys.readouterr().err


def test_simulate_and_a_simulated_sweep_point_solve_the_plans_one_placement(solves, tmp_path, capsys):
    """``inatb simulate`` and a simulated run (a sweep's ``simulate: true`` point) consume a scenario plan:
    its placement solved once, its simulation that placement's."""
    jobs = len(load_scenario(GRID_MOTIVATION).jobs)
    assert cli.main(["simulate", str(GRID_MOTIVATION)]) == 0
    assert len(solves) == jobs and "minimum sending rate" in capsys.readouterr().out
    from testbed.sim.run import simulate_into
    run_dir = simulate_into(load_scenario(GRID_MOTIVATION), tmp_path)
    assert len(solves) == 2 * jobs and json.loads((run_dir / "summary.json").read_text())["simulated"] is True


def test_validate_plans_what_the_run_would(capsys):
    scenario = load_scenario(GRID_MOTIVATION, ["scale=0.001", "time_dilation=auto"])
    plan = make_plan(scenario, installed_only=False)
    assert cli.main(["validate", str(GRID_MOTIVATION), "--set", "scale=0.001", "--set", "time_dilation=auto"]) == 0
    assert f"time_dilation auto: {plan.time_dilation:g} " in capsys.readouterr().out


def test_an_explicit_bmv2_must_be_installed_to_run_but_not_to_validate(monkeypatch):
    monkeypatch.setattr("shutil.which", lambda name: None)
    with pytest.raises(EnvironmentMissingError, match="target bmv2 needs simple_switch and p4c"):
        resolve_target("bmv2")
    assert resolve_target("bmv2", installed_only=False) == "bmv2"
    assert resolve_target("auto") == "pyswitch"
