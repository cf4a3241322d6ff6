"""Shared fixtures. The skip-or-fail rule of root tests lives in support.py."""

import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from support import require_emulation  # noqa: E402

from testbed.budget import REFERENCE_ONLY  # noqa: E402


@pytest.fixture(autouse=True)
def _reference_packet_costs(monkeypatch):
    """A test plans with the reference packet costs (testbed/budget.py), whatever this machine measured of its
    own, so that a plan a unit test works out by hand is the same on every machine; emulation tests plan with
    this machine's (:func:`emulation`)."""
    monkeypatch.setenv("INATB_PACKET_COSTS", REFERENCE_ONLY)


@pytest.fixture(autouse=True)
def _not_strict(monkeypatch):
    """A test's commands exit as the test expects whether or not the job that runs the suite sets
    ``INATB_STRICT`` (testbed/outcome.py): a test that wants it sets it."""
    monkeypatch.delenv("INATB_STRICT", raising=False)


@pytest.fixture(scope="session")
def session_packet_costs(tmp_path_factory):
    """This machine's packet costs, calibrated once for the session (testbed/calibration.py: about four
    seconds, on the first emulation test that plans), in a file of the session's own, as a user's first run
    calibrates into the cache."""
    return tmp_path_factory.getbasetemp() / "packet_costs.json"


@pytest.fixture
def emulation(monkeypatch, session_packet_costs):
    """Root and Mininet's tools, and this machine's packet costs for the run's plan: a run is planned as a
    user's run is on this machine, so that a slower machine gets the time dilation it needs."""
    require_emulation("mnexec", "tc", "ethtool")
    monkeypatch.setenv("INATB_PACKET_COSTS", str(session_packet_costs))


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
