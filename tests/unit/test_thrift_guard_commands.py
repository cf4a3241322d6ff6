"""The nftables commands of thrift_guard, built as argv lists by pure functions, and ThriftGuard's
install / remove sequence against a fake runner (the real rules: tests/dataplane/test_thrift_guard.py)."""

import subprocess

import pytest

from testbed.emulation import thrift_guard
from testbed.emulation.thrift_guard import (ThriftGuard, checked_ports, install_commands, remove_argv,
                                            table_name)
from testbed.errors import EmulationError


def test_table_is_named_after_the_run_only():
    assert table_name("20261122-070401-1646") == "inatb_guard_20261122_070401_1646"
    assert table_name("a b;c}") == "inatb_guard_a_b_c_"
    with pytest.raises(ValueError):
        table_name("--")


def test_install_commands():
    cmds = install_commands("r1", [9092, 9091, 9092])
    table = "inatb_guard_r1"
    assert cmds[0] == ["nft", "add", "table", "inet", table]
    assert cmds[1] == ["nft", "add", "chain", "inet", table, "input",
                       "{ type filter hook input priority -10 ; policy accept ; }"]
    assert cmds[2][5:] == ["output", "{ type filter hook output priority -10 ; policy accept ; }"]
    assert cmds[3] == ["nft", "add", "rule", "inet", table, "input", "iifname", "!=", '"lo"', "tcp", "dport",
                       "{ 9091, 9092 }", "drop"]
    assert cmds[4] == ["nft", "add", "rule", "inet", table, "output", "oifname", '"lo"', "tcp", "dport",
                       "{ 9091, 9092 }", "meta", "skuid", "!=", "0", "reject", "with", "tcp", "reset"]
    assert remove_argv("r1") == ["nft", "delete", "table", "inet", table]
    assert all(isinstance(a, str) for cmd in cmds for a in cmd)


@pytest.mark.parametrize("ports", [[], [0], [65536], ["9090"], [True], [9090.0]])
def test_bad_ports_are_refused(ports):
    with pytest.raises(ValueError):
        checked_ports(ports)


class FakeNft:
    """Answers nft argv lists: `list table` by whether the table was added, a failing verb on request."""

    def __init__(self, fail_on=None):
        self.calls = []
        self.tables = set()
        self.fail_on = fail_on

    def __call__(self, argv):
        self.calls.append(argv)
        verb, table = argv[1], argv[4]
        if self.fail_on and argv[1:3] == self.fail_on:
            return subprocess.CompletedProcess(argv, 1, "", "Error: Could not process rule")
        if verb == "list":
            return subprocess.CompletedProcess(argv, 0 if table in self.tables else 1, "", "")
        if verb == "add" and argv[2] == "table":
            self.tables.add(table)
        if verb == "delete":
            self.tables.discard(table)
        return subprocess.CompletedProcess(argv, 0, "", "")


@pytest.fixture
def nft_present(monkeypatch):
    monkeypatch.setattr(thrift_guard.shutil, "which", lambda name: "/usr/sbin/nft")


def test_guard_installs_then_removes_only_its_table(nft_present):
    nft = FakeNft()
    with ThriftGuard("r2", [9091], runner=nft) as guard:
        assert nft.tables == {guard.table}
        assert [c for c in nft.calls if c[1] == "add"] == install_commands("r2", [9091])
    assert nft.tables == set() and nft.calls[-1] == remove_argv("r2")
    guard.remove()                                 # again: nothing to do, no error
    assert nft.calls[-1][1] == "list"


def test_a_failed_install_removes_what_it_added(nft_present):
    nft = FakeNft(fail_on=["add", "rule"])
    with pytest.raises(EmulationError, match="Could not process rule"):
        ThriftGuard("r3", [9091], runner=nft).install()
    assert nft.tables == set() and remove_argv("r3") in nft.calls


def test_install_without_nft_names_the_package(monkeypatch):
    monkeypatch.setattr(thrift_guard.shutil, "which", lambda name: None)
    with pytest.raises(EmulationError, match="nftables"):
        ThriftGuard("r4", [9091], runner=FakeNft()).install()


def test_bmv2_thrift_ports_are_known_before_the_switches_start():
    pytest.importorskip("mininet")
    from types import SimpleNamespace
    from testbed.emulation.bmv2_node import THRIFT_BASE_PORT, thrift_ports
    topo = SimpleNamespace(switches=lambda: [SimpleNamespace(node_id=1), SimpleNamespace(node_id=7)])
    assert thrift_ports(topo) == [THRIFT_BASE_PORT + 1, THRIFT_BASE_PORT + 7]
