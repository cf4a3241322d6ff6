"""Where a figure comes from: the testbed's commit, the machine, the packages (a run's summary, a
reproduction page, the packet costs' cache key)."""

import os
import platform
import subprocess
from pathlib import Path

from testbed import __version__

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
