"""The Python API's ``run`` (testbed/api.py; root): the quickstart built from its file with overrides, run on
pyswitch as ``inatb run`` runs it, and its run directory read back as a summary and DataFrames."""

import json
from pathlib import Path

from testbed import api

REPO = Path(__file__).resolve().parents[2]
QUICKSTART = REPO / "scenarios" / "quickstart.yaml"
ITERATIONS = 10


def test_the_api_runs_the_quickstart_and_loads_its_results(emulation, tmp_path, quiet):
    scenario = api.scenario_from_file(QUICKSTART, [f"jobs.0.iterations={ITERATIONS}"])
    assert api.validate(scenario, "pyswitch").plan.target == "pyswitch"
    result = api.run(scenario, out_root=tmp_path, target="pyswitch", stream=quiet)
    assert result.status == "ok", result.summary.get("error")
    assert result.run_dir.parent.parent == tmp_path and (result.run_dir / "summary.json").is_file()
    assert (result.run_dir / "report.html").is_file() and (result.run_dir / "plots" / "iteration_time.png").is_file()
    assert result.summary["aggregation_exact"] is True
    assert result.jobs.loc["resnet50", "iterations_completed"] == ITERATIONS

    loaded = api.load_run(result.run_dir)
    assert loaded.summary == json.loads(json.dumps(result.summary, default=str))     # as summary.json has it
    assert list(loaded.jobs.index) == ["resnet50"]
    iterations = loaded.iterations()
    assert len(iterations) == 5 * ITERATIONS                 # 4 workers and the PS, one row per iteration each
    assert (iterations[iterations["role"] == "ps"]["exact"] == True).all()  # noqa: E712 - the PS checks each sum
    assert iterations[iterations["role"] == "ps"]["ingress_bytes"].sum() == loaded.jobs.loc["resnet50",
                                                                                           "ps_ingress_bytes"]
