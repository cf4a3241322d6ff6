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

import hashlib
import os
import platform
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

#: What a scenario asks for, and the name the BPF DCTCP registers under.
DCTCP = "dctcp"
BPF_NAME = "inatb_dctcp"
SOURCE = Path(__file__).with_name("dctcp.bpf.c")
KERNEL_BTF = Path("/sys/kernel/btf/vmlinux")
AVAILABLE = Path("/proc/sys/net/ipv4/tcp_available_congestion_control")
#: The tools the build and the registration need (the set-up command installs their packages).
TOOLS = ("clang", "bpftool")
LIBBPF_HEADER = Path("/usr/include/bpf/bpf_helpers.h")


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


def cache_dir() -> Path:
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "inatb" / "bpf"


def object_path(cache: Path, kernel_release: str, source_text: bytes) -> Path:
    """Where the object built from ``source_text`` for ``kernel_release`` is cached."""
    digest = hashlib.sha256(kernel_release.encode() + b"\0" + source_text).hexdigest()[:16]
    return cache / f"dctcp-{digest}.bpf.o"


def vmlinux_header_argv() -> list:
    """Prints the running kernel's types as C (the build's ``vmlinux.h``)."""
    return ["bpftool", "btf", "dump", "file", str(KERNEL_BTF), "format", "c"]


def compile_argv(source: Path, obj: Path, include_dir: Path) -> list:
    return ["clang", "-O2", "-g", "-target", "bpf", f"-D__TARGET_ARCH_{_bpf_arch()}", "-I", str(include_dir),
            "-c", str(source), "-o", str(obj)]


def register_argv(obj: Path) -> list:
    return ["bpftool", "struct_ops", "register", str(obj)]


def unregister_argv(name: str = BPF_NAME) -> list:
    return ["bpftool", "struct_ops", "unregister", "name", name]


def _bpf_arch() -> str:
    return {"x86_64": "x86", "aarch64": "arm64"}.get(platform.machine(), platform.machine())


def missing_prerequisite() -> Optional[str]:
    """Why the BPF DCTCP cannot be built here (None: it can): no kernel BTF, or a tool or header missing."""
    if not KERNEL_BTF.exists():
        return f"the kernel exposes no BTF ({KERNEL_BTF}), which BPF congestion controls need"
    tools = [t for t in TOOLS if shutil.which(t) is None]
    if tools or not LIBBPF_HEADER.exists():
        what = ", ".join(tools + ([] if LIBBPF_HEADER.exists() else ["libbpf's headers"]))
        return f"{what} not installed (scripts/bootstrap.sh installs them)"
    return None


def _run(argv: list, what: str, **kwargs) -> subprocess.CompletedProcess:
    try:
        out = subprocess.run(argv, capture_output=True, timeout=120, **kwargs)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise BpfDctcpError(f"{what}: {exc}") from None
    if out.returncode != 0:
        lines = out.stderr.decode(errors="replace").strip().splitlines()
        # the first error names the cause (a compiler's last line only counts them)
        first = next((line for line in lines if "error" in line.lower()), lines[-1] if lines else "")
        raise BpfDctcpError(f"{what} failed: {first.strip() or f'exit {out.returncode}'}")
    return out


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
    """The BPF DCTCP's object for the running kernel, built into ``cache`` (default :func:`cache_dir`) unless it
    is there already. Raises :class:`BpfDctcpError` when a step fails."""
    source = SOURCE.read_bytes()
    cache = cache or cache_dir()
    obj = object_path(cache, platform.release(), source)
    if not obj.exists():
        cache.mkdir(parents=True, exist_ok=True)
        header_dir = cache / f"include-{obj.stem}"
        header_dir.mkdir(exist_ok=True)
        header = _run(vmlinux_header_argv(), "dumping the kernel's BTF as C").stdout
        (header_dir / "vmlinux.h").write_bytes(header)
        partial = obj.with_suffix(".partial")
        _run(compile_argv(SOURCE, partial, header_dir), "compiling the BPF DCTCP")
        partial.replace(obj)
        shutil.rmtree(header_dir, ignore_errors=True)
    return obj


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
