"""Several pyswitch switches in one process (``switch.processes``): the scenario field, how the planner groups
the switches and prices the packets they hand each other, the process's command line, and one process
serving two switches' control sockets."""

import json
import math
import socket
import threading
from pathlib import Path
from collections import namedtuple
from types import SimpleNamespace

import pytest

from testbed.budget import PACKET_COST_CURVES, PacketBudget, packet_budget, packets_per_cpu_s, switch_process_groups
from testbed.dataplane.pyswitch.process import SwitchProcess, SwitchSpec, parse_args, switch_specs
from testbed.errors import ScenarioError
from testbed.scenario import load_scenario

REPO = Path(__file__).resolve().parents[2]
QUICKSTART = REPO / "scenarios" / "quickstart.yaml"
GOAT_1000 = REPO / "scenarios" / "papers" / "goat" / "testbed-1000.yaml"
INART_K6 = REPO / "scenarios" / "papers" / "inart" / "fat-tree-k6.yaml"


# -- the scenario field -------------------------------------------------------------------------------------

@pytest.mark.parametrize("value, expected", [(None, "auto"), ("auto", "auto"), ("per-switch", "per-switch"),
                                             (1, 1), (3, 3)])
def test_switch_processes_takes_auto_per_switch_or_a_count(value, expected):
    overrides = [] if value is None else [f"switch.processes={value}"]
    assert load_scenario(QUICKSTART, overrides).switch.processes == expected


@pytest.mark.parametrize("value", [0, -1, "two", True, 1.5])
def test_switch_processes_refuses_anything_else_naming_the_field(value):
    with pytest.raises(ScenarioError, match=r"^--set switch\.processes=\S+: expected auto, per-switch or a whole "
                                            r"number") as err:
        load_scenario(QUICKSTART, [f"switch.processes={json.dumps(value)}"])
    assert err.value.field == "switch.processes"


# -- grouping -----------------------------------------------------------------------------------------------

CHAIN = ["s1", "s2", "s3", "s4"]
#: s1-s2 and s3-s4 busy, s2-s3 nearly idle.
CHAIN_PPS = {("s1", "s2"): 900.0, ("s2", "s1"): 900.0, ("s3", "s4"): 800.0, ("s4", "s3"): 800.0,
             ("s2", "s3"): 10.0, ("s3", "s2"): 10.0}


def test_the_switches_that_send_each_other_the_most_share_a_process():
    assert switch_process_groups(CHAIN, CHAIN_PPS, 2) == (("s1", "s2"), ("s3", "s4"))
    # The busy pairs are kept apart from the idle link whichever way round the names come.
    assert switch_process_groups(["s4", "s2", "s3", "s1"], CHAIN_PPS, 2) == (("s4", "s3"), ("s2", "s1"))


def test_one_process_holds_every_switch_and_as_many_as_the_switches_hold_one_each():
    assert switch_process_groups(CHAIN, CHAIN_PPS, 1) == (tuple(CHAIN),)
    singles = tuple((name,) for name in CHAIN)
    assert switch_process_groups(CHAIN, CHAIN_PPS, 4) == singles == switch_process_groups(CHAIN, CHAIN_PPS, 9)


def test_an_odd_count_of_processes_splits_every_switch_once():
    groups = switch_process_groups(CHAIN, CHAIN_PPS, 3)
    assert len(groups) == 3 and sorted(n for g in groups for n in g) == CHAIN
    assert ("s1", "s2") in groups or ("s3", "s4") in groups


def test_a_packet_handed_between_switches_of_one_process_costs_the_curves_fastest_point():
    curve = PACKET_COST_CURVES["pyswitch"]
    rates = {"s1": 10_000.0, "s2": 10_000.0}
    handed = {("s1", "s2"): 4_000.0}
    alone = PacketBudget("pyswitch", 2, rates, {}, switch_link_pps=handed)
    shared = PacketBudget("pyswitch", 2, rates, {}, switch_groups=(("s1", "s2"),), switch_link_pps=handed)
    # Apart: each process at 10,000 packets/s, below the curve's first point: 28,100 packets per CPU-second.
    assert alone.cores_busy(1.0) == pytest.approx(2 * 10_000 / 28_100)
    # Together: one process at 20,000 packets/s; the 16,000 that arrive from hosts at the curve there
    # (log-linear between (11,600, 28,100) and (23,300, 42,700)), the 4,000 handed over at 42,700.
    at_20k = packets_per_cpu_s(curve, 20_000.0)
    assert at_20k == pytest.approx(28_100 + 14_600 * math.log(20_000 / 11_600) / math.log(23_300 / 11_600))
    assert shared.cores_busy(1.0) == pytest.approx(16_000 / at_20k + 4_000 / 42_700)
    assert shared.cores_busy(1.0) < alone.cores_busy(1.0)
    assert shared.processes() == 1 and alone.processes() == 2
    assert shared.switch_process_pps() == {("s1", "s2"): 20_000.0}


def test_auto_picks_the_count_that_needs_the_least_dilation():
    # InArt's k = 6 fat-tree at 1/1000, 45 switches: two processes need N = 34, a process per switch 48 (the machine's
    # budget with its contention, 33.3 and 47.2; their round trips' visits 32.3 and 44.9).
    overrides = ["scale=0.001", "time_dilation=auto"]
    auto = packet_budget(load_scenario(INART_K6, overrides), "pyswitch", cores=2)
    per_switch = packet_budget(load_scenario(INART_K6, overrides + ["switch.processes=per-switch"]), "pyswitch",
                               cores=2)
    assert len(per_switch.switch_groups) == 45 and per_switch.auto_factor() == 48.0
    assert len(auto.switch_groups) == 2 and auto.auto_factor() == 34.0
    assert sorted(n for g in auto.switch_groups for n in g) == sorted(per_switch.switch_pps)
    # Each of the two is within one switch's budget at that N.
    assert max(auto.switch_process_pps().values()) / 34.0 < 20_000
    assert auto.to_dict(34.0)["switch_processes"] == [list(g) for g in auto.switch_groups]


def test_a_count_of_processes_is_refused_on_bmv2_and_auto_means_one_each_there():
    with pytest.raises(ScenarioError, match=r"^--set switch\.processes=1: bmv2 runs a process per switch"):
        packet_budget(load_scenario(GOAT_1000, ["switch.processes=1"]), "bmv2", cores=2)
    assert packet_budget(load_scenario(GOAT_1000), "bmv2", cores=2).switch_groups == (("s1",), ("s2",), ("s3",))
    one = packet_budget(load_scenario(GOAT_1000, ["switch.processes=1"]), "pyswitch", cores=2)
    assert one.switch_groups == (("s1", "s2", "s3"),)


# -- the process ----------------------------------------------------------------------------------------------

def test_the_command_line_names_each_switch_its_control_socket_and_ports():
    specs = switch_specs(parse_args(["--switch", "s1=/r/s1.sock", "--switch", "s2=/r/s2.sock",
                                     "--port", "s1:1=s1-eth1", "--port", "s2:2=s2-eth2", "--port", "s1:3=s1-eth3"]))
    assert specs == [SwitchSpec("s1", {1: "s1-eth1", 3: "s1-eth3"}, "/r/s1.sock"),
                     SwitchSpec("s2", {2: "s2-eth2"}, "/r/s2.sock")]
    # One switch alone: --name and --control, ports without the switch's name.
    assert switch_specs(parse_args(["--name", "t", "--control", "/r/t.sock", "--port", "1=veth1"])) == [
        SwitchSpec("t", {1: "veth1"}, "/r/t.sock")]


@pytest.mark.parametrize("argv, message", [
    ([], "no switch"),
    (["--switch", "s1"], "expected NAME=CONTROL_PATH"),
    (["--switch", "s1=/a", "--switch", "s1=/b"], "given twice"),
    (["--switch", "s1=/a", "--port", "s2:1=x"], "for a switch given by --switch"),
    (["--switch", "s1=/a", "--port", "1=x"], "expected NAME:PORT=IFNAME"),
    (["--switch", "s1=/a", "--port", "s1:one=x"], "expected NAME:PORT=IFNAME"),
    (["--name", "t"], "--name and --control go together"),
    (["--name", "t", "--control", "/c", "--switch", "s1=/a"], "--name and --control go together"),
])
def test_a_wrong_command_line_names_the_argument(argv, message):
    with pytest.raises(ValueError, match=message):
        switch_specs(parse_args(argv))


def test_the_group_command_holds_every_members_ports(tmp_path):
    pytest.importorskip("mininet")
    from testbed.emulation.nodes import PYSWITCH_MARKER, pyswitch_argv
    intf = namedtuple("Intf", "name")
    members = [SimpleNamespace(name="s1", control_path="/r/s1.sock", ports={intf(name="s1-eth2"): 2,
                                                                               intf(name="s1-eth1"): 1}),
               SimpleNamespace(name="s2", control_path="/r/s2.sock", ports={intf(name="lo"): 0,
                                                                               intf(name="s2-eth1"): 1})]
    argv = pyswitch_argv(members, 64, 128)
    assert argv[2:4] == ["-m", PYSWITCH_MARKER]
    assert argv[4:] == ["--lanes", "64", "--slots", "128", "--switch=s1=/r/s1.sock", "--port=s1:1=s1-eth1",
                        "--port=s1:2=s1-eth2", "--switch=s2=/r/s2.sock", "--port=s2:1=s2-eth1"]


def _ask(path, request: dict) -> dict:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as client:
        client.settimeout(10)
        client.connect(path)
        stream = client.makefile("rwb")
        stream.write(json.dumps(request).encode() + b"\n")
        stream.flush()
        return json.loads(stream.readline())


def test_one_process_answers_each_switchs_control_socket_for_that_switch(tmp_path):
    paths = {name: str(tmp_path / f"{name}.sock") for name in ("s1", "s2")}
    proc = SwitchProcess([SwitchSpec(name, {}, path) for name, path in paths.items()], lanes=64, slots=16)
    server = threading.Thread(target=proc.serve, daemon=True)
    server.start()
    try:
        write = {"op": "register_write", "name": "agg_count", "index": 3, "value": 2}
        assert _ask(paths["s1"], write) == {"ok": True, "result": None}
        read = {"op": "register_read", "name": "agg_count", "index": 3}
        assert _ask(paths["s1"], read) == {"ok": True, "result": 2}
        assert _ask(paths["s2"], read) == {"ok": True, "result": 0}
        assert [switch.name for switch in proc.switches] == ["s1", "s2"]
    finally:
        proc.running = False
        server.join(timeout=5)
        proc.close()
    assert not any(Path(path).exists() for path in paths.values())
