"""Where a figure comes from: the testbed's commit, the P4 program, the machine, the packages and the data
plane's tools (a run's summary, ``inatb --version``, a reproduction page, the packet costs' cache key)."""

import os
import platform
import shutil
import subprocess
from pathlib import Path

from testbed import __version__
from testbed.errors import one_line

#: The repository the package runs from (an editable install's clone).
PROJECT_ROOT = Path(__file__).resolve().parents[1]


#: What makes a figure: the code, the P4 program, the scenarios (the docs a reproduction writes do not).
RESULT_SOURCES = ("testbed", "p4", "scenarios", "traffic", "setup.py")


def git_commit() -> str:
    """The commit of the testbed that runs, with ``-dirty`` when a tracked file of ``RESULT_SOURCES`` differs
    from it, or "unknown" outside a clone."""
    git = ["git", "-C", str(PROJECT_ROOT)]
    try:
        head = subprocess.run(git + ["rev-parse", "HEAD"], capture_output=True, text=True, timeout=5).stdout.strip()
        if not head:
            return "unknown"
        changed = subprocess.run(git + ["status", "--porcelain", "--untracked-files=no", "--", *RESULT_SOURCES],
                                 capture_output=True, text=True, timeout=5).stdout.strip()
        return head + ("-dirty" if changed else "")
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def short_commit() -> str:
    """:func:`git_commit` as a page shows it: the commit's first 12 digits, ``-dirty`` kept."""
    commit = git_commit()
    return commit[:12] + ("-dirty" if commit.endswith("-dirty") else "")


def p4_program_sha256() -> str:
    """The SHA-256 of the P4 program (``p4/ina.p4`` and the files it includes: what bmv2's build compiles,
    :func:`testbed.dataplane.p4build.program_sha256`), or "unknown" where its sources are not beside the
    package."""
    from testbed.dataplane import p4build      # the program's sources are its business (and numpy's import)
    return p4build.program_sha256() if p4build.source_files() else "unknown"


#: The bmv2 target's tools, by the command each is run as.
DATAPLANE_TOOLS = ("p4c", "simple_switch")
#: How long ``TOOL --version`` may take before its version reads as unknown.
TOOL_VERSION_TIMEOUT_S = 3.0


def tool_version(command: str, timeout_s: float = TOOL_VERSION_TIMEOUT_S):
    """The first line ``command --version`` prints, None when ``command`` is not on PATH (nothing is run
    then), or "unknown (why)" when it fails or takes longer than ``timeout_s``; never raises."""
    path = shutil.which(command)
    if path is None:
        return None
    try:
        done = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=timeout_s,
                              stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        return f"unknown ({command} --version took longer than {timeout_s:g} s)"
    except (OSError, subprocess.SubprocessError, ValueError) as exc:
        return one_line(f"unknown ({command} --version: {exc})", 200)
    line = next((line for line in (done.stdout + "\n" + done.stderr).splitlines() if line.strip()), "")
    if done.returncode != 0 or not line:
        return one_line(f"unknown ({command} --version exited {done.returncode}{': ' + line if line else ''})",
                        200)
    return one_line(line, 200)


def dataplane_tool_versions() -> dict:
    """:func:`tool_version` of each of :data:`DATAPLANE_TOOLS`."""
    return {command: tool_version(command) for command in DATAPLANE_TOOLS}


def run_versions(target: str) -> dict:
    """A run's ``versions``: :func:`package_versions`, and on bmv2 :func:`dataplane_tool_versions` too."""
    versions = package_versions()
    if target == "bmv2":
        versions.update(dataplane_tool_versions())
    return versions


def version_lines() -> list:
    """What ``inatb --version`` prints: the testbed's version, its commit, the P4 program's hash and the
    data plane's tools ("not installed" for one not on PATH)."""
    lines = [f"inatb {__version__}", f"git commit: {git_commit()}", f"P4 program: sha256 {p4_program_sha256()}"]
    for command, version in dataplane_tool_versions().items():
        lines.append(f"{command}: {version or 'not installed'}")
    return lines


def package_versions() -> dict:
    """Python's and the run's main packages' versions (None for one not installed)."""
    from importlib import metadata
    versions = {"python": platform.python_version(), "testbed": __version__}
    for name in ("mininet", "numpy", "networkx", "PuLP", "highspy", "PyYAML", "matplotlib"):
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = None
    return versions


def machine_id() -> str:
    """The CPU model and core count: what packet costs measured on one machine hold for."""
    model = "unknown CPU"
    try:
        with open("/proc/cpuinfo") as cpuinfo:
            model = next((line.split(":", 1)[1].strip() for line in cpuinfo if line.startswith("model name")), model)
    except OSError:
        pass
    return f"{model} x {os.cpu_count() or 1}"
