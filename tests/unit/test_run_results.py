"""A run's summary is made from its directory and its plan alone (testbed.emulation.results), with no root and
no network: a recorded run directory of the quickstart (6 iterations on pyswitch) gives its summary again,
and emulated and simulated runs share the summary's one producer (testbed.metrics.summary.run_summary)."""

import json
import shutil
from pathlib import Path

from testbed.emulation.results import RunObservations, summarise
from testbed.metrics.summary import run_summary
from testbed.plan import make_plan
from testbed.schemes import compute_placement
from testbed.scenario import load_scenario
from testbed.sim import evaluate
from testbed.sim.run import simulated_summary

RECORDED = Path(__file__).resolve().parent / "data" / "recorded-quickstart-run"
#: What says which machine and code made the summary, not what the run did.
MACHINE_KEYS = ("packet_budget", "versions", "git_commit", "host")


def summary_again(tmp_path):
    run_dir = tmp_path / "run"
    shutil.copytree(RECORDED, run_dir)
    recorded = json.loads((run_dir / "summary.json").read_text())
    (run_dir / "summary.json").unlink()
    seen = RunObservations.read(run_dir)
    plan = make_plan(load_scenario(run_dir / "scenario.yaml"), seen.target)
    summary = json.loads(json.dumps(summarise(run_dir, plan, seen), default=str))   # as summary.json has it
    return run_dir, recorded, summary


def test_a_recorded_run_directory_gives_its_summary_again(tmp_path):
    run_dir, recorded, summary = summary_again(tmp_path)
    assert set(summary) == set(recorded)
    assert {key: value for key, value in summary.items() if key not in MACHINE_KEYS} == \
        {key: value for key, value in recorded.items() if key not in MACHINE_KEYS}
    assert json.loads((run_dir / "summary.json").read_text()) == summary
    for name in ("iterations.csv", "plots/iteration_time.png", "plots/ps_ingress_rate.png",
                 "plots/worker_send_rate.png", "plots/aggregation_rate.png", "iftop/ps.txt"):
        assert (run_dir / name).is_file(), name
    assert "plot_error" not in summary


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
