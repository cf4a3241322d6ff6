"""``Egress`` control and the traffic manager of pyswitch.

bmv2 shapes each egress port with ``set_queue_rate`` (packets/s) and
``set_queue_depth`` (packets), and runs the P4 Egress control on a packet
when it leaves its port's queue; Egress sees ``standard_metadata.enq_qdepth``,
the queue depth when the packet was enqueued (packets ahead of it). pyswitch
keeps that order: :meth:`Egress.enqueue` is the traffic manager (tail drop
past the depth, so a dropped packet is neither marked nor counted; the queue
depth is recorded with the packet; how long the packet waited inside the
switch, from its receipt to its enqueue, goes to register ``switch_wait``,
which ina.p4's Egress fills from ``enq_timestamp - ingress_global_timestamp``),
:meth:`Egress.depart` is the Egress
control, run when the packet leaves: at once when its port is unshaped or
idle with tokens to spare, else from :meth:`Egress.drain` when the port's
byte-accurate token bucket (``rate_bps``) lets the head of the queue go.
Each departure spends its frame's tokens, whatever Egress then does with it
(bmv2 fixes a packet's departure slot when it is enqueued).

Egress, in ina.p4's order:

1. the second pass of an impaired packet (its duplicate, or the packet
   reordered and back) leaves untouched;
2. PA-ATP's GACK (``gack``: the progress Ingress computed, for a gradient
   absorbed here or the ingress clone of a completing one):
   :func:`gack_rewrite` turns the gradient into its sender's GACK (flags GACK,
   ECN_ECHO when it arrived CE; progress; elems 0; addresses and ports
   swapped; not ECN-capable, TTL ``program.GACK_TTL``, the lengths of its
   headers, UDP checksum 0). Its lanes were cut when it was queued (Ingress),
   so the shaper charged its own bytes;
3. multicast copies (``replica=True``, bmv2's instance_type REPLICATION) go
   through ``ina_mcast_rewrite`` keyed by the egress port: the host behind
   the port gets the copy addressed to it (destination MAC and IPv4, UDP
   checksum 0);
4. ECN-capable packets (ECT(0)/ECT(1)) that found at least ``ecn_threshold``
   packets ahead of them get CE (DCTCP-style), counted in ``port_ecn_marked``;
5. INA gradient packets (flag DATA; not RESULTs, not GACKs, not header-only
   Rina pulls or repair requests) are counted in ``port_ina_tx``;
6. link impairments, per port, each drawn only where its threshold is not 0:
   ``impair_drop`` (the packet is lost: ``port_impair_dropped``), else
   ``impair_duplicate`` (a copy, as the packet leaves, joins the tail of the
   queue of mirror session ``program.impair_session(port)``'s port, the port
   itself: ``port_impair_duplicated``) and ``impair_reorder`` (the packet goes
   round again: ina.p4 recirculates it and Ingress sends it straight back to
   the port, so it rejoins the tail of the port's queue behind what is queued
   when it left: ``port_impair_reordered``). When both happen, the copy is
   queued before the reordered packet, as bmv2's egress thread does. A draw is
   ``getrandbits(31)`` from the port's own ``random.Random(seed)`` (ina.p4's
   ``random(draw, 0, IMPAIR_DRAW_MAX)``), so a pyswitch run is repeatable;
   bmv2's random extern cannot be seeded.

The IPv4 header checksum is recomputed after steps 2-5, once per first pass
(the P4 program's ``update_checksum`` in its deparser), so a duplicate
carries it too.

Where the model cannot match bmv2: bmv2 sends a reordered packet through its
ingress thread (its recirculation queue is served first, so at most the
packet in ingress at that moment gets ahead of it), pyswitch puts it back in
the queue at the instant it left; on a port that is not shaped bmv2 still
has a queue that its egress thread drains as fast as it can, where pyswitch
sends at once, so there a reordered packet leaves at once (bmv2: behind
whatever the egress thread had not yet sent).
"""

import collections
import random
import struct
import time

from testbed.dataplane import program
from testbed.dataplane.program import WAIT_MAX_US, WAIT_PACKETS, WAIT_SUM_US
from testbed.dataplane.pyswitch.fields import (ETH_DST, ETH_SRC, INA_FLAGS_LO, INA_PORT_HI, INA_PORT_LO,
                                               IPV4_CHECKSUM_HI, IPV4_CHECKSUM_LO, IPV4_DST, IPV4_SRC,
                                               UDP_CHECKSUM_HI, UDP_CHECKSUM_LO, UDP_DST_PORT, UDP_DST_PORT_HI,
                                               UDP_DST_PORT_LO, UDP_SRC_PORT)
from testbed.dataplane.wire import (FLAG_DATA, FLAG_ECN_ECHO, FLAG_GACK, FLAG_RESULT, INA_ELEMS_OFFSET,
                                    INA_FLAGS_OFFSET, INA_PROGRESS_OFFSET, IPPROTO_UDP, IPV4_CHECKSUM_OFFSET,
                                    IPV4_HEADER_BYTES, IPV4_OFFSET, IPV4_PROTOCOL_OFFSET, IPV4_TOS_OFFSET,
                                    IPV4_TOTAL_LENGTH_OFFSET, IPV4_TTL_OFFSET, PAYLOAD_OFFSET, UDP_LENGTH_OFFSET)

_IPV4_WORDS = struct.Struct(f"!{IPV4_HEADER_BYTES // 2}H")     # the IPv4 header as 16-bit words
_IPV4_CHECKSUM_WORD = (IPV4_CHECKSUM_OFFSET - IPV4_OFFSET) // 2  # the checksum's index among them
_U16 = struct.Struct("!H")
_U32 = struct.Struct("!I")
_GRADIENT_FLAGS = FLAG_DATA | FLAG_RESULT | FLAG_GACK     # port_ina_tx counts DATA alone of these (low byte)


def fix_ipv4_checksum(buf: bytearray):
    words = _IPV4_WORDS.unpack_from(buf, IPV4_OFFSET)
    total = sum(words) - words[_IPV4_CHECKSUM_WORD]    # the header's sum with its checksum field zero
    total = (total & 0xFFFF) + (total >> 16)
    total = (total & 0xFFFF) + (total >> 16)
    csum = (~total) & 0xFFFF
    buf[IPV4_CHECKSUM_HI] = csum >> 8
    buf[IPV4_CHECKSUM_LO] = csum & 0xFF


def gack_rewrite(buf: bytearray, progress: int):
    """ina.p4's GACK, in place: the gradient in ``buf`` (its lanes already cut) becomes the header its sender
    gets back, carrying ``progress`` (S_sum) and ECN_ECHO when the gradient arrived CE."""
    _U16.pack_into(buf, INA_FLAGS_OFFSET, FLAG_GACK | FLAG_ECN_ECHO if buf[IPV4_TOS_OFFSET] & 3 == 3 else FLAG_GACK)
    _U32.pack_into(buf, INA_PROGRESS_OFFSET, progress)
    buf[ETH_DST], buf[ETH_SRC] = buf[ETH_SRC], buf[ETH_DST]
    buf[IPV4_SRC], buf[IPV4_DST] = buf[IPV4_DST], buf[IPV4_SRC]
    buf[UDP_SRC_PORT], buf[UDP_DST_PORT] = buf[UDP_DST_PORT], buf[UDP_SRC_PORT]
    buf[IPV4_TOS_OFFSET] &= 0xFC                              # not ECN-capable
    buf[IPV4_TTL_OFFSET] = program.GACK_TTL
    headers_alone(buf)


def headers_alone(buf: bytearray):
    """ina.p4's Egress for a packet that leaves without its lanes (``meta.strip_lanes``: a GACK, a Rina pull),
    in place, its lanes already cut: elems 0, the IPv4 and UDP lengths of the headers, UDP checksum 0."""
    buf[INA_ELEMS_OFFSET] = 0
    _U16.pack_into(buf, IPV4_TOTAL_LENGTH_OFFSET, program.GACK_IPV4_BYTES)
    _U16.pack_into(buf, UDP_LENGTH_OFFSET, program.GACK_UDP_BYTES)
    buf[UDP_CHECKSUM_HI] = buf[UDP_CHECKSUM_LO] = 0


SHAPER_TICK_S = 0.002
#: Longest wake-up delay of the switch process a backlogged port makes up for (see PortQueue.refill).
BACKLOG_CATCHUP_S = 0.05


class PortQueue:
    """Egress queue of one port: token bucket (bytes) + FIFO, tail drop at depth."""

    def __init__(self, rate_bps: float, depth_pkts: int):
        self.rate_bytes_per_s = rate_bps / 8.0
        self.depth_pkts = max(1, depth_pkts)
        # Burst: one full-size frame, or what the port sends in SHAPER_TICK_S, whichever is
        # larger. The switch loop wakes with epoll's 1 ms resolution, so a smaller burst
        # would cap a fast port at about one frame per millisecond.
        self.burst_bytes = max(1600.0, self.rate_bytes_per_s * SHAPER_TICK_S)
        self.catchup_bytes = max(self.burst_bytes, self.rate_bytes_per_s * BACKLOG_CATCHUP_S)
        self.tokens = self.burst_bytes
        self.last = None
        self.queue = collections.deque()
        self.dropped = 0

    def refill(self, now: float):
        """Credit the time since the last refill. An idle port banks at most ``burst_bytes``; a
        backlogged one was sending all along, so a late wake-up (the process waited for a core)
        sends what the link would have sent meanwhile, up to ``BACKLOG_CATCHUP_S`` of it, rather
        than losing link time: the port keeps its rate, and the lateness shows as latency."""
        if self.last is not None:
            cap = self.catchup_bytes if self.queue else self.burst_bytes
            self.tokens = min(cap, self.tokens + (now - self.last) * self.rate_bytes_per_s)
        self.last = now

    def next_departure(self, now: float) -> float:
        """Time at which the head of the queue may leave (now if it may now)."""
        if not self.queue:
            return float("inf")
        need = len(self.queue[0].frame) - self.tokens
        return now if need <= 0 else now + need / self.rate_bytes_per_s


#: Bits of an impairment draw: uniform in [0, program.IMPAIR_SCALE).
IMPAIR_DRAW_BITS = program.IMPAIR_SCALE.bit_length() - 1


class Queued:
    """A packet waiting in a port's queue, with what its Egress pass needs."""
    __slots__ = ("frame", "enq_qdepth", "replica", "second_pass", "gack")

    def __init__(self, frame: bytearray, enq_qdepth: int, replica: bool, second_pass: bool, gack):
        self.frame = frame
        self.enq_qdepth = enq_qdepth      # packets ahead of it when it was enqueued
        self.replica = replica            # a multicast copy (bmv2: instance_type REPLICATION)
        self.second_pass = second_pass    # an impairment's duplicate, or a reordered packet back in the queue
        self.gack = gack                  # the progress of the GACK it leaves as (PA-ATP), or None


class Egress:
    """Per-port ECN marking, INA egress counting, multicast rewrite, impairments and shaping."""

    def __init__(self, tables, clock=time.monotonic):
        self.ecn_threshold = [0]                        # register ecn_threshold
        self.switch_wait = [0] * program.WAIT_CELLS     # register switch_wait (program.WAIT_*)
        self.clock = clock          # the switch's clock, the one its packets' receipt times (``now``) are read on
        self.impair_drop = [0] * program.MAX_PORTS      # register impair_drop (thresholds of IMPAIR_SCALE)
        self.impair_duplicate = [0] * program.MAX_PORTS  # register impair_duplicate
        self.impair_reorder = [0] * program.MAX_PORTS   # register impair_reorder
        self.port_ina_tx = [0] * program.MAX_PORTS      # counter port_ina_tx
        self.port_ecn_marked = [0] * program.MAX_PORTS  # counter port_ecn_marked
        self.port_impair_dropped = [0] * program.MAX_PORTS     # counter port_impair_dropped
        self.port_impair_duplicated = [0] * program.MAX_PORTS  # counter port_impair_duplicated
        self.port_impair_reordered = [0] * program.MAX_PORTS   # counter port_impair_reordered
        self.mirror_sessions = {}   # session id -> port (bmv2: mirroring_session_add)
        self.impair_rng = {}        # port -> random.Random: the random extern, seeded per port
        self._mcast_rewrite = tables["ina_mcast_rewrite"].exact
        self.queues = {}            # port -> PortQueue (shaped ports)

    def qdepth(self, port: int) -> int:
        q = self.queues.get(port)
        return len(q.queue) if q else 0

    def seed_port(self, port: int, seed: int) -> None:
        """Restart ``port``'s impairment draws from ``seed``."""
        self.impair_rng[port] = random.Random(seed)

    def enqueue(self, port: int, buf: bytearray, now: float, send, replica: bool = False,
                second_pass: bool = False, gack=None, clone: bool = False):
        """The traffic manager: tail drop past the port's depth, else the packet leaves now (unshaped or
        idle port with the tokens) or waits in the port's queue; ``send(port, buf)`` puts it on the wire.
        ``gack``: the progress of the GACK the packet leaves as (PA-ATP), or None. ``now`` is the packet's
        receipt by the switch: how long ago that was goes to ``switch_wait`` (as bmv2 counts it in Egress,
        from its ingress timestamp to its enqueue, for every packet that is not tail-dropped, a second pass or
        an ingress ``clone``, which bmv2 starts without an ingress timestamp)."""
        queue = self.queues.get(port)
        depth = len(queue.queue) if queue is not None else 0
        if queue is not None and depth >= queue.depth_pkts:
            queue.dropped += 1
            return
        if not (second_pass or clone):
            wait_us = int((self.clock() - now) * 1e6)     # one clock: ``now`` was read on it before
            cells = self.switch_wait
            cells[WAIT_PACKETS] += 1
            cells[WAIT_SUM_US] += wait_us
            if wait_us > cells[WAIT_MAX_US]:
                cells[WAIT_MAX_US] = wait_us
        if queue is None:
            self.depart(port, buf, 0, replica, second_pass, now, send, gack)
            return
        queue.refill(now)
        if not depth and queue.tokens >= len(buf):
            queue.tokens -= len(buf)
            self.depart(port, buf, 0, replica, second_pass, now, send, gack)
        else:
            queue.queue.append(Queued(buf, depth, replica, second_pass, gack))

    def depart(self, port: int, buf: bytearray, enq_qdepth: int, replica: bool, second_pass: bool, now: float,
               send, gack=None):
        """ina.p4's Egress for one packet leaving its queue (the module docstring lists the steps)."""
        if second_pass:
            send(port, buf)
            return
        if gack is not None:
            gack_rewrite(buf, gack)
        if replica:
            entry = self._mcast_rewrite.get(port.to_bytes(2, "big"))
            if entry is not None and entry[0] == "mcast_rewrite":
                mac, ip = entry[1]
                buf[ETH_DST] = mac
                buf[IPV4_DST] = ip
                buf[UDP_CHECKSUM_HI] = buf[UDP_CHECKSUM_LO] = 0  # UDP checksum: the pseudo-header changed
        threshold = self.ecn_threshold[0]
        if threshold and enq_qdepth >= threshold and (buf[IPV4_TOS_OFFSET] & 3) in (1, 2):
            buf[IPV4_TOS_OFFSET] |= 3
            if port < program.MAX_PORTS:
                self.port_ecn_marked[port] += 1
        if buf[IPV4_PROTOCOL_OFFSET] == IPPROTO_UDP and len(buf) >= PAYLOAD_OFFSET and \
                buf[UDP_DST_PORT_HI] == INA_PORT_HI and buf[UDP_DST_PORT_LO] == INA_PORT_LO \
                and buf[INA_FLAGS_LO] & _GRADIENT_FLAGS == FLAG_DATA and port < program.MAX_PORTS:
            self.port_ina_tx[port] += 1     # gradient packets only, as ina.p4 counts them
        fix_ipv4_checksum(buf)
        if port >= program.MAX_PORTS:
            send(port, buf)
            return
        threshold = self.impair_drop[port]
        if threshold and self._draw(port) < threshold:
            self.port_impair_dropped[port] += 1
            return
        copy_port = None
        threshold = self.impair_duplicate[port]
        if threshold and self._draw(port) < threshold:
            self.port_impair_duplicated[port] += 1
            copy_port = self.mirror_sessions.get(program.impair_session(port))   # no session: no copy (bmv2)
        reordered = False
        threshold = self.impair_reorder[port]
        if threshold and self._draw(port) < threshold:
            self.port_impair_reordered[port] += 1
            reordered = True
        if copy_port is not None:
            self.enqueue(copy_port, bytearray(buf), now, send, second_pass=True)
        if reordered:   # recirculated: Ingress sends it straight back to this port (ina.p4's first check)
            self.enqueue(port, buf, now, send, second_pass=True)
        else:
            send(port, buf)

    def _draw(self, port: int) -> int:
        """A uniform draw in [0, IMPAIR_SCALE) from ``port``'s generator (seeded with the port number
        until set_port_impairment seeds it)."""
        rng = self.impair_rng.get(port)
        if rng is None:
            rng = self.impair_rng[port] = random.Random(port)
        return rng.getrandbits(IMPAIR_DRAW_BITS)

    def drain(self, now: float, send) -> float:
        """Send what the shapers allow now; return the next time something may leave."""
        for port, queue in self.queues.items():
            if not queue.queue:
                continue
            queue.refill(now)
            while queue.queue and queue.tokens >= len(queue.queue[0].frame):
                item = queue.queue.popleft()
                queue.tokens -= len(item.frame)
                self.depart(port, item.frame, item.enq_qdepth, item.replica, item.second_pass, now, send, item.gack)
        # after every departure: an impaired one may have queued a packet on any port
        return min((queue.next_departure(now) for queue in self.queues.values()), default=float("inf"))
