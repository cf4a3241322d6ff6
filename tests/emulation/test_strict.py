"""``inatb run --strict`` (testbed/outcome.py): a run the testbed itself marks distorted exits 9 under
``--strict`` and 0 without it, its results written either way.

The run is distorted on purpose, on any machine: the quickstart at 40 times its scale (200 Mb/s links, 205 kB
per worker and iteration) at time dilation 1 asks its one pyswitch switch for about 372,000 packets per second
and each worker for about 149,000, some 19 and 7 times the reference budget of 20,000 (``inatb validate``
warns of each), with its round trips' waits 20 times what a window allows. Its processes saturate their cores,
the machine is busy and the round trips wait (each alone marks the run: testbed/metrics/distortion.py); the
aggregation stays exact (workers retransmit what is lost). 15 iterations keep each run to seconds.
"""

import json
from pathlib import Path

from test_quickstart import QUICKSTART, assert_clean, inatb

from testbed.outcome import EXIT_DISTORTED

#: Far more packets than the machine can handle at time dilation 1 (see above).
OVERLOADED = ["--target", "pyswitch", "--set", "scale=0.002", "--set", "time_dilation=1",
              "--set", "jobs.0.iterations=15"]


def run_summary(proc) -> dict:
    """The summary of the run whose directory ``inatb run`` printed last on stdout."""
    run_dir = Path(proc.stdout.strip().splitlines()[-1])
    return json.loads((run_dir / "summary.json").read_text())


def test_a_distorted_run_exits_9_under_strict_with_its_results_written(emulation, tmp_path):
    """Without --strict the same run exits 0 (testbed.outcome.run_exit_code, unit-tested branch by branch)."""
    strict = inatb("run", str(QUICKSTART), "--out", str(tmp_path / "strict"), "--strict", *OVERLOADED)
    assert strict.returncode == EXIT_DISTORTED == 9, strict.stderr[-3000:]
    summary = run_summary(strict)                        # written all the same
    assert summary["status"] == "ok" and summary["aggregation_exact"] is True and summary["distorted"] is True
    assert summary["distortion_reasons"], summary
    assert "DISTORTED" in strict.stderr
    assert "inatb run --strict: exit 9: the run is exact but distorted" in strict.stderr
    assert_clean()
