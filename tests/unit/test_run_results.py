"""A run's summary is made from its directory and its plan alone (testbed.emulation.results), with no root and
no network: a recorded run directory of the quickstart (6 iterations on pyswitch) gives its summary again,
and emulated and simulated runs share the summary's one producer (testbed.metrics.summary.run_summary), its
layout's version and the provenance of the code, the P4 program and bmv2's tools with it."""

import json
import os
import re
import shutil
from pathlib import Path

import testbed
from testbed import provenance
from testbed.emulation.results import RunObservations, draw_missing_plots, summarise
from testbed.metrics.definitions import undefined_keys
from testbed.metrics.summary import SUMMARY_SCHEMA_VERSION, run_summary
from testbed.plan import make_plan
from testbed.schemes import compute_placement
from testbed.scenario import load_scenario
from testbed.sim import evaluate
from testbed.sim.run import simulated_summary

RECORDED = Path(__file__).resolve().parent / "data" / "recorded-quickstart-run"
#: What says which machine and code made the summary, not what the run did.
MACHINE_KEYS = ("packet_budget", "versions", "git_commit", "p4_program_sha256", "host")


def summary_again(tmp_path, target=None):
    """(run directory, its recorded summary, the summary made again from it); ``target``: as if that target
    had run it."""
    run_dir = tmp_path / "run"
    shutil.copytree(RECORDED, run_dir)
    recorded = json.loads((run_dir / "summary.json").read_text())
    (run_dir / "summary.json").unlink()
    seen = RunObservations.read(run_dir)
    seen.target = target or seen.target
    plan = make_plan(load_scenario(run_dir / "scenario.yaml"), seen.target, installed_only=False)
    summary = json.loads(json.dumps(summarise(run_dir, plan, seen), default=str))   # as summary.json has it
    return run_dir, recorded, summary


def fake_tool(directory: Path, name: str, output: str) -> None:
    """An executable ``name`` in ``directory`` that prints ``output`` (``--version``'s answer)."""
    path = directory / name
    path.write_text(f"#!/bin/sh\necho '{output}'\n")
    path.chmod(0o755)


def test_a_recorded_run_directory_gives_its_summary_again(tmp_path):
    run_dir, recorded, summary = summary_again(tmp_path)
    assert set(summary) == set(recorded)
    assert {key: value for key, value in summary.items() if key not in MACHINE_KEYS} == \
        {key: value for key, value in recorded.items() if key not in MACHINE_KEYS}
    assert json.loads((run_dir / "summary.json").read_text()) == summary
    for name in ("iterations.csv", "iftop/ps.txt"):
        assert (run_dir / name).is_file(), name
    assert not (run_dir / "plots").exists()          # drawn apart, when asked for


def test_a_recorded_run_directory_gives_its_plots_from_the_directory_alone(tmp_path):
    run_dir, _, _ = summary_again(tmp_path)
    drawn = draw_missing_plots(run_dir)
    assert [p.name for p in drawn] == ["aggregation_rate.png", "iteration_time.png", "ps_ingress_rate.png",
                                       "worker_send_rate.png"]
    assert all(p.stat().st_size > 0 and p.with_suffix(".svg").is_file() for p in drawn)
    stamps = [p.stat().st_mtime_ns for p in drawn]
    assert draw_missing_plots(run_dir) == drawn and [p.stat().st_mtime_ns for p in drawn] == stamps  # not again


def test_the_summary_is_computed_from_the_records_not_copied(tmp_path):
    run_dir, recorded, summary = summary_again(tmp_path)
    job = summary["jobs"][0]
    assert summary["status"] == "ok" and summary["aggregation_exact"] is True
    assert job["iterations_completed"] == job["iterations"] == 6
    ps_records = [json.loads(line) for line in (run_dir / "records" / "ps.jsonl").read_text().splitlines()]
    assert job["ps_ingress_bytes"] == sum(r["ingress_bytes"] for r in ps_records) > 0
    # A record changed changes the summary made from it.
    ps_records[-1]["exact"] = False
    (run_dir / "records" / "ps.jsonl").write_text("".join(json.dumps(r) + "\n" for r in ps_records))
    seen = RunObservations.read(run_dir)
    again = summarise(run_dir, make_plan(load_scenario(run_dir / "scenario.yaml"), seen.target), seen)
    assert again["aggregation_exact"] is False and again["jobs"][0]["aggregation_exact"] is False


def test_emulated_and_simulated_summaries_share_the_producers_keys(tmp_path):
    _, recorded, _ = summary_again(tmp_path)
    scenario = load_scenario(RECORDED / "scenario.yaml")
    simulated = simulated_summary(scenario, evaluate(scenario, compute_placement(scenario)))
    common = set(run_summary(scenario, "any", []))
    assert common <= set(recorded) and common <= set(simulated)
    assert simulated["target"] == "simulator" and recorded["target"] == "pyswitch"
    for summary in (recorded, simulated):
        assert (summary["scenario"], summary["policy"], summary["iterations"]) == ("quickstart", "atp", 6)


def test_a_summary_says_its_layouts_version_first_emulated_or_simulated(tmp_path):
    _, recorded, summary = summary_again(tmp_path)
    scenario = load_scenario(RECORDED / "scenario.yaml")
    simulated = simulated_summary(scenario, evaluate(scenario, compute_placement(scenario)))
    for made in (recorded, summary, simulated, run_summary(scenario, "any", [])):
        assert next(iter(made)) == "schema_version" and made["schema_version"] == SUMMARY_SCHEMA_VERSION == 1
    assert undefined_keys(summary) == [] and undefined_keys(simulated) == []


def test_an_emulated_summary_names_the_p4_program_it_ran_and_on_pyswitch_no_bmv2_tools(tmp_path, monkeypatch):
    tools = tmp_path / "bin"
    tools.mkdir()
    fake_tool(tools, "p4c", "p4c 1.2.4.2 (SHA: 0123abc BUILD: RELEASE)")
    monkeypatch.setenv("PATH", str(tools) + os.pathsep + os.environ["PATH"])
    _, recorded, summary = summary_again(tmp_path)
    assert re.fullmatch(r"[0-9a-f]{64}", summary["p4_program_sha256"])
    assert summary["p4_program_sha256"] == provenance.p4_program_sha256()
    assert re.fullmatch(r"[0-9a-f]{64}", recorded["p4_program_sha256"])
    assert "p4c" not in summary["versions"] and "simple_switch" not in summary["versions"]   # pyswitch ran it
    assert summary["versions"]["testbed"] == testbed.__version__


def test_a_bmv2_runs_summary_keeps_p4cs_and_simple_switchs_versions(tmp_path, monkeypatch):
    tools = tmp_path / "bin"
    tools.mkdir()
    fake_tool(tools, "p4c", "p4c 1.2.4.2 (SHA: 0123abc BUILD: RELEASE)")
    fake_tool(tools, "simple_switch", "1.15.0-0123abcd")
    monkeypatch.setenv("PATH", str(tools) + os.pathsep + os.environ["PATH"])
    _, _, summary = summary_again(tmp_path, target="bmv2")
    assert summary["target"] == "bmv2"
    assert summary["versions"]["p4c"] == "p4c 1.2.4.2 (SHA: 0123abc BUILD: RELEASE)"
    assert summary["versions"]["simple_switch"] == "1.15.0-0123abcd"
    # Without them on PATH the summary says so (null), and the run's summary is written all the same.
    monkeypatch.setattr(provenance.shutil, "which", lambda command: None)
    _, _, summary = summary_again(tmp_path / "again", target="bmv2")
    assert summary["versions"]["p4c"] is None and summary["versions"]["simple_switch"] is None


def test_the_summary_names_the_runs_it_superseded(tmp_path):
    """An auto run that ran again (testbed.plan.rerun_dilation) lists the earlier ones, from its observations."""
    run_dir, _, _ = summary_again(tmp_path)
    seen = RunObservations.read(run_dir)
    earlier = {"run_id": "20261202-000000-abcd", "time_dilation": 2.0,
               "distortion_reasons": ["CPU: the machine was 95% busy on average over 2 cores"]}
    seen.superseded_runs = [earlier]
    summary = summarise(run_dir, make_plan(load_scenario(run_dir / "scenario.yaml"), seen.target), seen)
    assert summary["superseded_runs"] == [earlier]
