"""Mininet switch node of the ebpf target: p4/ina.p4 as ina.bpf.c on the switch's interfaces.

Like every switch node it lives in the root namespace and serves the switch's Mininet interfaces; it has no
process: ``start`` builds the program for the run's lanes and slots (cached, so only the first switch of a
run may pay for clang), loads and pins it under the run's own bpffs directory and attaches it to every
port (testbed/dataplane/ebpf/switch.py), recording the pin directory in the run's state so that ``inatb
cleanup`` unpins what a killed run left, and writes what it loaded where to ``logs/<switch>.log``.
``runtime`` is its maps; ``stop`` detaches and unpins.
"""

from pathlib import Path

from mininet.node import Switch

from testbed.dataplane import program
from testbed.dataplane.ebpf.switch import EbpfSwitch
from testbed.dataplane.wire import DEFAULT_LANES


class EbpfSwitchNode(Switch):
    """A switch whose data plane is ina.bpf.c in the kernel."""

    target = "ebpf"

    def __init__(self, name, log_dir=".", control_dir="/tmp", lanes=DEFAULT_LANES, slots=program.DEFAULT_SLOTS,
                 run_state=None, **params):
        Switch.__init__(self, name, **params)
        self.lanes, self.slots, self.run_state = lanes, slots, run_state
        self.log_path = Path(log_dir) / f"{name}.log"
        self.owner = run_state.data["run_id"] if run_state is not None else "default"
        self.switch = None

    def start(self, controllers):
        ports = {port: intf.name for intf, port in self.ports.items() if intf.name != "lo"}
        self.switch = EbpfSwitch(self.name, ports, self.lanes, self.slots, owner=self.owner)
        if self.run_state is not None:
            self.run_state.add_bpf_pins(str(self.switch.pin_dir))
        self.switch.start()
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        self.log_path.write_text(self.switch.describe() + "\n")

    def runtime(self, timeout_s: float = 0.0):
        return self.switch.runtime()

    def died(self):
        """None: the kernel runs the switch; it cannot exit."""
        return None

    def stop(self, deleteIntfs=True):
        if self.switch is not None:
            self.switch.stop()
        Switch.stop(self, deleteIntfs)
