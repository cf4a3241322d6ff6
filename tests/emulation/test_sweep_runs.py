"""inatb sweep on real runs (root; in CI): a quickstart sweep runs every point, writes its table and
plot, resumes after Ctrl-C without redoing finished points, and leaves nothing behind."""

import csv
import signal
import subprocess
import sys
import time

import pytest
from support import IN_CI, open_in_chromium, require_browser, sigint_at_its_default
from test_quickstart import QUICKSTART, REPO, assert_clean, inatb


def require_ray():
    """Ray is an optional extra; the test extra (and so CI) has it, where its absence is a failure."""
    try:
        import ray  # noqa: F401
    except ImportError:
        if IN_CI:
            pytest.fail("Ray is missing (the [test] extra installs it; CI must run the Ray sweep)")
        pytest.skip("Ray is not installed (pip install -e '.[ray]')")


def write_sweep(tmp_path):
    path = tmp_path / "sweep.yaml"
    path.write_text(f"version: 1\nname: qs\nscenario: {QUICKSTART}\nset: ['jobs.0.iterations=2', 'target=pyswitch']\n"
                    "axes: {policy: [ps, atp]}\nrepetitions: 2\nmetrics: [iteration_time_s, ps_ingress_bytes]\n")
    return path


def table_rows(out):
    with open(out / "qs" / "table.csv", newline="") as f:
        return list(csv.DictReader(f))


def test_a_sweep_runs_every_point_and_a_second_call_runs_none(emulation, tmp_path):
    sweep, out = write_sweep(tmp_path), tmp_path / "out"
    proc = inatb("sweep", str(sweep), "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    assert "ran 4, already done 0; 4 ok" in proc.stderr
    rows = table_rows(out)
    assert sorted((r["policy"], r["repetition"]) for r in rows) == [("atp", "0"), ("atp", "1"), ("ps", "0"),
                                                                    ("ps", "1")]
    assert all(r["status"] == "ok" and r["aggregation_exact"] == "True" for r in rows)
    # ATP aggregates in the switch: its PS ingress is a fraction of ps's, repetition by repetition.
    ingress = {(r["policy"], r["repetition"]): float(r["ps_ingress_bytes"]) for r in rows}
    assert all(ingress[("atp", rep)] < 0.5 * ingress[("ps", rep)] for rep in ("0", "1"))
    assert (out / "qs" / "plots" / "iteration_time_s.png").stat().st_size > 0
    again = inatb("sweep", str(sweep), "--out", str(out))
    assert again.returncode == 0 and "ran 0, already done 4" in again.stderr, again.stderr
    assert_clean()
    # What the sweep left is browsable and comparable: its page and a run's page load in Chromium with
    # every plot, and compare puts atp's PS ingress beside ps's.
    require_browser()
    by_point = {(r["policy"], r["repetition"]): r["run_dir"] for r in rows}
    for results in (out / "qs", by_point[("atp", "0")]):
        report = inatb("report", str(results), "--html")
        assert report.returncode == 0, report.stderr
        severe, images = open_in_chromium(report.stdout.strip())
        assert severe == [] and images and all(i["naturalWidth"] > 0 for i in images), (severe, images)
    compared = inatb("compare", by_point[("ps", "0")], by_point[("atp", "0")], "--metric", "ps_ingress_bytes")
    assert compared.returncode == 0 and "ps_ingress_bytes" in compared.stdout, compared.stderr


def test_ctrl_c_stops_a_sweep_and_the_next_call_does_only_the_rest(emulation, tmp_path):
    sweep, out = write_sweep(tmp_path), tmp_path / "out"
    proc = subprocess.Popen([sys.executable, "-m", "testbed.cli", "sweep", str(sweep), "--out", str(out)], cwd=REPO,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=sigint_at_its_default)
    try:
        deadline = time.monotonic() + 120
        while not list(out.glob("qs/points/*/*/*/summary.json")):
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "no point finished"
            time.sleep(0.1)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 130, err
    done = [r for r in table_rows(out) if r["status"] == "ok"]
    assert 1 <= len(done) < 4
    assert_clean()
    rest = inatb("sweep", str(sweep), "--out", str(out))
    assert rest.returncode == 0, rest.stderr
    assert f"ran {4 - len(done)}, already done {len(done)}" in rest.stderr
    assert len(table_rows(out)) == 4
    assert_clean()


def test_the_same_sweep_on_a_local_ray_instance(emulation, tmp_path):
    require_ray()
    sweep, out = write_sweep(tmp_path), tmp_path / "out"
    proc = inatb("sweep", str(sweep), "--out", str(out), "--executor", "ray")
    assert proc.returncode == 0, proc.stderr
    assert "ran 4, already done 0; 4 ok" in proc.stderr
    rows = table_rows(out)
    assert len(rows) == 4 and all(r["status"] == "ok" and r["aggregation_exact"] == "True" for r in rows)
    # Each point came back from its Ray task whole: run directory, summary and log.
    for r in rows:
        run_dir = out / "qs" / "points" / r["run_dir"].split("/points/")[1]
        assert (run_dir / "summary.json").is_file() and (run_dir / "iterations.csv").is_file()
        assert (run_dir.parents[1] / "run.log").stat().st_size > 0
    raylets = subprocess.run(["pgrep", "-f", "raylet"], capture_output=True, text=True).stdout
    assert not raylets, "the local Ray instance was left running"
    assert_clean()
