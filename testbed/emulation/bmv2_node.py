"""Mininet switch node of the bmv2 target: ``simple_switch`` running p4/ina.p4.

Like every switch node it lives in the root namespace and serves the
switch's Mininet interfaces. ``start`` compiles the program for the run's
lanes and slots (p4build: cached, so only the first switch of a run may
pay for p4c) and launches ``simple_switch -i PORT@IFNAME ... --thrift-port
--device-id --notifications-addr --log-file logs/<switch>.log`` (its
notifications socket in the run's state directory); bmv2 writes that log as
``<switch>.log.txt``, and ``stop`` moves it to ``logs/<switch>.log``, where
every target's switch log is read (bmv2.settle_log). ``runtime`` waits for
the Thrift port by polling; if the process dies first, the DataplaneError
names the Thrift port it could not serve (and whether another process holds
it) with the tail of its logs, the "P4 switch did not start correctly" dead
end with the reason.

Thrift ports and device ids derive from the node's dpid (the topology's
node id): ``thrift_base + node id``, so switches of one run never share a
port and a run's ports are predictable. Nothing here imports thrift; the
runtime does, when it connects.
"""

import subprocess
from pathlib import Path

from mininet.node import Switch

from testbed.dataplane import program
from testbed.dataplane.bmv2 import (BMV2_START_TIMEOUT_S, Bmv2Runtime, log_tails, settle_log, simple_switch_argv,
                                    wait_for_thrift)
from testbed.dataplane.p4build import compile_program
from testbed.dataplane.wire import DEFAULT_LANES
from testbed.emulation.state import stop_process

BMV2_MARKER = "simple_switch"
THRIFT_BASE_PORT = 9090


def thrift_ports(topology, thrift_base: int = THRIFT_BASE_PORT) -> list:
    """The Thrift ports the run's switches will serve (``thrift_base + node id``), known before any
    switch starts, so thrift_guard can close them first."""
    return [thrift_base + node.node_id for node in topology.switches()]


class Bmv2SwitchNode(Switch):
    """A switch running bmv2's ``simple_switch`` with p4/ina.p4."""

    target = "bmv2"

    def __init__(self, name, log_dir=".", control_dir="/tmp", lanes=DEFAULT_LANES, slots=program.DEFAULT_SLOTS,
                 run_state=None, thrift_base=THRIFT_BASE_PORT, start_timeout_s=BMV2_START_TIMEOUT_S, **params):
        Switch.__init__(self, name, **params)
        self.log_dir = Path(log_dir)
        self.log_path = self.log_dir / f"{name}.log"         # bmv2's own log (warnings and errors), after stop
        self.out_path = self.log_dir / f"{name}.out"         # its stdout/stderr (start-up messages)
        self.lanes = lanes
        self.slots = slots
        self.run_state = run_state
        self.device_id = int(self.dpid, 16)
        # in the run's state directory, removed with it (bmv2's default is a socket in /tmp that outlives it)
        self.notifications_path = Path(control_dir) / f"{name}-notifications.ipc"
        self.thrift_port = thrift_base + self.device_id
        self.start_timeout_s = start_timeout_s
        self.json_path = None
        self.proc = None

    def switch_argv(self):
        ports = {port: intf.name for intf, port in self.ports.items() if intf.name != "lo"}
        return simple_switch_argv(self.json_path, ports, self.thrift_port, self.device_id, self.log_path,
                                  self.notifications_path)

    def start(self, controllers):
        self.json_path = compile_program(self.lanes, self.slots)
        self.log_dir.mkdir(parents=True, exist_ok=True)
        with open(self.out_path, "w") as out:
            self.proc = subprocess.Popen(self.switch_argv(), stdout=out, stderr=subprocess.STDOUT,
                                         stdin=subprocess.DEVNULL, start_new_session=True)
        if self.run_state is not None:
            self.run_state.add_process(self.proc.pid, BMV2_MARKER)

    def runtime(self):
        wait_for_thrift(self.thrift_port, self.start_timeout_s,
                        alive=lambda: self.proc is not None and self.proc.poll() is None,
                        switch=self.name, log_paths=[self.out_path, self.log_path])
        return Bmv2Runtime(self.thrift_port, switch=self.name, lanes=self.lanes, slots=self.slots)

    def died(self):
        """None while simple_switch runs; else its exit code and the last lines of its output and log."""
        if self.proc is None or self.proc.poll() is None:
            return None
        return f"exit {self.proc.returncode}; {log_tails([self.out_path, self.log_path])}"

    def stop(self, deleteIntfs=True):
        stop_process(self.proc)
        settle_log(self.log_path)
        Switch.stop(self, deleteIntfs)
