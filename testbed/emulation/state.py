"""Run lock and the record of what a run created.

Every run writes ``/run/inatb/<run-id>/state.json`` as it creates things:
its own pid, the switch-side interface names, and every process it started
(Mininet node shells, switches, agents, meters) as ``[pid, marker, start
time]``: a marker of its command line and its start time in clock ticks
since boot (field 22 of ``/proc/<pid>/stat``), read when the process is
recorded. ``inatb cleanup`` removes what a dead run left behind, and only
what it can prove the run created:

- a state file is read only if it, its run directory and the state root
  are owned by root (the cleaning user) and not writable by group or
  others, and it is a regular file, not a symlink; anything else is
  refused, reported, and left in place;
- a recorded process is signalled only while ``/proc/<pid>/cmdline`` still
  carries its marker AND its start time still equals the recorded one (a
  reused pid has another start time); records without a start time prove
  nothing and are skipped; pids <= 1 are never signalled;
- a recorded interface is deleted only if its name has the run's form
  ``<node>-eth<N>`` (``INTERFACE_NAME``, Mininet's naming of switch ports
  under the scenario's node-name rule);
- the nftables table named after the run id (``thrift_guard``) is deleted
  if it exists; no other rule is touched;
- a recorded BPF TCP congestion control (the run registered it for its
  background: testbed.traffic.dctcp_bpf) is unregistered if it is still
  registered and its name is the one that module registers;
- a recorded bpffs directory of the ebpf target's switches (their pinned
  programs and maps) is removed if it lies under the target's pin root
  (``/sys/fs/bpf/inatb/<run id>/``).

Modes are explicit whatever the umask: the state root and run directories
are created 0700 (``os.mkdir`` mode, then ``chmod``), state files and the
lock file 0600 (``os.open`` mode, then ``fchmod``). The run directory also
holds the pyswitch control sockets, which the 0700 directory closes to
other users.

One run at a time: an exclusive ``flock`` on ``/run/inatb/lock``; a second
run is refused with the holder's pid and scenario.
"""

import fcntl
import json
import os
import re
import signal
import stat
import subprocess
import time
from pathlib import Path

from testbed.dataplane.ebpf.switch import PIN_ROOT, unpin
from testbed.emulation import thrift_guard
from testbed.errors import RunLockError
from testbed.traffic import dctcp_bpf

STATE_ROOT = Path(os.environ.get("INATB_STATE_DIR", "/run/inatb"))
PRIVATE_DIR_MODE = 0o700
PRIVATE_FILE_MODE = 0o600
#: Only root's state files are trusted by cleanup (cleanup runs as root).
TRUSTED_OWNER_UID = 0
#: Switch-side interfaces a run creates: Mininet's ``<node>-eth<port>``, node names as
#: scenario.NODE_NAME allows (a letter, then letters, digits, '_'; topology.MAX_NAME_CHARS = 10).
INTERFACE_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_]{0,9}-eth[0-9]{1,4}")
#: How long cleanup waits for SIGTERMed processes before SIGKILL.
TERM_GRACE_S = 3.0
POLL_INTERVAL_S = 0.05


# -- private files and directories ----------------------------------------------------------

def make_private_dir(path: Path) -> Path:
    """``path`` as a directory of ours, mode 0700 whatever the umask; its parents as usual.

    An existing ``path`` must be a real directory (not a symlink) owned by this user; it is
    chmod-ed to 0700. Raises PermissionError otherwise.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        os.mkdir(path, PRIVATE_DIR_MODE)
    except FileExistsError:
        pass
    st = os.lstat(path)
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.geteuid():
        raise PermissionError(f"{path} is not a directory owned by uid {os.geteuid()}; refusing to use it")
    os.chmod(path, PRIVATE_DIR_MODE)
    return path


def write_private_file(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` atomically (temporary file, then rename), mode 0600 whatever the umask."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.tmp")
    try:
        os.unlink(tmp)                      # a crash's leftover
    except FileNotFoundError:
        pass
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, PRIVATE_FILE_MODE)
    try:
        os.fchmod(fd, PRIVATE_FILE_MODE)
        os.write(fd, text.encode())
    finally:
        os.close(fd)
    os.replace(tmp, path)


def open_private_file(path: Path) -> int:
    """An O_RDWR descriptor on ``path`` (created if absent, never through a symlink), mode 0600."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, PRIVATE_FILE_MODE)
    os.fchmod(fd, PRIVATE_FILE_MODE)
    return fd


def untrusted_reason(path: Path, owner_uid: int = TRUSTED_OWNER_UID, want_dir: bool = False):
    """Why ``path`` cannot be trusted as written by a run (None: it can): not a regular file (or, with
    ``want_dir``, a directory), a symlink, not owned by ``owner_uid``, writable by group or others."""
    try:
        st = os.lstat(path)
    except OSError as exc:
        return f"{path}: {exc.strerror}"
    kind_ok = stat.S_ISDIR(st.st_mode) if want_dir else stat.S_ISREG(st.st_mode)
    if not kind_ok:
        return f"{path}: not a {'directory' if want_dir else 'regular file'}"
    if st.st_uid != owner_uid:
        return f"{path}: owned by uid {st.st_uid}, not {owner_uid}"
    if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        return f"{path}: writable by group or others (mode {stat.S_IMODE(st.st_mode):04o})"
    return None


# -- the run lock and the run's record --------------------------------------------------------

class RunLock:
    def __init__(self, root: Path = STATE_ROOT):
        self.root = Path(root)
        self.path = self.root / "lock"
        self._fd = None

    def acquire(self, description: str):
        make_private_dir(self.root)
        fd = open_private_file(self.path)
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
    """What one run created, persisted (0600, in a 0700 directory) at every change."""

    def __init__(self, run_id: str, root: Path = STATE_ROOT):
        make_private_dir(root)
        self.dir = make_private_dir(Path(root) / run_id)
        self.path = self.dir / "state.json"
        self.data = {"run_id": run_id, "pid": os.getpid(), "started": time.time(), "interfaces": [],
                     "processes": []}
        self._save()

    def _save(self):
        write_private_file(self.path, json.dumps(self.data))

    def add_interfaces(self, names):
        self.data["interfaces"].extend(names)
        self._save()

    def set_device_group(self, group: int):
        """Record the device group the run's switch ports joined (testbed/emulation/network.py)."""
        self.data["device_group"] = group
        self._save()

    def add_congestion_control(self, name: str):
        """Record a BPF TCP congestion control the run registered."""
        self.data.setdefault("congestion_controls", []).append(name)
        self._save()

    def add_bpf_pins(self, path: str):
        """Record a bpffs directory of an ebpf switch (its pinned programs and maps)."""
        self.data.setdefault("bpf_pins", []).append(path)
        self._save()

    def add_process(self, pid: int, marker: str):
        """Record ``pid`` with its command-line marker and its start time (None if it is already gone)."""
        self.data["processes"].append([pid, marker, process_start_ticks(pid)])
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


def stop_processes(procs, timeout_s: float = 5.0) -> None:
    """Stop children we started (:func:`stop_process` each), all signalled first so that they stop in
    parallel: a process's exit may wait on the kernel (a switch's closing ports), and such waits overlap."""
    procs = [proc for proc in procs if proc is not None and proc.poll() is None]
    for proc in procs:
        proc.terminate()
    for proc in procs:
        stop_process(proc, timeout_s)


# -- process identity ---------------------------------------------------------------------------

def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def parse_start_ticks(stat_text: str) -> int:
    """Field 22 (starttime, clock ticks after boot) of a ``/proc/<pid>/stat`` line. The command name
    (field 2) is parenthesised and may hold spaces and ')', so fields are counted after its last ')'."""
    after_comm = stat_text[stat_text.rindex(")") + 2:].split()
    return int(after_comm[22 - 3])       # after_comm[0] is field 3 (state)


def process_start_ticks(pid: int):
    """Start time of ``pid`` in clock ticks since boot, or None if there is no such process."""
    try:
        return parse_start_ticks(Path(f"/proc/{pid}/stat").read_text(errors="replace"))
    except (OSError, ValueError, IndexError):
        return None


def is_recorded_process(pid, marker, start_ticks) -> bool:
    """True only while ``pid`` is provably the process recorded: a pid > 1, a non-empty marker in its
    command line, and the recorded start time equal to its current one."""
    if not isinstance(pid, int) or isinstance(pid, bool) or pid <= 1:
        return False
    if not isinstance(marker, str) or not marker or not isinstance(start_ticks, int):
        return False
    return marker in _cmdline(pid) and process_start_ticks(pid) == start_ticks


def _record_fields(record):
    """(pid, marker, start ticks) of a process record; start None for a record without one."""
    if not isinstance(record, (list, tuple)) or len(record) < 2:
        return None, None, None
    return record[0], record[1], record[2] if len(record) > 2 else None


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
        return True
    except ProcessLookupError:
        return False
    except PermissionError:
        return True


def _signal(pid: int, signum: int) -> None:
    try:
        os.kill(pid, signum)
    except ProcessLookupError:
        pass


def kill_recorded(processes) -> int:
    """SIGTERM, then SIGKILL, the recorded processes that are provably still the ones recorded
    (``is_recorded_process``, checked again before each signal). Returns how many were signalled."""
    targets = [(pid, marker, start) for pid, marker, start in map(_record_fields, processes)
               if is_recorded_process(pid, marker, start)]
    for pid, _, _ in targets:
        _signal(pid, signal.SIGTERM)
    deadline = time.monotonic() + TERM_GRACE_S
    while time.monotonic() < deadline and any(is_recorded_process(*t) for t in targets):
        time.sleep(POLL_INTERVAL_S)
    for target in targets:
        if is_recorded_process(*target):
            _signal(target[0], signal.SIGKILL)
    return len(targets)


# -- interfaces ---------------------------------------------------------------------------------

def is_run_interface(name) -> bool:
    """True if ``name`` has the form of an interface a run creates (``INTERFACE_NAME``)."""
    return isinstance(name, str) and INTERFACE_NAME.fullmatch(name) is not None


def delete_link_argv(name: str) -> list:
    return ["ip", "link", "del", name]


def group_members(group: int):
    """The names of the root namespace's devices in device group ``group``, or None when ``ip`` cannot list
    them. Read off every device's ``group`` (``ip -j link show group G`` prints empty records in iproute2
    6.1)."""
    listed = subprocess.run(["ip", "-j", "link", "show"], capture_output=True, text=True)
    try:
        devices = json.loads(listed.stdout) if listed.returncode == 0 else None
        return None if devices is None else {d["ifname"] for d in devices if d.get("group") == str(group)}
    except (ValueError, TypeError, KeyError):
        return None


def delete_group(group: int, names) -> set:
    """Delete every device of device group ``group`` with one ``ip link del group`` when the group holds some of
    ``names`` and nothing else (the run's switch ports: testbed/emulation/network.py); the names deleted, else
    an empty set."""
    members = group_members(group) if group else None
    if not members or not members <= set(names):
        return set()
    if subprocess.run(["ip", "link", "del", "group", str(group)], capture_output=True).returncode != 0:
        return set()
    return members


def delete_interfaces(names, group: int = 0) -> int:
    """Delete the recorded interfaces that exist and have the run's naming form; others are left alone. Those in
    the run's device ``group`` go at once (:func:`delete_group`), the rest one by one."""
    names = [name for name in names if is_run_interface(name)]
    removed = len(delete_group(group, names))
    for name in names:
        if Path(f"/sys/class/net/{name}").exists():
            subprocess.run(delete_link_argv(name), capture_output=True)
            removed += 1
    return removed


def _recorded_group(data: dict) -> int:
    """The device group a state file records (0 when none or not a whole number)."""
    group = data.get("device_group", 0)
    return group if isinstance(group, int) and not isinstance(group, bool) and group > 0 else 0


# -- cleanup --------------------------------------------------------------------------------------

def state_file_problem(state_file: Path, owner_uid: int = TRUSTED_OWNER_UID):
    """Why a state file cannot be trusted (None: it can): it, its run directory or the state root is not
    ``owner_uid``'s, is writable by group or others, or is not what it should be (symlinks refused)."""
    run_dir = state_file.parent
    return (untrusted_reason(run_dir.parent, owner_uid, want_dir=True)
            or untrusted_reason(run_dir, owner_uid, want_dir=True)
            or untrusted_reason(state_file, owner_uid))


def _read_state(state_file: Path):
    """The state's dict, or None if it cannot be read or is not a JSON object."""
    try:
        data = json.loads(state_file.read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _remove_thrift_guard(run_id) -> bool:
    """Delete the nftables table named after ``run_id`` (thrift_guard), if there is one."""
    try:
        return thrift_guard.remove_stale(str(run_id))
    except ValueError:          # a run id no table can be named after: the run installed none
        return False


def unregister_recorded(data: dict) -> int:
    """Unregister the BPF congestion controls a run's state records, those of testbed.traffic.dctcp_bpf's name
    only; how many were still registered."""
    names = [n for n in data.get("congestion_controls", []) if n == dctcp_bpf.BPF_NAME]
    return sum(dctcp_bpf.unregister(n) for n in names)


def unpin_recorded(data: dict) -> int:
    """Remove the ebpf switches' bpffs directories a run's state records, those under the run's own pin
    directory (``PIN_ROOT/<run id>``) only; how many were still there."""
    owner = PIN_ROOT / str(data.get("run_id", ""))
    removed = 0
    for path in data.get("bpf_pins", []):
        pins = Path(str(path))
        if pins.parent != owner or ".." in pins.parts or not pins.is_dir():
            continue
        unpin(pins)
        removed += 1
    return removed


def cleanup_stale(root: Path = STATE_ROOT, owner_uid: int = TRUSTED_OWNER_UID) -> list:
    """Remove what runs whose orchestrator is gone left behind. Returns one line per run seen."""
    report = []
    root = Path(root)
    if not root.exists():
        return report
    for state_file in sorted(root.glob("*/state.json")):
        problem = state_file_problem(state_file, owner_uid)
        if problem:
            report.append(f"run directory {state_file.parent.name}: refused ({problem}), left alone")
            continue
        data = _read_state(state_file)
        if data is None:
            continue
        run_id = data.get("run_id", state_file.parent.name)
        pid = data.get("pid", 0)
        if isinstance(pid, int) and pid > 1 and pid != os.getpid() and _alive(pid):
            report.append(f"run {run_id}: still running (pid {pid}), left alone")
            continue
        killed = kill_recorded(data.get("processes", []))
        removed = delete_interfaces(data.get("interfaces", []), _recorded_group(data))
        guard = _remove_thrift_guard(run_id)
        unregistered = unregister_recorded(data)
        unpinned = unpin_recorded(data)
        for p in state_file.parent.iterdir():
            p.unlink()
        state_file.parent.rmdir()
        report.append(f"run {run_id}: stopped {killed} processes, removed {removed} interfaces"
                      + (", removed its Thrift guard" if guard else "")
                      + (", unregistered its BPF congestion control" if unregistered else "")
                      + (f", unpinned {unpinned} ebpf switch{'es' if unpinned > 1 else ''}" if unpinned else ""))
    return report
