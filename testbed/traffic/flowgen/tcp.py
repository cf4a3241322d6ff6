"""The TCP roles: a *source* that opens one connection per flow at its start time, sends its bytes,
half-closes and times the flow until the sink's one-byte acknowledgement (retrying a failed connect with a
bounded backoff), and a *sink* that reads each connection to EOF and acknowledges it; with the TCP_INFO
and TCP_CONGESTION reads that their records quote (negotiated ECN, SYN retransmitted, congestion control)."""
from __future__ import annotations

import errno
import heapq
import json
import selectors
import socket
import sys
import time
from dataclasses import dataclass
from typing import IO, List, Optional, Tuple

from testbed.traffic.flowgen.eventloop import _drain, _monotonic_of, _serve_until_stopped, _StopFlag
from testbed.traffic.flowgen.source_ports import _bind_source_port

CHUNK_BYTES = 64 * 1024  # per send/recv call: bounds the work one ready socket costs a loop turn
ACK = b"\x01"
RETRY_FIRST_S = 0.01
RETRY_MAX_S = 0.2


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
