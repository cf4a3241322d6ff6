"""What the worker, ring and PS agents share: the UDP endpoint and the drain of its datagrams, readiness
handshake, records, straggler delays and the sending-rate metric."""

import contextlib
import json
import os
import random
import select
import signal
import socket
import time
from pathlib import Path

from testbed.atomic_io import write_text_atomic
from testbed.dataplane.wire import FRAME_OVERHEAD_BYTES, INA_UDP_PORT
from testbed.dilation import virtual_epoch_s
from testbed.metrics.host_delay import (TIMESTAMP_CMSG_BYTES, HostDelayMeter, enable_receive_timestamps,
                                        kernel_timestamp_s)

SO_RCVBUFFORCE = 33
SO_SNDBUFFORCE = 32
ECN_ECT0 = 0x02      # IPv4 ECN field: ECN-capable transport, so switch queues mark CE instead of dropping
ECN_CE = 0x03
TOS_CMSG_BYTES = socket.CMSG_SPACE(1)    # IP_TOS ancillary data: one byte
#: What a datagram's ancillary data may hold: its TOS byte and its kernel receive timestamp.
ANCILLARY_BYTES = TOS_CMSG_BYTES + TIMESTAMP_CMSG_BYTES
#: An endpoint's receive buffer: a burst of datagrams waits here while the agent works, never dropped.
RECEIVE_BUFFER_BYTES = 8 << 20
#: An endpoint's send buffer (the kernel doubles it for its bookkeeping). A datagram counts against it until
#: the host's qdisc has sent it, so a sender ahead of its link waits in ``sendto`` once this much is queued,
#: as a host behind a NIC does, instead of overflowing the qdisc (htb's leaf queue: the veth's txqueuelen of
#: 1000 packets; 256 KiB holds about 400 of the agents' datagrams). With 8 MiB a PS sending each RESULT to
#: eight workers of GOAT's testbed one by one lost about 250 of them in its qdisc per run.
SEND_BUFFER_BYTES = 256 << 10


class Endpoint(socket.socket):
    """An agent's UDP socket and the :class:`HostDelayMeter` of the datagrams it takes in and of the timed
    waits on it (:func:`pending_datagrams`, :func:`wait_readable`)."""

    def __init__(self):
        super().__init__(socket.AF_INET, socket.SOCK_DGRAM)
        self.host_delay = HostDelayMeter()

    def sendto(self, data, address):
        """``data`` to ``address``. When the send buffer is full (the host link's backpressure:
        ``SEND_BUFFER_BYTES``), wait until it takes the datagram, then tell the meter: what arrived meanwhile
        waited for the link, not the host (:meth:`HostDelayMeter.sends_unblocked`)."""
        try:
            return super().sendto(data, socket.MSG_DONTWAIT, address)
        except BlockingIOError:
            blocked_since_s = time.time()
            sent = super().sendto(data, address)
            self.host_delay.sends_unblocked(blocked_since_s, time.time())
            return sent


def open_endpoint(ip: str, port: int = INA_UDP_PORT, bind_ip: str = "") -> Endpoint:
    """UDP socket on ``port`` (the INA port unless a ring agent's), bound to ``bind_ip``, by default any
    address so broadcast results arrive too (a co-located PS binds its own address: the worker beside it
    holds the port on any other, and the kernel gives a datagram to the socket bound to its exact address).

    Every datagram leaves ECN-capable (ECT(0)); the socket reports each arriving
    datagram's TOS byte (IP_RECVTOS) so the PS can echo the CE marks of the switch queues, and its kernel
    receive timestamp (``SO_TIMESTAMPNS``) for the endpoint's host-delay meter. Sends block
    while the send buffer is full (``SEND_BUFFER_BYTES``: the host link's backpressure); receives never
    block (``MSG_DONTWAIT``: :func:`pending_datagrams`).
    """
    sock = Endpoint()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    enable_receive_timestamps(sock)
    sock.setsockopt(socket.IPPROTO_IP, socket.IP_TOS, ECN_ECT0)
    sock.setsockopt(socket.IPPROTO_IP, socket.IP_RECVTOS, 1)
    for opt, fallback, size in ((SO_RCVBUFFORCE, socket.SO_RCVBUF, RECEIVE_BUFFER_BYTES),
                                (SO_SNDBUFFORCE, socket.SO_SNDBUF, SEND_BUFFER_BYTES)):
        try:
            sock.setsockopt(socket.SOL_SOCKET, opt, size)
        except OSError:
            sock.setsockopt(socket.SOL_SOCKET, fallback, size)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_BROADCAST, 1)
    sock.bind((bind_ip or "0.0.0.0", port))
    return sock


def pending_datagrams(sock: Endpoint, listening_since_s: float = 0.0):
    """Every datagram waiting on ``sock`` now, as (data, ancillary, sender): its TOS byte (IP_RECVTOS,
    :func:`arrived_ce`) comes with it. How long each waited since the kernel took it in goes to the
    endpoint's host-delay meter as it is handed over, counted from ``listening_since_s`` (epoch seconds) at
    the earliest: an agent that does not read while it computes (the INA worker) keeps what arrives
    meanwhile for later by design, which is no delay of the host's."""
    recvmsg, received, wall_s = sock.recvmsg, sock.host_delay.received, time.time
    while True:
        try:
            data, ancillary, _, sender = recvmsg(4096, ANCILLARY_BYTES, socket.MSG_DONTWAIT)
        except BlockingIOError:
            return
        stamped_s = kernel_timestamp_s(ancillary)
        received(max(stamped_s, listening_since_s) if stamped_s else 0.0, wall_s())
        yield data, ancillary, sender


def wait_readable(sock: Endpoint, wait_s: float, idle_wait_s: float) -> bool:
    """Whether a datagram waits on ``sock`` within ``wait_s`` wall seconds. A wait shorter than the agent's
    ``idle_wait_s`` is a timer (a transport's pacing or timeout, an ACK or a compute phase falling due):
    when it runs out, how late the agent woke after it is metered (``send_lateness``)."""
    start_s = time.monotonic()
    ready, _, _ = select.select((sock,), (), (), wait_s)
    if not ready and 0 < wait_s < idle_wait_s:
        sock.host_delay.woke(start_s + wait_s, time.monotonic())
    return bool(ready)


def arrived_ce(ancillary) -> bool:
    """Whether a datagram's ancillary data (:func:`pending_datagrams`) says a switch queue marked it CE."""
    for level, kind, data in ancillary:
        if level == socket.IPPROTO_IP and kind == socket.IP_TOS:
            return bool(data) and data[0] & ECN_CE == ECN_CE
    return False


def host_delay_path(run_dir, name: str) -> Path:
    """Where an agent leaves its host-delay meter's summary when it ends: ``agents/<name>.host_delay.json``."""
    return Path(run_dir) / "agents" / f"{name}.host_delay.json"


def announce_ready_and_wait(run_dir: str, name: str, deadline_s: float) -> float:
    """Touch ``agents/<name>.ready``, then poll for ``agents/go`` (written once every agent is ready).

    Returns the start time (epoch seconds) the orchestrator wrote into ``go``.
    """
    agents = Path(run_dir) / "agents"
    (agents / f"{name}.ready").write_text(str(os.getpid()))
    go = agents / "go"
    limit = time.monotonic() + deadline_s
    while time.monotonic() < limit:
        if go.exists():
            text = go.read_text().strip()
            if text:
                # Everything (agents, background flows, injections) starts at the same epoch.
                start = float(text)
                if start > time.time():
                    time.sleep(start - time.time())
                return start
        time.sleep(0.005)
    raise TimeoutError(f"{name}: no start signal within {deadline_s:.0f}s")


class RecordWriter:
    """One JSON object per line, flushed at once so the orchestrator can follow progress."""

    def __init__(self, run_dir: str, name: str):
        path = Path(run_dir) / "records" / f"{name}.jsonl"
        path.parent.mkdir(parents=True, exist_ok=True)
        self._file = open(path, "a", buffering=1)

    def write(self, record: dict):
        self._file.write(json.dumps(record) + "\n")

    def close(self):
        self._file.close()


class AgentClock:
    """An agent's time under the scenario's ``time_dilation`` N (testbed/dilation.py).

    The network around the agent runs N times slower, so the agent keeps every duration virtual (compute
    time, straggler delays, its job's start, its transport's timers and pacing) and reads time on a clock N
    times slower: ``now_s`` is monotonic virtual seconds, a wait of t virtual seconds takes N t wall
    seconds (:meth:`wall_s`), and what it records (durations, rates, instants) is in virtual time. At
    N = 1 it is the wall clock.
    """

    def __init__(self, factor: float = 1.0, start_epoch_s: float = 0.0):
        self.factor = float(factor)
        self.start_epoch_s = start_epoch_s     # the run's common start (wall epoch seconds)

    def now_s(self) -> float:
        return time.monotonic() / self.factor

    def wall_s(self, virtual_s: float) -> float:
        """How long ``virtual_s`` virtual seconds last on the wall clock (0 for a negative span)."""
        return max(0.0, virtual_s) * self.factor

    def sleep(self, virtual_s: float):
        if virtual_s > 0:
            time.sleep(virtual_s * self.factor)

    def epoch_s(self) -> float:
        """Now, as an epoch instant of virtual time (the run's start is the same instant in both)."""
        return virtual_epoch_s(time.time(), self.start_epoch_s, self.factor)

    def until_s(self, offset_s: float) -> float:
        """Virtual seconds from now until ``offset_s`` virtual seconds after the run's start (may be < 0)."""
        return offset_s - (time.time() - self.start_epoch_s) / self.factor


@contextlib.contextmanager
def agent_session(config, port: int = INA_UDP_PORT):
    """The endpoint (on ``port``), record file and clock (:class:`AgentClock`, started at the run's common
    start) of an agent, after the common start signal; closed on exit, when the endpoint's host-delay
    summary is left in ``agents/<name>.host_delay.json`` (:func:`host_delay_path`)."""
    sock = open_endpoint(config.ip, port, config.bind_ip)
    records = RecordWriter(config.run_dir, config.name)
    try:
        start_epoch_s = announce_ready_and_wait(config.run_dir, config.name, config.ready_timeout_s)
        yield sock, records, AgentClock(config.time_dilation, start_epoch_s)
    finally:
        records.close()
        try:
            write_text_atomic(host_delay_path(config.run_dir, config.name), json.dumps(sock.host_delay.summary()))
        except OSError as exc:      # the run's directory went away: the run reports the role unmeasured
            print(f"{config.name}: host delay not kept: {exc}", flush=True)
        sock.close()


def install_status_dump(run_dir: str, name: str, describe):
    """On SIGUSR1 write ``describe()`` to ``agents/<name>.status.json`` (what the agent waits for).

    The orchestrator asks every agent for it when a run stalls; the file appears whole
    (written aside, then renamed) so a reader never sees half of it.
    """
    path = Path(run_dir) / "agents" / f"{name}.status.json"

    def dump(signum, frame):
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(describe(), default=str))
        os.replace(tmp, path)

    signal.signal(signal.SIGUSR1, dump)


def straggler_rng(config) -> random.Random:
    """The RNG of a worker's straggler delays (:func:`testbed.stragglers.straggler_delay_s`), seeded by
    (seed, job, worker)."""
    return random.Random(config.seed * 1_000_003 + config.job_id * 1009 + config.worker_index)


def sending_rate_bps(sent_bytes: int, sent_pkts: int, sending_s: float, link_rate_bps: float) -> float:
    """Frame bits over the time from the first frame's start to the last frame's end on the host link.
    The host's htb drains at the link rate, so the wire is done no earlier than the bits at that rate
    (frames handed over in a burst wait in the qdisc), and no earlier than the last hand-over plus one
    frame time."""
    if not sent_pkts:
        return 0.0
    bits = 8 * sent_bytes
    wire_s = max(sending_s + bits / sent_pkts / link_rate_bps, bits / link_rate_bps) if link_rate_bps else sending_s
    return bits / max(1e-9, wire_s)


class SendTally:
    """What an agent's transport sent in one iteration (packets, retransmissions, frame bytes, the last
    send's time, and what had left when the transport's first acknowledgement came), and the loop that
    sends it: every fragment the transport has due now."""

    __slots__ = ("pkts", "retx_pkts", "frame_bytes", "start_s", "last_s", "clock")

    def __init__(self, start_s: float):
        self.pkts = self.retx_pkts = self.frame_bytes = 0
        self.start_s = self.last_s = start_s
        self.clock = None       # (time, packets, frame bytes) at the iteration's first acknowledgement

    def send_due(self, transport, now_s: float, packet, sendto):
        """``packet(seq, retransmission) -> (address, datagram)``; ``sendto`` the socket's."""
        if self.clock is None and transport.first_ack_s is not None:
            self.clock = (transport.first_ack_s, self.pkts, self.frame_bytes)
        while (due := transport.next_send(now_s)) is not None:
            seq, retransmission = due
            addr, data = packet(seq, retransmission)
            sendto(data, addr)
            transport.on_sent(seq, retransmission, now_s)
            self.last_s = now_s
            self.pkts += 1
            self.retx_pkts += retransmission
            self.frame_bytes += len(data) + FRAME_OVERHEAD_BYTES

    def rate_bps(self, link_rate_bps: float) -> float:
        """GRID's gradient sending rate, as the flow-level model means it: the rate the acknowledgements
        clock the sender at. Frame bits sent after the iteration's first acknowledgement (a GACK, a
        RESULT, a ring ACK) over the time from it to the last frame's end on the host link
        (:func:`sending_rate_bps`). The first window leaves before anything can clock it, in a burst
        that fills the bottleneck's queue, and it is still there when the last frame leaves, so the
        sender's whole sending time undercounts the time the network took by that window: on
        PA-ATP's testbed, 32 of a worker's 228 fragments per iteration, 1.16x the link's share. Without
        frames after the first acknowledgement (one window is the whole iteration), the whole sending
        time from the iteration's start. The wait for RESULTs after the last frame is communication
        time, not sending."""
        if self.clock is not None and self.pkts > self.clock[1]:
            clock_s, pkts, frame_bytes = self.clock
            return sending_rate_bps(self.frame_bytes - frame_bytes, self.pkts - pkts, self.last_s - clock_s,
                                    link_rate_bps)
        return sending_rate_bps(self.frame_bytes, self.pkts, self.last_s - self.start_s, link_rate_bps)
