"""Packet captures (``metrics.pcap``): the scenario keys, the capture's command line and start, and the pcap
files the writer makes, which scapy's INA layer dissects."""

import io
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
from scapy.all import IP, UDP, Ether, rdpcap

from testbed.dataplane import wire
from testbed.dataplane.scapy_ina import INA
from testbed.emulation.launch import CAPTURE_MARKER, Launcher, capture_argv
from testbed.errors import EmulationError, ScenarioError
from testbed.metrics.pcap import (PCAP_GLOBAL_HEADER, PCAP_RECORD_HEADER, PCAP_SNAP_BYTES, PcapWriter,
                                  interface_node)
from testbed.scenario import parse_scenario
from test_scenario import BASE        # one rack of two workers and a PS under ATP

def metrics_of(metrics_yaml):
    return parse_scenario(textwrap.dedent(BASE) + metrics_yaml, "test.yaml").metrics


def error_of(metrics_yaml):
    with pytest.raises(ScenarioError) as info:
        metrics_of(metrics_yaml)
    return str(info.value)


# -- the scenario keys -------------------------------------------------------------------------------------------

def test_host_names_mean_their_own_interface_and_switch_ports_stay_as_named():
    metrics = metrics_of("metrics: {pcap: [ps, s1-eth1], pcap_max_size: 2MB}\n")
    assert metrics.pcap_interfaces == ["ps-eth0", "s1-eth1"]
    assert metrics.pcap_max_bytes == 2_000_000


def test_no_capture_unless_asked_and_a_default_cap():
    metrics = metrics_of("")
    assert metrics.pcap_interfaces == [] and metrics.pcap_max_bytes == 64_000_000


@pytest.mark.parametrize("names, field, named", [
    ("[ps, s1-eth9]", "metrics.pcap.1", "'s1-eth9'"),      # s1 has ports 1 to 3
    ("[h7]", "metrics.pcap.0", "'h7'"),                   # no such host
    ("[ps-eth0]", "metrics.pcap.0", "'ps-eth0'"),         # a host is named by its name
    ("[s1]", "metrics.pcap.0", "'s1'"),                   # a switch has no one interface
    ("[5]", "metrics.pcap.0", "5"),
])
def test_an_unknown_interface_or_host_is_refused_naming_the_field(names, field, named):
    message = error_of(f"metrics: {{pcap: {names}}}\n")
    assert f"{field}:" in message and named in message and "\n" not in message


def test_an_interface_named_twice_is_refused():
    assert "metrics.pcap.1: ps-eth0 is captured already" in error_of("metrics: {pcap: [ps, ps]}\n")


@pytest.mark.parametrize("size", ["100B", "11GB", "0"])
def test_a_cap_outside_its_bounds_is_refused_naming_the_field(size):
    assert "metrics.pcap_max_size:" in error_of(f"metrics: {{pcap: [ps], pcap_max_size: {size}}}\n")


# -- the command line and the start ------------------------------------------------------------------------------

def test_the_capture_argv_names_interface_file_snap_length_and_cap():
    argv = capture_argv("s1-eth1", Path("run/pcap/s1-eth1.pcap"), 5_000_000)
    assert argv[:5] == [sys.executable, "-I", "-m", CAPTURE_MARKER, "--iface"]
    assert argv[5:] == ["s1-eth1", "--out", "run/pcap/s1-eth1.pcap", "--snap-bytes", str(PCAP_SNAP_BYTES),
                        "--max-bytes", "5000000"]


def test_an_interface_belongs_to_the_node_before_its_eth():
    assert interface_node("ps-eth0") == "ps" and interface_node("s1-eth12") == "s1"
    assert interface_node("leaf_1-eth3") == "leaf_1"


def test_the_snap_length_keeps_a_whole_ina_frame_of_the_most_lanes():
    assert PCAP_SNAP_BYTES == wire.ina_frame_bytes(255) == 1100


class _Node:
    def __init__(self, argv_for):
        self.argv_for = argv_for

    def popen(self, argv, **kwargs):
        return subprocess.Popen(self.argv_for(argv), **kwargs)


class _Network:
    def __init__(self, argv_for):
        self.nodes = []
        self.argv_for = argv_for

    def host(self, name):
        self.nodes.append(name)
        return _Node(self.argv_for)


class _State:
    def __init__(self):
        self.processes = []

    def add_process(self, pid, marker):
        self.processes.append((pid, marker))


def test_a_capture_that_fails_to_start_is_one_line_naming_the_interface(tmp_path):
    (tmp_path / "logs").mkdir()
    fails = lambda argv: [sys.executable, "-c",                                               # noqa: E731
                          "import sys; print('Traceback ...'); print('pcap capture on s1-eth1: No such device'); "
                          "sys.exit(1)"]
    network, state = _Network(fails), _State()
    launcher = Launcher(network, state, tmp_path, say=lambda line: None)
    with pytest.raises(EmulationError) as info:
        launcher.start_captures(["s1-eth1"], 10_000)
    assert str(info.value) == "packet capture on s1-eth1 did not start: pcap capture on s1-eth1: No such device"
    assert network.nodes == ["s1"] and state.processes[0][1] == CAPTURE_MARKER
    launcher.stop_all()


def test_captures_start_in_their_nodes_once_their_header_is_written_and_stop_with_the_rest(tmp_path):
    (tmp_path / "logs").mkdir()
    # A stand-in capture: writes the header to --out, then waits to be stopped.
    stand_in = ("import sys, time; from testbed.metrics.pcap import pcap_global_header; "
                "out = sys.argv[sys.argv.index('--out') + 1]; open(out, 'wb').write(pcap_global_header(64)); "
                "time.sleep(60)")
    network, state = _Network(lambda argv: [sys.executable, "-c", stand_in] + argv[4:]), _State()
    said = []
    launcher = Launcher(network, state, tmp_path, say=said.append)
    launcher.start_captures(["ps-eth0", "s1-eth2"], 10_000)
    assert network.nodes == ["ps", "s1"]
    assert sorted(p.name for p in (tmp_path / "pcap").iterdir()) == ["ps-eth0.pcap", "s1-eth2.pcap"]
    assert [marker for _, marker in state.processes] == [CAPTURE_MARKER, CAPTURE_MARKER]
    assert "ps-eth0, s1-eth2" in said[0]
    launcher.stop_all()
    assert all(proc.poll() is not None for proc, _ in launcher.captures.values())


# -- the file ----------------------------------------------------------------------------------------------------

def _ina_frame(seq, elems=64, job=3):
    header = wire.InaHeader(job=job, flags=wire.FLAG_DATA, elems=elems, seq=seq, iteration=2, fanin=4)
    lanes = np.arange(elems, dtype=np.int32) * (seq + 1)
    return wire.build_ina_frame("02:00:00:00:00:02", "02:00:00:00:00:01", "10.0.0.1", "10.0.0.5", header, lanes)


def test_the_writers_file_dissects_with_the_ina_layer(tmp_path):
    path = tmp_path / "ps-eth0.pcap"
    frames = [_ina_frame(seq) for seq in range(5)] + [_ina_frame(9, elems=255)]
    with open(path, "wb") as stream:
        writer = PcapWriter(stream, PCAP_SNAP_BYTES, 10**6)
        for i, frame in enumerate(frames):
            assert writer.write(1_700_000_000_123_456_789 + i * 1000, frame, len(frame))
    packets = rdpcap(str(path))
    assert [p[INA].seq for p in packets] == [0, 1, 2, 3, 4, 9]
    assert all(p[INA].job == 3 and str(p[INA].flags) == "DATA" for p in packets)
    assert packets[1][INA].lanes == [2 * i for i in range(64)]
    assert len(packets[5][INA].lanes) == 255                        # the most lanes fit the snap length
    assert float(packets[0].time) == pytest.approx(1_700_000_000.123456, abs=1e-6)
    assert path.stat().st_size == writer.size_bytes


def test_a_frame_longer_than_the_snap_length_is_cut_and_keeps_its_length(tmp_path):
    path = tmp_path / "cut.pcap"
    long_frame = bytes(Ether() / IP(dst="10.0.0.2") / UDP(dport=5001) / (b"x" * 1400))
    with open(path, "wb") as stream:
        PcapWriter(stream, 128, 10**6).write(0, long_frame[:128], len(long_frame))
    raw = path.read_bytes()
    _, _, captured, original = PCAP_RECORD_HEADER.unpack_from(raw, PCAP_GLOBAL_HEADER.size)
    assert (captured, original) == (128, len(long_frame))
    assert rdpcap(str(path))[0][UDP].dport == 5001


def test_the_writer_stops_at_its_cap_with_whole_records():
    frame = _ina_frame(0)
    record_bytes = PCAP_RECORD_HEADER.size + len(frame)
    cap = PCAP_GLOBAL_HEADER.size + 3 * record_bytes + record_bytes // 2
    stream = io.BytesIO()
    writer = PcapWriter(stream, PCAP_SNAP_BYTES, cap)
    written = [writer.write(i, frame, len(frame)) for i in range(5)]
    assert written == [True, True, True, False, False]
    assert len(stream.getvalue()) == PCAP_GLOBAL_HEADER.size + 3 * record_bytes <= cap
    assert (writer.counts.written, writer.counts.refused) == (3, 2)
