"""What this machine has for the testbed, and what each absence costs (``inatb doctor``)."""

import os
import shutil
import subprocess


def _tc_qdiscs():
    """Which qdiscs the kernel/tc here can create (netem is missing on some machines)."""
    found = []
    for qdisc in ("htb", "tbf", "netem"):
        probe = subprocess.run(["tc", "qdisc", "add", "dev", "lo", "root", "handle", "1:", qdisc] +
                               (["rate", "1mbit", "burst", "10k", "latency", "1ms"] if qdisc == "tbf" else []),
                               capture_output=True)
        if probe.returncode == 0:
            found.append(qdisc)
            subprocess.run(["tc", "qdisc", "del", "dev", "lo", "root"], capture_output=True)
    return found


def checks():
    """(name, present, what it means) per requirement."""
    root = os.geteuid() == 0
    yield "root", root, "needed by inatb run (namespaces, links)" if not root else "running as root"
    for binary, cost in (("mnexec", "no emulation: install the Debian package mininet"),
                         ("tc", "no link shaping: install iproute2"),
                         ("ethtool", "user-space switches see bad checksums: install ethtool"),
                         ("iftop", "no cross-check of the iftop-style table: install iftop"),
                         ("simple_switch", "no bmv2 target; runs use pyswitch"),
                         ("p4c", "ina.p4 cannot be compiled; runs use pyswitch")):
        path = shutil.which(binary)
        label = {"simple_switch": "bmv2 simple_switch"}.get(binary, binary)
        yield label, path is not None, path or cost
    try:
        import mininet  # noqa: F401
        yield "mininet python module", True, "importable"
    except ImportError:
        yield "mininet python module", False, "pip install mininet (the set-up command does)"
    if root and shutil.which("tc"):
        qdiscs = _tc_qdiscs()
        yield "tc qdiscs", "htb" in qdiscs, (", ".join(qdiscs) or "none") + (
            "" if "netem" in qdiscs else " (no netem: delay/loss are emulated by pyswitch)")
