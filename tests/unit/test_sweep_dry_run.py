"""inatb sweep --dry-run: every point with what its run would use (target, time dilation, expected wall time),
points the planner refuses with the line the sweep records, done points skipped as the sweep skips them; no
run, no network, no root, nothing written."""

import math
from pathlib import Path

import pytest

from testbed.cli import main
from testbed.errors import EnvironmentMissingError, PlacementError
from testbed.plan import make_plan
from testbed.sweep import load_sweep, run_sweep
from testbed.sweep import dry_run
from testbed.sweep.dry_run import format_preview, preview_sweep
from testbed.sweep.executors import executor_for

REPO = Path(__file__).resolve().parents[2]
QUICKSTART = REPO / "scenarios" / "quickstart.yaml"
NULL = open("/dev/null", "w")


def sweep_file(tmp_path, body: str) -> Path:
    path = tmp_path / "sweep.yaml"
    path.write_text(f"version: 1\nname: s\nscenario: {QUICKSTART}\n" + body)
    return path


def test_each_point_is_listed_with_the_plan_its_run_would_make_and_the_total(tmp_path):
    spec = load_sweep(sweep_file(tmp_path, "axes: {policy: [ps, atp], jobs.0.iterations: [3]}\nrepetitions: 2\n"))
    preview = preview_sweep(spec, tmp_path / "out", "pyswitch")
    assert [p.point for p in preview.points] == spec.points and {p.status for p in preview.points} == {"planned"}
    for p in preview.points:
        plan = make_plan(spec.scenario_of(p.point), "pyswitch", installed_only=False)
        assert (p.target, p.time_dilation) == ("pyswitch", plan.time_dilation)
        assert p.expected_wall_s == pytest.approx(plan.expected_wall_s()) and p.expected_wall_s > 0
    assert preview.expected_wall_s() == pytest.approx(sum(p.expected_wall_s for p in preview.points))
    assert not (tmp_path / "out").exists()                                      # nothing written
    lines = format_preview(preview)
    assert lines[0].startswith("sweep s (dry run: nothing runs): 4 points (2 x 1 x 2 repetitions), emulated")
    assert lines[1].split() == ["point", "policy", "jobs.0.iterations", "repetition", "target", "time", "dilation",
                                "expected", "wall", "time"]
    for line, p in zip(lines[2:6], preview.points):
        assert line.split()[:5] == [p.point.point_id, p.point.values[0][1], "3", str(p.point.repetition), "pyswitch"]
        assert line.endswith(f"{p.expected_wall_s:.0f} s")
    assert lines[6].startswith("total: 4 to run, 0 already done, 0 refused; expected wall time about ")
    assert len(lines) == 7


def test_a_point_the_planner_refuses_is_listed_with_the_line_the_sweep_records(tmp_path):
    """A simulated sweep, run for real: its refused.json holds the dry run's line. An emulated point's is
    the run plan's refusal."""
    spec = load_sweep(sweep_file(tmp_path, "simulate: true\naxes: {policy: [atp, lbmm]}\n"))
    before = preview_sweep(spec, tmp_path / "out")
    planned, refused = before.points
    assert (planned.status, planned.target, math.isnan(planned.expected_wall_s)) == ("planned", "simulator", True)
    assert refused.status == "refused" and "lbmm" in refused.detail
    result = run_sweep(spec, tmp_path / "out", executor=executor_for(spec), progress=NULL)
    assert [r["error"] for r in result.rows] == ["", refused.detail]
    assert format_preview(before)[-1] == "total: 1 to run, 0 already done, 1 refused; simulated: seconds each, " \
                                         "here, without root"
    # Done now, as the sweep would skip them.
    after = preview_sweep(spec, tmp_path / "out")
    assert [(p.status, p.detail) for p in after.points] == [("done", "ok"), ("done", f"refused: {refused.detail}")]
    assert format_preview(after)[-1].startswith("total: 0 to run, 2 already done, 0 refused")
    emulated = load_sweep(sweep_file(tmp_path, "axes: {policy: [atp, lbmm]}\n"))
    with pytest.raises(PlacementError) as err:
        make_plan(emulated.scenario_of(emulated.points[1]), "pyswitch", installed_only=False)
    preview = preview_sweep(emulated, tmp_path / "other", "pyswitch")
    assert (preview.points[1].status, preview.points[1].detail) == ("refused", str(err.value))
    assert preview.expected_wall_s() == preview.points[0].expected_wall_s       # a refused point takes no time


def test_a_target_this_machine_lacks_is_said_once(tmp_path, monkeypatch):
    spec = load_sweep(sweep_file(tmp_path, "axes: {policy: [ps, atp]}\n"))

    def lacking(requested, installed_only=True):
        raise EnvironmentMissingError(f"target {requested} is not here")

    monkeypatch.setattr(dry_run, "choose_target", lacking)
    preview = preview_sweep(spec, tmp_path / "out", "bmv2")
    assert {p.target for p in preview.points} == {"bmv2"}          # planned for it all the same
    assert format_preview(preview)[-1] == "note: the sweep would stop here: target bmv2 is not here"


def test_inatb_sweep_dry_run_prints_the_points_without_root_and_takes_set(tmp_path, capsys):
    path = sweep_file(tmp_path, "axes: {policy: [ps, atp]}\n")
    assert main(["sweep", str(path), "--dry-run", "--out", str(tmp_path / "out"), "--target", "pyswitch",
                 "--set", "jobs.0.iterations=2"]) == 0
    captured = capsys.readouterr()
    out = captured.out.splitlines()
    assert "planning s:" in captured.err and "0/2" in captured.err    # the bar, on stderr: stdout is the list
    assert "with --set jobs.0.iterations=2" in out[0] and len(out) == 1 + 1 + 2 + 1
    ids = {p.point_id for p in load_sweep(path, ["jobs.0.iterations=2"]).points}
    assert {line.split()[0] for line in out[2:4]} == ids
    assert not (tmp_path / "out").exists()
    assert main(["sweep", str(path), "--dry-run", "--set", "policy=goat"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"inatb sweep: error: {path}:") and "axes.policy: --set policy=goat" in err
