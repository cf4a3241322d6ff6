"""Taking a run down quickly and only what it made: the links in one ``ip link del group`` of the run's own
device group, switch and agent processes signalled together, and a pyswitch process that ends its loop as
soon as SIGTERM arrives."""

import json
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from testbed.emulation import network
from testbed.emulation import state
from testbed.emulation.state import stop_processes

REPO = Path(__file__).resolve().parents[2]


class FakeNode:
    def __init__(self, name, ports=()):
        self.name = name
        self.intfs = {i: SimpleNamespace(name=port, node=self) for i, port in enumerate(ports, 1)}
        self.forgotten = []

    def intfList(self):
        return list(self.intfs.values())

    def delIntf(self, intf):
        self.forgotten.append(intf.name)


def fake_net(extra_link_ends=()):
    """Two switches and two hosts: h1-s1, s1-s2, s2-h2 (and a link between ``extra_link_ends``' host ports)."""
    s1, s2 = FakeNode("s1", ["s1-eth1", "s1-eth2"]), FakeNode("s2", ["s2-eth1", "s2-eth2"])
    h1, h2, h3 = FakeNode("h1", ["h1-eth0"]), FakeNode("h2", ["h2-eth0"]), FakeNode("h3", ["h3-eth0"])

    def link(a, b):
        return SimpleNamespace(intf1=a, intf2=b)
    links = [link(h1.intfs[1], s1.intfs[1]), link(s1.intfs[2], s2.intfs[1]), link(s2.intfs[2], h2.intfs[1])]
    if extra_link_ends:
        links.append(link(h2.intfs[1], h3.intfs[1]))
    return SimpleNamespace(switches=[s1, s2], hosts=[h1, h2, h3], links=links)


def fake_ip(monkeypatch, devices, delete_status=0, log=None):
    """``ip -j link show`` lists ``devices`` ({name: group}); every command is recorded (and its first words
    in ``log``)."""
    calls = []

    def run(argv, **kwargs):
        calls.append(list(argv))
        if log is not None:
            log.append(tuple(argv[:3]))
        if argv[:3] == ["ip", "-j", "link"]:
            listed = [{"ifname": name, "group": group} for name, group in devices.items()]
            return subprocess.CompletedProcess(argv, 0, json.dumps(listed), "")
        return subprocess.CompletedProcess(argv, delete_status, "", "")
    monkeypatch.setattr(network.subprocess, "run", run)
    return calls


GROUP = network.DEVICE_GROUP_BASE | 7
OURS = {name: str(GROUP) for name in ("s1-eth1", "s1-eth2", "s2-eth1", "s2-eth2")}


def test_the_run_deletes_its_links_in_one_command_and_mininet_forgets_them(monkeypatch):
    net = fake_net()
    calls = fake_ip(monkeypatch, {"lo": "default", "eth0": "default", **OURS})
    assert network.delete_links_at_once(net, GROUP)
    assert calls[-1] == ["ip", "link", "del", "group", str(GROUP)]
    assert len(calls) == 2 and net.links == []
    assert sorted(net.switches[0].forgotten + net.switches[1].forgotten) == sorted(OURS)
    assert [h.forgotten for h in net.hosts] == [["h1-eth0"], ["h2-eth0"], []]


def test_a_group_holding_a_device_of_another_is_left_alone(monkeypatch):
    net = fake_net()
    calls = fake_ip(monkeypatch, {**OURS, "veth-not-ours": str(GROUP)})
    assert not network.delete_links_at_once(net, GROUP)
    assert not any(argv[:3] == ["ip", "link", "del"] for argv in calls)
    assert len(net.links) == 3 and not net.switches[0].forgotten


@pytest.mark.parametrize("devices, status", [({}, 0), (OURS, 2)], ids=["empty group", "deletion refused"])
def test_nothing_is_forgotten_unless_the_group_was_deleted(monkeypatch, devices, status):
    net = fake_net()
    fake_ip(monkeypatch, devices, delete_status=status)
    assert not network.delete_links_at_once(net, GROUP)
    assert len(net.links) == 3 and not net.switches[0].forgotten


def test_no_group_means_no_command(monkeypatch):
    calls = fake_ip(monkeypatch, OURS)
    assert not network.delete_links_at_once(fake_net(), 0)
    assert calls == []


def test_a_link_without_a_switch_port_in_the_group_stays_for_mininet(monkeypatch):
    net = fake_net(extra_link_ends=True)
    fake_ip(monkeypatch, OURS)
    assert network.delete_links_at_once(net, GROUP)
    assert [(link.intf1.name, link.intf2.name) for link in net.links] == [("h2-eth0", "h3-eth0")]


def test_a_run_group_is_never_the_default_one_and_marks_the_process():
    group = network.run_device_group()
    assert group >> 16 == network.DEVICE_GROUP_BASE >> 16 and group != 0


class FakeProc:
    def __init__(self, name, log, exited=False):
        self.name, self.log, self.returncode = name, log, (0 if exited else None)

    def poll(self):
        return self.returncode

    def terminate(self):
        self.log.append(("terminate", self.name))

    def wait(self, timeout=None):
        self.log.append(("wait", self.name))
        self.returncode = -15
        return self.returncode


def test_every_process_is_signalled_before_any_is_waited_for():
    log = []
    stop_processes([FakeProc("a", log), None, FakeProc("gone", log, exited=True), FakeProc("b", log)])
    assert log[:2] == [("terminate", "a"), ("terminate", "b")]
    assert ("wait", "a") in log[2:] and ("wait", "b") in log[2:]
    assert not any(name == "gone" for _, name in log)


PYSWITCH_WAITING_AN_HOUR = """
import sys
from testbed.dataplane.pyswitch import process
process.IDLE_POLL_S = 3600.0
proc = process.SwitchProcess([], lanes=64, slots=16)
proc.stop_on(process.signal.SIGTERM)
print("serving", flush=True)
proc.serve()
proc.close()
print("stopped", flush=True)
"""


def test_sigterm_ends_the_pyswitch_loop_in_the_wait_it_arrives_in():
    """Python resumes an interrupted poll after the signal's handler (PEP 475); the signal's wake-up byte ends
    it. The loop here would otherwise wait an hour."""
    child = subprocess.Popen([sys.executable, "-c", PYSWITCH_WAITING_AN_HOUR], cwd=REPO, stdout=subprocess.PIPE,
                             text=True)
    try:
        assert child.stdout.readline().strip() == "serving"
        child.terminate()
        out, _ = child.communicate(timeout=60)
    finally:
        child.kill()
    assert out.strip() == "stopped" and child.returncode == 0


def test_the_switches_processes_stop_before_their_ports_go_then_the_nodes(monkeypatch):
    """A switch whose ports vanish under it ends with ENETDOWN (pyswitch's receive raised it at every teardown
    while Mininet deleted the links first)."""
    log = []
    net = fake_net()
    net.switches[0].proc, net.switches[1].proc = FakeProc("s1", log), FakeProc("s2", log)
    calls = fake_ip(monkeypatch, OURS, log=log)
    net.stop = lambda: log.append(("net.stop",))
    network.stop_network(net, GROUP)
    assert log[:2] == [("terminate", "s1"), ("terminate", "s2")]
    deleted = log.index(("ip", "link", "del"))
    assert max(log.index(("wait", "s1")), log.index(("wait", "s2"))) < deleted < log.index(("net.stop",))
    assert calls[-1] == ["ip", "link", "del", "group", str(GROUP)] and net.links == []


@pytest.mark.parametrize("status, joined", [(0, GROUP), (1, 0)], ids=["joined", "refused"])
def test_every_switch_port_joins_the_group_in_one_batch_or_the_links_go_one_by_one(monkeypatch, status, joined):
    inputs = []

    def run(argv, input=None, **kwargs):
        inputs.append((list(argv), input))
        return subprocess.CompletedProcess(argv, status if argv[:2] == ["ip", "-batch"] else 0, "", "")
    monkeypatch.setattr(network.subprocess, "run", run)
    assert network._configure_switch_ports(fake_net(), GROUP) == joined
    batch = [text for argv, text in inputs if argv[:2] == ["ip", "-batch"]]
    assert batch == ["".join(f"link set dev {name} group {GROUP}\n" for name in OURS)]
    sysctl = [argv for argv, _ in inputs if argv[0] == "sysctl"]
    assert len(sysctl) == 1 and len(sysctl[0]) == 3 + len(OURS)


def test_a_killed_runs_recorded_ports_go_at_once_through_its_recorded_group(monkeypatch):
    """``inatb cleanup`` and a run's last step: the recorded group is deleted when it holds only recorded
    ports; the names that remain (none here: the fakes are not in /sys/class/net) go one by one."""
    calls = fake_ip(monkeypatch, {"eth0": "default", **OURS})
    assert state.delete_interfaces([*OURS, "not-a-run-interface"], GROUP) == len(OURS)
    assert calls[-1] == ["ip", "link", "del", "group", str(GROUP)]
    calls = fake_ip(monkeypatch, {**OURS, "s9-eth1": str(GROUP)})     # a port the record does not hold
    assert state.delete_interfaces(list(OURS), GROUP) == 0
    assert not any(argv[:3] == ["ip", "link", "del"] for argv in calls)
    calls = fake_ip(monkeypatch, OURS)
    assert state.delete_interfaces(list(OURS)) == 0 and calls == []


@pytest.mark.parametrize("recorded, group", [({"device_group": GROUP}, GROUP), ({}, 0), ({"device_group": True}, 0),
                                             ({"device_group": "1"}, 0), ({"device_group": -4}, 0)])
def test_only_a_whole_positive_recorded_group_is_used(recorded, group):
    assert state._recorded_group(recorded) == group
