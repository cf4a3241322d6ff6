"""One switch of the ebpf target: ``ina.bpf.c`` built, loaded, pinned and attached to the switch's ports.

:class:`EbpfSwitch` builds the object for the switch's lanes and slots (:func:`testbed.bpf_build.build`,
cached per kernel, source and definitions), loads it with ``bpftool prog loadall``, which pins the two
programs and every map in the switch's own bpffs directory (``/sys/fs/bpf/inatb/<owner>/<switch>``), and
on each port puts a ``clsact`` qdisc whose ingress and egress run the pinned programs. The port numbers go
into the maps ``port_ifindex`` and ``ifindex_port``. A shaped port gets an htb root qdisc at its rate
(the runtime's ``set_port_shaping``, :func:`shaping_argvs`). :meth:`EbpfSwitch.stop` removes the qdiscs it added and the
pins; nothing else of the machine is touched. The commands are built apart from running them (:mod:`.commands`).
Root only.
"""

import os
import shutil
import struct
import subprocess
from pathlib import Path

from testbed import bpf_build
from testbed.dataplane.ebpf.commands import clsact_argv, filter_argv, load_argv, run, unqdisc_argv
from testbed.dataplane.ebpf.runtime import EbpfRuntime
from testbed.errors import DataplaneError

SOURCE = Path(__file__).with_name("ina.bpf.c")
BPFFS = Path("/sys/fs/bpf")
PIN_ROOT = BPFFS / "inatb"
PROGRAMS = ("ina_ingress", "ina_egress")


def build(lanes: int, slots: int) -> Path:
    """The object for ``lanes`` lanes and ``slots`` slots, built unless cached."""
    return bpf_build.build(SOURCE, "ina", (f"INA_LANES={int(lanes)}", f"INA_SLOTS={int(slots)}"),
                           error=DataplaneError)


def mount_bpffs() -> None:
    """bpffs at /sys/fs/bpf, where the programs and maps are pinned (mounted if it is not)."""
    if os.path.ismount(BPFFS):
        return
    BPFFS.mkdir(parents=True, exist_ok=True)
    run(["mount", "-t", "bpf", "bpf", str(BPFFS)], "mounting bpffs")


class EbpfSwitch:
    """``name``'s programs on ``ports`` ({port number: interface}), pinned under ``PIN_ROOT/owner/name``."""

    def __init__(self, name: str, ports: dict, lanes: int = 64, slots: int = 1024, owner: str = "default"):
        self.name, self.ports, self.lanes, self.slots = name, dict(ports), lanes, slots
        self.pin_dir = PIN_ROOT / owner / name
        self.programs_dir, self.maps_dir = self.pin_dir / "programs", self.pin_dir / "maps"
        self.object_path = None     # the built object, once started
        self._attached = []

    def start(self) -> None:
        self.object_path = build(self.lanes, self.slots)
        mount_bpffs()
        if self.pin_dir.exists():
            raise DataplaneError(f"switch {self.name}: {self.pin_dir} exists (a switch of that name runs, or "
                                 f"a run was killed: inatb cleanup removes it)")
        self.pin_dir.mkdir(parents=True)
        try:
            run(load_argv(self.object_path, self.programs_dir, self.maps_dir),
                f"switch {self.name}: loading ina.bpf.c")
            self._set_ports()
            for ifname in self.ports.values():
                self._attached.append(ifname)
                run(clsact_argv(ifname), f"switch {self.name}: clsact on {ifname}")
                for direction, program in zip(("ingress", "egress"), PROGRAMS):
                    run(filter_argv(ifname, direction, self.programs_dir / program),
                         f"switch {self.name}: {program} on {ifname}")
        except BaseException:
            self.stop()
            raise

    def _set_ports(self) -> None:
        runtime = self.runtime()
        try:
            for port, ifname in self.ports.items():
                try:
                    ifindex = int(Path(f"/sys/class/net/{ifname}/ifindex").read_text())
                except OSError:
                    raise DataplaneError(f"switch {self.name}: no interface {ifname} for port {port}") from None
                runtime.map("port_ifindex").update(struct.pack("<I", port), struct.pack("<I", ifindex))
                runtime.map("ifindex_port").update(struct.pack("<I", ifindex), struct.pack("<I", port))
        finally:
            runtime.close()

    def describe(self) -> str:
        """What runs where: the object, the pins, the ports."""
        ports = ", ".join(f"{port}={ifname}" for port, ifname in sorted(self.ports.items()))
        return (f"switch {self.name}: {self.object_path} ({self.lanes} lanes, {self.slots} slots), "
                f"pinned at {self.pin_dir}, on ports {ports}")

    def runtime(self) -> EbpfRuntime:
        return EbpfRuntime(self.maps_dir, self.name, self.lanes, self.slots)

    def stop(self) -> None:
        """Detach from every port this switch attached to and unpin its programs and maps (the kernel frees
        them with the last reference)."""
        for ifname in self._attached:
            if Path(f"/sys/class/net/{ifname}").exists():
                for which in ("clsact", "root"):
                    subprocess.run(unqdisc_argv(ifname, which), capture_output=True)
        self._attached = []
        unpin(self.pin_dir)


def unpin(pin_dir: Path) -> None:
    """Remove a switch's pins (``PIN_ROOT/owner/switch``), its owner's directory once it holds no other, and
    ``PIN_ROOT`` once it holds no owner's (``rmdir`` leaves one that another run filled meanwhile)."""
    shutil.rmtree(pin_dir, ignore_errors=True)
    owner = pin_dir.parent
    for directory in (owner, PIN_ROOT) if owner.parent == PIN_ROOT else ():
        try:
            directory.rmdir()
        except OSError:      # not empty (or gone): another switch's or run's
            return
