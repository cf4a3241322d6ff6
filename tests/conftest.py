"""Shared test set-up.

Emulation tests need root (namespaces, veth, AF_PACKET) and the Debian
packages the bootstrap installs. Outside CI they skip with the reason when
those are missing; under CI (``CI=true``, which runs as root on a machine the
bootstrap prepared) a missing requirement FAILS the test, so an emulation
test can never be silently skipped there. Only bmv2 cases may skip in CI.
"""

import os
import shutil
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")


def require_emulation(*binaries):
    """Skip (or, under CI, fail) unless root and every binary are present."""
    problems = []
    if os.geteuid() != 0:
        problems.append("needs root")
    problems += [f"{b} not found" for b in binaries if shutil.which(b) is None]
    if problems:
        reason = "emulation test: " + ", ".join(problems)
        if IN_CI:
            pytest.fail(reason + " (CI must run emulation tests)")
        pytest.skip(reason)


@pytest.fixture
def emulation():
    require_emulation("mnexec", "tc", "ethtool")


class QuietStream:
    """A progress stream that discards output (tests read the summary, not the console)."""

    def write(self, text):
        pass

    def flush(self):
        pass

    def isatty(self):
        return False


@pytest.fixture
def quiet():
    return QuietStream()
