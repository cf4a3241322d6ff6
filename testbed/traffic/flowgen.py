"""Background-traffic agent: real TCP flows between emulated hosts, one process per host.

Run inside a host's network namespace (a Mininet host)::

    python -m testbed.traffic.flowgen CONFIG.json

Design. The flows come from ``testbed.traffic.distributions.plan_flows`` (the
HPCC generator's rule: Poisson arrivals per sending host, sizes from a
datacenter CDF, uniform destinations; PA-ATP injects Hadoop flows this way at
loads 0.2-0.8; docs/guide/network-dynamics.md gives the rule). A *source* opens one TCP
connection per flow at the flow's start time, writes ``size_bytes`` zero bytes,
half-closes, and waits for the *sink*'s one-byte acknowledgement that it read
every byte up to EOF. Flow i of a source leaves from port ``source_port(i)``
(UDP flows too), so that ECMP per flow puts it on the same path in every
run of a seed; when that port's earlier connection to the same sink still
holds the four-tuple (open, or in TIME_WAIT after the ports wrapped), the
flow leaves from a port the kernel picks instead of failing until its
deadline. The flow completion time (FCT) is measured by the source,
from the start of the successful ``connect`` to the arrival of that
acknowledgement. Both roles run one single-threaded ``selectors`` event loop
with non-blocking sockets, so hundreds of concurrent flows cost one select per
batch of ready sockets, and a new flow starts as soon as its timer is due
(select sleeps exactly until the next start time, retry or deadline).

Readiness is never waited for with fixed sleeps: a source whose connect fails
(e.g. the sink is not listening yet) retries with a bounded exponential backoff
(10 ms doubling to 200 ms) until the deadline. Each role stops at its deadline
or on SIGTERM/SIGINT, records what was unfinished, flushes its output and exits
0. A malformed config exits 2 with a one-line message on stderr. Output is one
start line and one summary line on stdout; nothing per packet.

Config (JSON object):

``{"role": "sink", "port": 5001, "listen_ip": "0.0.0.0", "stop_epoch_s": 1700000030.0, "output": "sink.jsonl"}``
    ``port`` is required; ``listen_ip`` defaults to ``0.0.0.0``; without
    ``stop_epoch_s`` the sink runs until SIGTERM; without ``output`` it records
    nothing; ``congestion_control`` sets its listener's (connections inherit
    it: a DCTCP receiver echoes each segment's CE mark, RFC 8257). A sink
    record is one JSON line per connection:
    ``{"peer": "10.0.0.1:40312", "bytes": 1460, "duration_s": 0.0021, "completed": true,
    "congestion_control": "cubic"}`` (``completed``: EOF reached and
    acknowledged; ``duration_s`` from accept to EOF; ``congestion_control``
    what the connection's socket reported using).

``{"role": "source", "src": "h1", "start_epoch_s": ..., "stop_epoch_s": ..., "output": "flows.jsonl", "flows": [...]}``
    ``flows`` is a list of ``{"dst": "10.0.0.2", "port": 5001, "start_s": 0.013, "size_bytes": 1460}``
    where ``dst`` is an IPv4 address and ``start_s`` the offset from
    ``start_epoch_s`` (wall clock, seconds since the epoch). ``stop_epoch_s``
    is the deadline; ``src`` is a label copied into each record (default: the
    host name). ``congestion_control`` names the TCP congestion control of
    every flow (``TCP_CONGESTION`` on its socket, e.g. ``"cubic"``); without
    it the flows use the kernel's default, whatever the host was set to. The
    source exits as soon as every flow is recorded. Each flow is one JSON
    line, written when it ends:
    ``{"src": "h1", "dst": "10.0.0.2", "size_bytes": 1460, "start_s": 0.013, "fct_s": 0.0021,
    "completed": true, "congestion_control": "cubic", "ecn": false, "syn_retransmitted": false}``
    with ``start_s`` the planned offset, ``fct_s`` null when not completed
    (connection refused until the deadline, reset, or still running at stop),
    ``congestion_control`` what the socket reported using (null if it never
    had one), and ``ecn`` whether the connection negotiated ECN (TCP_INFO's
    ``TCPI_OPT_ECN``: the host's ``net.ipv4.tcp_ecn`` asked for it and the sink
    agreed; false if it never connected), and ``syn_retransmitted`` whether its
    SYN had to be sent again (TCP_INFO's ``tcpi_total_retrans`` when it
    connected): Linux then asks no more for ECN (``net.ipv4.tcp_ecn_fallback``,
    RFC 3168 §6.1.1.1), so such a connection runs without it.

Constant-rate UDP flows. A *udp-source* sends each flow's datagrams at a
constant rate from ``start_epoch_s + start_s`` for ``duration_s``; a
*udp-sink* counts what arrives. ``rate_bps`` counts IP packets: each datagram
is ``datagram_bytes`` of UDP payload plus 28 bytes of IPv4 (20) and UDP (8)
headers, so datagrams leave every ``(datagram_bytes + 28) * 8 / rate_bps``
seconds. On the wire each is an Ethernet frame 14 bytes longer (the link
shaper counts frames, without preamble or FCS), so a flow occupies
``rate_bps * (datagram_bytes + 42) / (datagram_bytes + 28)`` of a shaped link.
The payload is zeros after a 12-byte header: the flow's index in ``flows``
(uint32) and its sequence number (uint64), network byte order
(``struct`` ``"!IQ"``); the sequence counts the datagrams the kernel accepted,
0, 1, 2, ... Departure *k* is due at ``start + k * interval``; one select
(microsecond timeout) sleeps until the next due departure of any flow. A loop
that wakes late sends at most ``MAX_BURST_DATAGRAMS`` (8) datagrams of a flow
at once and forgives the older backlog, so a stall never turns into a burst;
a source that cannot keep up sends less, as its record shows. A send that
fails (ENOBUFS/EAGAIN: the socket's send buffer or the device queue is full;
any other per-datagram error too) is counted in ``send_drops`` and not
retried. Each flow sends from its own socket (its own source port; a
switch hashing ports would spread them, while the emulated switches choose
among parallel links by source and destination, so one pair's flows share
a path). Linux drops silently, without ENOBUFS, a UDP datagram
that a full qdisc of the sender's own interface refuses after the socket
accepted it; the sink's ``lost`` counts those.

``{"role": "udp-sink", "port": 5101, "listen_ip": "0.0.0.0", "stop_epoch_s": ..., "output": "udp-sink.jsonl"}``
    ``port`` and ``output`` are required; ``listen_ip`` defaults to
    ``0.0.0.0``; without ``stop_epoch_s`` the sink runs until SIGTERM. The
    socket asks for a 4 MB receive buffer (SO_RCVBUFFORCE, else SO_RCVBUF,
    which ``net.core.rmem_max`` caps; the start line quotes what it got) and
    each wake reads every queued datagram (up to 4096 before it looks at the
    clock again). At stop it writes one JSON line per (peer address, flow index):
    ``{"peer": "10.0.0.7", "flow": 0, "datagrams": 311, "bytes": 319708, "lost": 2}``
    with ``bytes`` the IP bytes (payload + 28 per datagram) and ``lost`` =
    highest sequence seen + 1 - ``datagrams`` (so losses after the last
    datagram that arrived are not seen; clamped at 0 should a datagram be
    duplicated). Two udp-sources on one host sending the same flow index to
    one sink would be counted together. Datagrams shorter than the header are
    counted on the summary line only.

``{"role": "udp-source", "src": "h7", "start_epoch_s": ..., "stop_epoch_s": ..., "output": "u.jsonl", "flows": [...]}``
    ``flows`` is a list of
    ``{"dst": "10.0.0.9", "port": 5101, "start_s": 0.0, "duration_s": 2.5, "rate_bps": 3.2e6, "datagram_bytes": 1000}``:
    ``dst`` an IPv4 address, ``port`` 1-65535, ``start_s`` >= 0,
    ``duration_s`` > 0, ``rate_bps`` > 0 and ``datagram_bytes`` an integer
    from 12 to 1472 (default 1000); ``src`` and the epochs as for ``source``.
    The source exits when every flow has sent its last datagram, at
    ``stop_epoch_s`` or on SIGTERM/SIGINT, and then writes one JSON line per
    flow, in the order of ``flows``: ``src``, ``flow``, then the flow's ``dst``,
    ``port``, ``start_s``, ``duration_s``, ``rate_bps`` and ``datagram_bytes``
    as configured, then what it did, e.g. for the flow above
    ``"sent_datagrams": 973, "sent_bytes": 1000244, "send_drops": 0, "max_start_lag_s": 0.00012, "completed": true``.
    ``flow`` is the index the sink reports, ``sent_bytes`` counts IP bytes
    (``sent_datagrams * (datagram_bytes + 28)``), ``max_start_lag_s`` is the
    latest that a departure of the flow (its first included) was served after
    its due time (null if the flow never started), and ``completed`` is false
    for a flow still due to send at the deadline or the signal. A complete,
    unimpeded flow sends ``ceil(duration_s / interval)`` datagrams.
"""
from __future__ import annotations

import errno
import heapq
import ipaddress
import json
import math
import random
import resource
import selectors
import signal
import socket
import struct
import sys
import time
from dataclasses import dataclass
from typing import IO, Dict, List, Optional, Sequence, Tuple

CHUNK_BYTES = 64 * 1024  # per send/recv call: bounds the work one ready socket costs a loop turn
ACK = b"\x01"
RETRY_FIRST_S = 0.01
RETRY_MAX_S = 0.2
PERCENTILES = (50, 95, 99)

UDP_HEADER = struct.Struct("!IQ")  # flow index, sequence number: the front of every udp-source datagram
UDP_IP_OVERHEAD_BYTES = 28  # IPv4 (20) + UDP (8) headers: counted in rate_bps and in every "bytes"
ETHERNET_HEADER_BYTES = 14  # what a frame adds to the IP packet (the shaper counts frames)
UDP_DEFAULT_DATAGRAM_BYTES = 1000
UDP_MAX_DATAGRAM_BYTES = 1500 - UDP_IP_OVERHEAD_BYTES  # one 1500-byte-MTU packet
MAX_BURST_DATAGRAMS = 8  # catch-up bound of a flow after a late wake
UDP_RCVBUF_BYTES = 4 * 1024 * 1024
UDP_DRAIN_MAX = 4096  # datagrams read per wake before the sink looks at its deadline again
SO_RCVBUFFORCE = getattr(socket, "SO_RCVBUFFORCE", 33)  # Linux; Python does not export it
#: A source's flow i leaves from the i-th port (modulo SOURCE_PORTS) of one fixed shuffle of 10000-32767 (below
#: Linux's ephemeral range), not from a port the kernel picks: under ECMP per flow (topology.ecmp: flow) its path
#: is then a function of the plan, and every run of a seed puts the same flow on the same path. Shuffled, not
#: consecutive: CRC-16 is linear in its input bits, and consecutive ports put 80% of the flows on two of four
#: paths where ports the kernel picks spread them evenly.
FIRST_SOURCE_PORT = 10000
SOURCE_PORTS = 22768
SOURCE_PORT_SHUFFLE_SEED = 1


def _source_port_order() -> tuple:
    ports = list(range(FIRST_SOURCE_PORT, FIRST_SOURCE_PORT + SOURCE_PORTS))
    random.Random(SOURCE_PORT_SHUFFLE_SEED).shuffle(ports)
    return tuple(ports)


_SOURCE_PORT_ORDER = _source_port_order()


def source_port(index: int) -> int:
    """The port flow ``index`` of a source's ``flows`` leaves from (distinct for SOURCE_PORTS flows in a row)."""
    return _SOURCE_PORT_ORDER[index % SOURCE_PORTS]


def _bind_source_port(sock: socket.socket, index: int) -> None:
    """Bind ``sock`` to flow ``index``'s source port; if that port is taken, the kernel picks one at connect."""
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)   # past a TIME_WAIT of an earlier run's flow
    try:
        sock.bind(("0.0.0.0", source_port(index)))
    except OSError:
        pass


def _percentile(sorted_values: Sequence[float], q: float) -> float:
    """Percentile with linear interpolation between order statistics (numpy's default)."""
    position = (len(sorted_values) - 1) * q / 100.0
    lo = math.floor(position)
    hi = min(lo + 1, len(sorted_values) - 1)
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * (position - lo)


def _window_capacity_bytes(duration_s: float, link_rate_bps: float) -> float:
    """Bytes ``link_rate_bps`` carries in ``duration_s``: what every load of a window is a share of."""
    if duration_s <= 0 or link_rate_bps <= 0:
        raise ValueError(f"duration_s and link_rate_bps must be > 0, got {duration_s}, {link_rate_bps}")
    return link_rate_bps * duration_s / 8.0


def summarise_flows(records: Sequence[dict], duration_s: float, link_rate_bps: float) -> Dict[str, Optional[float]]:
    """Summary of source records over a window of ``duration_s`` on ``link_rate_bps`` of capacity.

    ``achieved_load`` = bytes of *completed* flows / (link_rate_bps * duration_s / 8)
    (a flow cut off at the deadline contributes nothing: the sender cannot know
    how much of it arrived; ``received_load`` counts it from the sinks' records);
    ``offered_load`` is the same ratio for the bytes of all flows. For records of
    several senders pass the sum of their link rates. FCT percentiles (linear
    interpolation) are over completed flows and None when no flow completed;
    ``mean_size_bytes`` is over all flows.
    """
    capacity_bytes = _window_capacity_bytes(duration_s, link_rate_bps)
    completed = [r for r in records if r["completed"]]
    offered_bytes = sum(r["size_bytes"] for r in records)
    delivered_bytes = sum(r["size_bytes"] for r in completed)
    fcts_s = sorted(r["fct_s"] for r in completed)
    summary: Dict[str, Optional[float]] = {
        "flow_count": len(records),
        "completed_count": len(completed),
        "offered_bytes": offered_bytes,
        "delivered_bytes": delivered_bytes,
        "offered_load": offered_bytes / capacity_bytes,
        "achieved_load": delivered_bytes / capacity_bytes,
        "mean_size_bytes": offered_bytes / len(records) if records else None,
    }
    for q in PERCENTILES:
        summary[f"fct_p{q}_s"] = _percentile(fcts_s, q) if fcts_s else None
    return summary


def received_load(sink_records: Sequence[dict], duration_s: float, link_rate_bps: float) -> Dict[str, float]:
    """What the sinks received over a window of ``duration_s`` on ``link_rate_bps`` of capacity.

    ``received_load`` = payload bytes of every connection the sinks recorded, completed or cut off at
    the deadline / (link_rate_bps * duration_s / 8): the share of the capacity the flows actually used.
    ``achieved_load`` (``summarise_flows``) counts completed flows only, so one Hadoop flow of
    megabytes still running at the deadline takes its every byte out of it: on PA-ATP's testbed at
    4 Mb/s a cut-off 10 MB flow is a third of the load over 60 s. Same units as ``achieved_load``
    (TCP payload bytes over link capacity).
    """
    capacity_bytes = _window_capacity_bytes(duration_s, link_rate_bps)
    received_bytes = sum(r["bytes"] for r in sink_records)
    return {"received_bytes": received_bytes, "received_load": received_bytes / capacity_bytes}


class _StopFlag:
    """Set by the SIGTERM/SIGINT handler; the handler's wakeup byte breaks the select."""

    def __init__(self) -> None:
        self.requested = False

    def handle(self, signum: int, frame: object) -> None:
        self.requested = True


@dataclass
class _Flow:
    dst: str
    port: int
    start_s: float
    size_bytes: int
    sock: Optional[socket.socket] = None
    state: str = "pending"  # pending -> connecting -> sending -> awaiting_ack -> done
    sent_bytes: int = 0
    connect_mono_s: float = 0.0
    backoff_s: float = RETRY_FIRST_S
    attempts: int = 0
    congestion_control: Optional[str] = None   # what the socket reported using
    ecn: bool = False                          # the connection negotiated ECN
    syn_retransmitted: bool = False            # its SYN was sent again (Linux then falls back to no ECN)
    seeded_port: bool = True                   # leaves from source_port(index), not from a port the kernel picks


class _Source:
    """Starts each flow at its time, sends, half-closes, waits for the ACK byte, records."""

    def __init__(self, config: dict, out: IO[str], stop: _StopFlag, wake: socket.socket) -> None:
        self.src = config.get("src") or socket.gethostname()
        self.flows = [_Flow(f["dst"], int(f["port"]), float(f["start_s"]), int(f["size_bytes"]))
                      for f in config["flows"]]
        self.t0_mono_s = _monotonic_of(config["start_epoch_s"])
        self.deadline_mono_s = _monotonic_of(config["stop_epoch_s"])
        self.out, self.stop, self.wake = out, stop, wake
        self.selector = selectors.DefaultSelector()
        self.payload = memoryview(bytes(CHUNK_BYTES))
        self.timers = [(self.t0_mono_s + flow.start_s, i) for i, flow in enumerate(self.flows)]
        heapq.heapify(self.timers)
        self.records: List[dict] = []
        self.max_start_lag_s = 0.0
        self.congestion_control = config.get("congestion_control")

    def _record(self, flow: _Flow, fct_s: Optional[float]) -> None:
        if flow.sock is not None:
            if flow.state in ("connecting", "sending", "awaiting_ack"):
                self.selector.unregister(flow.sock)
            flow.sock.close()
            flow.sock = None
        flow.state = "done"
        record = {"src": self.src, "dst": flow.dst, "size_bytes": flow.size_bytes, "start_s": flow.start_s,
                  "fct_s": fct_s, "completed": fct_s is not None, "congestion_control": flow.congestion_control,
                  "ecn": flow.ecn, "syn_retransmitted": flow.syn_retransmitted}
        self.records.append(record)
        self.out.write(json.dumps(record) + "\n")
        self.out.flush()

    def _retry(self, index: int) -> None:
        flow = self.flows[index]
        if flow.sock is not None:
            if flow.state == "connecting":
                self.selector.unregister(flow.sock)
            flow.sock.close()
            flow.sock = None
        flow.state = "pending"
        heapq.heappush(self.timers, (time.monotonic() + flow.backoff_s, index))
        flow.backoff_s = min(2 * flow.backoff_s, RETRY_MAX_S)

    def _connect(self, index: int) -> None:
        flow = self.flows[index]
        flow.attempts += 1
        if flow.attempts == 1:  # how late is the start?
            self.max_start_lag_s = max(self.max_start_lag_s, time.monotonic() - self.t0_mono_s - flow.start_s)
        try:
            flow.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            if flow.seeded_port:
                _bind_source_port(flow.sock, index)
            if self.congestion_control:
                flow.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_CONGESTION, self.congestion_control.encode())
            flow.congestion_control = _congestion_control_of(flow.sock)
            flow.sock.setblocking(False)
            flow.connect_mono_s = time.monotonic()
            err = flow.sock.connect_ex((flow.dst, flow.port))
        except OSError:  # e.g. EMFILE: try again shortly
            self._retry(index)
            return
        if err in (errno.EADDRNOTAVAIL, errno.EADDRINUSE) and flow.seeded_port:
            flow.seeded_port = False   # the four-tuple is another connection's (open or in TIME_WAIT)
        if err not in (0, errno.EINPROGRESS):
            self._retry(index)
            return
        flow.state = "connecting"
        self.selector.register(flow.sock, selectors.EVENT_WRITE, index)

    def _on_ready(self, index: int) -> None:
        flow = self.flows[index]
        try:
            if flow.state == "connecting":
                if flow.sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR):
                    self._retry(index)
                    return
                flow.state = "sending"
                flow.ecn, flow.syn_retransmitted = _connection_ecn(flow.sock)
            if flow.state == "sending":
                remaining = flow.size_bytes - flow.sent_bytes
                if remaining:
                    flow.sent_bytes += flow.sock.send(self.payload[: min(remaining, CHUNK_BYTES)])
                if flow.sent_bytes == flow.size_bytes:
                    flow.sock.shutdown(socket.SHUT_WR)
                    flow.state = "awaiting_ack"
                    self.selector.modify(flow.sock, selectors.EVENT_READ, index)
            elif flow.state == "awaiting_ack":
                ack = flow.sock.recv(1)
                self._record(flow, time.monotonic() - flow.connect_mono_s if ack == ACK else None)
        except BlockingIOError:
            pass
        except OSError:  # reset or refused mid-flow: the flow failed
            self._record(flow, None)

    def _start_due_flows(self) -> None:
        now_mono_s = time.monotonic()
        while self.timers and self.timers[0][0] <= now_mono_s:
            self._connect(heapq.heappop(self.timers)[1])

    def run(self) -> str:
        """Run until every flow is recorded, the deadline, or a stop signal; returns the reason."""
        self.selector.register(self.wake, selectors.EVENT_READ, None)
        reason = "all flows ended"
        while len(self.records) < len(self.flows):
            now_mono_s = time.monotonic()
            if self.stop.requested:
                reason = "signal"
                break
            if now_mono_s >= self.deadline_mono_s:
                reason = "deadline"
                break
            self._start_due_flows()
            next_mono_s = min(self.timers[0][0], self.deadline_mono_s) if self.timers else self.deadline_mono_s
            for key, _ in self.selector.select(max(0.0, next_mono_s - time.monotonic())):
                if key.data is None:
                    _drain(self.wake)
                else:
                    self._on_ready(key.data)
                self._start_due_flows()  # a long batch of ready sockets must not delay a start
        for flow in self.flows:
            if flow.state != "done":
                self._record(flow, None)
        self.selector.close()
        return reason


class _Sink:
    """Accepts connections, reads each to EOF, acknowledges with one byte, records."""

    def __init__(self, config: dict, out: Optional[IO[str]], stop: _StopFlag, wake: socket.socket) -> None:
        self.listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if config.get("congestion_control"):
            # Accepted connections keep the listener's: a DCTCP receiver echoes each segment's CE mark.
            self.listener.setsockopt(socket.IPPROTO_TCP, socket.TCP_CONGESTION, config["congestion_control"].encode())
        self.listener.bind((config.get("listen_ip", "0.0.0.0"), int(config["port"])))
        self.listener.listen(socket.SOMAXCONN)
        self.listener.setblocking(False)
        self.deadline_mono_s = _monotonic_of(config.get("stop_epoch_s"))
        self.out, self.stop, self.wake = out, stop, wake
        self.selector = selectors.DefaultSelector()
        self.buffer = bytearray(CHUNK_BYTES)
        self.connections = 0
        self.completed = 0
        self.bytes_received = 0

    def _finish(self, conn: socket.socket, state: dict, completed: bool) -> None:
        self.selector.unregister(conn)
        conn.close()
        self.connections += 1
        self.completed += completed
        self.bytes_received += state["bytes"]
        if self.out is not None:
            record = {"peer": state["peer"], "bytes": state["bytes"],
                      "duration_s": time.monotonic() - state["accept_mono_s"], "completed": completed,
                      "congestion_control": state["congestion_control"]}
            self.out.write(json.dumps(record) + "\n")
            self.out.flush()

    def _on_readable(self, conn: socket.socket, state: dict) -> None:
        try:
            n = conn.recv_into(self.buffer)
        except BlockingIOError:
            return
        except OSError:
            self._finish(conn, state, False)
            return
        if n:
            state["bytes"] += n
            return
        try:
            conn.send(ACK)
        except OSError:
            self._finish(conn, state, False)
            return
        self._finish(conn, state, True)

    def _on_ready(self, key) -> None:
        if key.data != "listen":
            self._on_readable(key.fileobj, key.data)
            return
        try:
            conn, (host, port) = self.listener.accept()
        except OSError:
            return
        conn.setblocking(False)
        state = {"peer": f"{host}:{port}", "bytes": 0, "accept_mono_s": time.monotonic(),
                 "congestion_control": _congestion_control_of(conn)}
        self.selector.register(conn, selectors.EVENT_READ, state)

    def run(self) -> str:
        self.selector.register(self.listener, selectors.EVENT_READ, "listen")
        reason = _serve_until_stopped(self.selector, self.stop, self.wake, self.deadline_mono_s, self._on_ready)
        for key in list(self.selector.get_map().values()):
            if isinstance(key.data, dict):
                self._finish(key.fileobj, key.data, False)
        self.selector.close()
        self.listener.close()
        return reason


@dataclass
class _UdpFlow:
    dst: str
    port: int
    start_s: float
    duration_s: float
    rate_bps: float
    datagram_bytes: int
    begin_mono_s: float = 0.0
    end_mono_s: float = 0.0
    interval_s: float = 0.0
    slot: int = 0  # the next departure to serve is due at begin_mono_s + slot * interval_s
    sock: Optional[socket.socket] = None
    payload: Optional[bytearray] = None
    sent_datagrams: int = 0  # also the next sequence number
    send_drops: int = 0
    max_lag_s: Optional[float] = None
    done: bool = False

    def due_mono_s(self) -> float:
        return self.begin_mono_s + self.slot * self.interval_s


class _UdpSource:
    """Sends each flow's datagrams at its constant rate; a heap holds every flow's next departure."""

    def __init__(self, config: dict, stop: _StopFlag, wake: socket.socket) -> None:
        self.src = config.get("src") or socket.gethostname()
        self.t0_mono_s = _monotonic_of(config["start_epoch_s"])
        self.deadline_mono_s = _monotonic_of(config["stop_epoch_s"])
        self.flows: List[_UdpFlow] = []
        for f in config["flows"]:
            flow = _UdpFlow(f["dst"], int(f["port"]), float(f["start_s"]), float(f["duration_s"]),
                            float(f["rate_bps"]), int(f.get("datagram_bytes", UDP_DEFAULT_DATAGRAM_BYTES)))
            flow.begin_mono_s = self.t0_mono_s + flow.start_s
            flow.end_mono_s = flow.begin_mono_s + flow.duration_s
            flow.interval_s = (flow.datagram_bytes + UDP_IP_OVERHEAD_BYTES) * 8 / flow.rate_bps
            self.flows.append(flow)
        self.stop, self.wake = stop, wake
        # Only the wake socket is ever registered (a UDP send never waits), so select()'s fd
        # limit is moot, and its timeout has microseconds where epoll's has milliseconds.
        self.selector = selectors.SelectSelector()
        self.timers = [(flow.begin_mono_s, i) for i, flow in enumerate(self.flows)]
        heapq.heapify(self.timers)

    def _send(self, index: int, flow: _UdpFlow) -> None:
        try:
            if flow.sock is None:
                flow.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
                _bind_source_port(flow.sock, index)
                flow.sock.setblocking(False)
                flow.payload = bytearray(flow.datagram_bytes)
            UDP_HEADER.pack_into(flow.payload, 0, index, flow.sent_datagrams)
            flow.sock.sendto(flow.payload, (flow.dst, flow.port))
        except OSError:  # ENOBUFS/EAGAIN (queue full), or e.g. EMFILE/EHOSTUNREACH: this datagram is lost
            flow.send_drops += 1
            return
        flow.sent_datagrams += 1

    def _serve(self, index: int, now_mono_s: float) -> None:
        """Send the departures of flow ``index`` due by ``now_mono_s``: at most MAX_BURST_DATAGRAMS."""
        flow = self.flows[index]
        lag_s = now_mono_s - flow.due_mono_s()
        flow.max_lag_s = lag_s if flow.max_lag_s is None else max(flow.max_lag_s, lag_s)
        # The flow was popped because its departure was due: never let rounding make it not due.
        last_due = max(flow.slot, math.floor((now_mono_s - flow.begin_mono_s) / flow.interval_s))
        flow.slot = max(flow.slot, last_due - MAX_BURST_DATAGRAMS + 1)  # forgive an older backlog
        while flow.slot <= last_due and flow.due_mono_s() < flow.end_mono_s:
            self._send(index, flow)
            flow.slot += 1
        if flow.due_mono_s() < flow.end_mono_s:
            heapq.heappush(self.timers, (flow.due_mono_s(), index))
        else:
            flow.done = True
            self._close(flow)

    @staticmethod
    def _close(flow: _UdpFlow) -> None:
        if flow.sock is not None:
            flow.sock.close()
            flow.sock = None

    def run(self) -> str:
        """Run until every flow has sent its last datagram, the deadline, or a stop signal."""
        self.selector.register(self.wake, selectors.EVENT_READ, None)
        reason = "all flows ended"
        while self.timers:
            if self.stop.requested:
                reason = "signal"
                break
            now_mono_s = time.monotonic()
            if now_mono_s >= self.deadline_mono_s:
                reason = "deadline"
                break
            while self.timers and self.timers[0][0] <= now_mono_s:
                self._serve(heapq.heappop(self.timers)[1], now_mono_s)
            if self.timers:
                timeout_s = min(self.timers[0][0], self.deadline_mono_s) - time.monotonic()
                if self.selector.select(max(0.0, timeout_s)):
                    _drain(self.wake)
        for flow in self.flows:
            self._close(flow)
        self.selector.close()
        return reason

    def records(self) -> List[dict]:
        return [{"src": self.src, "flow": i, "dst": flow.dst, "port": flow.port, "start_s": flow.start_s,
                 "duration_s": flow.duration_s, "rate_bps": flow.rate_bps, "datagram_bytes": flow.datagram_bytes,
                 "sent_datagrams": flow.sent_datagrams,
                 "sent_bytes": flow.sent_datagrams * (flow.datagram_bytes + UDP_IP_OVERHEAD_BYTES),
                 "send_drops": flow.send_drops, "max_start_lag_s": flow.max_lag_s, "completed": flow.done}
                for i, flow in enumerate(self.flows)]


class _UdpSink:
    """Counts the datagrams of each (peer, flow index) and the gaps in their sequence numbers."""

    def __init__(self, config: dict, stop: _StopFlag, wake: socket.socket) -> None:
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        try:
            self.sock.setsockopt(socket.SOL_SOCKET, SO_RCVBUFFORCE, UDP_RCVBUF_BYTES)  # needs CAP_NET_ADMIN
        except OSError:
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, UDP_RCVBUF_BYTES)  # capped by rmem_max
        self.rcvbuf_bytes = self.sock.getsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF)
        self.sock.bind((config.get("listen_ip", "0.0.0.0"), int(config["port"])))
        self.sock.setblocking(False)
        self.deadline_mono_s = _monotonic_of(config.get("stop_epoch_s"))
        self.stop, self.wake = stop, wake
        self.selector = selectors.DefaultSelector()
        self.buffer = bytearray(65536)
        self.counts: Dict[Tuple[str, int], List[int]] = {}  # (peer, flow) -> [datagrams, bytes, highest seq]
        self.foreign = 0

    def _read_all(self) -> None:
        buffer, counts = self.buffer, self.counts
        for _ in range(UDP_DRAIN_MAX):
            try:
                n, (host, _) = self.sock.recvfrom_into(buffer)
            except BlockingIOError:
                return
            except OSError:  # e.g. a queued ICMP error: nothing to count
                continue
            if n < UDP_HEADER.size:
                self.foreign += 1
                continue
            flow, seq = UDP_HEADER.unpack_from(buffer)
            entry = counts.get((host, flow))
            if entry is None:
                counts[(host, flow)] = [1, n + UDP_IP_OVERHEAD_BYTES, seq]
            else:
                entry[0] += 1
                entry[1] += n + UDP_IP_OVERHEAD_BYTES
                if seq > entry[2]:
                    entry[2] = seq

    def run(self) -> str:
        self.selector.register(self.sock, selectors.EVENT_READ, "data")
        reason = _serve_until_stopped(self.selector, self.stop, self.wake, self.deadline_mono_s,
                                      lambda key: self._read_all())
        self.selector.close()
        self.sock.close()
        return reason

    def records(self) -> List[dict]:
        return [{"peer": peer, "flow": flow, "datagrams": datagrams, "bytes": nbytes,
                 "lost": max(0, highest + 1 - datagrams)}
                for (peer, flow), (datagrams, nbytes, highest)
                in sorted(self.counts.items(), key=lambda item: (socket.inet_aton(item[0][0]), item[0][1]))]


def _monotonic_of(epoch_s: Optional[float]) -> float:
    """The monotonic-clock time of wall-clock ``epoch_s`` (seconds since the epoch); None: never (inf)."""
    return math.inf if epoch_s is None else time.monotonic() + float(epoch_s) - time.time()


def _serve_until_stopped(selector, stop: _StopFlag, wake: socket.socket, deadline_mono_s: float, on_ready) -> str:
    """A sink's loop: select until a stop signal ("signal") or ``deadline_mono_s`` ("deadline"), the reason
    returned; ``wake`` (the signal wake-up socket, registered here) is drained, every other ready key goes to
    ``on_ready(key)``."""
    selector.register(wake, selectors.EVENT_READ, "wake")
    while True:
        if stop.requested:
            return "signal"
        timeout_s = deadline_mono_s - time.monotonic()
        if timeout_s <= 0:
            return "deadline"
        for key, _ in selector.select(None if math.isinf(timeout_s) else timeout_s):
            if key.data == "wake":
                _drain(wake)
            else:
                on_ready(key)


def _drain(sock: socket.socket) -> None:
    try:
        while sock.recv(4096):
            pass
    except BlockingIOError:
        pass


ROLES = ("sink", "source", "udp-sink", "udp-source")
REQUIRED_FIELDS = {
    "sink": ("port",),
    "source": ("start_epoch_s", "stop_epoch_s", "output", "flows"),
    "udp-sink": ("port", "output"),
    "udp-source": ("start_epoch_s", "stop_epoch_s", "output", "flows"),
}


def _is_number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_port(value: object) -> bool:
    return _is_int(value) and 0 < value < 65536


def _is_ipv4(value: object) -> bool:
    try:
        ipaddress.IPv4Address(value)
    except (TypeError, ValueError):
        return False
    return True


def _check_field(path: str, where: str, field: str, container: dict, ok, requirement: str) -> None:
    """ValueError naming the file and ``where.field`` unless ``ok(container[field])``."""
    if field in container and ok(container[field]):
        return
    got = repr(container[field]) if field in container else "nothing"
    raise ValueError(f"{path}: {where}{field} must be {requirement} (got {got})")


def _check_udp_config(path: str, config: dict) -> None:
    if config["role"] == "udp-sink":
        _check_field(path, "", "port", config, _is_port, "an integer port 1-65535")
        if "listen_ip" in config:
            _check_field(path, "", "listen_ip", config, _is_ipv4, "an IPv4 address")
        if "stop_epoch_s" in config:
            _check_field(path, "", "stop_epoch_s", config, _is_number, "a number (seconds since the epoch)")
        _check_field(path, "", "output", config, lambda v: isinstance(v, str) and v != "", "a file path")
        return
    for field in ("start_epoch_s", "stop_epoch_s"):
        _check_field(path, "", field, config, _is_number, "a number (seconds since the epoch)")
    _check_field(path, "", "output", config, lambda v: isinstance(v, str) and v != "", "a file path")
    _check_field(path, "", "flows", config, lambda v: isinstance(v, list), "a list of flows")
    for i, flow in enumerate(config["flows"]):
        where = f"flows[{i}]."
        if not isinstance(flow, dict):
            raise ValueError(f"{path}: flows[{i}] must be an object (got {flow!r})")
        _check_field(path, where, "dst", flow, _is_ipv4, "an IPv4 address")
        _check_field(path, where, "port", flow, _is_port, "an integer port 1-65535")
        _check_field(path, where, "start_s", flow, lambda v: _is_number(v) and v >= 0, "a number >= 0")
        _check_field(path, where, "duration_s", flow, lambda v: _is_number(v) and v > 0, "a number > 0")
        _check_field(path, where, "rate_bps", flow, lambda v: _is_number(v) and v > 0, "a number > 0")
        if "datagram_bytes" in flow:
            _check_field(path, where, "datagram_bytes", flow,
                         lambda v: _is_int(v) and UDP_HEADER.size <= v <= UDP_MAX_DATAGRAM_BYTES,
                         f"an integer from {UDP_HEADER.size} to {UDP_MAX_DATAGRAM_BYTES}")


def load_config(path: str) -> dict:
    """Read and check a flowgen config; ValueError names the file and the bad field."""
    with open(path) as f:
        config = json.load(f)
    if not isinstance(config, dict) or config.get("role") not in ROLES:
        raise ValueError(f"{path}: 'role' must be one of {', '.join(repr(r) for r in ROLES)}")
    missing = [k for k in REQUIRED_FIELDS[config["role"]] if k not in config]
    if missing:
        raise ValueError(f"{path}: {config['role']} config lacks {', '.join(missing)}")
    if config["role"].startswith("udp-"):
        _check_udp_config(path, config)
        return config
    if "congestion_control" in config and not (isinstance(config["congestion_control"], str)
                                               and config["congestion_control"]):
        raise ValueError(f"{path}: congestion_control must be a TCP congestion control's name, e.g. 'cubic'")
    if config.get("congestion_control") and (why := congestion_control_error(config["congestion_control"])):
        raise ValueError(f"{path}: congestion_control: {why}")
    for i, flow in enumerate(config.get("flows", [])):
        try:
            ipaddress.IPv4Address(flow["dst"])
            if int(flow["port"]) <= 0 or float(flow["start_s"]) < 0 or int(flow["size_bytes"]) < 0:
                raise ValueError
        except (KeyError, TypeError, ValueError):
            raise ValueError(
                f"{path}: flows[{i}] needs dst (IPv4), port > 0, start_s >= 0, size_bytes >= 0: {flow}"
            ) from None
    return config


#: struct tcp_info (linux/tcp.h): tcpi_options is its sixth byte; TCPI_OPT_ECN the bit ECN negotiation sets.
TCP_INFO_OPTIONS_OFFSET = 5
TCPI_OPT_ECN = 8
#: tcpi_total_retrans (u32) after the 8 bytes of u8 fields and 23 u32 fields; on a socket that has just
#: connected it counts the SYN's retransmissions.
TCP_INFO_TOTAL_RETRANS_OFFSET = 100


def _connection_ecn(sock: socket.socket) -> Tuple[bool, bool]:
    """(negotiated ECN, SYN sent again) of a socket that has just connected, from one TCP_INFO read."""
    info = sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, TCP_INFO_TOTAL_RETRANS_OFFSET + 4)
    total_retrans = int.from_bytes(info[TCP_INFO_TOTAL_RETRANS_OFFSET:TCP_INFO_TOTAL_RETRANS_OFFSET + 4],
                                   sys.byteorder)
    return bool(info[TCP_INFO_OPTIONS_OFFSET] & TCPI_OPT_ECN), total_retrans > 0


def _congestion_control_of(sock: socket.socket) -> str:
    return sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_CONGESTION, 16).split(b"\0", 1)[0].decode()


def congestion_control_error(name: str) -> Optional[str]:
    """Why TCP congestion control ``name`` cannot be used here, or None: tried on a socket, as a source sets
    it (which lets a root process load the algorithm's module, so the kernel's available list is not
    enough to tell)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_CONGESTION, name.encode())
        except OSError as exc:
            try:
                with open("/proc/sys/net/ipv4/tcp_available_congestion_control") as f:
                    available = f.read().split()
            except OSError:
                available = []
            return (f"this kernel has no TCP congestion control {name!r} ({exc.strerror or exc}); available: "
                    f"{', '.join(available) or 'unknown'}")
    return None


def _raise_fd_limit(needed: int) -> None:
    """Lift the soft open-files limit to the hard one when the flows could exceed it."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != resource.RLIM_INFINITY and soft < needed:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
        except (ValueError, OSError):
            pass


def _run_udp_sink(config: dict, stop: _StopFlag, wake: socket.socket) -> None:
    with open(config["output"], "w") as out:
        sink = _UdpSink(config, stop, wake)
        print(f"flowgen udp-sink: listening on {config.get('listen_ip', '0.0.0.0')}:{config['port']} "
              f"(receive buffer {sink.rcvbuf_bytes} bytes)", flush=True)
        reason = sink.run()
        records = sink.records()
        for record in records:
            out.write(json.dumps(record) + "\n")
    print(f"flowgen udp-sink: stopped ({reason}); {sum(r['datagrams'] for r in records)} datagrams, "
          f"{sum(r['bytes'] for r in records)} bytes from {len(records)} flows, "
          f"{sum(r['lost'] for r in records)} lost, {sink.foreign} foreign", flush=True)


def _run_udp_source(config: dict, stop: _StopFlag, wake: socket.socket) -> None:
    _raise_fd_limit(len(config["flows"]) + 64)
    with open(config["output"], "w") as out:
        source = _UdpSource(config, stop, wake)
        print(f"flowgen udp-source {source.src}: {len(source.flows)} flows, "
              f"{sum(flow.rate_bps for flow in source.flows) / 1e6:.3f} Mb/s in all (IP bytes) to "
              f"{len({flow.dst for flow in source.flows})} destinations; starts in "
              f"{source.t0_mono_s - time.monotonic():.3f} s, deadline in "
              f"{source.deadline_mono_s - time.monotonic():.3f} s", flush=True)
        reason = source.run()
        records = source.records()
        for record in records:
            out.write(json.dumps(record) + "\n")
    lags_s = [r["max_start_lag_s"] for r in records if r["max_start_lag_s"] is not None]
    print(f"flowgen udp-source {source.src}: stopped ({reason}); {sum(r['completed'] for r in records)}/"
          f"{len(records)} flows completed; {sum(r['sent_datagrams'] for r in records)} datagrams, "
          f"{sum(r['sent_bytes'] for r in records)} bytes sent, {sum(r['send_drops'] for r in records)} send drops; "
          f"departures at most {max(lags_s, default=0.0) * 1e3:.1f} ms late", flush=True)


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = sys.argv[1:] if argv is None else list(argv)
    if len(args) != 1:
        print("usage: python -m testbed.traffic.flowgen CONFIG.json", file=sys.stderr)
        return 2
    try:
        config = load_config(args[0])
    except (OSError, ValueError) as exc:
        print(f"flowgen: bad config: {exc}", file=sys.stderr)
        return 2
    stop = _StopFlag()
    wake, wake_writer = socket.socketpair()
    wake.setblocking(False)
    wake_writer.setblocking(False)
    signal.set_wakeup_fd(wake_writer.fileno())
    signal.signal(signal.SIGTERM, stop.handle)
    signal.signal(signal.SIGINT, stop.handle)
    try:
        if config["role"] == "udp-sink":
            _run_udp_sink(config, stop, wake)
        elif config["role"] == "udp-source":
            _run_udp_source(config, stop, wake)
        elif config["role"] == "sink":
            out = open(config["output"], "w") if config.get("output") else None
            try:
                sink = _Sink(config, out, stop, wake)
                print(f"flowgen sink: listening on {config.get('listen_ip', '0.0.0.0')}:{config['port']}", flush=True)
                reason = sink.run()
            finally:
                if out is not None:
                    out.close()
            print(f"flowgen sink: stopped ({reason}); {sink.connections} connections, "
                  f"{sink.completed} completed, {sink.bytes_received} bytes received", flush=True)
        else:
            _raise_fd_limit(len(config["flows"]) + 64)
            with open(config["output"], "w") as out:
                source = _Source(config, out, stop, wake)
                total_bytes = sum(flow.size_bytes for flow in source.flows)
                print(f"flowgen source {source.src}: {len(source.flows)} flows, {total_bytes} bytes to "
                      f"{len({flow.dst for flow in source.flows})} destinations; starts in "
                      f"{source.t0_mono_s - time.monotonic():.3f} s, deadline in "
                      f"{source.deadline_mono_s - time.monotonic():.3f} s", flush=True)
                reason = source.run()
            fcts_s = sorted(r["fct_s"] for r in source.records if r["completed"])
            p50 = f"{_percentile(fcts_s, 50):.4f} s" if fcts_s else "n/a"
            p99 = f"{_percentile(fcts_s, 99):.4f} s" if fcts_s else "n/a"
            print(f"flowgen source {source.src}: stopped ({reason}); {len(fcts_s)}/{len(source.records)} flows "
                  f"completed; fct p50 {p50}, p99 {p99}; starts at most {source.max_start_lag_s * 1e3:.1f} ms late",
                  flush=True)
    except OSError as exc:  # e.g. the sink's port is taken
        print(f"flowgen: {exc}", file=sys.stderr)
        return 1
    finally:
        signal.set_wakeup_fd(-1)
        wake.close()
        wake_writer.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
