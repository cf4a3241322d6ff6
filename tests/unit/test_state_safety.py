"""Owner-only modes of what a run writes, and ``inatb cleanup`` acting only on what a run provably created.

Everything happens in pytest's tmp dirs (the state root is passed in, never /run/inatb); the one
process signalled is a ``sleep`` child of this test.
"""

import contextlib
import json
import os
import stat
import subprocess
import sys
import time

import pytest

from testbed import topology
from testbed.dataplane.ebpf.switch import PIN_ROOT, EbpfSwitch
from testbed.dataplane.pyswitch.process import bind_private_unix_socket
from testbed.emulation import state
from testbed.emulation.state import (RunLock, RunState, cleanup_stale, delete_interfaces, is_recorded_process,
                                     is_run_interface, kill_recorded, make_private_dir, parse_start_ticks,
                                     process_start_ticks, state_file_problem)
from testbed.traffic import dctcp_bpf

OWNER = os.geteuid()          # the trusted owner in these tests (root where they normally run)


@contextlib.contextmanager
def umask(value):
    saved = os.umask(value)
    try:
        yield
    finally:
        os.umask(saved)


def mode_of(path):
    return stat.S_IMODE(os.lstat(path).st_mode)


@pytest.fixture
def sleeper():
    """A harmless child process, always reaped."""
    proc = subprocess.Popen(["sleep", "60"], stdin=subprocess.DEVNULL)
    try:
        yield proc
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait()


def wait_exit(proc, timeout_s=5.0):
    deadline = time.monotonic() + timeout_s
    while proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.02)
    return proc.poll()


def dead_pid():
    """The pid of a process that has exited (and been reaped)."""
    proc = subprocess.Popen(["true"])
    proc.wait()
    return proc.pid


# -- modes ---------------------------------------------------------------------------------------------

def test_state_dirs_files_and_lock_are_owner_only_under_a_permissive_umask(tmp_path):
    root = tmp_path / "inatb"
    with umask(0):
        lock = RunLock(root)
        lock.acquire("test")
        try:
            run = RunState("r1", root)
            run.add_interfaces(["s1-eth1"])
        finally:
            lock.release()
    assert mode_of(root) == 0o700 and mode_of(run.dir) == 0o700
    assert mode_of(run.path) == 0o600 and mode_of(root / "lock") == 0o600
    assert json.loads(run.path.read_text())["interfaces"] == ["s1-eth1"]
    assert [p.name for p in run.dir.iterdir()] == ["state.json"]      # no temporary file left


def test_an_existing_wide_state_dir_is_narrowed_and_a_symlink_refused(tmp_path):
    wide = tmp_path / "wide"
    wide.mkdir(mode=0o777)
    os.chmod(wide, 0o777)
    make_private_dir(wide)
    assert mode_of(wide) == 0o700
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "elsewhere")
    with pytest.raises(PermissionError, match="not a directory owned"):
        make_private_dir(tmp_path / "link")


def test_pyswitch_control_socket_is_owner_only_under_a_permissive_umask(tmp_path):
    path = str(tmp_path / "s1.sock")
    with umask(0):
        sock = bind_private_unix_socket(path)
    try:
        assert stat.S_ISSOCK(os.lstat(path).st_mode) and mode_of(path) == 0o600
    finally:
        sock.close()


# -- which state files cleanup trusts --------------------------------------------------------------

def test_cleanup_refuses_a_group_writable_state_file_and_leaves_it(tmp_path, sleeper):
    run = RunState("r2", tmp_path)
    run.add_process(sleeper.pid, "sleep")
    run.data["pid"] = dead_pid()
    run._save()
    os.chmod(run.path, 0o620)
    report = cleanup_stale(tmp_path, owner_uid=OWNER)
    assert len(report) == 1 and "refused" in report[0] and "writable by group or others" in report[0]
    assert run.path.exists() and sleeper.poll() is None


def test_cleanup_refuses_a_state_file_of_another_owner(tmp_path):
    run = RunState("r3", tmp_path)
    problem = state_file_problem(run.path, owner_uid=OWNER + 1)
    assert problem and f"owned by uid {OWNER}" in problem
    if OWNER == 0:    # as root: a file really owned by nobody
        os.chown(run.path, 65534, 65534)
        assert "owned by uid 65534" in state_file_problem(run.path, owner_uid=0)
        assert "refused" in cleanup_stale(tmp_path, owner_uid=0)[0] and run.path.exists()


def test_cleanup_refuses_a_symlinked_state_file_and_a_wide_run_directory(tmp_path):
    run = RunState("r4", tmp_path)
    target = tmp_path / "forged.json"
    target.write_text(run.path.read_text())
    run.path.unlink()
    run.path.symlink_to(target)
    assert "not a regular file" in state_file_problem(run.path, owner_uid=OWNER)
    run.path.unlink()
    run._save()
    os.chmod(run.dir, 0o777)
    assert "writable by group or others" in state_file_problem(run.path, owner_uid=OWNER)


def test_cleanup_of_a_dead_run_stops_its_process_and_removes_its_record(tmp_path, sleeper):
    run = RunState("r5", tmp_path)
    run.add_process(sleeper.pid, "sleep")
    run.data["pid"] = dead_pid()
    run._save()
    report = cleanup_stale(tmp_path, owner_uid=OWNER)
    assert report == ["run r5: stopped 1 processes, removed 0 interfaces"]
    assert wait_exit(sleeper) is not None and not run.dir.exists()


def test_cleanup_of_a_dead_run_unregisters_the_bpf_congestion_control_it_registered(tmp_path):
    substitute = dctcp_bpf.Substitute("dctcp", dctcp_bpf.BPF_NAME, dctcp_bpf.build(tmp_path / "cache"))
    assert dctcp_bpf.register(substitute) and dctcp_bpf.BPF_NAME in dctcp_bpf.available()
    try:
        assert not dctcp_bpf.register(substitute)             # there already: not this call's to unregister
        run = RunState("r7", tmp_path)
        run.add_congestion_control(dctcp_bpf.BPF_NAME)
        run.add_congestion_control("cubic")                   # a name that module does not register: left alone
        run.data["pid"] = dead_pid()
        run._save()
        report = cleanup_stale(tmp_path, owner_uid=OWNER)
        assert report == ["run r7: stopped 0 processes, removed 0 interfaces, unregistered its BPF congestion "
                          "control"]
        assert dctcp_bpf.BPF_NAME not in dctcp_bpf.available() and "cubic" in dctcp_bpf.available()
    finally:
        dctcp_bpf.unregister()


def test_cleanup_of_a_dead_run_unpins_its_ebpf_switches_and_nothing_else(tmp_path):
    switch = EbpfSwitch("s1", {}, lanes=8, slots=16, owner="r8")
    stranger = PIN_ROOT / "not-r8" / "s1"
    switch.start()
    try:
        stranger.mkdir(parents=True)
        run = RunState("r8", tmp_path)
        run.add_bpf_pins(str(switch.pin_dir))
        run.add_bpf_pins(str(stranger))                       # not under the run's own directory: left alone
        run.data["pid"] = dead_pid()
        run._save()
        report = cleanup_stale(tmp_path, owner_uid=OWNER)
        assert report == ["run r8: stopped 0 processes, removed 0 interfaces, unpinned 1 ebpf switch"]
        assert not (PIN_ROOT / "r8").exists() and stranger.is_dir()
    finally:
        switch.stop()
        stranger.rmdir()
        stranger.parent.rmdir()


def test_a_stopped_switch_leaves_no_pin_directory_behind():
    others = PIN_ROOT.is_dir() and any(PIN_ROOT.iterdir())     # another run's pins: the root stays for them
    switch = EbpfSwitch("s1", {}, lanes=8, slots=16, owner="r9")
    switch.start()
    switch.stop()
    assert not (PIN_ROOT / "r9").exists()
    assert PIN_ROOT.is_dir() == others


# -- process identity ------------------------------------------------------------------------------

def test_start_ticks_are_field_22_even_with_parentheses_in_the_command_name():
    fields = " ".join(str(n) for n in range(3, 53))       # fields 3..52 hold their own number
    assert parse_start_ticks(f"1234 (a) b (c) {fields}") == 22
    assert process_start_ticks(os.getpid()) == parse_start_ticks(open(f"/proc/{os.getpid()}/stat").read())


def test_add_process_records_the_start_time(tmp_path, sleeper):
    run = RunState("r6", tmp_path)
    run.add_process(sleeper.pid, "sleep")
    pid, marker, start = json.loads(run.path.read_text())["processes"][0]
    assert (pid, marker, start) == (sleeper.pid, "sleep", process_start_ticks(sleeper.pid))
    assert isinstance(start, int) and is_recorded_process(pid, marker, start)


def test_kill_recorded_needs_marker_and_start_time_to_match(sleeper):
    start = process_start_ticks(sleeper.pid)
    not_proven = [[sleeper.pid, "sleep", start + 1],          # another process under a reused pid
                  [sleeper.pid, "simple_switch", start],      # command line does not carry the marker
                  [sleeper.pid, "sleep"],                     # an old record without a start time
                  [sleeper.pid, "", start],
                  [sleeper.pid, "sleep", None],
                  [1, "init", process_start_ticks(1)], [0, "x", 0], [-1, "x", 0], [True, "x", 0],
                  "garbage", [str(sleeper.pid), "sleep", start]]
    assert kill_recorded(not_proven) == 0
    assert sleeper.poll() is None
    assert kill_recorded([[sleeper.pid, "sleep", start]]) == 1
    assert wait_exit(sleeper) is not None


# -- interfaces --------------------------------------------------------------------------------------

def test_only_interfaces_of_the_run_naming_form_are_deleted(monkeypatch):
    calls = []
    monkeypatch.setattr(state.subprocess, "run", lambda argv, **kw: calls.append(argv))
    refused = ["lo", "eth0", "docker0", "s1-eth", "1s-eth1", "../s1-eth1", "s1-eth1 ", "s1-eth1;reboot",
               "abcdefghijk-eth1", "s1-veth1", 7, None]
    assert not any(is_run_interface(name) for name in refused)
    assert delete_interfaces(refused) == 0 and calls == []
    longest = "a" * topology.MAX_NAME_CHARS
    assert all(is_run_interface(n) for n in ("s1-eth1", "leaf_2-eth12", f"{longest}-eth9"))
    assert not is_run_interface(f"{longest}b-eth9")
    monkeypatch.setattr(state.Path, "exists", lambda self: True)
    assert delete_interfaces(["s1-eth1", "lo"]) == 1 and calls == [["ip", "link", "del", "s1-eth1"]]


def test_isolated_python_still_imports_the_installed_package(tmp_path):
    """Switch processes run ``python -I -m ...``: a ``testbed`` package in the current directory must not be
    imported, and the venv's (editable) install must be."""
    decoy = tmp_path / "testbed"
    decoy.mkdir()
    (decoy / "__init__.py").write_text("raise SystemExit('decoy imported')\n")
    out = subprocess.run([sys.executable, "-I", "-c", "import testbed; print(testbed.__file__)"], cwd=tmp_path,
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert not out.stdout.strip().startswith(str(tmp_path))


def test_pyswitch_node_argv_is_isolated():
    pytest.importorskip("mininet")
    from types import SimpleNamespace
    from testbed.emulation.nodes import PYSWITCH_MARKER, pyswitch_argv
    node = SimpleNamespace(ports={}, name="s1", control_path="/x/s1.sock")
    argv = pyswitch_argv([node], 4, 8)
    assert argv[:4] == [sys.executable, "-I", "-m", PYSWITCH_MARKER]
