"""Shared fixtures. The skip-or-fail rule of root tests lives in support.py."""

import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from support import require_emulation  # noqa: E402


@pytest.fixture(autouse=True)
def _reference_packet_costs(monkeypatch, tmp_path_factory):
    """Every test plans with the reference packet costs (testbed/budget.py), whatever this machine measured of
    its own (benchmarks/bench_packet_costs.py --calibrate), so a time dilation the tests expect is the same
    on every machine."""
    monkeypatch.setenv("INATB_PACKET_COSTS", str(tmp_path_factory.getbasetemp() / "no-packet-costs.json"))


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
