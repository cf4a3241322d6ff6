"""A run that makes no progress is stopped early and diagnosed, not waited out."""

import json
from pathlib import Path

import pytest
from test_quickstart import assert_clean

from testbed.emulation.orchestrator import run_scenario
from testbed.emulation.stall import stall_bound_s
from testbed.errors import RunStalled
from testbed.scenario import load_scenario

QUICKSTART = Path(__file__).resolve().parents[2] / "scenarios" / "quickstart.yaml"


def test_a_stalled_job_stops_early_with_a_diagnosis(emulation, tmp_path, quiet):
    # w3 is stopped (SIGSTOP) for longer than the run may last: nobody's iteration can complete.
    scenario = load_scenario(QUICKSTART, ["run_timeout=300s", "jobs.0.iterations=20",
                                          "stragglers={pauses: [{worker: w3, at: 0.3s, duration: 250s}]}"])
    bound_s = stall_bound_s(scenario)
    assert bound_s < 60
    with pytest.raises(RunStalled, match=r"stalled: no iteration completed for \d+s \(bound \d+s"):
        run_scenario(scenario, out_root=tmp_path, target="pyswitch", stream=quiet)
    (run_dir,) = (tmp_path / "quickstart").iterdir()
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["status"] == "stalled" and summary["error"].startswith("stalled:")
    assert summary["wall_s"] < bound_s + 30                       # stopped at the bound, not at run_timeout
    diagnosis = json.loads((run_dir / "diagnosis.json").read_text())
    s1 = diagnosis["switches"]["s1"]
    assert s1["slots_held"]["resnet50"] >= 0
    assert s1["moved_since_progress"]["retx_bypassed"] > 0         # the others' retransmissions went on to the PS
    assert diagnosis["agents"]["ps"]["role"] == "ps" and diagnosis["agents"]["ps"]["incomplete"] > 0
    missing = {w for entry in diagnosis["agents"]["ps"]["first_incomplete"] for w in entry["workers_missing"]}
    assert missing == {2}                                         # w3 is worker index 2
    assert diagnosis["agents"]["w1"]["phase"] == "communicating" and diagnosis["agents"]["w1"]["results_missing"]
    assert diagnosis["agents"]["w3"] == {"status": "no answer"}   # stopped: it cannot answer
    assert_clean()
