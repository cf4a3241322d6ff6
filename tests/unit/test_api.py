"""The Python API (testbed/api.py) gives what the command line gives, through the same code: a scenario from a
dict, YAML text or a file with overrides, the same one-line errors, ``validate``'s plan lines, ``simulate``'s
figures, and results directories as pandas objects. ``run`` needs root: tests/emulation/test_api_run.py."""

import json
import shutil
from pathlib import Path

import pandas as pd
import pytest
import yaml
from report_fixtures import write_sweep

from testbed import api, cli
from testbed.errors import ScenarioError, UsageError
from testbed.metrics.summary import load_records, write_iterations_csv
from testbed.plan import describe, make_plan
from testbed.scenario import load_scenario

REPO = Path(__file__).resolve().parents[2]
QUICKSTART = REPO / "scenarios" / "quickstart.yaml"
RECORDED = Path(__file__).resolve().parent / "data" / "recorded-quickstart-run"
#: The simulator's own timings: how long it took here, not what it found.
TIMING_KEYS = ("solve_s", "placement_s", "evaluate_s")


def quickstart_dict() -> dict:
    return yaml.safe_load(QUICKSTART.read_text())


def same_scenario(a, b) -> bool:
    return (a.name, a.seed, a.scale, a.target, a.time_dilation, a.switch, a.jobs) == \
        (b.name, b.seed, b.scale, b.target, b.time_dilation, b.switch, b.jobs) and \
        describe(make_plan(a, installed_only=False)) == describe(make_plan(b, installed_only=False))


def cli_error(capsys, *argv) -> str:
    """The one line ``inatb`` prints for an error, without its ``inatb COMMAND: error:`` prefix."""
    assert cli.main(list(argv)) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    prefix = f"inatb {argv[0]}: error: "
    assert err.startswith(prefix)
    return err[len(prefix):].rstrip("\n")


def without_timings(value):
    if isinstance(value, dict):
        return {k: without_timings(v) for k, v in value.items() if k not in TIMING_KEYS}
    if isinstance(value, list):
        return [without_timings(v) for v in value]
    return value


def test_a_scenario_from_a_dict_is_the_scenario_of_its_file():
    document = quickstart_dict()
    scenario = api.scenario_from_dict(document)
    assert scenario.source == api.DICT_SOURCE
    assert same_scenario(scenario, load_scenario(QUICKSTART))
    assert document == quickstart_dict(), "the dict is left as it was"


def test_a_dict_may_hold_tuples_where_yaml_has_lists():
    document = quickstart_dict()
    document["topology"]["links"] = [tuple(link) for link in document["topology"]["links"]]
    assert same_scenario(api.scenario_from_dict(document), load_scenario(QUICKSTART))


def test_yaml_text_and_a_file_with_overrides_give_the_scenario_the_command_line_gives():
    overrides = ["policy=ps", "jobs.0.iterations=5"]
    from_text = api.scenario_from_yaml(QUICKSTART.read_text(), overrides)
    from_file = api.scenario_from_file(QUICKSTART, overrides)
    assert from_text.jobs[0].scheme == from_file.jobs[0].scheme == "ps"
    assert from_text.jobs[0].iterations == from_file.jobs[0].iterations == 5
    assert same_scenario(from_text, load_scenario(QUICKSTART, overrides))
    assert same_scenario(from_file, load_scenario(QUICKSTART, overrides))
    assert same_scenario(api.scenario_from_dict(quickstart_dict(), overrides), from_file)
    assert api.scenario_from_file(QUICKSTART, "policy=ps").jobs[0].scheme == "ps", "one string is one override"


def test_a_bad_key_is_the_same_one_line_as_the_command_lines(tmp_path, capsys):
    path = tmp_path / "typo.yaml"
    path.write_text(QUICKSTART.read_text().replace("window: 32", "windw: 32"))
    line = cli_error(capsys, "validate", str(path))
    assert "jobs.0.windw: unknown key; did you mean window?" in line and f"{path}:" in line
    with pytest.raises(ScenarioError) as from_file:
        api.scenario_from_file(path)
    with pytest.raises(ScenarioError) as from_text:
        api.scenario_from_yaml(path.read_text(), source=str(path))
    assert str(from_file.value) == str(from_text.value) == line


def test_a_bad_override_is_the_same_one_line_as_the_command_lines(capsys):
    line = cli_error(capsys, "validate", str(QUICKSTART), "--set", "scale=big")
    for make in (lambda: api.scenario_from_file(QUICKSTART, ["scale=big"]),
                 lambda: api.scenario_from_yaml(QUICKSTART.read_text(), ["scale=big"]),
                 lambda: api.scenario_from_dict(quickstart_dict(), ["scale=big"])):
        with pytest.raises(ScenarioError) as error:
            make()
        assert str(error.value) == line == "--set scale=big: expected a number, got 'big'"


def test_a_dicts_errors_name_the_dict_and_the_field_without_a_line():
    document = quickstart_dict()
    document["jobs"][0]["polcy"] = "atp"
    with pytest.raises(ScenarioError) as error:
        api.scenario_from_dict(document)
    assert str(error.value) == "<dict>: jobs.0.polcy: unknown key; did you mean policy?"
    document = quickstart_dict()
    document["jobs"][0]["compute_time"] = object()
    with pytest.raises(ScenarioError) as error:
        api.scenario_from_dict(document)
    assert str(error.value) == ("<dict>: jobs.0.compute_time: expected plain data (a dict, list, str, int, float, "
                                "bool or None), got builtins.object")
    with pytest.raises(ScenarioError, match=r"^<dict>: \(file\): expected a dict, got list$"):
        api.scenario_from_dict([])


def test_validate_gives_the_plan_and_the_lines_inatb_validate_prints(capsys):
    scenario = api.scenario_from_file(QUICKSTART)
    validation = api.validate(scenario)
    assert validation.lines == describe(make_plan(scenario, installed_only=False))
    # auto: bmv2 where it is installed, else pyswitch (testbed.budget.target_choice)
    assert validation.plan.target == make_plan(scenario, installed_only=False).target
    assert validation.plan.scenario is scenario
    assert cli.main(["validate", str(QUICKSTART)]) == 0
    assert capsys.readouterr().out.splitlines() == [f"{QUICKSTART}: valid"] + validation.lines


def test_simulate_gives_the_figures_inatb_simulate_json_prints(capsys):
    simulation = api.simulate(api.scenario_from_file(QUICKSTART))
    assert cli.main(["simulate", str(QUICKSTART), "--json"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert without_timings(json.loads(json.dumps(simulation.figures, default=str))) == without_timings(printed)
    assert list(simulation.jobs.index) == ["resnet50"] and simulation.jobs.index.name == "job"
    assert simulation.jobs.loc["resnet50", "comm_time_s"] == printed["jobs"]["resnet50"]["comm_time_s"] > 0


def test_a_recorded_run_directory_loads_as_a_summary_and_dataframes(tmp_path):
    run_dir = tmp_path / "run"
    shutil.copytree(RECORDED, run_dir)
    # what a run writes beside its summary (testbed.emulation.results.summarise), from its records
    records = load_records(run_dir)
    write_iterations_csv(run_dir / "iterations.csv", load_scenario(run_dir / "scenario.yaml"), records)
    loaded = api.load_run(run_dir)
    assert loaded.run_dir == run_dir and loaded.status == "ok"
    assert loaded.summary == json.loads((RECORDED / "summary.json").read_text())
    assert isinstance(loaded.jobs, pd.DataFrame) and list(loaded.jobs.index) == ["resnet50"]
    assert loaded.jobs.loc["resnet50", "iterations_completed"] == 6
    assert loaded.jobs.loc["resnet50", "policy"] == "atp"
    iterations = loaded.iterations()
    assert iterations.equals(api.load_iterations(run_dir))
    assert len(iterations) == sum(len(rows) for rows in records.values()) == 5 * 6
    assert sorted(iterations["node"].unique()) == ["ps", "w1", "w2", "w3", "w4"]
    assert iterations[iterations["role"] == "ps"]["ingress_bytes"].sum() == loaded.jobs.loc["resnet50",
                                                                                           "ps_ingress_bytes"]


def test_a_run_directory_without_iterations_csv_is_one_line_naming_the_file(tmp_path):
    with pytest.raises(UsageError, match=r"iterations\.csv: unreadable") as error:
        api.load_run(RECORDED).iterations()
    assert "\n" not in str(error.value)
    with pytest.raises(UsageError, match=r"summary\.json: unreadable"):
        api.load_run(tmp_path)


def test_a_sweep_directory_loads_as_its_table_axes_metrics_and_point_means(tmp_path):
    sweep_dir = write_sweep(tmp_path / "sweep")
    loaded = api.load_sweep(sweep_dir)
    assert loaded.table.equals(pd.read_csv(sweep_dir / "table.csv"))
    assert len(loaded.table) == 4 and loaded.axes == ["policy"]
    assert {"iteration_time_s", "ps_ingress_bytes"} <= set(loaded.metrics)
    means = loaded.point_means().set_index("policy")
    assert list(means["runs"]) == [2, 2]
    assert means.loc["ps", "ps_ingress_bytes"] == 960000 and means.loc["atp", "ps_ingress_bytes"] == 240000
    assert means.loc["ps", "iteration_time_s"] == pytest.approx(2 * 0.0405)
    with pytest.raises(UsageError, match=r"table\.csv: unreadable"):
        api.load_sweep(tmp_path)
