"""Targets of the packet-test suite: one switch of the INA program, three ways to run it.

(A helper module, not a conftest.py: the ``target`` fixture lives in
test_packets.py so no second module named ``conftest`` shadows tests/conftest.py.)

``make_target(kind, tmp_path)`` builds one of:

- ``pyswitch-inproc``: PySwitchCore + LocalRuntime in this process (no root);
- ``pyswitch-process``: the real pyswitch process on veth pairs whose far ends
  live in a fresh network namespace (harness.VethRig; root: skipped without
  it outside CI, failed under CI, by tests/support.py's require_emulation);
- ``bmv2``: ``simple_switch`` running p4/ina.p4 compiled by p4c, driven over
  Thrift by Bmv2Runtime, on the same kind of rig; skipped with the reason
  "bmv2 (simple_switch) and p4c not found" where they are absent, failed
  instead when ``INATB_REQUIRE_BMV2=1`` (set by .ci/run when it put the
  toolchain on PATH: there a skipped bmv2 case would be a silent gap);
- ``ebpf``: p4/ina.p4 as ina.bpf.c at TC ingress and egress of the rig's
  switch ends, driven by EbpfRuntime over its pinned maps (root; clang,
  bpftool and libbpf's headers, which scripts/bootstrap.sh installs).

Every target offers the same handful of calls: ``runtime`` (a
SwitchRuntime), ``send(port, frame)``, ``send_seq([(port, frame)...])``
(in order: out-of-process targets pause between packets from different
ports so the switch sees them in the order given), ``recv(count, timeout_s)``
-> [(port, bytes)] and ``quiet(wait_s)`` (what arrives while waiting; [] is
"nothing"). Everything a target creates is removed when its test ends, and a
final check asserts no rig namespace or link is left.
"""

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

from support import bmv2_available, require_emulation, skip_bmv2_case

from testbed.dataplane.pyswitch.core import LocalRuntime, PySwitchCore
from testbed.dataplane.runtime import PySwitchRuntime
from testbed.emulation.state import stop_process

LANES = 64
SLOTS = 64
PORTS = (1, 2, 3, 4)
PROCESS_GAP_S = 0.03


def _need_root(what):
    require_emulation("ip", "ethtool")


class InProcTarget:
    name = "pyswitch-inproc"
    out_of_process = False

    def __init__(self):
        self.core = PySwitchCore("t", LANES, SLOTS)
        self.runtime = LocalRuntime(self.core)
        self._out = []

    def _collect(self, port, frame):
        self._out.append((port, bytes(frame)))

    def send(self, port, frame):
        self.core.receive(bytearray(frame), port, time.monotonic(), self._collect)

    def send_seq(self, items):
        for port, frame in items:
            self.send(port, frame)

    def recv(self, count=None, timeout_s=2.0):
        deadline = time.monotonic() + timeout_s
        while True:
            if self.core.egress.queues:
                self.core.egress.drain(time.monotonic(), self._collect)
            if (count is not None and len(self._out) >= count) or time.monotonic() >= deadline:
                break
            if not any(q.queue for q in self.core.egress.queues.values()):
                break  # nothing queued: nothing more can come
            time.sleep(0.002)
        out, self._out = self._out, []
        return out

    def quiet(self, wait_s=0.0):
        return self.recv(None, wait_s)

    def close(self):
        pass


class RigTarget:
    """A switch process on a VethRig (pyswitch process or bmv2)."""

    out_of_process = True

    def __init__(self, rig, owns_switch=True):
        self.rig = rig
        self.owns_switch = owns_switch     # False: the runtime, switch and rig outlive this target
        self.proc = None
        self.runtime = None
        self.stop_switch = None     # how to stop a switch that is not a process (ebpf); else proc is stopped
        self._last_port = None

    def send(self, port, frame):
        self.rig.send(port, frame)

    def send_seq(self, items):
        for port, frame in items:
            if self._last_port is not None and port != self._last_port:
                time.sleep(PROCESS_GAP_S)
            self.rig.send(port, frame)
            self._last_port = port
        self._last_port = None

    def recv(self, count=None, timeout_s=2.0):
        return self.rig.recv(timeout_s, count)

    def quiet(self, wait_s=0.3):
        return self.rig.recv(wait_s, None)

    def close(self):
        if not self.owns_switch:
            return
        try:
            if self.runtime is not None:
                self.runtime.close()
        finally:
            try:
                if self.stop_switch is not None:
                    self.stop_switch()
                else:
                    stop_process(self.proc)
            finally:
                self.rig.close()


def _on_rig(name, start_switch):
    """A RigTarget called ``name`` on a fresh rig, its switch started by ``start_switch(target)`` (which
    sets the target's process or stop_switch, and its runtime); whatever was made is removed if that fails."""
    from testbed.dataplane.harness import VethRig
    target = RigTarget(VethRig(PORTS))
    target.name = name
    try:
        target.rig.create()
        start_switch(target)
    except BaseException:
        target.close()
        raise
    return target


def _start_pyswitch_process(tmp_path):
    def start(target):
        control = str(tmp_path / "t.sock")
        log = open(tmp_path / "pyswitch.log", "w")
        # -I: isolated, as the emulation starts it (nodes.pyswitch_argv): nothing from the cwd is imported
        argv = [sys.executable, "-I", "-m", "testbed.dataplane.pyswitch.process", "--name", "t", "--control", control,
                "--lanes", str(LANES), "--slots", str(SLOTS)]
        argv += [f"--port={p}={ifname}" for p, ifname in target.rig.switch_ports().items()]
        target.proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                       cwd=str(Path(__file__).resolve().parents[2]))
        log.close()
        target.runtime = PySwitchRuntime.wait_for(control, "t", 20.0, alive=lambda: target.proc.poll() is None)
    return _on_rig("pyswitch-process", start)


def _free_tcp_port():
    import socket
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _start_bmv2(tmp_path):
    from testbed.budget import load_packet_costs, slowness
    from testbed.dataplane.bmv2 import Bmv2Runtime, simple_switch_argv, start_timeout_s, wait_for_thrift
    from testbed.dataplane.p4build import compile_program
    json_path = compile_program(LANES, SLOTS)

    def start(target):
        thrift_port = _free_tcp_port()
        argv = simple_switch_argv(json_path, target.rig.switch_ports(), thrift_port, device_id=1,
                                  log_path=tmp_path / "bmv2.log", notifications_path=tmp_path / "bmv2.ipc")
        out = open(tmp_path / "bmv2.out", "w")
        target.proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        out.close()
        limit_s = start_timeout_s(slowness(load_packet_costs(), "bmv2"))
        wait_for_thrift(thrift_port, limit_s, alive=lambda: target.proc.poll() is None, switch="t",
                        log_paths=[tmp_path / "bmv2.out", tmp_path / "bmv2.log"])
        target.runtime = Bmv2Runtime(thrift_port, switch="t", lanes=LANES, slots=SLOTS)
    return _on_rig("bmv2", start)


def _start_ebpf(tmp_path):
    from testbed.dataplane.ebpf.switch import EbpfSwitch

    def start(target):
        switch = EbpfSwitch("t", target.rig.switch_ports(), LANES, SLOTS, owner=f"packet-test-{os.getpid()}")
        target.stop_switch = switch.stop
        switch.start()
        target.runtime = switch.runtime()
    return _on_rig("ebpf", start)


class SharedEbpfSwitch:
    """One ebpf switch on one rig for a module's cases: loading the program (the verifier's pass) is most of
    a case's set-up, so each case gets the switch reset (EbpfRuntime.reset: every entry, register, counter
    and port setting gone) and the rig drained instead of a new one. ``close`` stops both."""

    def __init__(self, tmp_path):
        self.target = _start_ebpf(tmp_path)

    def fresh(self) -> "RigTarget":
        """The switch for one case, as loaded; closing it leaves the switch and the rig to :meth:`close`."""
        shared = self.target
        shared.runtime.reset()
        shared.rig.drain()
        target = RigTarget(shared.rig, owns_switch=False)
        target.name, target.runtime = "ebpf", shared.runtime
        return target

    def close(self):
        self.target.close()


TARGET_KINDS = ("pyswitch-inproc", "pyswitch-process", "bmv2", "ebpf")


def make_target(kind, tmp_path, shared_ebpf=None):
    """A started target of ``kind``; skips (or fails under CI) when the machine cannot run it. ``shared_ebpf``
    (a callable returning a :class:`SharedEbpfSwitch`): the ebpf case reuses that switch, reset."""
    if kind == "pyswitch-inproc":
        return InProcTarget()
    if kind == "pyswitch-process":
        _need_root("pyswitch-process target")
        return _start_pyswitch_process(tmp_path)
    if kind == "ebpf":
        _need_root("ebpf target")
        return shared_ebpf().fresh() if shared_ebpf else _start_ebpf(tmp_path)
    if not bmv2_available():
        skip_bmv2_case()
    _need_root("bmv2 target")
    return _start_bmv2(tmp_path)


def assert_no_rig_left_behind():
    if os.geteuid() == 0 and shutil.which("ip"):
        from testbed.dataplane.harness import leftovers
        left = leftovers()
        assert not left["netns"] and not left["links"], f"packet tests left {left} behind"
