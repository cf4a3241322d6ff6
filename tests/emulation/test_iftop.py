"""Emulation test: the iftop meter agent against real iftop on the same veth interface.

Two fresh network namespaces joined by a veth pair (10.99.0.1 <-> 10.99.0.2,
tx checksum offload off, IPv6 off so only our IPv4 traffic is on the link).
In the receiving namespace the meter agent and a real ``iftop -t -s 5`` watch
the same interface while a paced UDP source in the other namespace sends a
bounded bulk (~3 MB/s, ending ~4 s after iftop started, so it falls entirely
inside iftop's window) and then small keepalives (iftop only advances its clock
when a packet arrives, so -s needs traffic at the end). A sink echoes a small
reply per datagram so both directions carry traffic. Checks: cumulative
totals agree within 10 %, the formatted table's totals agree with iftop's,
and the meter's byte count is exactly the IP packet lengths sent.

Root only (namespaces, AF_PACKET); skipped when not root or iftop is missing.
Everything created is removed in ``finally`` blocks, also on failure.
"""

import os
import secrets
import select
import shutil
import subprocess
import sys
import time
from contextlib import contextmanager

import pytest

from testbed.metrics.iftop import (
    format_iftop_table,
    load_samples,
    parse_iftop_output,
    run_iftop_command,
)

from support import require_emulation  # noqa: E402

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

@pytest.fixture(autouse=True)
def _needs_root_and_iftop():
    require_emulation("iftop", "ip", "ethtool")


SENDER_IP = "10.99.0.1"
RECEIVER_IP = "10.99.0.2"
UDP_PORT = 5999
BULK_RATE_BYTES_PER_S = 3_000_000
BULK_PAYLOAD_BYTES = 1400          # IP packet length 1428
KEEPALIVE_PAYLOAD_BYTES = 1        # IP packet length 29
KEEPALIVE_INTERVAL_S = 0.05
IFTOP_SECONDS = 5
BULK_END_AFTER_IFTOP_READY_S = 4.0  # iftop -s 5 prints >= 5 s after it started
PROCESS_HARD_STOP_S = 20.0          # every helper process ends by itself after this

SENDER_SCRIPT = r"""
import socket, sys, time
dst, port, bulk_end, rate, payload, ka_payload, ka_interval, hard_stop = sys.argv[1:9]
port, bulk_end, rate = int(port), float(bulk_end), float(rate)
payload, ka_payload = int(payload), int(ka_payload)
ka_interval, hard_stop = float(ka_interval), float(hard_stop)
deadline = time.monotonic() + hard_stop
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind((sys.argv[9], 0))
data, ka = b"x" * payload, b"k" * ka_payload
start = time.time()
sent_packets = 0
while time.time() < bulk_end and time.monotonic() < deadline:
    due = int(rate * (time.time() - start) / (payload + 28)) + 1
    while sent_packets < due:
        s.sendto(data, (dst, port))
        sent_packets += 1
    time.sleep(0.005)
print("bulk", sent_packets, sent_packets * (payload + 28), flush=True)
while time.monotonic() < deadline:
    s.sendto(ka, (dst, port))
    time.sleep(ka_interval)
"""

SINK_SCRIPT = r"""
import socket, sys, time
ip, port, hard_stop = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
s.bind((ip, port))
s.settimeout(0.2)
print("ready", flush=True)
reply = b"r" * 32
deadline = time.monotonic() + hard_stop
while time.monotonic() < deadline:
    try:
        _, peer = s.recvfrom(2048)
    except socket.timeout:
        continue
    s.sendto(reply, peer)
"""


def _run(*argv):
    return subprocess.run(list(argv), check=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          text=True, timeout=30)


def _wait_for(predicate, timeout_s, what):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.02)
    raise AssertionError(f"timed out after {timeout_s} s waiting for {what}")


def _stop(proc, grace_s=3.0):
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(grace_s)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(grace_s)


class Lab:
    """Names of one veth namespace pair and the processes started in it."""

    def __init__(self, suffix):
        self.ns_tx = f"inatbif-{suffix}a"
        self.ns_rx = f"inatbif-{suffix}b"
        self.if_tx = f"ibf{suffix}a"
        self.if_rx = f"ibf{suffix}b"
        self.procs = []

    def popen(self, ns, argv, **kwargs):
        kwargs.setdefault("stdout", subprocess.PIPE)
        kwargs.setdefault("stderr", subprocess.PIPE)
        proc = subprocess.Popen(["ip", "netns", "exec", ns] + list(argv), cwd=REPO_ROOT,
                                text=True, **kwargs)
        self.procs.append(proc)
        return proc

    def packet_sockets(self, ns):
        """AF_PACKET sockets bound to ETH_P_ALL and running in namespace ``ns``."""
        table = _run("ip", "netns", "exec", ns, "cat", "/proc/net/packet").stdout.splitlines()[1:]
        return sum(1 for row in table if len(row.split()) > 5
                   and row.split()[3] == "0003" and row.split()[5] == "1")


@contextmanager
def veth_namespaces():
    lab = Lab(secrets.token_hex(3))
    try:
        _run("ip", "netns", "add", lab.ns_tx)
        _run("ip", "netns", "add", lab.ns_rx)
        _run("ip", "link", "add", lab.if_tx, "type", "veth", "peer", "name", lab.if_rx)
        _run("ip", "link", "set", lab.if_tx, "netns", lab.ns_tx)
        _run("ip", "link", "set", lab.if_rx, "netns", lab.ns_rx)
        for ns, dev, ip in ((lab.ns_tx, lab.if_tx, SENDER_IP), (lab.ns_rx, lab.if_rx, RECEIVER_IP)):
            # IPv6 off: no DAD/MLD packets; the link carries only the test's IPv4 traffic
            _run("ip", "netns", "exec", ns, "sh", "-c",
                 f"for f in all default {dev}; do p=/proc/sys/net/ipv6/conf/$f/disable_ipv6; "
                 f"[ -e $p ] && echo 1 > $p; done; true")
            _run("ip", "-n", ns, "addr", "add", f"{ip}/24", "dev", dev)
            _run("ip", "-n", ns, "link", "set", dev, "up")
            if shutil.which("ethtool"):
                _run("ip", "netns", "exec", ns, "ethtool", "-K", dev, "tx", "off")
        yield lab
    finally:
        for proc in reversed(lab.procs):
            _stop(proc)
        for ns in (lab.ns_tx, lab.ns_rx):
            subprocess.run(["ip", "netns", "del", ns], stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL, check=False)
        # if the veth never left the root namespace
        subprocess.run(["ip", "link", "del", lab.if_tx], stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL, check=False)


def _readline(proc, timeout_s):
    ready, _, _ = select.select([proc.stdout], [], [], timeout_s)
    return proc.stdout.readline() if ready else ""


def _diff_pct(a, b):
    return 100.0 * abs(a - b) / max(a, b, 1)


def test_meter_agrees_with_real_iftop(tmp_path):
    meter_path = tmp_path / "meter.jsonl"
    with veth_namespaces() as lab:
        sink = lab.popen(lab.ns_rx, [sys.executable, "-c", SINK_SCRIPT, RECEIVER_IP, str(UDP_PORT),
                                     str(PROCESS_HARD_STOP_S)])
        assert _readline(sink, 10.0).strip() == "ready", sink.stderr.read() if sink.poll() else ""

        meter = lab.popen(lab.ns_rx, [sys.executable, "-m", "testbed.metrics.iftop",
                                      "--iface", lab.if_rx, "--out", str(meter_path),
                                      "--interval-s", "0.5", "--duration-s", str(PROCESS_HARD_STOP_S)],
                          env=dict(os.environ, PYTHONPATH=REPO_ROOT))
        _wait_for(lambda: meter_path.exists() and meter_path.read_text().endswith("\n")
                  or meter.poll() is not None, 10.0, "the meter's first line")
        assert meter.poll() is None, meter.stderr.read()

        iftop = lab.popen(lab.ns_rx, run_iftop_command(lab.if_rx, IFTOP_SECONDS, rate_unit="bytes"))
        _wait_for(lambda: lab.packet_sockets(lab.ns_rx) >= 2 or iftop.poll() is not None,
                  10.0, "iftop's capture socket")
        assert iftop.poll() is None, iftop.stderr.read()
        iftop_ready_s = time.time()

        sender = lab.popen(lab.ns_tx, [
            sys.executable, "-c", SENDER_SCRIPT, RECEIVER_IP, str(UDP_PORT),
            str(iftop_ready_s + BULK_END_AFTER_IFTOP_READY_S), str(BULK_RATE_BYTES_PER_S),
            str(BULK_PAYLOAD_BYTES), str(KEEPALIVE_PAYLOAD_BYTES), str(KEEPALIVE_INTERVAL_S),
            str(PROCESS_HARD_STOP_S), SENDER_IP])

        try:
            iftop_out, iftop_err = iftop.communicate(timeout=IFTOP_SECONDS + 10)
        except subprocess.TimeoutExpired:
            pytest.fail("iftop -s did not finish (no packets to advance its clock?)")
        assert iftop.returncode == 0, iftop_err

        _stop(sender)
        bulk_line = sender.stdout.read().split()
        assert bulk_line[:1] == ["bulk"], sender.stderr.read()
        bulk_packets, bulk_ip_bytes = int(bulk_line[1]), int(bulk_line[2])
        _stop(meter, grace_s=5.0)
        assert meter.returncode == 0, meter.stderr.read()

    # everything this test created is gone
    namespaces = _run("ip", "netns", "list").stdout
    links = _run("ip", "-o", "link").stdout
    assert lab.ns_tx not in namespaces and lab.ns_rx not in namespaces
    assert lab.if_tx not in links and lab.if_rx not in links

    samples = load_samples(str(meter_path))
    assert len(samples) >= 4
    final = samples[-1][1]
    meter_sent = sum(v for k, v in final.items() if k.startswith(RECEIVER_IP + ">"))
    meter_received = sum(v for k, v in final.items() if k.endswith(">" + RECEIVER_IP))
    meter_total = meter_sent + meter_received

    real = parse_iftop_output(iftop_out)
    table_text = format_iftop_table(samples, lab.if_rx, local_ip=RECEIVER_IP, rate_unit="bytes")
    table = parse_iftop_output(table_text)

    pct_total = _diff_pct(real["total_bytes"], meter_total)
    pct_recv = _diff_pct(real["received_bytes"], meter_received)
    pct_sent = _diff_pct(real["sent_bytes"], meter_sent)
    pct_table = _diff_pct(real["total_bytes"], table["total_bytes"])
    print(f"\nbulk sent: {bulk_packets} datagrams, {bulk_ip_bytes} IP bytes")
    print(f"iftop cumulative sent/recv/total: {real['sent_bytes']} / {real['received_bytes']} / "
          f"{real['total_bytes']} B")
    print(f"meter cumulative sent/recv/total: {meter_sent} / {meter_received} / {meter_total} B")
    print(f"agreement: total {pct_total:.2f} %, received {pct_recv:.2f} %, sent {pct_sent:.2f} %, "
          f"formatted table vs iftop {pct_table:.2f} %")
    print("iftop:\n" + iftop_out + "meter table:\n" + table_text)

    assert bulk_ip_bytes >= 0.5 * BULK_RATE_BYTES_PER_S  # the bulk really ran
    assert real["received_bytes"] > 0 and real["sent_bytes"] > 0
    assert pct_total <= 10.0
    assert pct_recv <= 10.0
    assert pct_sent <= 10.0
    # the formatted table's totals agree with iftop's (and with the raw samples)
    assert pct_table <= 10.0
    assert _diff_pct(real["received_bytes"], table["received_bytes"]) <= 10.0
    assert _diff_pct(real["sent_bytes"], table["sent_bytes"]) <= 10.0
    assert _diff_pct(table["total_bytes"], meter_total) <= 0.6  # display rounding only
    # per-pair: the bulk direction matches
    pair = f"{SENDER_IP}>{RECEIVER_IP}"
    assert _diff_pct(real["pairs"][pair], final[pair]) <= 10.0
    # the meter counts IP packet lengths exactly: bulk (1428 B each) + whole keepalives (29 B)
    extra_bytes = final[pair] - bulk_ip_bytes
    keepalive_ip_bytes = KEEPALIVE_PAYLOAD_BYTES + 28
    assert extra_bytes >= 0 and extra_bytes % keepalive_ip_bytes == 0, (final[pair], bulk_ip_bytes)
    assert extra_bytes // keepalive_ip_bytes <= PROCESS_HARD_STOP_S / KEEPALIVE_INTERVAL_S

