"""The INA wire contract: header codec, fixed-point gradients, frame helpers.

Packet layout (p4/README.md documents the same contract for the P4 program)::

    Ethernet (14) / IPv4 (20, no options) / UDP (8, dst port 40000) /
    INA header (38) / payload: ``elems`` signed 32-bit big-endian lanes

The INA header fields, in order and network byte order:

=========  ====  ==========================================================
job        16    job id (multi-tenant)
flags      16    see the ``FLAG_*`` constants
elems       8    lanes in the payload
level       8    aggregation levels this packet has passed (0 = raw)
agg_node   16    aggregation node chosen by the placement (switch id or PS id)
fanin      16    contributions the aggregation node must collect
count      16    contributions already summed into this packet
submodel   16    sub-model (layer group) id
iteration  32    training iteration
seq        32    fragment index within the job's iteration
slot       32    aggregator index at the aggregation node
bitmap     64    contributors (bit i = worker i of the job)
progress   32    PA-ATP progress sum
=========  ====  ==========================================================

Rina (``policy: rina``, Rina §IV) speaks the INA header on port 40000
between its members and inside its racks; ``seq`` is
:func:`rina_seq` (the ring step and the fragment's index within that
step's chunk), ``agg_node`` the rack's ToR on the packets that ToR
aggregates (a task, a shard) and 0 elsewhere, and ``count`` of an ACK
(flag RESULT) the fragments it acknowledges from ``seq``. Flags TASK,
PULL, GATHER and REPAIR are Rina's (below); p4/README.md has the switch
side.

Ring all-reduce (``policy: rar``) is not INA: its workers send chunks of
their gradient to their ring successor as plain UDP to port 40001, which
the switches forward like any other traffic. A ring header (16 bytes,
``RING_HEADER``: job 16, flags 16, elems 16, step 16, iteration 32, index
32, the fragment's index within the step's chunk) precedes the lanes; a
ring ACK (flag RESULT, ECN_ECHO if the data met a CE mark) is the header
alone, back to the sender.

The fast paths (agents, pyswitch) use the ``struct`` objects below directly;
:class:`InaHeader` is the readable form for tests, tools and logs. A scapy
layer for pcaps lives in :mod:`testbed.dataplane.scapy_ina`, never imported by
a fast path.
"""

import socket
import struct
from dataclasses import dataclass, fields

import numpy as np

INA_UDP_PORT = 40000
ETH_HEADER_BYTES = 14
IPV4_HEADER_BYTES = 20
UDP_HEADER_BYTES = 8
INA_HEADER = struct.Struct("!HHBBHHHHIIIQI")
INA_HEADER_BYTES = INA_HEADER.size  # 38
#: INA_HEADER as a numpy record, for the fast paths that read or write a batch of headers at once: field by
#: field the same bytes (named as :class:`InaHeader`'s fields).
INA_HEADER_DTYPE = np.dtype([("job", ">u2"), ("flags", ">u2"), ("elems", "u1"), ("level", "u1"),
                             ("agg_node", ">u2"), ("fanin", ">u2"), ("count", ">u2"), ("submodel", ">u2"),
                             ("iteration", ">u4"), ("seq", ">u4"), ("slot", ">u4"), ("bitmap", ">u8"),
                             ("progress", ">u4")])
LANE_BYTES = 4
DEFAULT_LANES = 64  # elements per fragment in every paper; p4 `-D INA_LANES`
MAX_LANES = 255     # the most one fragment carries: ``elems`` is 8 bits
#: Offsets in a full Ethernet frame.
IPV4_OFFSET = ETH_HEADER_BYTES
UDP_OFFSET = IPV4_OFFSET + IPV4_HEADER_BYTES
INA_OFFSET = UDP_OFFSET + UDP_HEADER_BYTES
PAYLOAD_OFFSET = INA_OFFSET + INA_HEADER_BYTES  # 80
#: Offsets of the header fields in a full frame (IPv4 without options), for the fast paths that read and
#: rewrite them in place: Ethernet's MACs and EtherType, the IPv4 fields of RFC 791's header, UDP's (RFC 768).
MAC_BYTES = 6
ETH_DST_OFFSET = 0
ETH_SRC_OFFSET = ETH_DST_OFFSET + MAC_BYTES
ETH_TYPE_OFFSET = ETH_SRC_OFFSET + MAC_BYTES    # 16 bits
IPV4_ADDR_BYTES = 4
IPV4_VERSION_IHL_OFFSET = IPV4_OFFSET           # version (4 bits), header length in 32-bit words (4 bits)
IPV4_TOS_OFFSET = IPV4_OFFSET + 1               # DSCP (6 bits), ECN (2 bits)
IPV4_TOTAL_LENGTH_OFFSET = IPV4_OFFSET + 2      # 16 bits
IPV4_TTL_OFFSET = IPV4_OFFSET + 8
IPV4_PROTOCOL_OFFSET = IPV4_OFFSET + 9
IPV4_CHECKSUM_OFFSET = IPV4_OFFSET + 10         # 16 bits
IPV4_SRC_OFFSET = IPV4_OFFSET + 12
IPV4_DST_OFFSET = IPV4_SRC_OFFSET + IPV4_ADDR_BYTES
UDP_SRC_PORT_OFFSET = UDP_OFFSET                # each field 16 bits
UDP_DST_PORT_OFFSET = UDP_OFFSET + 2
UDP_LENGTH_OFFSET = UDP_OFFSET + 4
UDP_CHECKSUM_OFFSET = UDP_OFFSET + 6
#: The values a frame of the contract has there: EtherType IPv4, version 4 with a 5-word header, protocol UDP.
ETH_TYPE_IPV4 = 0x0800
IPV4_VERSION_IHL = 0x45
IPPROTO_UDP = 17


def _field_offsets(layout: struct.Struct) -> tuple:
    """The offset of each field of ``layout``, a big-endian format of one letter per field."""
    codes = layout.format.lstrip("!")
    return tuple(struct.calcsize("!" + codes[:i]) for i in range(len(codes)))


#: Offsets of the INA header's fields in a full frame, in the order of the table above (INA_HEADER's).
(INA_JOB_OFFSET, INA_FLAGS_OFFSET, INA_ELEMS_OFFSET, INA_LEVEL_OFFSET, INA_AGG_NODE_OFFSET, INA_FANIN_OFFSET,
 INA_COUNT_OFFSET, INA_SUBMODEL_OFFSET, INA_ITERATION_OFFSET, INA_SEQ_OFFSET, INA_SLOT_OFFSET, INA_BITMAP_OFFSET,
 INA_PROGRESS_OFFSET) = (INA_OFFSET + offset for offset in _field_offsets(INA_HEADER))
#: Bytes of a frame around a UDP payload (Ethernet + IPv4 + UDP): a socket's datagram + this = frame bytes.
FRAME_OVERHEAD_BYTES = INA_OFFSET
#: Ring all-reduce: its own port (never parsed as INA), its header (job, flags, elems, step, iteration, index).
RING_UDP_PORT = 40001
RING_HEADER = struct.Struct("!HHHHII")
RING_HEADER_BYTES = RING_HEADER.size  # 16

FLAG_DATA = 0x0001        # a gradient contribution (raw or partial aggregate)
FLAG_GACK = 0x0002        # per-gradient ack (PA-ATP)
FLAG_RESULT = 0x0004      # aggregate result / AACK travelling back to workers
FLAG_RETX = 0x0008        # retransmission by a worker
FLAG_ECN_ECHO = 0x0010    # congestion seen, echoed to the sender
FLAG_AECN = 0x0020        # aggregation-ECN (PA-ATP)
FLAG_COLLISION = 0x0040   # slot held by another tag: bypassed toward the PS
FLAG_OVERFLOW = 0x0080    # value overflow (ATP)
FLAG_LAST = 0x0100        # last fragment of the iteration from this sender
FLAG_SHADOW = 0x0200      # SwitchML: the packet names copy 1 of its pool slot (wire.shadow_slot)
FLAG_CAPACITY = 0x0400    # switch aggregation capacity exhausted: bypassed
FLAG_TASK = 0x0800        # Rina: a rack agent's shard that starts an aggregation at its ToR (the switch pulls)
FLAG_PULL = 0x1000        # Rina: the ToR's pull of a task to the rack's other workers (header only)
FLAG_GATHER = 0x2000      # Rina: a finished chunk (AllGather): a Rina ToR multicasts it to its rack
FLAG_REPAIR = 0x4000      # Rina: a rack worker asks its agent for finished fragments it missed, and the answer
FLAG_EVICTED = 0x8000     # ESA: a partial aggregate evicted from its slot by a contribution of higher rank

FLAG_NAMES = {
    FLAG_DATA: "DATA", FLAG_GACK: "GACK", FLAG_RESULT: "RESULT", FLAG_RETX: "RETX",
    FLAG_ECN_ECHO: "ECN_ECHO", FLAG_AECN: "AECN", FLAG_COLLISION: "COLLISION",
    FLAG_OVERFLOW: "OVERFLOW", FLAG_LAST: "LAST", FLAG_SHADOW: "SHADOW",
    FLAG_CAPACITY: "CAPACITY", FLAG_TASK: "TASK", FLAG_PULL: "PULL", FLAG_GATHER: "GATHER",
    FLAG_REPAIR: "REPAIR", FLAG_EVICTED: "EVICTED",
}

MAX_WORKERS_PER_JOB = 64  # one bitmap bit per worker

#: Rina's seq: the ring step in the bits from RINA_STEP_SHIFT up, the fragment's index within the step's chunk
#: below them. Steps follow one another within an iteration, so a later use of a rack's slot has a higher
#: seq (the "newer" rule of p4/ina.p4's Rina branch), and the slot of index i is ``slot_base + i mod count``
#: whenever the count is a power of two up to 2^RINA_STEP_SHIFT.
RINA_STEP_SHIFT = 20
RINA_INDEX_MASK = (1 << RINA_STEP_SHIFT) - 1


def rina_seq(step: int, index: int) -> int:
    """The seq of fragment ``index`` of ring step ``step``'s chunk (Rina's packets)."""
    if not 0 <= index <= RINA_INDEX_MASK or not 0 <= step < 1 << (32 - RINA_STEP_SHIFT):
        raise WireError(f"rina seq out of range: step {step}, index {index}")
    return step << RINA_STEP_SHIFT | index


def rina_step_index(seq: int) -> tuple:
    """(step, index) of a Rina seq (:func:`rina_seq`)."""
    return seq >> RINA_STEP_SHIFT, seq & RINA_INDEX_MASK


#: Rina's ring generation (§IV-C2: a new ring of members after a worker's error) in the iteration field's bits
#: from RINA_GENERATION_SHIFT up, the iteration below them: an iteration redone in a later generation is newer
#: to a Rina ToR's slots than any of an earlier one (p4/ina.p4 compares iterations), and an agent tells the
#: packets of the ring it left from those of the ring it is in.
RINA_GENERATION_SHIFT = 24
RINA_ITERATION_MASK = (1 << RINA_GENERATION_SHIFT) - 1


def rina_iteration(generation: int, iteration: int) -> int:
    """The iteration field of a Rina packet of ``iteration`` in ring generation ``generation``."""
    if not 0 <= iteration <= RINA_ITERATION_MASK or not 0 <= generation < 1 << (32 - RINA_GENERATION_SHIFT):
        raise WireError(f"rina iteration out of range: generation {generation}, iteration {iteration}")
    return generation << RINA_GENERATION_SHIFT | iteration


def rina_generation_iteration(field: int) -> tuple:
    """(generation, iteration) of a Rina packet's iteration field (:func:`rina_iteration`)."""
    return field >> RINA_GENERATION_SHIFT, field & RINA_ITERATION_MASK


class WireError(ValueError):
    """A packet does not follow the wire contract."""


@dataclass
class InaHeader:
    job: int = 0
    flags: int = FLAG_DATA
    elems: int = DEFAULT_LANES
    level: int = 0
    agg_node: int = 0
    fanin: int = 1
    count: int = 1
    submodel: int = 0
    iteration: int = 0
    seq: int = 0
    slot: int = 0
    bitmap: int = 0
    progress: int = 0

    def pack(self) -> bytes:
        return INA_HEADER.pack(*(getattr(self, f.name) for f in fields(self)))

    @classmethod
    def unpack(cls, data, offset: int = 0) -> "InaHeader":
        if len(data) - offset < INA_HEADER_BYTES:
            raise WireError(f"INA header needs {INA_HEADER_BYTES} bytes, got {len(data) - offset}")
        return cls(*INA_HEADER.unpack_from(data, offset))

    def flag_names(self):
        return [name for bit, name in FLAG_NAMES.items() if self.flags & bit]


# --- fixed point ----------------------------------------------------------

def choose_scale_bits(workers: int, gradient_bound: float) -> int:
    """Largest ``scale_bits`` such that the sum of ``workers`` values bounded by
    ``gradient_bound`` in magnitude cannot overflow int32 (the scale is chosen per
    job, so the sum over all its workers cannot overflow)."""
    if workers < 1 or gradient_bound <= 0:
        raise ValueError("workers must be >= 1 and gradient_bound > 0")
    bits = 0
    while workers * gradient_bound * 2.0 ** (bits + 1) <= 2**31 - 1 and bits < 30:
        bits += 1
    if workers * gradient_bound * 2.0**bits > 2**31 - 1:
        raise ValueError(f"{workers} workers x bound {gradient_bound} overflow int32 even unscaled")
    return bits


def check_sum_fits(workers: int, gradient_bound: float, scale_bits: int) -> bool:
    return workers * round(gradient_bound * 2**scale_bits) <= 2**31 - 1


def to_fixed(values: np.ndarray, scale_bits: int) -> np.ndarray:
    """float -> int32 lanes (round to nearest)."""
    return np.rint(np.asarray(values, dtype=np.float64) * (1 << scale_bits)).astype(np.int32)


def from_fixed(lanes: np.ndarray, scale_bits: int) -> np.ndarray:
    return np.asarray(lanes, dtype=np.float64) / (1 << scale_bits)


def lanes_to_bytes(lanes: np.ndarray) -> bytes:
    return np.asarray(lanes, dtype=">i4").tobytes()


def bytes_to_lanes(data, elems: int, offset: int = 0) -> np.ndarray:
    if len(data) - offset < elems * LANE_BYTES:
        raise WireError(f"payload holds {(len(data) - offset) // LANE_BYTES} lanes, header says {elems}")
    return np.frombuffer(data, dtype=">i4", count=elems, offset=offset)


def fragment(values: np.ndarray, lanes: int = DEFAULT_LANES) -> np.ndarray:
    """Split a 1-D int32 tensor into rows of ``lanes``, zero-padding the last one."""
    n = len(values)
    rows = max(1, -(-n // lanes))
    out = np.zeros(rows * lanes, dtype=np.int32)
    out[:n] = values
    return out.reshape(rows, lanes)


def ina_frame_bytes(lanes: int = DEFAULT_LANES) -> int:
    """Bytes of a full INA frame of ``lanes`` lanes, Ethernet header included (336 for 64 lanes)."""
    return PAYLOAD_OFFSET + LANE_BYTES * lanes


def ring_frame_bytes(lanes: int = DEFAULT_LANES) -> int:
    """Bytes of a full ring all-reduce frame of ``lanes`` lanes, Ethernet header included (314 for 64)."""
    return FRAME_OVERHEAD_BYTES + RING_HEADER_BYTES + LANE_BYTES * lanes


def fragments_of(elements: int, lanes: int = DEFAULT_LANES) -> int:
    return max(1, -(-elements // lanes))


# --- addresses and frames -------------------------------------------------

def mac_to_bytes(mac: str) -> bytes:
    parts = mac.split(":")
    if len(parts) != 6:
        raise WireError(f"bad MAC address {mac!r}")
    return bytes(int(p, 16) for p in parts)


def bytes_to_mac(data: bytes) -> str:
    return ":".join(f"{b:02x}" for b in data)


def ipv4_checksum(header: bytes) -> int:
    """RFC 1071 checksum of a 20-byte IPv4 header whose checksum field is zero."""
    total = sum(struct.unpack("!10H", header))
    total = (total & 0xFFFF) + (total >> 16)
    total = (total & 0xFFFF) + (total >> 16)
    return (~total) & 0xFFFF


def build_ipv4_udp(src_ip: str, dst_ip: str, payload: bytes, src_port: int = INA_UDP_PORT,
                   dst_port: int = INA_UDP_PORT, ttl: int = 64, ecn: int = 0, ident: int = 0) -> bytes:
    """IPv4 + UDP (checksum 0) around ``payload``."""
    total = IPV4_HEADER_BYTES + UDP_HEADER_BYTES + len(payload)
    ip = bytearray(struct.pack("!BBHHHBBH4s4s", IPV4_VERSION_IHL, ecn & 3, total, ident, 0, ttl, IPPROTO_UDP, 0,
                               socket.inet_aton(src_ip), socket.inet_aton(dst_ip)))
    struct.pack_into("!H", ip, 10, ipv4_checksum(bytes(ip)))
    udp = struct.pack("!HHHH", src_port, dst_port, UDP_HEADER_BYTES + len(payload), 0)
    return bytes(ip) + udp + payload


def build_frame(dst_mac: str, src_mac: str, src_ip: str, dst_ip: str, payload: bytes, **ip_kwargs) -> bytes:
    return mac_to_bytes(dst_mac) + mac_to_bytes(src_mac) + ETH_TYPE_IPV4.to_bytes(2, "big") + build_ipv4_udp(
        src_ip, dst_ip, payload, **ip_kwargs)


def build_ina_frame(dst_mac: str, src_mac: str, src_ip: str, dst_ip: str, header: InaHeader,
                    lanes=None, **ip_kwargs) -> bytes:
    if lanes is None:
        lanes = np.zeros(header.elems, dtype=np.int32)
    return build_frame(dst_mac, src_mac, src_ip, dst_ip, header.pack() + lanes_to_bytes(lanes), **ip_kwargs)


@dataclass
class ParsedFrame:
    dst_mac: str
    src_mac: str
    src_ip: str
    dst_ip: str
    ttl: int
    ecn: int
    dst_port: int
    ina: "InaHeader | None"
    lanes: "np.ndarray | None"
    ip_checksum_ok: bool


def parse_frame(frame: bytes) -> ParsedFrame:
    """Dissect a frame for tests and tools (not a fast path)."""
    if len(frame) < UDP_OFFSET or frame[ETH_TYPE_OFFSET:IPV4_OFFSET] != ETH_TYPE_IPV4.to_bytes(2, "big"):
        raise WireError("not an IPv4 frame")
    ip = frame[IPV4_OFFSET:UDP_OFFSET]
    zeroed = ip[:10] + b"\x00\x00" + ip[12:]
    ok = ipv4_checksum(zeroed) == struct.unpack("!H", ip[10:12])[0]
    dst_port = struct.unpack_from("!H", frame, UDP_OFFSET + 2)[0]
    ina = lanes = None
    if frame[IPV4_PROTOCOL_OFFSET] == IPPROTO_UDP and dst_port == INA_UDP_PORT:
        ina = InaHeader.unpack(frame, INA_OFFSET)
        lanes = bytes_to_lanes(frame, ina.elems, PAYLOAD_OFFSET).astype(np.int32)
    return ParsedFrame(bytes_to_mac(frame[0:6]), bytes_to_mac(frame[6:12]), socket.inet_ntoa(ip[12:16]),
                       socket.inet_ntoa(ip[16:20]), ip[8], ip[1] & 3, dst_port, ina, lanes, ok)


def fragment_seqs(fragments_per_submodel) -> list:
    """The seq of every fragment of every sub-model: ``result[g][k]`` is fragment ``k`` of sub-model ``g``.

    Sub-models are interleaved in proportion to their sizes: fragment ``k`` of a sub-model of ``n``
    fragments sits at the fraction ``(k + 1/2) / n`` of the iteration (ties in sub-model order). A
    worker sends in seq order, so its sub-models leave side by side, each toward its own
    aggregation node and PS, and all finish together, as the fluid model lets them flow; sent one
    after the other they would share the host link in turn and the slowest path would set the pace
    of each in turn. Every in-flight window is still one run of consecutive seqs, so
    :func:`slot_index` keeps the fragments of one window in distinct slots. Workers and PSs derive
    the same mapping from the job's layout; one sub-model is the identity.
    """
    counts = [int(n) for n in fragments_per_submodel]
    order = sorted(((2 * k + 1) / (2 * n), g, k) for g, n in enumerate(counts) for k in range(n))
    seqs = [[0] * n for n in counts]
    for seq, (_, g, k) in enumerate(order):
        seqs[g][k] = seq
    return seqs


def slot_index(seq: int, slot_base: int, slot_count: int) -> int:
    """Aggregator index for fragment ``seq`` in a job's slot range at a switch.

    The contract asks for a deterministic function of (job, submodel, seq); the
    range itself is per job, so ``seq mod count`` suffices and keeps the
    fragments of one window in distinct slots whenever window <= count (a CRC
    would collide inside the window). p4/ina.p4 computes the same with
    ``hash(..., HashAlgorithm.identity, base, {seq}, count)``.
    """
    return slot_base + (seq % slot_count if slot_count else 0)


def shadow_slot(seq: int, iteration: int, total_fragments: int, slot_base: int, pool: int) -> tuple:
    """(slot, version) of fragment ``seq`` of ``iteration`` in a SwitchML pool of ``pool`` slots, each
    with two copies (SwitchML §3, "shadow copies"; ``program.RELEASE_SHADOW``): the job's range at the
    switch is ``2 x pool`` slots, copy ``version`` of pool slot ``k`` being ``slot_base + 2k + version``.

    Pool slot ``k = seq mod pool`` is used by fragments ``k, k + pool, ...`` of every iteration, in that
    order (a self-clocked worker, window <= pool, sends ``seq`` only after the RESULT of ``seq - pool``);
    consecutive uses alternate copies, so the version is the parity of the use count over the run:
    ``iteration x uses per iteration + seq // pool``. A copy is therefore reused only after every worker
    sent the next use of its pool slot, i.e. after every worker had its result: until then it keeps the
    aggregate, from which the switch answers a retransmission.
    """
    k = seq % pool
    uses_per_iteration = (total_fragments - k + pool - 1) // pool
    version = (iteration * uses_per_iteration + seq // pool) & 1
    return slot_base + 2 * k + version, version
