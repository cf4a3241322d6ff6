"""Run lock and the record of what a run created.

Every run writes ``/run/inatb/<run-id>/state.json`` as it creates things:
its own pid, the switch-side interface names, and the pids of every process
it started (Mininet node shells, switches, agents, meters) with a marker of
their command line. ``inatb cleanup`` removes what a dead run left behind:
only the recorded interfaces that still exist and the recorded processes
whose command line still matches, never anything the run did not create.

One run at a time: an exclusive ``flock`` on ``/run/inatb/lock``; a second
run is refused with the holder's pid and scenario.
"""

import fcntl
import json
import os
import signal
import subprocess
import time
from pathlib import Path

from testbed.errors import RunLockError

STATE_ROOT = Path(os.environ.get("INATB_STATE_DIR", "/run/inatb"))


class RunLock:
    def __init__(self, root: Path = STATE_ROOT):
        self.path = root / "lock"
        self._fd = None

    def acquire(self, description: str):
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.read(fd, 4096).decode(errors="replace").strip() or "unknown"
            os.close(fd)
            raise RunLockError(f"another run is in progress ({holder}); wait for it to finish or stop it "
                               f"with Ctrl-C, then retry")
        os.ftruncate(fd, 0)
        os.write(fd, f"pid {os.getpid()}, {description}".encode())
        self._fd = fd

    def release(self):
        if self._fd is not None:
            os.ftruncate(self._fd, 0)
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None


class RunState:
    """What one run created, persisted at every change."""

    def __init__(self, run_id: str, root: Path = STATE_ROOT):
        self.dir = root / run_id
        self.dir.mkdir(parents=True, exist_ok=True)
        self.path = self.dir / "state.json"
        self.data = {"run_id": run_id, "pid": os.getpid(), "started": time.time(), "interfaces": [],
                     "processes": []}
        self._save()

    def _save(self):
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps(self.data))
        tmp.replace(self.path)

    def add_interfaces(self, names):
        self.data["interfaces"].extend(names)
        self._save()

    def add_process(self, pid: int, marker: str):
        self.data["processes"].append([pid, marker])
        self._save()

    def remove(self):
        for p in self.dir.iterdir():
            p.unlink()
        self.dir.rmdir()


def stop_process(proc, timeout_s: float = 5.0) -> None:
    """SIGTERM a child we started, then SIGKILL if it has not exited within ``timeout_s``."""
    if proc is None or proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
        return True
    except ProcessLookupError:
        return False
    except PermissionError:
        return True


def kill_recorded(processes) -> int:
    """SIGTERM, then SIGKILL, the recorded processes whose command line still carries their marker."""
    targets = [pid for pid, marker in processes if marker and marker in _cmdline(pid)]
    for pid in targets:
        try:
            os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
    deadline = time.monotonic() + 3.0
    while time.monotonic() < deadline and any(_alive(p) for p in targets):
        time.sleep(0.05)
    for pid in targets:
        if _alive(pid):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
    return len(targets)


def delete_interfaces(names) -> int:
    removed = 0
    for name in names:
        if Path(f"/sys/class/net/{name}").exists():
            subprocess.run(["ip", "link", "del", name], capture_output=True)
            removed += 1
    return removed


def cleanup_stale(root: Path = STATE_ROOT) -> list:
    """Remove what runs whose orchestrator is gone left behind. Returns one line per run cleaned."""
    report = []
    if not root.exists():
        return report
    for state_file in sorted(root.glob("*/state.json")):
        try:
            data = json.loads(state_file.read_text())
        except (OSError, ValueError):
            continue
        pid = data.get("pid", 0)
        if pid != os.getpid() and _alive(pid):
            report.append(f"run {data['run_id']}: still running (pid {pid}), left alone")
            continue
        killed = kill_recorded(data.get("processes", []))
        removed = delete_interfaces(data.get("interfaces", []))
        for p in state_file.parent.iterdir():
            p.unlink()
        state_file.parent.rmdir()
        report.append(f"run {data['run_id']}: stopped {killed} processes, removed {removed} interfaces")
    return report
