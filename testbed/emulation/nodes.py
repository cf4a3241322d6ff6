"""Mininet switch nodes, one class per target, chosen by name (``SWITCH_TARGETS``).

A switch node lives in the root namespace (as Mininet's switches do) and
runs the target's switch process on its interfaces. ``start`` launches it,
``runtime`` waits for it by polling its control channel and returns the
SwitchRuntime the controller installs entries through; when the process dies
during start-up the error carries the tail of its log (the "P4 switch did
not start correctly" dead end, with the reason).
"""

import subprocess
import sys
from pathlib import Path

from mininet.node import Switch

from testbed.dataplane.runtime import PySwitchRuntime
from testbed.errors import DataplaneError
from testbed.emulation.state import stop_process

PYSWITCH_MARKER = "testbed.dataplane.pyswitch.process"


def log_tail(path: Path, lines: int = 15) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


class PySwitchNode(Switch):
    """A switch running ``pyswitch`` (the Python model of p4/ina.p4)."""

    target = "pyswitch"

    def __init__(self, name, log_dir=".", control_dir="/tmp", lanes=64, slots=1024, run_state=None, **params):
        Switch.__init__(self, name, **params)
        self.log_path = Path(log_dir) / f"{name}.log"
        self.control_path = str(Path(control_dir) / f"{name}.sock")
        self.lanes = lanes
        self.slots = slots
        self.run_state = run_state
        self.proc = None
        self._log = None

    def switch_argv(self):
        """``python -I -m testbed.dataplane.pyswitch.process ...``: isolated mode (-I) keeps root's current
        directory, PYTHON* variables and the user site out of sys.path, so only the venv's installed
        package is imported."""
        ports = [f"--port={port}={intf.name}" for intf, port in sorted(self.ports.items(), key=lambda x: x[1])
                 if intf.name != "lo"]
        return [sys.executable, "-I", "-m", PYSWITCH_MARKER, "--name", self.name, "--control", self.control_path,
                "--lanes", str(self.lanes), "--slots", str(self.slots), *ports]

    def start(self, controllers):
        self._log = open(self.log_path, "w")
        self.proc = subprocess.Popen(self.switch_argv(), stdout=self._log, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL, start_new_session=True)
        if self.run_state is not None:
            self.run_state.add_process(self.proc.pid, PYSWITCH_MARKER)

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
        stop_process(self.proc)
        if self._log is not None:
            self._log.close()
            self._log = None
        Switch.stop(self, deleteIntfs)


#: target name -> switch node class; the bmv2 target registers its class here.
SWITCH_TARGETS = {"pyswitch": PySwitchNode}

# The bmv2 target (testbed/emulation/bmv2_node.py) imports no thrift at import time; the guard keeps the
# pyswitch path working even if that module or its dependencies cannot load.
try:
    from testbed.emulation.bmv2_node import Bmv2SwitchNode
except ImportError:  # pragma: no cover - the bmv2 target stays unregistered
    Bmv2SwitchNode = None
else:
    SWITCH_TARGETS["bmv2"] = Bmv2SwitchNode
