"""``sudo inatb run``: the run directory, and the directories made on the way to it, belong to the user who
typed sudo, whether the run ends well or is interrupted; the run's state, lock and control sockets stay root's
(root; the command runs with SUDO_UID/SUDO_GID of nobody, as sudo would set them)."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from support import sigint_at_its_default
from test_quickstart import QUICKSTART, REPO, assert_clean, inatb

from testbed.emulation.state import STATE_ROOT

NOBODY = 65534
SUDO_NOBODY = {"SUDO_UID": str(NOBODY), "SUDO_GID": str(NOBODY)}


def owners(root: Path) -> dict:
    """``root`` and every entry under it -> (uid, gid), symlinks themselves."""
    return {str(p): (os.lstat(p).st_uid, os.lstat(p).st_gid) for p in [root, *root.rglob("*")]}


def assert_the_users(results: Path):
    not_theirs = {path: ids for path, ids in owners(results).items() if ids != (NOBODY, NOBODY)}
    assert not not_theirs, f"not handed over: {not_theirs}"


def assert_roots(state_root: Path):
    assert state_root.exists(), state_root
    not_roots = {path: ids for path, ids in owners(state_root).items() if ids[0] != 0}
    assert not not_roots, f"state not root's: {not_roots}"


def test_a_run_through_sudo_leaves_its_results_to_the_user_and_its_state_to_root(emulation, tmp_path):
    results = tmp_path / "results"                       # made by the run: the user's too; tmp_path stays root's
    proc = inatb("run", str(QUICKSTART), "--out", str(results), "--target", "pyswitch",
                 "--set", "jobs.0.iterations=10", env={**os.environ, **SUDO_NOBODY})
    assert proc.returncode == 0, proc.stderr
    run_dir = Path(proc.stdout.strip().splitlines()[-1])
    assert run_dir.parent.parent == results and (run_dir / "summary.json").exists()
    assert len(owners(run_dir)) > 20                     # the whole run directory, not its top alone
    assert_the_users(results)
    assert (os.stat(run_dir).st_mode & 0o777) == 0o700   # still private
    assert os.stat(tmp_path).st_uid == 0
    assert_roots(STATE_ROOT)
    assert_clean()


def test_an_interrupted_run_through_sudo_leaves_its_results_to_the_user(emulation, tmp_path):
    results = tmp_path / "results"
    proc = subprocess.Popen([sys.executable, "-m", "testbed.cli", "run", str(QUICKSTART), "--out", str(results),
                             "--target", "pyswitch", "--set", "jobs.0.iterations=100000", "--set",
                             "run_timeout=300s"], cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env={**os.environ, **SUDO_NOBODY}, preexec_fn=sigint_at_its_default)
    try:
        deadline = time.monotonic() + 60
        while not any(p.stat().st_size for p in results.glob("quickstart/*/records/ps.jsonl")):
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "the run never started iterating"
            time.sleep(0.1)
        (run_dir,) = results.glob("quickstart/*")
        assert_roots(STATE_ROOT / run_dir.name)          # the live run's state and sockets: root's
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, err
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["status"] == "interrupted"
    assert_the_users(results)
    assert_roots(STATE_ROOT)
    assert_clean()
