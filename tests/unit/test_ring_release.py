"""A ring job's workers stop lingering once every one of them has recorded its last iteration
(testbed.emulation.monitor.Monitor.release_finished_rings, testbed.agents.ring.job_done_path)."""

import json
from types import SimpleNamespace

from testbed.agents.ring import job_done_path
from testbed.emulation.monitor import Monitor, last_recorded_iteration


def _records(run_dir, worker, iterations, tail=b""):
    path = run_dir / "records" / f"{worker}.jsonl"
    path.write_bytes(b"".join(json.dumps({"iteration": i}).encode() + b"\n" for i in iterations) + tail)
    return path


def test_the_last_complete_record_gives_the_iteration(tmp_path):
    (tmp_path / "records").mkdir()
    assert last_recorded_iteration(tmp_path / "records" / "absent.jsonl") == -1
    assert last_recorded_iteration(_records(tmp_path, "w1", [])) == -1
    assert last_recorded_iteration(_records(tmp_path, "w1", [0, 1])) == 1
    assert last_recorded_iteration(_records(tmp_path, "w1", [0, 1], tail=b'{"itera')) == 1   # being written


def _monitor(run_dir, jobs):
    monitor = Monitor.__new__(Monitor)
    monitor.run_dir, monitor.rings_lingering = run_dir, list(jobs)
    return monitor


def test_a_ring_job_is_released_only_when_every_worker_recorded_its_last_iteration(tmp_path):
    (tmp_path / "records").mkdir()
    (tmp_path / "agents").mkdir()
    ring = SimpleNamespace(name="job", workers=["w1", "w2", "w3"], iterations=3)
    monitor = _monitor(tmp_path, [ring])
    _records(tmp_path, "w1", [0, 1, 2])
    _records(tmp_path, "w2", [0, 1, 2])
    _records(tmp_path, "w3", [0, 1])                 # still at work (or failed: a failed worker stops short)
    monitor.release_finished_rings()
    assert not job_done_path(tmp_path, "job").exists() and monitor.rings_lingering == [ring]
    _records(tmp_path, "w3", [0, 1, 2])
    monitor.release_finished_rings()
    assert job_done_path(tmp_path, "job").exists() and monitor.rings_lingering == []
