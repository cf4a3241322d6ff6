"""A run at ``time_dilation: auto`` on a host busier than the plan measured runs again, slower
(testbed.plan.rerun_dilation), keeping every run's directory.

The busy host is this one with a neighbour: a process outside the run spins on each core the run may use for the
whole test, so the machine is busy past ``SATURATED_MACHINE_SHARE`` whatever the run does, and every run is marked
for its CPU (testbed/metrics/distortion.py), on any machine. The planner calibrated its costs before the
neighbour came (the cached calibration, or the command's own with the neighbour present: either way the
quickstart plans a small N), so the first run, then its two reruns at twice and four times its N, all end
host-bound: three run directories, the last one's summary naming the other two, and ``--strict`` exit 9.
"""

import contextlib
import json
import math
import subprocess
import sys
from pathlib import Path

from test_quickstart import QUICKSTART, assert_clean, inatb

from testbed.metrics.cpu import available_cores
from testbed.metrics.distortion import host_bound
from testbed.outcome import EXIT_DISTORTED
from testbed.plan import AUTO_RERUN_FACTOR, AUTO_RERUNS


@contextlib.contextmanager
def busy_neighbour():
    """A process spinning beside the run per core it may use (testbed.metrics.cpu.available_cores), stopped when
    the block ends."""
    spinners = [subprocess.Popen([sys.executable, "-c", "while True: pass"])
                for _ in range(math.ceil(available_cores()))]
    try:
        yield
    finally:
        for spinner in spinners:
            spinner.kill()
            spinner.wait()


def test_an_auto_run_that_a_busy_neighbour_makes_host_bound_runs_again_slower(emulation, tmp_path):
    with busy_neighbour():
        proc = inatb("run", str(QUICKSTART), "--out", str(tmp_path), "--target", "pyswitch", "--strict",
                     "--set", "time_dilation=auto", "--set", "jobs.0.iterations=4")
    assert proc.returncode == EXIT_DISTORTED, proc.stderr[-3000:]
    last = Path(proc.stdout.strip().splitlines()[-1])
    summary = json.loads((last / "summary.json").read_text())
    assert summary["status"] == "ok" and summary["aggregation_exact"] is True
    assert host_bound(summary["distortion_reasons"]), summary["distortion_reasons"]
    earlier = summary["superseded_runs"]
    assert len(earlier) == AUTO_RERUNS and proc.stderr.count(": running it again at time dilation") == AUTO_RERUNS
    dilations = [run["time_dilation"] for run in earlier] + [summary["time_dilation"]]
    assert dilations == [dilations[0] * AUTO_RERUN_FACTOR ** i for i in range(AUTO_RERUNS + 1)]
    assert sorted(p.name for p in last.parent.iterdir()) == sorted([run["run_id"] for run in earlier] + [last.name])
    for run in earlier:                    # every run's results kept, each marked for the host
        kept = json.loads((last.parent / run["run_id"] / "summary.json").read_text())
        assert kept["status"] == "ok" and kept["aggregation_exact"] is True
        assert kept["time_dilation"] == run["time_dilation"] and kept["distortion_reasons"] == run["distortion_reasons"]
        assert host_bound(kept["distortion_reasons"]) and kept["superseded_runs"] == earlier[:earlier.index(run)]
    assert "ran again after run " + earlier[0]["run_id"] in proc.stderr
    assert_clean()
