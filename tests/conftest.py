"""Shared fixtures. The skip-or-fail rule of root tests lives in support.py."""

import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from support import require_emulation  # noqa: E402


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
