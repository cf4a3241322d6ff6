"""A scenario's plan is made once (testbed/plan.py): the placement is solved once per command, for the run and the
simulator alike (``simulate`` and a simulated sweep point too), and ``validate`` plans what ``run`` would."""

import dataclasses
import io
import json
from pathlib import Path

import pytest
from report_fixtures import job_summary, write_run

from testbed import cli, schemes
from testbed.emulation import orchestrator
from testbed.errors import EnvironmentMissingError, RunLockError, ScenarioError
from testbed.metrics.distortion import Evidence, assess, host_bound, reason_kind
from testbed.plan import (AUTO_RERUN_FACTOR, AUTO_RERUNS, make_plan, rerun_dilation, rerun_plan, resolve_target,
                          slowed_plan)
from testbed.scenario import MAX_TIME_DILATION, load_scenario

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


RINA_TESTBED = REPO / "scenarios" / "papers" / "rina" / "testbed.yaml"      # a ring: one round trip per step
CPU_BOUND = assess(Evidence(cpu={"machine": {"mean": 0.95}, "cores": 2}))
SPURIOUS = assess(Evidence(fragments_sent=100, spurious_retransmissions=10))


def auto_plan(dilation="auto"):
    return make_plan(load_scenario(RINA_TESTBED, ["policy=rar", f"time_dilation={dilation}"]), "pyswitch",
                     installed_only=False)


def test_the_host_bound_reasons_are_the_cpu_and_the_host_delay_ones():
    assert CPU_BOUND and SPURIOUS
    assert host_bound(CPU_BOUND) and not host_bound(SPURIOUS) and not host_bound([])
    assert host_bound(SPURIOUS + CPU_BOUND)
    assert reason_kind("host delay: a round trip of job j waited 3 ms") == "host delay"


def test_an_auto_run_that_ends_host_bound_runs_again_at_twice_its_n_twice_at_most():
    plan = auto_plan()
    n = plan.time_dilation
    host_bound_ok = {"status": "ok", "distortion_reasons": CPU_BOUND}
    assert rerun_dilation(plan, host_bound_ok, 0) == AUTO_RERUN_FACTOR * n
    assert rerun_dilation(plan, host_bound_ok, AUTO_RERUNS - 1) == AUTO_RERUN_FACTOR * n
    assert rerun_dilation(plan, host_bound_ok, AUTO_RERUNS) is None                 # enough
    assert rerun_dilation(plan, {"status": "ok", "distortion_reasons": SPURIOUS}, 0) is None   # not the host's
    assert rerun_dilation(plan, {"status": "ok", "distortion_reasons": []}, 0) is None        # a result
    assert rerun_dilation(plan, {**host_bound_ok, "status": "stalled"}, 0) is None
    assert rerun_dilation(auto_plan(dilation=n), host_bound_ok, 0) is None         # a fixed N is the answer
    at_most = dataclasses.replace(plan, time_dilation=MAX_TIME_DILATION)
    assert rerun_dilation(at_most, host_bound_ok, 0) is None
    near_most = dataclasses.replace(plan, time_dilation=0.6 * MAX_TIME_DILATION)
    assert rerun_dilation(near_most, host_bound_ok, 0) == MAX_TIME_DILATION


def test_a_slowed_plan_is_the_same_plan_with_its_network_and_control_made_at_the_new_n():
    plan = auto_plan()
    slowed = slowed_plan(plan, 2 * plan.time_dilation)
    assert slowed.time_dilation == 2 * plan.time_dilation and slowed.placement is plan.placement
    assert slowed.budget is plan.budget and slowed.target == plan.target and slowed.scenario is plan.scenario
    link = next(iter(plan.world.topology.links))
    assert next(iter(slowed.world.topology.links)).rate_bps == pytest.approx(link.rate_bps / 2)
    fixed = auto_plan(dilation=2 * plan.time_dilation)          # made at that N from the start
    assert slowed.world.topology.links == fixed.world.topology.links
    assert slowed.control.switches == fixed.control.switches and slowed.control.agents == fixed.control.agents


def test_a_plan_whose_slowed_world_cannot_be_shaped_is_not_run_again(monkeypatch):
    plan = auto_plan()

    def unshapeable(world):
        raise ScenarioError("topology.link_rate", "valid for `inatb simulate` only")
    monkeypatch.setattr("testbed.plan.require_emulable", unshapeable)
    assert rerun_plan(plan, {"status": "ok", "distortion_reasons": CPU_BOUND}, 0) is None


class FakeRun:
    """:class:`orchestrator.Run`'s interface without a network: each run's distortion reasons the next of
    ``summaries``; ``raises``: run number -> (what it raises, whether before its results are written)."""
    made = []

    def __init__(self, plan, out_root, stream, on_finished, superseded=()):
        self.plan, self.out_root, self.on_finished, self.superseded = plan, out_root, on_finished, list(superseded)
        FakeRun.made.append(self)

    def execute(self):
        number = len(FakeRun.made)
        raised, before_its_results = FakeRun.raises.get(number, (None, False))
        if raised and before_its_results:
            raise raised                   # the run could not begin: no results
        summary = {"status": "ok", "time_dilation": self.plan.time_dilation, "superseded_runs": self.superseded,
                   "distortion_reasons": FakeRun.summaries[number - 1]}
        result = orchestrator.RunResult(self.out_root / f"run{number}", summary)
        self.on_finished(result)
        if raised:
            raise raised                   # a Ctrl-C held while its results were written, delivered after
        return result


def fake_runs(monkeypatch, summaries, raises=None):
    """run_scenario's runs are :class:`FakeRun`'s with these ``summaries`` and ``raises``, none made yet."""
    monkeypatch.setattr(orchestrator, "preflight", lambda: None)
    monkeypatch.setattr(FakeRun, "made", [])
    monkeypatch.setattr(FakeRun, "summaries", summaries, raising=False)
    monkeypatch.setattr(FakeRun, "raises", raises or {}, raising=False)


@pytest.mark.parametrize("reasons, runs", [((CPU_BOUND, []), 2), ((CPU_BOUND, CPU_BOUND, CPU_BOUND), 3),
                                           ((SPURIOUS,), 1), (([],), 1)])
def test_run_scenario_runs_a_host_bound_auto_run_again_and_hands_over_the_last(monkeypatch, tmp_path, reasons,
                                                                                runs):
    fake_runs(monkeypatch, reasons)
    plan, finished, said = auto_plan(), [], io.StringIO()
    result = orchestrator.run_scenario(plan.scenario, tmp_path, plan=plan, stream=said,
                                       on_finished=finished.append, run_class=FakeRun)
    assert len(FakeRun.made) == runs and finished == [result]
    assert [run.plan.time_dilation for run in FakeRun.made] == \
        [plan.time_dilation * AUTO_RERUN_FACTOR ** i for i in range(runs)]
    assert result.summary["superseded_runs"] == [
        {"run_id": f"run{i + 1}", "time_dilation": plan.time_dilation * AUTO_RERUN_FACTOR ** i,
         "distortion_reasons": CPU_BOUND} for i in range(runs - 1)]
    assert said.getvalue().count("was host-bound") == runs - 1


@pytest.mark.parametrize("raises, handed_over", [({2: (RunLockError("another run holds the lock"), True)}, "run1"),
                                                 ({1: (KeyboardInterrupt(), False)}, "run1"),
                                                 ({2: (KeyboardInterrupt(), False)}, "run2")])
def test_a_run_held_back_to_run_again_is_handed_over_when_the_next_cannot_begin(monkeypatch, tmp_path, raises,
                                                                                handed_over):
    fake_runs(monkeypatch, (CPU_BOUND, CPU_BOUND, []), raises)
    plan, finished = auto_plan(), []
    with pytest.raises((RunLockError, KeyboardInterrupt)):
        orchestrator.run_scenario(plan.scenario, tmp_path, plan=plan, stream=io.StringIO(),
                                  on_finished=finished.append, run_class=FakeRun)
    assert [result.run_dir.name for result in finished] == [handed_over]
