"""DCTCP for background traffic on kernels without ``tcp_dctcp``: the project's own DCTCP (``dctcp.bpf.c``,
RFC 8257) as a BPF TCP congestion control.

PA-ATP's background traffic runs DCTCP (its section III-B 2). A scenario says
``congestion_control: dctcp``; where the kernel has DCTCP the flows use it,
and where it has not (a kernel built without ``CONFIG_TCP_CONG_DCTCP``) but
can load BPF congestion controls (BTF at ``/sys/kernel/btf/vmlinux``), the
run builds ``dctcp.bpf.c`` against the running kernel's BTF (``bpftool btf
dump``, then ``clang -target bpf``; the object is cached per kernel release
and source) and registers it (``bpftool struct_ops register``) as
``inatb_dctcp`` for the run's lifetime: the flows' sockets, sources and
sinks alike (a DCTCP receiver echoes each segment's CE mark, RFC 8257
section 3.2), use that name, and the summary's ``congestion_control_used``
says so. The run that registered it unregisters it at teardown, and its
state file records it, so ``inatb cleanup`` unregisters it after a run
that was killed (testbed.emulation.state). A registration the run did not
make (an earlier run's that is still going) is used and left alone.

Commands are built apart from running them (``*_argv``); :func:`build`,
:func:`register` and :func:`unregister` run them.
"""

from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from testbed import bpf_build

#: What a scenario asks for, and the name the BPF DCTCP registers under.
DCTCP = "dctcp"
BPF_NAME = "inatb_dctcp"
SOURCE = Path(__file__).with_name("dctcp.bpf.c")
AVAILABLE = Path("/proc/sys/net/ipv4/tcp_available_congestion_control")


class BpfDctcpError(RuntimeError):
    """The BPF DCTCP cannot be built or registered here; the message says why in one line."""


@dataclass(frozen=True)
class Substitute:
    """A background congestion control the run provides: ``requested`` (the scenario's name) runs as
    ``used``, the object at ``object_path`` registered for the run."""
    requested: str
    used: str
    object_path: Path


def available() -> list:
    """The kernel's TCP congestion controls (registered BPF ones included)."""
    try:
        return AVAILABLE.read_text().split()
    except OSError:
        return []


def register_argv(obj: Path) -> list:
    return ["bpftool", "struct_ops", "register", str(obj)]


def unregister_argv(name: str = BPF_NAME) -> list:
    return ["bpftool", "struct_ops", "unregister", "name", name]


def missing_prerequisite() -> Optional[str]:
    """Why the BPF DCTCP cannot be built here (None: it can): no kernel BTF, or a tool or header missing."""
    return bpf_build.missing_prerequisite() or None


def _run(argv: list, what: str, **kwargs):
    return bpf_build.run(argv, what, BpfDctcpError, **kwargs)


def prepare(requested: str, cache: Path = None) -> Optional[Substitute]:
    """What the run must provide for background congestion control ``requested``: None when the kernel
    has it (or it is not DCTCP), else the BPF DCTCP, built if its object is not cached. Raises
    :class:`BpfDctcpError` when the kernel lacks DCTCP and it cannot be built."""
    if requested != DCTCP or DCTCP in available():
        return None
    why = missing_prerequisite()
    if why:
        raise BpfDctcpError(f"this kernel has no TCP congestion control 'dctcp', and its BPF substitute cannot be "
                            f"built: {why}")
    return Substitute(requested, BPF_NAME, build(cache))


def build(cache: Path = None) -> Path:
    """The BPF DCTCP's object for the running kernel (:func:`testbed.bpf_build.build`, cached). Raises
    :class:`BpfDctcpError` when a step fails."""
    return bpf_build.build(SOURCE, "dctcp", cache=cache, error=BpfDctcpError)


def register(substitute: Substitute) -> bool:
    """Register ``substitute`` unless a congestion control of its name is there already; True if this call
    registered it (the caller then owns it and unregisters it)."""
    if substitute.used in available():
        return False
    _run(register_argv(substitute.object_path), f"registering {substitute.used}")
    if substitute.used not in available():
        raise BpfDctcpError(f"registering {substitute.used}: bpftool succeeded, but the kernel does not list it")
    return True


def unregister(name: str = BPF_NAME) -> bool:
    """Unregister the BPF congestion control ``name`` if it is registered; True if it was."""
    if name not in available():
        return False
    _run(unregister_argv(name), f"unregistering {name}")
    return True
