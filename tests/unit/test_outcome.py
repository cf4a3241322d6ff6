"""What a finished run, sweep or reproduction exits with (testbed/outcome.py), and ``--strict`` /
``INATB_STRICT`` reaching it from each command (testbed/cli.py), with the runs stood in for: no root."""

from pathlib import Path

import pytest

from testbed.cli import EXIT_CODES, build_parser, main
from testbed.errors import UsageError
from testbed.outcome import (EXIT_DISTORTED, EXIT_DONE, EXIT_NOT_EXACT, point_exit_code, run_exit_code,
                             strict_from_env, sweep_exit_code)

REPO = Path(__file__).resolve().parents[2]
QUICKSTART = REPO / "scenarios" / "quickstart.yaml"

EXACT = {"status": "ok", "aggregation_exact": True, "distorted": False}
DISTORTED = {**EXACT, "distorted": True, "distortion_reasons": ["CPU: switch s1 used 100% of a core"]}
INEXACT = {**EXACT, "aggregation_exact": False}
INEXACT_AND_DISTORTED = {**INEXACT, "distorted": True}
SIMULATED = {"status": "ok", "simulated": True, "distorted": False}      # no aggregation_exact: nothing aggregated


# -- the decision ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("summary, plain, strict", [
    (EXACT, EXIT_DONE, EXIT_DONE),
    (DISTORTED, EXIT_DONE, EXIT_DISTORTED),                 # exits 0 without --strict, as it always did
    (INEXACT, EXIT_NOT_EXACT, EXIT_NOT_EXACT),
    (INEXACT_AND_DISTORTED, EXIT_NOT_EXACT, EXIT_NOT_EXACT),  # not exact outranks distorted
    ({**EXACT, "status": "stalled"}, EXIT_DONE, EXIT_NOT_EXACT),
    ({**DISTORTED, "status": "failed"}, EXIT_DONE, EXIT_NOT_EXACT),
    ({"status": "ok", "distorted": False}, EXIT_NOT_EXACT, EXIT_NOT_EXACT),   # exactness unknown is not exact
])
def test_a_runs_exit_code(summary, plain, strict):
    assert run_exit_code(summary) == run_exit_code(summary, strict=False) == plain
    assert run_exit_code(summary, strict=True) == strict


@pytest.mark.parametrize("row, plain, strict", [
    (EXACT, EXIT_DONE, EXIT_DONE),
    (DISTORTED, EXIT_DONE, EXIT_DISTORTED),
    (INEXACT, EXIT_DONE, EXIT_NOT_EXACT),                  # a sweep never asked for exactness without --strict
    (INEXACT_AND_DISTORTED, EXIT_DONE, EXIT_NOT_EXACT),
    (SIMULATED, EXIT_DONE, EXIT_DONE),                     # a simulated point counts as exact
    ({**SIMULATED, "distorted": True}, EXIT_DONE, EXIT_DISTORTED),
    ({"status": "refused", "distorted": None}, EXIT_DONE, EXIT_DONE),   # refused at plan time: a finding
    ({**EXACT, "status": "stalled"}, EXIT_NOT_EXACT, EXIT_NOT_EXACT),
    ({**DISTORTED, "status": "failed"}, EXIT_NOT_EXACT, EXIT_NOT_EXACT),
    ({"status": "missing", "distorted": None}, EXIT_NOT_EXACT, EXIT_NOT_EXACT),
    ({"status": "unreadable", "distorted": None}, EXIT_NOT_EXACT, EXIT_NOT_EXACT),
])
def test_a_sweep_points_exit_code(row, plain, strict):
    assert point_exit_code(row) == plain and point_exit_code(row, strict=True) == strict
    assert sweep_exit_code([row]) == plain and sweep_exit_code([row], strict=True) == strict


def test_a_sweep_exits_with_its_worst_points_code():
    assert sweep_exit_code([], strict=True) == EXIT_DONE
    assert sweep_exit_code([EXACT, SIMULATED, {"status": "refused"}], strict=True) == EXIT_DONE
    assert sweep_exit_code([EXACT, DISTORTED, EXACT], strict=True) == EXIT_DISTORTED
    assert sweep_exit_code([DISTORTED, INEXACT, DISTORTED], strict=True) == EXIT_NOT_EXACT
    assert sweep_exit_code([INEXACT, DISTORTED]) == EXIT_DONE
    assert sweep_exit_code([DISTORTED, {**EXACT, "status": "stalled"}]) == EXIT_NOT_EXACT


@pytest.mark.parametrize("value, strict", [("1", True), ("true", True), ("YES", True), (" on ", True),
                                           ("0", False), ("", False), ("false", False), ("No", False),
                                           ("off", False)])
def test_inatb_strict_in_the_environment(value, strict):
    assert strict_from_env({"INATB_STRICT": value}) is strict


def test_inatb_strict_unset_is_not_strict_and_a_value_it_does_not_know_is_refused_in_one_line():
    assert strict_from_env({}) is False
    with pytest.raises(UsageError) as refused:
        strict_from_env({"INATB_STRICT": "maybe\nnot"})
    assert str(refused.value) == "environment variable INATB_STRICT='maybe\\nnot': expected 1 (strict) or 0"
    assert UsageError.exit_code == 2


def test_the_new_code_is_listed_once_and_distinct():
    codes = [code for code, _ in EXIT_CODES]
    assert len(codes) == len(set(codes))
    meanings = dict(EXIT_CODES)
    assert "--strict" in meanings[EXIT_DISTORTED] and "distorted" in meanings[EXIT_DISTORTED]
    assert (EXIT_DONE, EXIT_NOT_EXACT, EXIT_DISTORTED) == (0, 8, 9)
    epilog = build_parser().epilog
    assert "    9  --strict: every run ended ok and exact, but one is distorted" in epilog
    assert "INATB_STRICT  set to 1: --strict for run, fidelity, sweep and reproduce" in epilog


# -- the commands: each reads --strict and INATB_STRICT and asks the decision ------------------------------

@pytest.fixture
def fake_run(monkeypatch, tmp_path):
    """``inatb run`` and ``inatb fidelity`` without a network: the run returns ``summary`` (set by the test)."""
    from testbed.emulation import orchestrator
    from testbed.emulation.orchestrator import RunResult
    made = {"summary": dict(EXACT)}

    def run_scenario(scenario, out_root="results", target=None, stream=None, plan=None, on_finished=None):
        run_dir = tmp_path / "out" / "quickstart" / "run"
        run_dir.mkdir(parents=True, exist_ok=True)
        result = RunResult(run_dir, dict(made["summary"]))
        on_finished(result)
        return result

    monkeypatch.setattr(orchestrator, "run_scenario", run_scenario)
    monkeypatch.setattr("testbed.reports.text.format_summary", lambda summary: "the summary")
    monkeypatch.setattr("testbed.fidelity.compare", lambda summary, simulation: {})
    monkeypatch.setattr("testbed.fidelity.format_fidelity", lambda fidelity: "the fidelity table")
    return made


@pytest.mark.parametrize("command", ["run", "fidelity"])
def test_a_distorted_run_exits_9_under_strict_or_inatb_strict_and_0_without(command, fake_run, monkeypatch, capsys,
                                                                           tmp_path):
    argv = [command, str(QUICKSTART), "--target", "pyswitch", "--out", str(tmp_path / "out")]
    fake_run["summary"] = DISTORTED
    assert main(argv) == EXIT_DONE
    assert "--strict" not in capsys.readouterr().err
    assert main(argv + ["--strict"]) == EXIT_DISTORTED
    out = capsys.readouterr()
    assert f"inatb {command} --strict: exit 9: the run is exact but distorted" in out.err
    assert out.out.strip() == str(tmp_path / "out" / "quickstart" / "run")     # the run directory, as always
    monkeypatch.setenv("INATB_STRICT", "1")
    assert main(argv) == EXIT_DISTORTED
    fake_run["summary"] = EXACT
    assert main(argv) == EXIT_DONE
    fake_run["summary"] = INEXACT_AND_DISTORTED
    assert main(argv) == EXIT_NOT_EXACT
    monkeypatch.setenv("INATB_STRICT", "0")
    fake_run["summary"] = DISTORTED
    assert main(argv) == EXIT_DONE


def test_a_bad_inatb_strict_is_refused_before_anything_runs(fake_run, monkeypatch, capsys, tmp_path):
    from testbed.emulation import orchestrator
    monkeypatch.setattr(orchestrator, "run_scenario", lambda *a, **k: pytest.fail("ran"))
    monkeypatch.setenv("INATB_STRICT", "sometimes")
    assert main(["run", str(QUICKSTART), "--out", str(tmp_path)]) == 2
    assert capsys.readouterr().err == ("inatb run: error: environment variable INATB_STRICT='sometimes': expected 1 "
                                       "(strict) or 0\n")


def sweep_result(tmp_path, rows):
    from testbed.sweep.runner import SweepResult
    return SweepResult(tmp_path, tmp_path / "table.csv", [], len(rows), 0, rows)


def test_a_sweep_with_a_distorted_point_exits_9_under_strict(monkeypatch, capsys, tmp_path):
    import testbed.sweep
    sweep = tmp_path / "sweep.yaml"
    sweep.write_text(f"version: 1\nname: s\nscenario: {QUICKSTART}\naxes: {{policy: [ps, atp, goat]}}\n")
    rows = [{**EXACT, "policy": "ps"}, {**DISTORTED, "policy": "atp"}, {"status": "refused", "policy": "goat"}]
    monkeypatch.setattr(testbed.sweep, "run_sweep", lambda spec, out, **kw: sweep_result(tmp_path, rows))
    argv = ["sweep", str(sweep), "--out", str(tmp_path)]
    assert main(argv) == EXIT_DONE
    assert main(argv + ["--strict"]) == EXIT_DISTORTED
    assert "inatb sweep --strict: exit 9: 1 point exact but distorted" in capsys.readouterr().err
    monkeypatch.setenv("INATB_STRICT", "1")
    assert main(argv) == EXIT_DISTORTED
    rows.append({**INEXACT, "policy": "ps"})
    assert main(argv) == EXIT_NOT_EXACT
    monkeypatch.delenv("INATB_STRICT")
    assert main(argv) == EXIT_DONE                   # without --strict a sweep's points need only end ok


def test_a_simulated_sweep_passes_strict(tmp_path):
    """A simulated point has no aggregates to check and is never distorted: --strict lets it pass."""
    sweep = tmp_path / "sweep.yaml"
    sweep.write_text(f"version: 1\nname: s\nscenario: {QUICKSTART}\nsimulate: true\naxes: {{policy: [ps, atp]}}\n")
    assert main(["sweep", str(sweep), "--out", str(tmp_path / "out"), "--strict"]) == EXIT_DONE


def test_a_reproduction_with_a_distorted_run_exits_9_under_strict(monkeypatch, capsys, tmp_path):
    from testbed import reproduce
    results = iter([[EXACT, SIMULATED], [DISTORTED]] * 2)
    monkeypatch.setattr(reproduce, "run_experiment",
                        lambda experiment, out, target, display, rerun_distorted: sweep_result(tmp_path, next(results)))
    monkeypatch.setattr(reproduce, "require_root_for", lambda chosen: None)
    argv = ["reproduce", "goat", "--only", "motivation,exp3", "--out", str(tmp_path), "--page-dir", str(tmp_path)]
    assert main(argv) == EXIT_DONE
    assert main(argv + ["--strict"]) == EXIT_DISTORTED
    err = capsys.readouterr().err
    assert "inatb reproduce --strict: exit 9: 1 point exact but distorted" in err
