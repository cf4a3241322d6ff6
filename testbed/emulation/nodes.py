"""Mininet switch nodes, one class per target, chosen by name (``SWITCH_TARGETS``).

A switch node lives in the root namespace (as Mininet's switches do) and
runs the target's switch process on its interfaces (pyswitch nodes may
share one process: ``process_groups``). ``start`` launches it,
``runtime`` waits for it by polling its control channel and returns the
SwitchRuntime the controller installs entries through; when the process dies
during start-up the error carries the tail of its log (the "P4 switch did
not start correctly" dead end, with the reason).
"""

import subprocess
import sys
from pathlib import Path

from mininet.node import Switch

from testbed.dataplane.bmv2 import start_timeout_s
from testbed.dataplane.runtime import PySwitchRuntime
from testbed.errors import DataplaneError
from testbed.emulation.state import stop_process

PYSWITCH_MARKER = "testbed.dataplane.pyswitch.process"


def log_tail(path: Path, lines: int = 15) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


def switch_node_params(plan, log_dir: Path, run_state) -> dict:
    """The parameters every switch node of ``plan``'s run takes: where it logs, where its control socket
    lives (the run state's directory), the program's lanes and slots, the run state that records what it
    starts, for pyswitch the switches that share each process, for bmv2 how long it may take to start."""
    params = dict(log_dir=str(log_dir), control_dir=str(run_state.dir), lanes=plan.scenario.switch.lanes,
                  slots=plan.scenario.switch.slots, run_state=run_state)
    if plan.target == "pyswitch" and plan.budget.switch_groups is not None:
        params["process_groups"] = plan.budget.switch_groups
    if plan.target == "bmv2":
        params["start_timeout_s"] = start_timeout_s(plan.budget.slowness())
    return params


def pyswitch_argv(members, lanes: int, slots: int) -> list:
    """The command of one pyswitch process running ``members`` (switch nodes: ``name``, ``ports``,
    ``control_path``): ``python -I -m testbed.dataplane.pyswitch.process --switch NAME=CONTROL ...
    --port NAME:PORT=IFNAME ...``. Isolated mode (-I) keeps root's current directory, PYTHON* variables and
    the user site out of sys.path, so only the venv's installed package is imported."""
    argv = [sys.executable, "-I", "-m", PYSWITCH_MARKER, "--lanes", str(lanes), "--slots", str(slots)]
    for node in members:
        argv.append(f"--switch={node.name}={node.control_path}")
        argv += [f"--port={node.name}:{port}={intf.name}"
                 for intf, port in sorted(node.ports.items(), key=lambda x: x[1]) if intf.name != "lo"]
    return argv


class PySwitchNode(Switch):
    """A switch running ``pyswitch`` (the Python model of p4/ina.p4).

    ``process_groups``: switches that share one pyswitch process (names, each group a sequence; a switch in
    none has a process of its own); see :class:`testbed.dataplane.pyswitch.process.SwitchProcess` for why.
    The processes start in :meth:`batchStartup`, once every switch's interfaces exist; every member of a
    group holds the same process (``proc``) and log.
    """

    target = "pyswitch"

    def __init__(self, name, log_dir=".", control_dir="/tmp", lanes=64, slots=1024, run_state=None,
                 process_groups=(), **params):
        Switch.__init__(self, name, **params)
        self.process_group = next((tuple(group) for group in process_groups if name in group), (name,))
        first, others = self.process_group[0], len(self.process_group) - 1
        self.log_path = Path(log_dir) / (f"{name}.log" if not others else f"pyswitch-{first}-and-{others}-more.log")
        self.control_path = str(Path(control_dir) / f"{name}.sock")
        self.lanes = lanes
        self.slots = slots
        self.run_state = run_state
        self.proc = None
        self._log = None

    def start(self, controllers):
        """Nothing yet: :meth:`batchStartup` starts the processes (a group's members must all exist)."""

    @classmethod
    def batchStartup(cls, switches):
        """Start one process per group of ``switches`` (Mininet calls this after every ``start``)."""
        groups = {}
        for node in switches:
            groups.setdefault(node.process_group, []).append(node)
        for group, members in groups.items():
            members.sort(key=lambda node: group.index(node.name))
            leader = members[0]
            log = open(leader.log_path, "w")
            proc = subprocess.Popen(pyswitch_argv(members, leader.lanes, leader.slots), stdout=log,
                                    stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
            if leader.run_state is not None:
                leader.run_state.add_process(proc.pid, PYSWITCH_MARKER)
            for node in members:
                node.proc, node._log = proc, log
        return switches

    def runtime(self, timeout_s: float = 20.0):
        try:
            return PySwitchRuntime.wait_for(self.control_path, self.name, timeout_s,
                                            alive=lambda: self.proc is not None and self.proc.poll() is None)
        except DataplaneError as exc:
            raise DataplaneError(f"{exc}; last lines of {self.log_path}:\n{log_tail(self.log_path)}")

    def died(self):
        """None while the switch process runs; else its exit code and the last lines of its log."""
        if self.proc is None or self.proc.poll() is None:
            return None
        return f"exit {self.proc.returncode}; last lines of {self.log_path}:\n{log_tail(self.log_path)}"

    def stop(self, deleteIntfs=True):
        """Stop the process (a group's first member to stop ends it for all) and close its log."""
        stop_process(self.proc)
        if self._log is not None:
            self._log.close()
            self._log = None
        Switch.stop(self, deleteIntfs)


#: target name -> switch node class; the bmv2 and ebpf targets register their classes here.
SWITCH_TARGETS = {"pyswitch": PySwitchNode}

# The bmv2 target (testbed/emulation/bmv2_node.py) imports no thrift at import time; the guard keeps the
# pyswitch path working even if that module or its dependencies cannot load.
try:
    from testbed.emulation.bmv2_node import Bmv2SwitchNode
except ImportError:  # pragma: no cover - the bmv2 target stays unregistered
    Bmv2SwitchNode = None
else:
    SWITCH_TARGETS["bmv2"] = Bmv2SwitchNode

from testbed.emulation.ebpf_node import EbpfSwitchNode  # noqa: E402 - beside the others, registered after them

SWITCH_TARGETS["ebpf"] = EbpfSwitchNode
