"""``Egress`` control and the traffic manager of pyswitch.

bmv2 shapes each egress port with ``set_queue_rate`` (packets/s) and
``set_queue_depth`` (packets); the P4 egress pipeline then sees
``standard_metadata.enq_qdepth``, the queue depth when the packet was
enqueued (packets ahead of it), and marks IPv4 CE when it reaches
``ecn_threshold`` (DCTCP-style, REFERENCE.md). pyswitch keeps the same
semantics with a byte-accurate token bucket per port (``rate_bps``), tail
drop past the depth *before* the egress pipeline (bmv2's traffic manager
drops before Egress runs, so a dropped packet is neither marked nor
counted), and the same marking rule on ECN-capable packets (ECT(0)/ECT(1)),
counted per port in ``port_ecn_marked``.

Multicast copies (``replica=True``, bmv2's instance_type REPLICATION) first
go through ``ina_mcast_rewrite`` keyed by the egress port: the host behind
the port gets the copy addressed to it (destination MAC and IPv4, UDP
checksum 0).

Loss, duplication and reordering per port are pyswitch-only (netem is
missing on these machines): drawn from a seeded RNG per port so a run is
repeatable. Reordering holds a packet back and releases it after the next one.

The IPv4 header checksum is recomputed here, once, after every header change
(the P4 program's ``update_checksum`` in its deparser).
"""

import collections
import random
import struct

from testbed.dataplane import program
from testbed.dataplane.wire import FLAG_RESULT, INA_OFFSET, INA_UDP_PORT, PAYLOAD_OFFSET

_H10 = struct.Struct("!10H")
_INA_PORT_HI, _INA_PORT_LO = INA_UDP_PORT >> 8, INA_UDP_PORT & 0xFF


def fix_ipv4_checksum(buf: bytearray):
    buf[24] = buf[25] = 0
    total = sum(_H10.unpack_from(buf, 14))
    total = (total & 0xFFFF) + (total >> 16)
    total = (total & 0xFFFF) + (total >> 16)
    csum = (~total) & 0xFFFF
    buf[24] = csum >> 8
    buf[25] = csum & 0xFF


SHAPER_TICK_S = 0.002


class PortQueue:
    """Egress queue of one port: token bucket (bytes) + FIFO, tail drop at depth."""

    def __init__(self, rate_bps: float, depth_pkts: int):
        self.rate_bytes_per_s = rate_bps / 8.0
        self.depth_pkts = max(1, depth_pkts)
        # Burst: one full-size frame, or what the port sends in SHAPER_TICK_S, whichever is
        # larger. The switch loop wakes with epoll's 1 ms resolution, so a smaller burst
        # would cap a fast port at about one frame per millisecond.
        self.burst_bytes = max(1600.0, self.rate_bytes_per_s * SHAPER_TICK_S)
        self.tokens = self.burst_bytes
        self.last = None
        self.queue = collections.deque()
        self.dropped = 0

    def refill(self, now: float):
        if self.last is not None:
            self.tokens = min(self.burst_bytes, self.tokens + (now - self.last) * self.rate_bytes_per_s)
        self.last = now

    def next_departure(self, now: float) -> float:
        """Time at which the head of the queue may leave (now if it may now)."""
        if not self.queue:
            return float("inf")
        need = len(self.queue[0]) - self.tokens
        return now if need <= 0 else now + need / self.rate_bytes_per_s


#: A reordered frame is held until the port's next frame, or this long at most: with
#: no next frame (a sender waiting for results) holding it longer would make it a loss.
REORDER_HOLD_S = 0.002


class Impairment:
    def __init__(self, drop: float, duplicate: float, reorder: float, seed: int):
        self.drop, self.duplicate, self.reorder = drop, duplicate, reorder
        self.rng = random.Random(seed)
        self.held = None
        self.held_until = 0.0
        self.dropped = self.duplicated = self.reordered = 0

    def apply(self, buf, now: float):
        """Frames to send now, in order, for one frame offered."""
        rng = self.rng
        if self.drop and rng.random() < self.drop:
            self.dropped += 1
            return ()
        out = [buf]
        if self.duplicate and rng.random() < self.duplicate:
            self.duplicated += 1
            out.append(bytearray(buf))
        if self.held is not None:
            out.append(self.held)
            self.held = None
        elif self.reorder and rng.random() < self.reorder:
            self.reordered += 1
            self.held = out.pop(0)
            self.held_until = now + REORDER_HOLD_S
        return out

    def release_due(self, now: float):
        """The held frame once its hold time is over (else None)."""
        if self.held is not None and now >= self.held_until:
            frame, self.held = self.held, None
            return frame
        return None


class Egress:
    """Per-port ECN marking, INA egress counting, multicast rewrite, impairments and shaping."""

    def __init__(self, tables):
        self.ecn_threshold = [0]                     # register ecn_threshold
        self.port_ina_tx = [0] * program.MAX_PORTS   # counter port_ina_tx
        self.port_ecn_marked = [0] * program.MAX_PORTS  # counter port_ecn_marked
        self._mcast_rewrite = tables["ina_mcast_rewrite"].exact
        self.queues = {}        # port -> PortQueue
        self.impairments = {}   # port -> Impairment

    def qdepth(self, port: int) -> int:
        q = self.queues.get(port)
        return len(q.queue) if q else 0

    def enqueue(self, port: int, buf: bytearray, now: float, send, replica: bool = False):
        """Traffic manager + Egress for one packet, then the port's queue or the wire (``send(port, buf)``)."""
        queue = self.queues.get(port)
        depth = 0
        if queue is not None:
            depth = len(queue.queue)
            if depth >= queue.depth_pkts:
                queue.dropped += 1
                return
        if replica:
            entry = self._mcast_rewrite.get(port.to_bytes(2, "big"))
            if entry is not None and entry[0] == "mcast_rewrite":
                mac, ip = entry[1]
                buf[0:6] = mac
                buf[30:34] = ip
                buf[40] = buf[41] = 0  # UDP checksum: the pseudo-header changed
        threshold = self.ecn_threshold[0]
        if threshold and depth >= threshold and (buf[15] & 3) in (1, 2):
            buf[15] |= 3
            if port < program.MAX_PORTS:
                self.port_ecn_marked[port] += 1
        if buf[23] == 17 and len(buf) >= PAYLOAD_OFFSET and buf[36] == _INA_PORT_HI and buf[37] == _INA_PORT_LO \
                and not buf[INA_OFFSET + 3] & FLAG_RESULT and port < program.MAX_PORTS:
            self.port_ina_tx[port] += 1     # gradient packets only, as ina.p4 counts them
        fix_ipv4_checksum(buf)
        imp = self.impairments.get(port)
        if imp is None:
            if queue is None:
                send(port, buf)
            else:
                self._queue(queue, port, buf, now, send)
            return
        for frame in imp.apply(buf, now):
            self._offer(port, frame, now, send)

    def _offer(self, port, frame, now, send):
        queue = self.queues.get(port)
        if queue is None:
            send(port, frame)
        else:
            self._queue(queue, port, frame, now, send)

    @staticmethod
    def _queue(queue, port, frame, now, send):
        queue.refill(now)
        if not queue.queue and queue.tokens >= len(frame):
            queue.tokens -= len(frame)
            send(port, frame)
        elif len(queue.queue) >= queue.depth_pkts:
            queue.dropped += 1
        else:
            queue.queue.append(frame)

    def drain(self, now: float, send) -> float:
        """Send what the shapers and reorder holds allow now; return the next time something may leave."""
        earliest = float("inf")
        for port, imp in self.impairments.items():
            if imp.held is not None:
                frame = imp.release_due(now)
                if frame is not None:
                    self._offer(port, frame, now, send)
                else:
                    earliest = min(earliest, imp.held_until)
        for port, queue in self.queues.items():
            if not queue.queue:
                continue
            queue.refill(now)
            while queue.queue and queue.tokens >= len(queue.queue[0]):
                frame = queue.queue.popleft()
                queue.tokens -= len(frame)
                send(port, frame)
            earliest = min(earliest, queue.next_departure(now))
        return earliest
