"""What tests share beyond fixtures: the rule for tests that need root and binaries.

Outside CI such a test skips with the reason; under CI (``CI=true``, which
runs as root on a machine the bootstrap prepared) a missing requirement FAILS
it, so an emulation or packet test can never be silently skipped there. Only
bmv2 cases may skip in CI (bmv2 and p4c are not installable on CI machines).
"""

import os
import shutil

import pytest

IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")


def require_emulation(*binaries):
    """Skip (or, under CI, fail) unless running as root with every binary present."""
    problems = []
    if os.geteuid() != 0:
        problems.append("needs root")
    problems += [f"{b} not found" for b in binaries if shutil.which(b) is None]
    if problems:
        reason = "emulation test: " + ", ".join(problems)
        if IN_CI:
            pytest.fail(reason + " (CI must run emulation tests)")
        pytest.skip(reason)
