"""Building the project's BPF programs: C compiled with clang against the running kernel's BTF, cached.

A program's object is built from its source, the running kernel's types (``bpftool btf dump ... format c``
as the build's ``vmlinux.h``) and compile-time definitions (``-D``), and cached under
``<cache>/bpf`` per kernel release, source and definitions, so a second run builds nothing (the most
recently used objects of each program are kept: :func:`testbed.cache.prune`). The BPF DCTCP
(:mod:`testbed.traffic.dctcp_bpf`) and the ebpf switch target (:mod:`testbed.dataplane.ebpf`) build here.

Commands are built apart from running them (``*_argv``); :func:`build` and :func:`run` run them.
"""

import hashlib
import platform
import re
import shutil
import subprocess
from pathlib import Path

from testbed.cache import cache_dir as _cache_root, mark_used, prune

KERNEL_BTF = Path("/sys/kernel/btf/vmlinux")
#: The tools a build needs (the set-up command installs their packages).
TOOLS = ("clang", "bpftool")
LIBBPF_HEADER = Path("/usr/include/bpf/bpf_helpers.h")


class BpfBuildError(RuntimeError):
    """A BPF program cannot be built (or a bpftool step failed); the message says why in one line."""


def cache_dir() -> Path:
    return _cache_root() / "bpf"


#: A cached object's name after its stem: ``-`` and the first 16 hex digits of its key.
OBJECT_NAME = re.compile(r"-[0-9a-f]{16}\.bpf\.o")


def object_path(cache: Path, stem: str, kernel_release: str, source_text: bytes, defines: tuple = ()) -> Path:
    """Where the object built from ``source_text`` with ``defines`` for ``kernel_release`` is cached."""
    key = kernel_release.encode() + b"\0" + source_text + b"\0" + "\0".join(defines).encode()
    return cache / f"{stem}-{hashlib.sha256(key).hexdigest()[:16]}.bpf.o"


def vmlinux_header_argv() -> list:
    """Prints the running kernel's types as C (the build's ``vmlinux.h``)."""
    return ["bpftool", "btf", "dump", "file", str(KERNEL_BTF), "format", "c"]


def compile_argv(source: Path, obj: Path, include_dir: Path, defines: tuple = ()) -> list:
    """clang for BPF; ``-mcpu=v3`` for the atomic instructions that return a value (fetch-add, exchange)."""
    return (["clang", "-O2", "-g", "-target", "bpf", "-mcpu=v3", f"-D__TARGET_ARCH_{_bpf_arch()}", "-I",
             str(include_dir)] + [f"-D{d}" for d in defines] + ["-c", str(source), "-o", str(obj)])


def _bpf_arch() -> str:
    return {"x86_64": "x86", "aarch64": "arm64"}.get(platform.machine(), platform.machine())


def missing_prerequisite() -> str:
    """Why BPF programs cannot be built here ('' : they can): no kernel BTF, or a tool or header missing."""
    if not KERNEL_BTF.exists():
        return f"the kernel exposes no BTF ({KERNEL_BTF})"
    tools = [t for t in TOOLS if shutil.which(t) is None]
    if tools or not LIBBPF_HEADER.exists():
        what = ", ".join(tools + ([] if LIBBPF_HEADER.exists() else ["libbpf's headers"]))
        return f"{what} not installed (scripts/bootstrap.sh installs them)"
    return ""


def run(argv: list, what: str, error=BpfBuildError, **kwargs) -> subprocess.CompletedProcess:
    """Run one step; a failure raises ``error`` with the step's first error line."""
    try:
        out = subprocess.run(argv, capture_output=True, timeout=120, **kwargs)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise error(f"{what}: {exc}") from None
    if out.returncode != 0:
        lines = out.stderr.decode(errors="replace").strip().splitlines()
        # the first error names the cause (a compiler's last line only counts them)
        first = next((line for line in lines if "error" in line.lower()), lines[-1] if lines else "")
        raise error(f"{what} failed: {first.strip() or f'exit {out.returncode}'}")
    return out


def build(source: Path, stem: str, defines: tuple = (), cache: Path = None, error=BpfBuildError) -> Path:
    """The object of ``source`` with ``defines`` for the running kernel, built into ``cache`` (default
    :func:`cache_dir`) unless it is there already. Raises ``error`` when a step fails."""
    why = missing_prerequisite()
    if why:
        raise error(f"cannot build {source.name}: {why}")
    text = source.read_bytes()
    cache = cache or cache_dir()
    obj = object_path(cache, stem, platform.release(), text, tuple(defines))
    if obj.exists():
        mark_used(obj)
    else:
        cache.mkdir(parents=True, exist_ok=True)
        header_dir = cache / f"include-{obj.stem}"
        header_dir.mkdir(exist_ok=True)
        try:
            header = run(vmlinux_header_argv(), "dumping the kernel's BTF as C", error).stdout
            (header_dir / "vmlinux.h").write_bytes(header)
            partial = obj.with_suffix(".partial")
            run(compile_argv(source, partial, header_dir, tuple(defines)), f"compiling {source.name}", error)
            partial.replace(obj)
        finally:
            shutil.rmtree(header_dir, ignore_errors=True)
        prune(path for path in cache.glob(f"{stem}-*.bpf.o") if OBJECT_NAME.fullmatch(path.name[len(stem):]))
    return obj
