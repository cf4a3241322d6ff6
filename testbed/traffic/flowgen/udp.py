"""The constant-rate UDP roles: a *udp-source* that paces each flow's datagrams (a numbered ``"!IQ"``
header, then zeros) from one heap of next departures, catching up at most ``MAX_BURST_DATAGRAMS`` after a
late wake, and a *udp-sink* that counts the datagrams, bytes and sequence gaps of each (peer, flow index)."""
from __future__ import annotations

import heapq
import math
import selectors
import socket
import struct
import time
from dataclasses import dataclass
from typing import Dict, List, Optional, Tuple

from testbed.traffic.flowgen.eventloop import _drain, _monotonic_of, _serve_until_stopped, _StopFlag
from testbed.traffic.flowgen.source_ports import _bind_source_port

UDP_HEADER = struct.Struct("!IQ")  # flow index, sequence number: the front of every udp-source datagram
UDP_IP_OVERHEAD_BYTES = 28  # IPv4 (20) + UDP (8) headers: counted in rate_bps and in every "bytes"
ETHERNET_HEADER_BYTES = 14  # what a frame adds to the IP packet (the shaper counts frames)
UDP_DEFAULT_DATAGRAM_BYTES = 1000
UDP_MAX_DATAGRAM_BYTES = 1500 - UDP_IP_OVERHEAD_BYTES  # one 1500-byte-MTU packet
MAX_BURST_DATAGRAMS = 8  # catch-up bound of a flow after a late wake
UDP_RCVBUF_BYTES = 4 * 1024 * 1024
UDP_DRAIN_MAX = 4096  # datagrams read per wake before the sink looks at its deadline again
SO_RCVBUFFORCE = getattr(socket, "SO_RCVBUFFORCE", 33)  # Linux; Python does not export it


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
