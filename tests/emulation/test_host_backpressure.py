"""Emulation tests: an agent that sends faster than its host link waits for the link, as a host behind a NIC
does, instead of losing datagrams in its host's qdisc (``testbed.agents.common.SEND_BUFFER_BYTES``).

The first drives an agent endpoint through a veth shaped by htb (as Mininet shapes a host's link) in two fresh
network namespaces; the second runs the case that lost them: a K-SGD PS of GOAT's testbed with 16 workers, which
sends each RESULT to its eight participants one by one. Root only; everything created is removed after.
"""

import secrets
import subprocess
import sys
from contextlib import contextmanager
from pathlib import Path

from support import require_emulation
from test_quickstart import assert_clean

from testbed.agents.common import RECEIVE_BUFFER_BYTES
from testbed.emulation.orchestrator import run_scenario
from testbed.metrics.losses import qdisc_dropped
from testbed.scenario import load_scenario

GOAT_TESTBED = Path(__file__).resolve().parents[2] / "scenarios" / "papers" / "goat" / "testbed-1000.yaml"
SENDER_IP, RECEIVER_IP, PORT = "10.98.0.1", "10.98.0.2", 40000
DATAGRAMS = 3000               # three times the qdisc's 1000-packet queue
DATAGRAM_BYTES = 340           # about an INA frame of 64 lanes


def _run(*argv):
    return subprocess.run(argv, check=True, capture_output=True, text=True)


@contextmanager
def shaped_veth(rate: str):
    """Namespaces ``tx`` and ``rx`` joined by a veth; ``tx``'s end shaped by htb at ``rate``."""
    tag = secrets.token_hex(3)
    ns_tx, ns_rx, if_tx, if_rx = f"bptx{tag}", f"bprx{tag}", f"bpt{tag}", f"bpr{tag}"
    try:
        _run("ip", "netns", "add", ns_tx)
        _run("ip", "netns", "add", ns_rx)
        _run("ip", "link", "add", if_tx, "type", "veth", "peer", "name", if_rx)
        _run("ip", "link", "set", if_tx, "netns", ns_tx)
        _run("ip", "link", "set", if_rx, "netns", ns_rx)
        for ns, dev, ip in ((ns_tx, if_tx, SENDER_IP), (ns_rx, if_rx, RECEIVER_IP)):
            _run("ip", "-n", ns, "addr", "add", f"{ip}/24", "dev", dev)
            _run("ip", "-n", ns, "link", "set", dev, "up")
        _run("ip", "netns", "exec", ns_tx, "tc", "qdisc", "add", "dev", if_tx, "root", "handle", "5:0", "htb",
             "default", "1")
        _run("ip", "netns", "exec", ns_tx, "tc", "class", "add", "dev", if_tx, "parent", "5:0", "classid", "5:1",
             "htb", "rate", rate, "burst", "15k")
        yield ns_tx, ns_rx, if_tx
    finally:
        for ns in (ns_tx, ns_rx):
            subprocess.run(["ip", "netns", "del", ns], capture_output=True, check=False)
        subprocess.run(["ip", "link", "del", if_tx], capture_output=True, check=False)


# Run inside the namespaces (``ip netns exec``): the receiver binds, says "ready", counts what arrives until
# nothing has for a second; the sender pushes DATAGRAMS through an agent endpoint as fast as it will take them.
RECEIVER = f"""
import socket, sys
sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
sock.setsockopt(socket.SOL_SOCKET, 33, {RECEIVE_BUFFER_BYTES})
sock.bind(("{RECEIVER_IP}", {PORT}))
sock.settimeout(1.0)
print("ready", flush=True)
count = 0
try:
    while True:
        sock.recv(4096)
        count += 1
except socket.timeout:
    pass
print(count, flush=True)
"""
SENDER = f"""
from testbed.agents.common import open_endpoint
sock = open_endpoint("{SENDER_IP}", {PORT}, "{SENDER_IP}")
for _ in range({DATAGRAMS}):
    sock.sendto(bytes({DATAGRAM_BYTES}), ("{RECEIVER_IP}", {PORT}))
"""


def test_an_endpoint_ahead_of_its_shaped_link_waits_instead_of_losing_datagrams_in_the_qdisc(emulation):
    with shaped_veth("5mbit") as (ns_tx, ns_rx, if_tx):
        receiver = subprocess.Popen(["ip", "netns", "exec", ns_rx, sys.executable, "-c", RECEIVER],
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            assert receiver.stdout.readline().strip() == "ready", receiver.stderr.read()
            # 3000 x 382 frame bytes at 5 Mb/s: about 1.8 s, held back by the sender's full send buffer.
            sender = subprocess.run(["ip", "netns", "exec", ns_tx, sys.executable, "-c", SENDER], capture_output=True,
                                    text=True, timeout=60, cwd=Path(__file__).resolve().parents[2])
            assert sender.returncode == 0, sender.stderr
            received, _ = receiver.communicate(timeout=60)
        finally:
            receiver.kill()
        dropped = qdisc_dropped(_run("ip", "netns", "exec", ns_tx, "tc", "-s", "qdisc", "show", "dev", if_tx).stdout)
        assert dropped == 0
        assert int(received.strip()) == DATAGRAMS


def test_a_k_of_n_ps_sending_each_result_to_its_participants_loses_none_in_its_qdisc(emulation, tmp_path, quiet):
    workers = ",".join(f"w{i}" for i in range(1, 17))
    scenario = load_scenario(GOAT_TESTBED, ["jobs.0.iterations=3", "switch.memory=20MB", "policy=ksgd",
                                            "topology.workers_per_rack=8", f"jobs.0.workers=[{workers}]",
                                            "stragglers.compute_delay=[{workers: all, persistent: true}]"])
    result = run_scenario(scenario, out_root=tmp_path, target="pyswitch", stream=quiet)
    summary, job = result.summary, result.summary["jobs"][0]
    assert summary["status"] == "ok" and summary["aggregation_exact"] is True, summary["error"]
    assert job["iterations_completed"] == 3
    # Before the send buffer was sized to the qdisc: about 250 RESULTs lost at the PS's qdisc, 1.1% resent,
    # the run marked distorted.
    assert not summary["distorted"], summary["distortion_reasons"]
    assert job["retransmitted_packets"] == 0
    assert_clean()
