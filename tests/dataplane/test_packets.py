"""Packet tests of the INA program, the same cases on every target (PTF style).

Each case installs entries through the target's SwitchRuntime, sends crafted
frames into switch ports, and checks the frames that come out (ports,
headers, lanes) and the switch state (registers, counters). The targets
(pyswitch in-process, the pyswitch process on veth pairs, bmv2) are the
``target`` fixture of conftest.py; a case that passes on one and fails on
another is a lockstep bug between p4/ina.p4 and pyswitch.

The switch under test has four ports: workers W1..W3 behind ports 1..3 and
the parameter server behind port 4; its own INA address is 10.0.1.1.
"""

import collections
import math

import numpy as np
import pytest

from testbed.dataplane import program
from testbed.dataplane.entries import TableEntry
from testbed.dataplane.wire import (FLAG_AECN, FLAG_CAPACITY, FLAG_COLLISION, FLAG_DATA, FLAG_ECN_ECHO, FLAG_EVICTED,
                                    FLAG_GACK, FLAG_GATHER, FLAG_PULL, FLAG_RESULT, FLAG_RETX, FLAG_SHADOW, FLAG_TASK, INA_OFFSET,
                                    INA_UDP_PORT, PAYLOAD_OFFSET, InaHeader, build_frame, build_ina_frame,
                                    ipv4_checksum, parse_frame, rina_iteration, rina_seq, shadow_slot, slot_index)
from testbed.errors import DataplaneError

from packet_targets import (LANES, SLOTS, TARGET_KINDS, SharedEbpfSwitch, assert_no_rig_left_behind,  # noqa: E402
                            make_target)

SW_MAC = "02:00:00:00:01:00"
SW_ADDR = "10.0.1.1"
SW_NODE = 1
PS_NODE = 100
HOSTS = {1: ("10.0.0.1", "02:00:00:00:00:01"), 2: ("10.0.0.2", "02:00:00:00:00:02"),
         3: ("10.0.0.3", "02:00:00:00:00:03"), 4: ("10.0.0.100", "02:00:00:00:00:64")}
PS_PORT = 4
PS_IP, PS_MAC = HOSTS[PS_PORT]
GROUP_IP = "10.0.0.250"


@pytest.fixture(params=TARGET_KINDS)
def target(request, tmp_path):
    """One switch of the INA program on each target in turn (packet_targets.py); the ebpf cases share one
    switch, reset for each."""
    t = make_target(request.param, tmp_path, shared_ebpf=lambda: request.getfixturevalue("shared_ebpf"))
    try:
        yield t
    finally:
        t.close()


@pytest.fixture(scope="module")
def shared_ebpf(tmp_path_factory):
    shared = SharedEbpfSwitch(tmp_path_factory.mktemp("ebpf"))
    try:
        yield shared
    finally:
        shared.close()


@pytest.fixture(scope="module", autouse=True)
def _no_rig_left_behind():
    yield
    assert_no_rig_left_behind()


# -- helpers ---------------------------------------------------------------------------

def stat(target, name):
    return target.runtime.counter_read("ina_stats", program.STAT_INDICES[name])[0]


def install_routes(rt):
    for port, (ip, mac) in HOSTS.items():
        rt.table_add(TableEntry("ipv4_lpm", "ipv4_forward", (f"{ip}/32",), (("dstAddr", mac), ("port", port))))


def aggregate_entry(job, base=0, count=8, submodel=0, release_mode=program.RELEASE_ON_EMIT, next_agg_node=PS_NODE,
                    next_fanin=1, next_slot_base=0, next_slot_count=0, overflow=(PS_IP, 0, 0, 0, 0)):
    """``overflow``: (overflow_dst, agg_node, fanin, slot_base, slot_count), by default the PS (header kept)."""
    return TableEntry("ina_filter", "ina_aggregate", (job, SW_NODE, submodel), (
        ("switch_addr", SW_ADDR), ("slot_base", base), ("slot_count", count), ("release_mode", release_mode),
        ("next_agg_node", next_agg_node), ("next_fanin", next_fanin), ("next_dst", PS_IP),
        ("next_slot_base", next_slot_base), ("next_slot_count", next_slot_count), ("bypass_dst", PS_IP))
        + tuple(zip(("overflow_dst", "overflow_agg_node", "overflow_fanin", "overflow_slot_base",
                     "overflow_slot_count"), overflow)))


def lanes_of(seed, n=LANES):
    rng = np.random.default_rng(seed)
    values = rng.integers(-2**31, 2**31, size=n, dtype=np.int64)
    values[:3] = [2**31 - 1, -2**31, 123456789]   # wrap-around must behave as bit<32>
    return values.astype(np.int32)


def wrap_sum(*arrays):
    total = np.zeros(len(arrays[0]), dtype=np.int64)
    for a in arrays:
        total += a.astype(np.int64)
    return (((total + 2**31) % 2**32) - 2**31).astype(np.int32)


def contribution(worker, job, seq, lanes, iteration=0, flags=FLAG_DATA, fanin=3, base=0, count=8, submodel=0,
                 elems=None, ecn=0, bitmap=None, slot=None):
    ip, mac = HOSTS[worker]
    header = InaHeader(job=job, flags=flags, elems=len(lanes) if elems is None else elems, agg_node=SW_NODE,
                       fanin=fanin, count=1, submodel=submodel, iteration=iteration, seq=seq,
                       slot=slot_index(seq, base, count) if slot is None else slot,
                       bitmap=(1 << worker) if bitmap is None else bitmap)
    return build_ina_frame(SW_MAC, mac, ip, SW_ADDR, header, lanes, ecn=ecn)


def only(frames, port=None):
    assert len(frames) == 1, f"expected one frame, got {len(frames)}: {[p for p, _ in frames]}"
    got_port, frame = frames[0]
    if port is not None:
        assert got_port == port
    return parse_frame(frame), frame


def udp_checksum_of(frame):
    return int.from_bytes(frame[40:42], "big")


# -- forwarding --------------------------------------------------------------------------

def test_forwarding_lpm_route_precedence_mac_ttl_checksum(target):
    rt = target.runtime
    rt.table_add(TableEntry("ipv4_lpm", "ipv4_forward", ("10.0.0.0/24",), (("dstAddr", HOSTS[2][1]), ("port", 2))))
    rt.table_add(TableEntry("ipv4_lpm", "ipv4_forward", ("10.0.0.3/32",), (("dstAddr", HOSTS[3][1]), ("port", 3))))
    src_ip, src_mac = HOSTS[1]

    def udp(dst, src=src_ip, ttl=64):
        return build_frame(SW_MAC, src_mac, src, dst, b"hello world!" * 4, src_port=5000, dst_port=5001, ttl=ttl)

    target.send(1, udp("10.0.0.3"))
    pkt, frame = only(target.recv(1), port=3)          # the longest prefix wins
    assert (pkt.dst_mac, pkt.ttl, pkt.dst_ip, pkt.src_mac) == (HOSTS[3][1], 63, "10.0.0.3", src_mac)
    assert pkt.ip_checksum_ok and frame[42:] == udp("10.0.0.3")[42:]
    target.send(1, udp("10.0.0.7"))
    pkt, _ = only(target.recv(1), port=2)
    assert pkt.dst_mac == HOSTS[2][1] and pkt.ip_checksum_ok

    # An exact (src, dst) route beats lpm, for that source only.
    rt.table_add(TableEntry("route", "route_forward", (src_ip, "10.0.0.3"), (("dstAddr", PS_MAC), ("port", 4))))
    target.send(1, udp("10.0.0.3"))
    pkt, _ = only(target.recv(1), port=4)
    assert pkt.dst_mac == PS_MAC and pkt.ttl == 63
    target.send(1, udp("10.0.0.3", src="10.0.0.9"))
    only(target.recv(1), port=3)

    # No route, TTL expiring: dropped and counted.
    target.send(1, udp("192.168.7.7"))
    target.send(1, udp("10.0.0.3", ttl=1))
    assert target.quiet() == []
    assert stat(target, "no_route_dropped") == 2
    assert stat(target, "forwarded") == 4


def crc16_arc_bitwise(data: bytes) -> int:
    """CRC-16/ARC computed bit by bit, MSB first on reflected bytes (not pyswitch's table-driven form)."""
    crc = 0
    for byte in data:
        crc ^= int(f"{byte:08b}"[::-1], 2) << 8
        for _ in range(8):
            crc = ((crc << 1) ^ 0x8005) & 0xFFFF if crc & 0x8000 else (crc << 1) & 0xFFFF
    return int(f"{crc:016b}"[::-1], 2)


def test_route_ecmp_spreads_flows_by_their_five_tuple_and_keeps_each_on_one_port(target):
    assert crc16_arc_bitwise(b"123456789") == 0xBB3D           # the catalogued check value of CRC-16/ARC
    rt = target.runtime
    install_routes(rt)
    src_ip, src_mac = HOSTS[1]
    rt.table_add(TableEntry("route", "route_ecmp", (src_ip, PS_IP),
                            (("dstAddr", PS_MAC), ("first_port", 2), ("ports", 3))))

    def frame(src_port, dst_port, protocol):
        udp = bytearray(build_frame(SW_MAC, src_mac, src_ip, PS_IP, b"x" * 40, src_port=src_port,
                                    dst_port=dst_port))
        udp[23] = protocol                                      # 6: the same bytes read as a TCP header's start
        udp[24:26] = b"\x00\x00"
        udp[24:26] = ipv4_checksum(bytes(udp[14:34])).to_bytes(2, "big")
        return bytes(udp)

    def expected_port(src_port, dst_port, protocol):
        five_tuple = (bytes(map(int, src_ip.split("."))) + bytes(map(int, PS_IP.split("."))) + bytes((protocol,))
                      + src_port.to_bytes(2, "big") + dst_port.to_bytes(2, "big"))
        return 2 + crc16_arc_bitwise(five_tuple) % 3

    seen = collections.Counter()
    for protocol in (6, 17):
        for src_port in range(40001, 40013):
            for _ in range(2):                                  # a flow's packets all take one port
                target.send(1, frame(src_port, 5001, protocol))
                pkt, _ = only(target.recv(1), port=expected_port(src_port, 5001, protocol))
                assert pkt.dst_mac == PS_MAC and pkt.ttl == 63 and pkt.ip_checksum_ok
            seen[expected_port(src_port, 5001, protocol)] += 1
    assert sorted(seen) == [2, 3, 4]                            # the flows are spread over every member
    # Another protocol hashes with ports 0; another source has no ECMP entry (its lpm route: the PS's port)
    target.send(1, frame(40001, 5001, 47))
    only(target.recv(1), port=2 + crc16_arc_bitwise(bytes(map(int, src_ip.split(".")))
                                                       + bytes(map(int, PS_IP.split("."))) + bytes((47, 0, 0, 0, 0)))
         % 3)
    target.send(2, build_frame(SW_MAC, HOSTS[2][1], HOSTS[2][0], PS_IP, b"x" * 40, src_port=40001, dst_port=5001))
    only(target.recv(2), port=PS_PORT)


# -- aggregation --------------------------------------------------------------------------

def test_aggregation_of_three_contributions(target):
    rt = target.runtime
    install_routes(rt)
    rt.table_add(aggregate_entry(job=7, base=8, count=8, next_agg_node=200, next_fanin=5, next_slot_base=32,
                                 next_slot_count=4))
    seq = 13
    slot = slot_index(seq, 8, 8)
    parts = {w: lanes_of(w) for w in (1, 2, 3)}
    target.send_seq([(1, contribution(1, 7, seq, parts[1], base=8)), (2, contribution(2, 7, seq, parts[2], base=8))])
    assert target.quiet() == []                       # absorbed until the fan-in is reached
    assert rt.register_read("agg_count", slot) == 2
    assert rt.register_read("agg_bitmap", slot) == 0b110
    assert rt.register_read("agg_job", slot) == 7 and rt.register_read("agg_seq", slot) == seq
    partial = wrap_sum(parts[1], parts[2])
    for lane in (0, 1, 2, 17, LANES - 1):
        assert rt.register_read("agg_value", slot * LANES + lane) == int(partial[lane]) & 0xFFFFFFFF

    target.send(3, contribution(3, 7, seq, parts[3], base=8))
    pkt, frame = only(target.recv(1), port=PS_PORT)
    ina = pkt.ina
    assert np.array_equal(pkt.lanes, wrap_sum(parts[1], parts[2], parts[3]))
    assert (ina.count, ina.bitmap, ina.level, ina.agg_node, ina.fanin) == (3, 0b1110, 1, 200, 5)
    assert ina.slot == slot_index(seq, 32, 4) and (ina.job, ina.seq, ina.elems) == (7, seq, LANES)
    assert ina.flags == FLAG_DATA
    assert (pkt.src_ip, pkt.dst_ip, pkt.dst_mac, pkt.ttl) == (SW_ADDR, PS_IP, PS_MAC, 63)
    assert pkt.ip_checksum_ok and udp_checksum_of(frame) == 0
    assert rt.register_read("agg_count", slot) == 0 and rt.register_read("agg_bitmap", slot) == 0  # released
    assert (stat(target, "aggregated"), stat(target, "emitted"), stat(target, "ina_rx")) == (3, 1, 3)
    assert rt.counter_read("port_ina_tx", PS_PORT)[0] == 1


def test_duplicate_does_not_double_count(target):
    install_routes(target.runtime)
    target.runtime.table_add(aggregate_entry(job=1))
    parts = {w: lanes_of(10 + w) for w in (1, 2, 3)}
    target.send_seq([(1, contribution(1, 1, 0, parts[1])), (1, contribution(1, 1, 0, parts[1]))])
    assert target.quiet() == []
    assert stat(target, "duplicate_dropped") == 1
    target.send_seq([(2, contribution(2, 1, 0, parts[2])), (3, contribution(3, 1, 0, parts[3]))])
    pkt, _ = only(target.recv(1), port=PS_PORT)
    assert np.array_equal(pkt.lanes, wrap_sum(parts[1], parts[2], parts[3]))
    assert (pkt.ina.count, pkt.ina.bitmap) == (3, 0b1110)


def test_retx_duplicate_flushes_the_partial(target):
    rt = target.runtime
    install_routes(rt)
    rt.table_add(aggregate_entry(job=1))
    parts = {w: lanes_of(20 + w) for w in (1, 2, 3)}
    target.send_seq([(1, contribution(1, 1, 5, parts[1])), (2, contribution(2, 1, 5, parts[2])),
                     (1, contribution(1, 1, 5, parts[1], flags=FLAG_DATA | FLAG_RETX))])
    pkt, _ = only(target.recv(1), port=PS_PORT)
    assert np.array_equal(pkt.lanes, wrap_sum(parts[1], parts[2]))
    # The partial goes to the PS (bypass_dst), still RETX, addressed as this switch's (no switch on
    # the way aggregates it again), and the slot is freed.
    assert (pkt.ina.count, pkt.ina.bitmap, pkt.ina.flags, pkt.ina.level) == (2, 0b110, FLAG_DATA | FLAG_RETX, 1)
    assert (pkt.src_ip, pkt.dst_ip, pkt.ina.agg_node) == (SW_ADDR, PS_IP, SW_NODE)
    slot = slot_index(5, 0, 8)
    assert rt.register_read("agg_count", slot) == 0
    assert (stat(target, "partial_flushed"), stat(target, "duplicate_dropped"), stat(target, "emitted")) == (1, 1, 1)
    # The third worker's retransmission finds no slot holding its tag: straight on to the PS, unchanged.
    frame = contribution(3, 1, 5, parts[3], flags=FLAG_DATA | FLAG_RETX)
    target.send(3, frame)
    pkt, out = only(target.recv(1), port=PS_PORT)
    assert pkt.ina.flags == FLAG_DATA | FLAG_RETX and np.array_equal(pkt.lanes, parts[3])
    assert (pkt.src_ip, pkt.dst_ip, pkt.ina.count, pkt.ina.level) == (HOSTS[3][0], PS_IP, 1, 0)
    assert stat(target, "retx_bypassed") == 1 and rt.register_read("agg_count", slot) == 0


def test_retx_of_a_contribution_the_partial_lacks_goes_to_the_ps_alone(target):
    """A resent gradient whose original went elsewhere (overflowed, or to the PS) must not join the
    partial: the aggregate would then hold it twice over the two paths, and the PS could never merge
    the two. It goes on to the PS unchanged; the partial stays until its members' RETX flush it."""
    rt = target.runtime
    install_routes(rt)
    rt.table_add(aggregate_entry(job=1))
    parts = {w: lanes_of(30 + w) for w in (1, 2, 3)}
    slot = slot_index(9, 0, 8)
    target.send_seq([(1, contribution(1, 1, 9, parts[1])), (2, contribution(2, 1, 9, parts[2]))])
    assert target.quiet() == []
    target.send(3, contribution(3, 1, 9, parts[3], flags=FLAG_DATA | FLAG_RETX))
    pkt, _ = only(target.recv(1), port=PS_PORT)
    assert pkt.ina.flags == FLAG_DATA | FLAG_RETX and np.array_equal(pkt.lanes, parts[3])
    assert (pkt.src_ip, pkt.dst_ip, pkt.ina.count, pkt.ina.bitmap, pkt.ina.level) == (HOSTS[3][0], PS_IP, 1,
                                                                                      0b1000, 0)
    assert (rt.register_read("agg_count", slot), rt.register_read("agg_bitmap", slot)) == (2, 0b110)
    assert (stat(target, "retx_bypassed"), stat(target, "aggregated"), stat(target, "emitted")) == (1, 2, 0)
    # A member's retransmission flushes the partial, which holds the first sends only.
    target.send(1, contribution(1, 1, 9, parts[1], flags=FLAG_DATA | FLAG_RETX))
    pkt, _ = only(target.recv(1), port=PS_PORT)
    assert (pkt.ina.count, pkt.ina.bitmap) == (2, 0b110) and np.array_equal(pkt.lanes, wrap_sum(parts[1], parts[2]))
    assert rt.register_read("agg_count", slot) == 0


def test_hold_a_members_retx_is_dropped_and_the_partial_waits_for_its_straggler(target):
    """RELEASE_HOLD (GOAT): the slot is its sub-model's own, so a fast member's retransmission while a
    straggler has not sent is dropped instead of flushing the partial to the PS; the straggler's first
    send then completes the aggregate, which leaves as a first send (RETX clear) and frees the slot."""
    rt = target.runtime
    install_routes(rt)
    rt.table_add(aggregate_entry(job=1, release_mode=program.RELEASE_HOLD))
    parts = {w: lanes_of(60 + w) for w in (1, 2, 3)}
    slot = slot_index(9, 0, 8)
    target.send_seq([(1, contribution(1, 1, 9, parts[1])), (2, contribution(2, 1, 9, parts[2])),
                     (1, contribution(1, 1, 9, parts[1], flags=FLAG_DATA | FLAG_RETX)),
                     (2, contribution(2, 1, 9, parts[2], flags=FLAG_DATA | FLAG_RETX))])
    assert target.quiet() == []
    assert (rt.register_read("agg_count", slot), rt.register_read("agg_bitmap", slot)) == (2, 0b110)
    assert (stat(target, "retx_held"), stat(target, "duplicate_dropped"), stat(target, "partial_flushed"),
            stat(target, "emitted")) == (2, 2, 0, 0)
    target.send(3, contribution(3, 1, 9, parts[3]))
    pkt, _ = only(target.recv(1), port=PS_PORT)
    assert (pkt.ina.flags, pkt.ina.count, pkt.ina.bitmap, pkt.ina.level) == (FLAG_DATA, 3, 0b1110, 1)
    assert np.array_equal(pkt.lanes, wrap_sum(*parts.values()))
    assert (rt.register_read("agg_count", slot), rt.register_read("agg_bitmap", slot)) == (0, 0)


def test_hold_a_retx_the_partial_lacks_joins_it(target):
    """RELEASE_HOLD: a member whose first send was lost before the switch resends it; the partial, which
    waits for it, takes it (ATP's rule would send it to the PS alone, leaving the partial to a flush)."""
    rt = target.runtime
    install_routes(rt)
    rt.table_add(aggregate_entry(job=1, release_mode=program.RELEASE_HOLD))
    parts = {w: lanes_of(70 + w) for w in (1, 2, 3)}
    target.send_seq([(1, contribution(1, 1, 3, parts[1])), (2, contribution(2, 1, 3, parts[2]))])
    assert target.quiet() == []
    target.send(3, contribution(3, 1, 3, parts[3], flags=FLAG_DATA | FLAG_RETX))
    pkt, _ = only(target.recv(1), port=PS_PORT)
    assert (pkt.ina.flags, pkt.ina.count, pkt.ina.bitmap) == (FLAG_DATA, 3, 0b1110)
    assert np.array_equal(pkt.lanes, wrap_sum(*parts.values()))
    assert (stat(target, "retx_bypassed"), stat(target, "aggregated"), stat(target, "emitted")) == (0, 3, 1)


def test_hold_a_retx_claims_a_slot_its_fragment_never_reached_but_not_one_it_left(target):
    """RELEASE_HOLD: a RETX that finds the slot free under another tag starts the partial (the fragment's
    first sends were lost before the switch), and the others' first sends complete it; once the aggregate
    has left (the slot keeps its tag), a RETX of it -- its RESULT was lost -- goes to the PS alone."""
    rt = target.runtime
    install_routes(rt)
    rt.table_add(aggregate_entry(job=1, release_mode=program.RELEASE_HOLD))
    parts = {w: lanes_of(80 + w) for w in (1, 2, 3)}
    slot = slot_index(5, 0, 8)
    target.send(1, contribution(1, 1, 5, parts[1], flags=FLAG_DATA | FLAG_RETX))
    assert target.quiet() == []
    assert (rt.register_read("agg_count", slot), rt.register_read("agg_bitmap", slot)) == (1, 0b10)
    target.send_seq([(2, contribution(2, 1, 5, parts[2])), (3, contribution(3, 1, 5, parts[3]))])
    pkt, _ = only(target.recv(1), port=PS_PORT)
    assert (pkt.ina.flags, pkt.ina.count, pkt.ina.bitmap) == (FLAG_DATA, 3, 0b1110)
    assert np.array_equal(pkt.lanes, wrap_sum(*parts.values()))
    target.send(1, contribution(1, 1, 5, parts[1], flags=FLAG_DATA | FLAG_RETX))
    pkt, _ = only(target.recv(1), port=PS_PORT)
    assert (pkt.ina.flags, pkt.ina.count, pkt.ina.bitmap, pkt.ina.level) == (FLAG_DATA | FLAG_RETX, 1, 0b10, 0)
    assert np.array_equal(pkt.lanes, parts[1]) and pkt.src_ip == HOSTS[1][0]
    assert (stat(target, "retx_bypassed"), rt.register_read("agg_count", slot)) == (1, 0)


def test_late_contribution_after_a_flush_goes_on_to_the_ps(target):
    """A worker that starts late finds its slot freed by the others' flush: the slot kept the tag, so
    the late original goes on to the PS instead of opening a partial nobody will complete."""
    rt = target.runtime
    install_routes(rt)
    rt.table_add(aggregate_entry(job=1))
    parts = {w: lanes_of(40 + w) for w in (1, 2, 3)}
    target.send_seq([(1, contribution(1, 1, 6, parts[1])), (2, contribution(2, 1, 6, parts[2])),
                     (2, contribution(2, 1, 6, parts[2], flags=FLAG_DATA | FLAG_RETX))])
    flushed, _ = only(target.recv(1), port=PS_PORT)
    assert flushed.ina.bitmap == 0b110
    target.send(3, contribution(3, 1, 6, parts[3]))
    late, _ = only(target.recv(1), port=PS_PORT)
    assert late.ina.flags == FLAG_DATA and late.ina.bitmap == 0b1000 and np.array_equal(late.lanes, parts[3])
    assert late.dst_ip == PS_IP and late.ina.level == 0
    slot = slot_index(6, 0, 8)
    assert rt.register_read("agg_count", slot) == 0
    assert stat(target, "retx_bypassed") == 1
    # Another seq that maps to the same slot later still aggregates normally.
    later = {w: lanes_of(50 + w) for w in (1, 2, 3)}
    target.send_seq([(w, contribution(w, 1, 14, later[w])) for w in (1, 2, 3)])
    pkt, _ = only(target.recv(1), port=PS_PORT)
    assert pkt.ina.count == 3 and np.array_equal(pkt.lanes, wrap_sum(*later.values()))


def rack_aggregate(rack, job, seq, lanes, bitmap, count, fanin, flags=FLAG_DATA, base=0, slots=8):
    """A level-1 aggregate of a rack switch (behind port ``rack``) toward this switch, the level above."""
    ip, mac = HOSTS[rack]
    header = InaHeader(job=job, flags=flags, elems=len(lanes), level=1, agg_node=SW_NODE, fanin=fanin, count=count,
                       iteration=0, seq=seq, slot=slot_index(seq, base, slots), bitmap=bitmap)
    return build_ina_frame(SW_MAC, mac, ip, SW_ADDR, header, lanes)


def test_two_racks_partial_aggregates_merge_at_the_level_above(target):
    """ATP's second level: two racks' aggregates (three workers each) merge into one exact aggregate;
    a duplicate of a rack's aggregate is suppressed; a retransmitted rack aggregate that finds the
    slot still waiting for the other rack flushes the partial to the PS and frees the slot, and the
    other rack's aggregate then follows it there."""
    rt = target.runtime
    install_routes(rt)
    rt.table_add(aggregate_entry(job=4, next_agg_node=PS_NODE, next_fanin=2))
    racks = {1: (0b1110, lanes_of(90)), 2: (0b1110000, lanes_of(91))}
    target.send(1, rack_aggregate(1, 4, 3, racks[1][1], racks[1][0], count=3, fanin=6))
    target.send(1, rack_aggregate(1, 4, 3, racks[1][1], racks[1][0], count=3, fanin=6))   # a duplicate
    assert target.quiet() == []
    assert stat(target, "duplicate_dropped") == 1
    target.send(2, rack_aggregate(2, 4, 3, racks[2][1], racks[2][0], count=3, fanin=6))
    pkt, _ = only(target.recv(1), port=PS_PORT)
    assert np.array_equal(pkt.lanes, wrap_sum(racks[1][1], racks[2][1]))
    assert (pkt.ina.count, pkt.ina.bitmap, pkt.ina.level, pkt.ina.fanin) == (6, 0b1111110, 2, 2)
    assert (pkt.ina.flags, pkt.src_ip, pkt.dst_ip) == (FLAG_DATA, SW_ADDR, PS_IP)
    assert (stat(target, "aggregated"), stat(target, "emitted")) == (2, 1)

    # Seq 4: rack 1's aggregate waits for rack 2; rack 1's switch re-emits it as a RETX.
    target.send(1, rack_aggregate(1, 4, 4, racks[1][1], racks[1][0], count=3, fanin=6))
    target.send(1, rack_aggregate(1, 4, 4, racks[1][1], racks[1][0], count=3, fanin=6, flags=FLAG_DATA | FLAG_RETX))
    flushed, _ = only(target.recv(1), port=PS_PORT)
    assert (flushed.ina.bitmap, flushed.ina.count, flushed.ina.agg_node) == (0b1110, 3, SW_NODE)
    assert np.array_equal(flushed.lanes, racks[1][1])
    assert rt.register_read("agg_count", slot_index(4, 0, 8)) == 0
    target.send(2, rack_aggregate(2, 4, 4, racks[2][1], racks[2][0], count=3, fanin=6))
    late, _ = only(target.recv(1), port=PS_PORT)                 # on to the PS, where the two merge
    assert (late.ina.bitmap, late.ina.level, late.dst_ip) == (0b1110000, 1, PS_IP)
    assert np.array_equal(late.lanes, racks[2][1])


def test_two_jobs_do_not_mix(target):
    rt = target.runtime
    install_routes(rt)
    rt.table_add(aggregate_entry(job=1, base=0, count=8))
    rt.table_add(aggregate_entry(job=2, base=8, count=8))
    a = {w: lanes_of(30 + w) for w in (1, 2)}
    b = {w: lanes_of(40 + w) for w in (1, 2)}
    target.send_seq([(1, contribution(1, 1, 3, a[1], fanin=2, base=0)),
                     (1, contribution(1, 2, 3, b[1], fanin=2, base=8)),
                     (2, contribution(2, 2, 3, b[2], fanin=2, base=8)),
                     (2, contribution(2, 1, 3, a[2], fanin=2, base=0))])
    out = target.recv(2)
    assert len(out) == 2 and all(port == PS_PORT for port, _ in out)
    by_job = {p.ina.job: p for p in (parse_frame(f) for _, f in out)}
    assert np.array_equal(by_job[1].lanes, wrap_sum(a[1], a[2]))
    assert np.array_equal(by_job[2].lanes, wrap_sum(b[1], b[2]))
    assert by_job[1].ina.bitmap == by_job[2].ina.bitmap == 0b110
    assert stat(target, "collision_bypassed") == 0


def test_collision_bypass(target):
    rt = target.runtime
    install_routes(rt)
    rt.table_add(aggregate_entry(job=1, base=0, count=4))
    rt.table_add(aggregate_entry(job=2, base=0, count=4))   # overlapping ranges: the jobs compete for slots
    mine = lanes_of(50)
    target.send(1, contribution(1, 1, 0, mine, base=0, count=4))
    theirs = lanes_of(51)
    target.send(2, contribution(2, 2, 0, theirs, base=0, count=4))        # slot 0, held by job 1
    pkt, frame = only(target.recv(1), port=PS_PORT)
    assert pkt.ina.flags == FLAG_DATA | FLAG_COLLISION and pkt.ina.job == 2
    assert np.array_equal(pkt.lanes, theirs) and (pkt.ina.count, pkt.ina.level) == (1, 0)
    assert (pkt.src_ip, pkt.dst_ip) == (HOSTS[2][0], PS_IP) and udp_checksum_of(frame) == 0
    # Same job, same iteration, another fragment mapped to the same slot: a collision as well.
    target.send(2, contribution(2, 1, 4, lanes_of(52), base=0, count=4))
    pkt, _ = only(target.recv(1), port=PS_PORT)
    assert pkt.ina.flags & FLAG_COLLISION and pkt.ina.seq == 4
    assert stat(target, "collision_bypassed") == 2
    assert rt.register_read("agg_job", 0) == 1 and rt.register_read("agg_count", 0) == 1  # job 1 keeps its slot


def test_siblings_of_a_collided_fragment_follow_it(target):
    """A worker running a window ahead: its fragment 4 meets slot 0 still held by fragment 0 and goes on
    to the overflow target. Its siblings, arriving once slot 0 is free again, follow it there rather
    than start a partial it would never join (GOAT Fig. 2(b)); another fragment claims the slot as usual."""
    rt = target.runtime
    install_routes(rt)
    rt.table_add(aggregate_entry(job=1, base=0, count=4))
    first = {w: lanes_of(80 + w) for w in (1, 2, 3)}
    target.send(1, contribution(1, 1, 0, first[1], count=4))
    ahead = lanes_of(84)
    target.send(1, contribution(1, 1, 4, ahead, count=4))                    # slot 0 holds fragment 0
    pkt, _ = only(target.recv(1), port=PS_PORT)
    assert pkt.ina.flags == FLAG_DATA | FLAG_COLLISION and pkt.ina.seq == 4
    assert [rt.register_read(f"agg_collided_{r}", 0) for r in ("job", "iteration", "seq")] == [1, 0, 4]
    target.send_seq([(2, contribution(2, 1, 0, first[2], count=4)), (3, contribution(3, 1, 0, first[3], count=4))])
    pkt, _ = only(target.recv(1), port=PS_PORT)                             # fragment 0 complete, slot 0 free
    assert pkt.ina.seq == 0 and pkt.ina.count == 3
    for w in (2, 3):
        target.send(w, contribution(w, 1, 4, lanes_of(84 + w), count=4))
        pkt, _ = only(target.recv(1), port=PS_PORT)
        assert (pkt.ina.flags, pkt.ina.seq, pkt.ina.bitmap, pkt.ina.level) == (FLAG_DATA, 4, 1 << w, 0)
        assert np.array_equal(pkt.lanes, lanes_of(84 + w))
    assert stat(target, "overflow_followed") == 2 and rt.register_read("agg_count", 0) == 0
    target.send(1, contribution(1, 1, 8, lanes_of(90), count=4))
    assert target.quiet() == [] and rt.register_read("agg_seq", 0) == 8 and rt.register_read("agg_count", 0) == 1


def test_slot_reuse_across_iterations_reclaims_stale(target):
    rt = target.runtime
    install_routes(rt)
    rt.table_add(aggregate_entry(job=1))
    target.send(1, contribution(1, 1, 2, lanes_of(60), iteration=0, fanin=2))   # W2's part of iteration 0 never came
    new = {w: lanes_of(61 + w) for w in (1, 2)}
    target.send_seq([(1, contribution(1, 1, 2, new[1], iteration=1, fanin=2)),
                     (2, contribution(2, 1, 2, new[2], iteration=1, fanin=2))])
    pkt, _ = only(target.recv(1), port=PS_PORT)
    assert np.array_equal(pkt.lanes, wrap_sum(new[1], new[2])) and pkt.ina.iteration == 1
    assert (pkt.ina.count, pkt.ina.bitmap) == (2, 0b110)
    assert stat(target, "stale_reclaimed") == 1
    # Iteration 2 claims the slot; a late iteration-1 packet must not join it.
    target.send(1, contribution(1, 1, 2, lanes_of(70), iteration=2, fanin=2))
    target.send(2, contribution(2, 1, 2, lanes_of(71), iteration=1, fanin=2))
    pkt, _ = only(target.recv(1), port=PS_PORT)
    assert pkt.ina.flags & FLAG_COLLISION and pkt.ina.iteration == 1
    assert rt.register_read("agg_iteration", slot_index(2, 0, 8)) == 2


def test_far_future_iteration_does_not_hold_a_slot(target):
    """A DATA packet more than MAX_ITERATION_LEAD iterations ahead of its slot's tag (same job), held or
    left by the last release, claims nothing: it goes on to the PS unchanged and the slot keeps serving
    the job. Within the lead (a worker catching up) the slot is still claimed or reclaimed."""
    rt = target.runtime
    install_routes(rt)
    rt.table_add(aggregate_entry(job=1))
    lead = program.MAX_ITERATION_LEAD
    seq, slot = 2, slot_index(2, 0, 8)
    first = {w: lanes_of(130 + w) for w in (1, 2)}
    target.send_seq([(w, contribution(w, 1, seq, first[w], iteration=0, fanin=2)) for w in (1, 2)])
    only(target.recv(1), port=PS_PORT)                             # iteration 0 done: slot free, tag kept

    def assert_bypassed_unchanged(worker, iteration, lanes):
        pkt, frame = only(target.recv(1), port=PS_PORT)
        assert (pkt.ina.flags, pkt.ina.iteration, pkt.ina.count, pkt.ina.level) == (FLAG_DATA, iteration, 1, 0)
        assert (pkt.src_ip, pkt.dst_ip, pkt.ina.bitmap) == (HOSTS[worker][0], PS_IP, 1 << worker)
        assert np.array_equal(pkt.lanes, lanes) and udp_checksum_of(frame) == 0

    garbage = lanes_of(140)
    target.send(3, contribution(3, 1, seq, garbage, iteration=2**31 + 7, fanin=2))     # free slot
    assert_bypassed_unchanged(3, 2**31 + 7, garbage)
    assert (rt.register_read("agg_count", slot), rt.register_read("agg_iteration", slot)) == (0, 0)
    target.send(3, contribution(3, 1, seq, garbage, iteration=lead + 1, fanin=2))      # just past the lead
    assert_bypassed_unchanged(3, lead + 1, garbage)
    assert stat(target, "lead_bypassed") == 2

    # Iteration 1 claims the slot; a far-future packet does not take it over while it is held.
    target.send(1, contribution(1, 1, seq, lanes_of(141), iteration=1, fanin=2))
    target.send(3, contribution(3, 1, seq, garbage, iteration=1 + lead + 1, fanin=2))
    assert_bypassed_unchanged(3, 1 + lead + 1, garbage)
    assert (rt.register_read("agg_count", slot), rt.register_read("agg_iteration", slot)) == (1, 1)
    # ... and the job goes on: a worker at the lead's edge reclaims the slot (stale), the others follow.
    ahead = {w: lanes_of(150 + w) for w in (1, 2)}
    target.send_seq([(w, contribution(w, 1, seq, ahead[w], iteration=1 + lead, fanin=2)) for w in (1, 2)])
    pkt, _ = only(target.recv(1), port=PS_PORT)
    assert pkt.ina.iteration == 1 + lead and np.array_equal(pkt.lanes, wrap_sum(*ahead.values()))
    assert (stat(target, "stale_reclaimed"), stat(target, "lead_bypassed")) == (1, 3)
    assert stat(target, "collision_bypassed") == 0

    # A slot no job used yet (job 0: job ids start at 1) is measured from iteration 0, where every job
    # starts: garbage far ahead does not take it, a genuine first iteration does.
    fresh = slot_index(5, 0, 8)
    target.send(1, contribution(1, 1, 5, lanes_of(160), iteration=1000, fanin=2))
    pkt, _ = only(target.recv(1), port=PS_PORT)
    assert pkt.ina.iteration == 1000 and stat(target, "lead_bypassed") == 4
    assert rt.register_read("agg_count", fresh) == 0
    target.send(1, contribution(1, 1, 5, lanes_of(161), iteration=lead, fanin=2))
    assert target.quiet() == []
    assert (rt.register_read("agg_count", fresh), rt.register_read("agg_iteration", fresh)) == (1, lead)


def test_release_on_result(target):
    rt = target.runtime
    install_routes(rt)
    rt.table_add(aggregate_entry(job=3, release_mode=program.RELEASE_ON_RESULT))
    for worker in (1, 2):
        rt.table_add(TableEntry("ina_result", "ina_release", (3, HOSTS[worker][0]),
                                (("slot_base", 0), ("slot_count", 8), ("mcast_grp", 0))))
    parts = {w: lanes_of(80 + w) for w in (1, 2)}
    slot = slot_index(6, 0, 8)
    target.send_seq([(1, contribution(1, 3, 6, parts[1], fanin=2)), (2, contribution(2, 3, 6, parts[2], fanin=2))])
    pkt, _ = only(target.recv(1), port=PS_PORT)
    assert np.array_equal(pkt.lanes, wrap_sum(parts[1], parts[2]))
    assert rt.register_read("agg_count", slot) == 2           # still held until the RESULT passes
    target.send(1, contribution(1, 3, 6, parts[1], fanin=2))
    assert target.quiet() == []                                # a plain duplicate
    target.send(1, contribution(1, 3, 6, parts[1], fanin=2, flags=FLAG_DATA | FLAG_RETX))
    pkt, _ = only(target.recv(1), port=PS_PORT)                # the aggregate again, slot kept, still RETX
    assert np.array_equal(pkt.lanes, wrap_sum(parts[1], parts[2])) and pkt.ina.count == 2
    assert (pkt.ina.flags, pkt.ina.agg_node, pkt.ina.level) == (FLAG_DATA | FLAG_RETX, PS_NODE, 1)
    assert rt.register_read("agg_count", slot) == 2

    def result(worker, iteration):
        header = InaHeader(job=3, flags=FLAG_RESULT, elems=LANES, agg_node=PS_NODE, count=2, iteration=iteration,
                           seq=6, bitmap=0b110)
        return build_ina_frame(SW_MAC, PS_MAC, PS_IP, HOSTS[worker][0], header, wrap_sum(parts[1], parts[2]))

    target.send(PS_PORT, result(1, iteration=5))               # another iteration's RESULT: no release
    only(target.recv(1), port=1)
    assert rt.register_read("agg_count", slot) == 2 and stat(target, "result_released") == 0
    target.send(PS_PORT, result(1, iteration=0))
    pkt, _ = only(target.recv(1), port=1)                       # forwarded to the worker as unicast
    assert pkt.ina.flags == FLAG_RESULT and pkt.ttl == 63 and pkt.dst_mac == HOSTS[1][1]
    assert rt.register_read("agg_count", slot) == 0 and rt.register_read("agg_bitmap", slot) == 0
    assert stat(target, "result_released") == 1
    target.send(PS_PORT, result(2, iteration=0))                # the second worker's copy: nothing left to free
    only(target.recv(1), port=2)
    assert stat(target, "result_released") == 1


SHADOW_FRAGMENTS, SHADOW_POOL = 8, 4      # a job of 8 fragments per iteration, a pool of 4 slots (8 copies)


def shadow_contribution(worker, seq, lanes, iteration=0, flags=FLAG_DATA):
    slot, version = shadow_slot(seq, iteration, SHADOW_FRAGMENTS, 0, SHADOW_POOL)
    return contribution(worker, 4, seq, lanes, iteration=iteration, fanin=2, slot=slot,
                        flags=flags | (FLAG_SHADOW if version else 0))


def test_shadow_copy_keeps_the_aggregate_and_answers_a_retransmission_with_it(target):
    """SwitchML's shadow copies (RELEASE_SHADOW): a complete copy keeps its aggregate. Until its PS's RESULT
    passes (ina_shadow_result marks the copy resulted), a RETX duplicate sends the aggregate to the PS again;
    after, the switch answers it with the aggregate, as the RESULT, back to its sender."""
    rt = target.runtime
    install_routes(rt)
    rt.table_add(aggregate_entry(job=4, count=2 * SHADOW_POOL, release_mode=program.RELEASE_SHADOW))
    for worker in (1, 2):
        rt.table_add(TableEntry("ina_result", "ina_shadow_result", (4, HOSTS[worker][0]),
                                (("slot_base", 0), ("pool", SHADOW_POOL), ("mcast_grp", 0))))
    assert shadow_slot(1, 0, SHADOW_FRAGMENTS, 0, SHADOW_POOL) == (2, 0)     # pool slot 1, copy 0
    parts = {w: lanes_of(300 + w) for w in (1, 2)}
    total = wrap_sum(parts[1], parts[2])
    target.send_seq([(1, shadow_contribution(1, 1, parts[1])), (2, shadow_contribution(2, 1, parts[2]))])
    pkt, _ = only(target.recv(1), port=PS_PORT)
    assert np.array_equal(pkt.lanes, total) and pkt.ina.count == 2
    assert rt.register_read("agg_count", 2) == 2                   # kept: the copy is the result
    target.send(1, shadow_contribution(1, 1, parts[1]))
    assert target.quiet() == []                                    # a plain duplicate
    target.send(1, shadow_contribution(1, 1, parts[1], flags=FLAG_DATA | FLAG_RETX))
    pkt, _ = only(target.recv(1), port=PS_PORT)                   # not resulted: the aggregate to the PS again
    assert np.array_equal(pkt.lanes, total) and pkt.ina.flags == FLAG_DATA | FLAG_RETX and pkt.ina.count == 2
    assert rt.register_read("agg_resulted", 2) == 0

    def result(worker, iteration):
        header = InaHeader(job=4, flags=FLAG_RESULT, elems=LANES, agg_node=PS_NODE, count=2, iteration=iteration,
                           seq=1, bitmap=0b110)
        return build_ina_frame(SW_MAC, PS_MAC, PS_IP, HOSTS[worker][0], header, total)

    target.send(PS_PORT, result(2, iteration=3))                   # another iteration's RESULT: no mark
    only(target.recv(1), port=2)
    assert rt.register_read("agg_resulted", 2) == 0
    target.send(PS_PORT, result(2, iteration=0))                   # lost after this switch, say
    only(target.recv(1), port=2)
    assert rt.register_read("agg_resulted", 2) == 1 and rt.register_read("agg_count", 2) == 2
    target.send(1, shadow_contribution(1, 1, parts[1], flags=FLAG_DATA | FLAG_RETX))
    pkt, frame = only(target.recv(1), port=1)
    assert np.array_equal(pkt.lanes, wrap_sum(parts[1], parts[2]))
    assert (pkt.ina.flags, pkt.ina.count, pkt.ina.bitmap, pkt.ina.seq, pkt.ina.job) == (FLAG_RESULT, 2, 0b110, 1, 4)
    assert (pkt.src_ip, pkt.dst_ip, pkt.dst_mac, pkt.ttl) == (SW_ADDR, HOSTS[1][0], HOSTS[1][1], 63)
    assert pkt.ip_checksum_ok and udp_checksum_of(frame) == 0
    assert (stat(target, "shadow_answered"), stat(target, "partial_flushed"), stat(target, "emitted")) == (1, 1, 2)
    assert rt.counter_read("port_ina_tx", 1)[0] == 0               # a RESULT, not a gradient
    assert rt.register_read("agg_count", 2) == 2


def test_shadow_copies_alternate_and_a_newer_use_reclaims_a_copy(target):
    """The next use of a pool slot takes the other copy, leaving the first one whole; the use after takes the
    first copy back (stale_reclaimed); a retransmission older than what a copy holds goes on to the PS."""
    rt = target.runtime
    install_routes(rt)
    rt.table_add(aggregate_entry(job=4, count=2 * SHADOW_POOL, release_mode=program.RELEASE_SHADOW))
    parts = {w: lanes_of(310 + w) for w in (1, 2)}
    target.send_seq([(1, shadow_contribution(1, 1, parts[1])), (2, shadow_contribution(2, 1, parts[2]))])
    only(target.recv(1), port=PS_PORT)
    # seq 5 is pool slot 1's next use: copy 1 (slot 3), flagged SHADOW; a RETX that finds it free claims it.
    assert shadow_slot(5, 0, SHADOW_FRAGMENTS, 0, SHADOW_POOL) == (3, 1)
    target.send(1, shadow_contribution(1, 5, parts[1], flags=FLAG_DATA | FLAG_RETX))
    assert target.quiet() == []
    assert rt.register_read("agg_count", 3) == 1 and rt.register_read("agg_count", 2) == 2
    target.send(2, shadow_contribution(2, 5, parts[2]))
    pkt, _ = only(target.recv(1), port=PS_PORT)
    assert pkt.ina.seq == 5 and np.array_equal(pkt.lanes, wrap_sum(parts[1], parts[2]))
    # Iteration 1's seq 1 is the use after: copy 0 again, reclaimed from iteration 0's seq 1.
    assert shadow_slot(1, 1, SHADOW_FRAGMENTS, 0, SHADOW_POOL) == (2, 0)
    target.send(1, shadow_contribution(1, 1, parts[1], iteration=1))
    assert target.quiet() == []
    assert (rt.register_read("agg_count", 2), rt.register_read("agg_iteration", 2)) == (1, 1)
    assert stat(target, "stale_reclaimed") == 1
    # A late retransmission of iteration 0's seq 1 finds a newer use there: on to the PS.
    target.send(2, shadow_contribution(2, 1, parts[2], flags=FLAG_DATA | FLAG_RETX))
    pkt, _ = only(target.recv(1), port=PS_PORT)
    assert pkt.ina.flags & FLAG_COLLISION and pkt.ina.iteration == 0 and np.array_equal(pkt.lanes, parts[2])
    assert (rt.register_read("agg_count", 2), stat(target, "shadow_answered")) == (1, 0)


def test_multicast_of_results(target):
    rt = target.runtime
    install_routes(rt)
    rt.mc_group_create(5, [1, 2, 3])
    rt.table_add(TableEntry("ina_result", "ina_multicast", (9, GROUP_IP), (("mcast_grp", 5),)))
    for port in (1, 2, 3):
        ip, mac = HOSTS[port]
        rt.table_add(TableEntry("ina_mcast_rewrite", "mcast_rewrite", (port,), (("dstAddr", mac), ("ipDstAddr", ip))))
    lanes = lanes_of(90)
    header = InaHeader(job=9, flags=FLAG_RESULT, elems=LANES, agg_node=PS_NODE, count=3, seq=11, bitmap=0b1110)
    target.send(PS_PORT, build_ina_frame(SW_MAC, PS_MAC, PS_IP, GROUP_IP, header, lanes))
    out = target.recv(3)
    assert sorted(port for port, _ in out) == [1, 2, 3]
    for port, frame in out:
        pkt = parse_frame(frame)
        assert (pkt.dst_ip, pkt.dst_mac) == HOSTS[port]
        assert (pkt.src_ip, pkt.ttl, pkt.ina.seq, pkt.ina.flags) == (PS_IP, 63, 11, FLAG_RESULT)
        assert np.array_equal(pkt.lanes, lanes) and pkt.ip_checksum_ok and udp_checksum_of(frame) == 0
    assert stat(target, "multicast") == 1
    assert sum(rt.counter_read("port_ina_tx", p)[0] for p in (1, 2, 3)) == 0     # RESULTs are not gradients
    # A RESULT entering from port 1 is never sent back out of port 1.
    target.send(1, build_ina_frame(SW_MAC, HOSTS[1][1], HOSTS[1][0], GROUP_IP, header, lanes))
    assert sorted(port for port, _ in target.recv(2)) == [2, 3]
    assert target.quiet() == []
    assert rt.register_read("switch_wait", program.WAIT_PACKETS) == 5      # the pruned copy waited for nothing
    # No ina_result entry: a RESULT is plain unicast.
    target.send(PS_PORT, build_ina_frame(SW_MAC, PS_MAC, PS_IP, HOSTS[2][0], InaHeader(job=10, flags=FLAG_RESULT,
                                                                                         elems=4), lanes[:4]))
    only(target.recv(1), port=2)


# -- queues and capacity --------------------------------------------------------------------

def test_ecn_marking_on_queue_depth(target):
    rt = target.runtime
    install_routes(rt)
    rt.register_write("ecn_threshold", 0, 2)
    rt.set_port_shaping(2, 80_000, 64)            # 10 kB/s: 1000-byte frames queue up
    src_ip, src_mac = HOSTS[1]

    def frame(ecn, tag):
        return build_frame(SW_MAC, src_mac, src_ip, HOSTS[2][0], bytes([tag]) * 958, src_port=5000, dst_port=5001,
                           ecn=ecn)

    burst = [frame(2, i) for i in range(8)] + [frame(0, 100)]   # 8 ECT(0) frames, then one not ECN-capable
    target.send_seq([(1, f) for f in burst])
    out = target.recv(len(burst), timeout_s=5.0)
    assert len(out) == len(burst) and all(port == 2 for port, _ in out)
    ecn = [parse_frame(f).ecn for _, f in out]
    assert ecn[0] == 2 and ecn[-1] == 0                    # an empty queue marks nothing; non-ECT never
    assert ecn[-5:-1] == [3, 3, 3, 3]                      # the deep end of the queue is CE
    assert all(parse_frame(f).ip_checksum_ok for _, f in out)
    assert rt.counter_read("port_ecn_marked", 2)[0] == ecn.count(3)


def test_switch_wait_counts_what_reached_an_egress_queue(target):
    """``switch_wait``: packets that reached an egress queue, their summed and longest wait between the
    switch's receipt and the queue (microseconds); a packet dropped in Ingress is not in it."""
    rt = target.runtime
    install_routes(rt)
    src_ip, src_mac = HOSTS[1]
    frames = [build_frame(SW_MAC, src_mac, src_ip, HOSTS[2][0], bytes([tag]) * 100, src_port=5000, dst_port=5001)
              for tag in range(5)]
    frames.append(build_frame(SW_MAC, src_mac, src_ip, "10.9.9.9", b"x" * 100, src_port=5000, dst_port=5001))
    target.send_seq([(1, f) for f in frames])
    assert len(target.recv(5)) == 5 and target.quiet() == []
    packets, total_us, longest_us = rt.register_read_all("switch_wait")
    assert packets == 5 and longest_us <= total_us < 5 * 1_000_000
    assert rt.register_read("switch_wait", program.WAIT_PACKETS) == 5


def test_aggregation_capacity_cap(target):
    rt = target.runtime
    install_routes(rt)
    rt.table_add(aggregate_entry(job=1, count=16))
    rt.meter_set_rates("agg_capacity", 0, 1.0, 4)          # 1 aggregation per second, burst of 4
    frames = [(1, contribution(1, 1, seq, lanes_of(100 + seq), fanin=2, count=16)) for seq in range(10)]
    target.send_seq(frames)
    out = target.recv(10, timeout_s=2.0)
    aggregated = stat(target, "aggregated")
    assert aggregated == 4 if target.name.startswith("pyswitch") else 4 <= aggregated <= 5
    assert len(out) == 10 - aggregated == stat(target, "capacity_bypassed")
    for port, frame in out:
        pkt = parse_frame(frame)
        assert port == PS_PORT and pkt.ina.flags == FLAG_DATA | FLAG_CAPACITY and pkt.dst_ip == PS_IP
        assert np.array_equal(pkt.lanes, lanes_of(100 + pkt.ina.seq))
    assert sorted(parse_frame(f).ina.seq for _, f in out) == list(range(aggregated, 10))


def test_capacity_refuses_whole_fragments_never_a_contribution_of_one_in_progress(target):
    """Out of tokens, a fragment's first contribution goes to the PS and its siblings follow it; a fragment
    already started completes here (the tokens it finds gone or not), so no partial waits for a sibling that
    went ahead."""
    rt = target.runtime
    install_routes(rt)
    rt.table_add(aggregate_entry(job=1, count=16))
    rt.meter_set_rates("agg_capacity", 0, 0.001, 1)        # one token, none for another ~1000 s
    a1, a2, b1, b2 = (lanes_of(10), lanes_of(11), lanes_of(20), lanes_of(21))
    target.send_seq([(1, contribution(1, 1, 0, a1, fanin=2, count=16)),    # takes the token: claims slot 0
                     (1, contribution(1, 1, 1, b1, fanin=2, count=16)),    # none left: seq 1 goes to the PS
                     (2, contribution(2, 1, 0, a2, fanin=2, count=16)),    # completes seq 0 all the same
                     (2, contribution(2, 1, 1, b2, fanin=2, count=16))])   # follows its sibling to the PS
    out = [parse_frame(f) for port, f in target.recv(3, timeout_s=2.0) if port == PS_PORT]
    assert len(out) == 3
    (aggregate,) = [p for p in out if p.ina.seq == 0]
    assert aggregate.ina.count == 2 and np.array_equal(aggregate.lanes, (a1.astype(np.int64) + a2).astype(np.int32))
    raw = sorted((p.ina.bitmap, p.ina.flags) for p in out if p.ina.seq == 1)
    assert raw == [(1 << 1, FLAG_DATA | FLAG_CAPACITY), (1 << 2, FLAG_DATA)]
    assert (stat(target, "capacity_bypassed"), stat(target, "retx_bypassed"), stat(target, "emitted")) == (1, 1, 1)


#: An overflow target that is a switch (ATP's level 2): its address (reached through port 3), agg_node, fan-in and
#: slot range, as the controller installs it from the policy's bypass_hop.
LEVEL2 = (HOSTS[3][0], 7, 5, 100, 16)


def test_overflow_goes_to_the_level_two_switch_addressed_as_its_contribution(target):
    """A collision overflows to the policy's bypass_hop: the packet leaves for it with agg_node, fan-in and slot
    rewritten to the target's (slot = its base + seq mod its count), so the level-2 switch aggregates it."""
    rt = target.runtime
    install_routes(rt)
    rt.table_add(aggregate_entry(job=1, count=1, overflow=LEVEL2))
    target.send_seq([(1, contribution(1, 1, 0, lanes_of(0), fanin=2, count=1)),       # claims the one slot
                     (1, contribution(1, 1, 5, lanes_of(5), fanin=2, count=1))])      # collides
    ((port, frame),) = target.recv(1, timeout_s=2.0)
    pkt = parse_frame(frame)
    assert port == 3 and pkt.dst_ip == LEVEL2[0] and pkt.ina.flags == FLAG_DATA | FLAG_COLLISION
    assert (pkt.ina.agg_node, pkt.ina.fanin, pkt.ina.slot, pkt.ina.seq) == (7, 5, 100 + 5 % 16, 5)
    assert pkt.ina.count == 1 and pkt.ina.bitmap == 1 << 1 and np.array_equal(pkt.lanes, lanes_of(5))
    assert stat(target, "collision_bypassed") == 1


def test_a_capacity_refusal_and_its_siblings_overflow_to_level_two_and_resent_fragments_to_the_ps(target):
    rt = target.runtime
    install_routes(rt)
    rt.table_add(aggregate_entry(job=1, count=16, overflow=LEVEL2))
    rt.meter_set_rates("agg_capacity", 0, 0.001, 1)        # one token, none for another ~1000 s
    target.send_seq([(1, contribution(1, 1, 0, lanes_of(0), fanin=2, count=16)),     # takes the token
                     (1, contribution(1, 1, 1, lanes_of(1), fanin=2, count=16)),     # refused: to level 2
                     (2, contribution(2, 1, 1, lanes_of(2), fanin=2, count=16)),     # its sibling follows
                     (2, contribution(2, 1, 1, lanes_of(2), fanin=2, count=16, flags=FLAG_DATA | FLAG_RETX))])
    out = [(port, parse_frame(f)) for port, f in target.recv(3, timeout_s=2.0)]
    to_level2 = sorted((p.ina.bitmap, p.ina.flags, p.ina.agg_node, p.ina.fanin) for port, p in out if port == 3)
    assert to_level2 == [(1 << 1, FLAG_DATA | FLAG_CAPACITY, 7, 5), (1 << 2, FLAG_DATA, 7, 5)]
    ((_, resent),) = [(port, p) for port, p in out if port == PS_PORT]
    assert resent.ina.flags == FLAG_DATA | FLAG_RETX and (resent.ina.agg_node, resent.ina.fanin) == (SW_NODE, 2)


# -- ESA: preemption of a slot by a contribution of higher rank -------------------------------------

def esa_setup(rt, jobs, release_mode=program.RELEASE_ON_RESULT):
    """``jobs``: {job: (priority, submodel, fanin here, overflow target)}; every job's range is slots 0-3."""
    install_routes(rt)
    for job, (priority, submodel, fanin, overflow) in jobs.items():
        rt.table_add(aggregate_entry(job=job, count=4, submodel=submodel, overflow=overflow,
                                     release_mode=release_mode))
        rt.table_add(TableEntry("esa_job", "esa_enable", (job,), (("priority", priority),)))
        rt.table_add(TableEntry("esa_evict", "esa_evict_to", (job, submodel), tuple(zip(
            ("priority", "fanin", "overflow_dst", "overflow_agg_node", "overflow_fanin", "overflow_slot_base",
             "overflow_slot_count"), (priority, fanin) + tuple(overflow)))))


def test_esa_a_job_of_higher_priority_evicts_the_partial_toward_its_overflow_target(target):
    """Job 2 (priority 5) collides with job 1's partial (priority 0, sub-model 1, two of three contributions):
    the slot takes job 2's contribution, and the packet leaves as job 1's partial (its tag, sub-model, count,
    bitmap and lanes; flags DATA | EVICTED, level 1, from the switch) toward job 1's overflow target (ATP's
    level 2, addressed as its contribution). Job 1's late sibling then collides; job 2 completes in the slot."""
    rt = target.runtime
    esa_setup(rt, {1: (0, 1, 3, LEVEL2), 2: (5, 0, 3, (PS_IP, 0, 0, 0, 0))})
    a = {w: lanes_of(90 + w) for w in (1, 2, 3)}
    b = {w: lanes_of(95 + w) for w in (1, 2, 3)}
    target.send_seq([(1, contribution(1, 1, 4, a[1], count=4, submodel=1)),
                     (2, contribution(2, 1, 4, a[2], count=4, submodel=1)),
                     (3, contribution(3, 2, 0, b[3], count=4))])              # slot 0: job 2 outranks job 1
    pkt, frame = only(target.recv(1), port=3)
    assert (pkt.src_ip, pkt.dst_ip, udp_checksum_of(frame)) == (SW_ADDR, LEVEL2[0], 0)
    assert (pkt.ina.job, pkt.ina.flags, pkt.ina.level, pkt.ina.submodel, pkt.ina.seq) == \
        (1, FLAG_DATA | FLAG_EVICTED, 1, 1, 4)
    assert (pkt.ina.count, pkt.ina.bitmap) == (2, 0b110)
    assert (pkt.ina.agg_node, pkt.ina.fanin, pkt.ina.slot) == (7, 5, 100 + 4 % 16)
    assert np.array_equal(pkt.lanes, wrap_sum(a[1], a[2]))
    assert [rt.register_read(name, 0) for name in ("agg_job", "agg_seq", "agg_count", "agg_bitmap",
                                                   "agg_submodel", "agg_elems")] == [2, 0, 1, 1 << 3, 0, LANES]
    assert (stat(target, "esa_evicted"), stat(target, "collision_bypassed")) == (1, 0)
    target.send(3, contribution(3, 1, 4, a[3], count=4, submodel=1))         # job 1's sibling: outranked
    pkt, _ = only(target.recv(1), port=3)
    assert (pkt.ina.job, pkt.ina.flags, pkt.ina.agg_node) == (1, FLAG_DATA | FLAG_COLLISION, 7)
    target.send_seq([(1, contribution(1, 2, 0, b[1], count=4)), (2, contribution(2, 2, 0, b[2], count=4))])
    pkt, _ = only(target.recv(1), port=PS_PORT)
    assert (pkt.ina.job, pkt.ina.flags, pkt.ina.count, pkt.ina.bitmap) == (2, FLAG_DATA, 3, 0b1110)
    assert np.array_equal(pkt.lanes, wrap_sum(b[1], b[2], b[3]))
    assert (stat(target, "esa_evicted"), stat(target, "collision_bypassed")) == (1, 1)


def test_esa_an_evicted_partials_late_sibling_follows_it_once_the_slot_is_free(target):
    """Job 2 evicts job 1's partial of seq 4 and completes in the slot, which its emit frees. Job 1's late
    sibling of seq 4 then finds the slot free: it follows the evicted partial to the overflow target rather
    than start a partial whose other half left with the eviction."""
    rt = target.runtime
    to_ps = (PS_IP, 0, 0, 0, 0)
    esa_setup(rt, {1: (0, 0, 2, to_ps), 2: (5, 0, 2, to_ps)}, release_mode=program.RELEASE_ON_EMIT)
    target.send_seq([(1, contribution(1, 1, 4, lanes_of(101), count=4, fanin=2)),
                     (2, contribution(2, 2, 0, lanes_of(102), count=4, fanin=2))])       # evicts job 1's seq 4
    evicted, _ = only(target.recv(1), port=PS_PORT)
    assert (evicted.ina.job, evicted.ina.seq, evicted.ina.flags) == (1, 4, FLAG_DATA | FLAG_EVICTED)
    target.send(3, contribution(3, 2, 0, lanes_of(103), count=4, fanin=2))
    done, _ = only(target.recv(1), port=PS_PORT)
    assert (done.ina.job, done.ina.count) == (2, 2) and rt.register_read("agg_count", 0) == 0
    target.send(2, contribution(2, 1, 4, lanes_of(104), count=4, fanin=2))             # the late sibling
    pkt, _ = only(target.recv(1), port=PS_PORT)
    assert (pkt.ina.job, pkt.ina.seq, pkt.ina.flags, pkt.ina.bitmap) == (1, 4, FLAG_DATA, 1 << 2)
    assert np.array_equal(pkt.lanes, lanes_of(104))
    assert stat(target, "overflow_followed") == 1 and rt.register_read("agg_count", 0) == 0


def test_esa_within_a_job_the_older_fragment_evicts_and_equal_ranks_collide(target):
    """Same priority: job 1's seq 0 evicts its own seq 4 (older first; to the PS, header otherwise as it
    was), a newer seq 8 collides, and job 2 (another job of equal priority) collides too."""
    rt = target.runtime
    to_ps = (PS_IP, 0, 0, 0, 0)
    esa_setup(rt, {1: (0, 0, 3, to_ps), 2: (0, 0, 3, to_ps)})
    newer, older = lanes_of(70), lanes_of(71)
    target.send_seq([(1, contribution(1, 1, 4, newer, count=4)), (2, contribution(2, 1, 0, older, count=4))])
    pkt, _ = only(target.recv(1), port=PS_PORT)
    assert (pkt.ina.job, pkt.ina.seq, pkt.ina.flags, pkt.ina.count, pkt.ina.bitmap) == \
        (1, 4, FLAG_DATA | FLAG_EVICTED, 1, 1 << 1)
    assert (pkt.ina.agg_node, pkt.ina.fanin, pkt.src_ip) == (SW_NODE, 3, SW_ADDR)
    assert np.array_equal(pkt.lanes, newer)
    assert (rt.register_read("agg_seq", 0), rt.register_read("agg_bitmap", 0)) == (0, 1 << 2)
    target.send_seq([(3, contribution(3, 1, 8, lanes_of(72), count=4)),
                     (3, contribution(3, 2, 0, lanes_of(73), count=4))])
    out = sorted((p.ina.job, p.ina.seq, p.ina.flags) for p in (parse_frame(f) for _, f in target.recv(2)))
    assert out == [(1, 8, FLAG_DATA | FLAG_COLLISION), (2, 0, FLAG_DATA | FLAG_COLLISION)]
    assert (stat(target, "esa_evicted"), stat(target, "collision_bypassed")) == (1, 2)


def test_esa_never_evicts_a_complete_slot_for_a_retransmission_or_without_both_entries(target):
    rt = target.runtime
    to_ps = (PS_IP, 0, 0, 0, 0)
    esa_setup(rt, {1: (0, 0, 2, to_ps), 2: (5, 0, 3, to_ps)})
    rt.table_add(aggregate_entry(job=3, count=4))               # no esa_job / esa_evict entry
    rt.table_add(TableEntry("esa_job", "esa_enable", (4,), (("priority", 9),)))
    rt.table_add(aggregate_entry(job=4, count=4))               # opted in, but its slots are not evictable
    # slot 0: job 1's seq 0 completes (kept until its RESULT); slot 1: job 1's seq 1, incomplete;
    # slot 2: job 3's seq 2, incomplete; slot 3: job 4's seq 3, incomplete
    target.send_seq([(1, contribution(1, 1, 0, lanes_of(1), fanin=2, count=4)),
                     (2, contribution(2, 1, 0, lanes_of(2), fanin=2, count=4)),
                     (1, contribution(1, 1, 1, lanes_of(3), fanin=2, count=4)),
                     (1, contribution(1, 3, 2, lanes_of(4), count=4)),
                     (1, contribution(1, 4, 3, lanes_of(5), count=4))])
    only(target.recv(1), port=PS_PORT)                           # job 1's seq 0 aggregate
    target.send_seq([(3, contribution(3, 2, 0, lanes_of(6), count=4)),          # complete: not evicted
                     (3, contribution(3, 2, 1, lanes_of(7), count=4, flags=FLAG_DATA | FLAG_RETX)),  # a RETX
                     (3, contribution(3, 2, 5, lanes_of(8), count=4, fanin=1)),  # would complete on its own
                     (3, contribution(3, 2, 1, lanes_of(9)[:LANES - 1], count=4)),  # other lanes
                     (3, contribution(3, 2, 2, lanes_of(10), count=4)),         # job 3 has no esa_evict entry
                     (2, contribution(2, 3, 1, lanes_of(11), count=4)),         # job 3 has no esa_job entry
                     (2, contribution(2, 2, 3, lanes_of(12), count=4))])        # job 4 has no esa_evict entry
    out = [parse_frame(f) for _, f in target.recv(7)]
    assert sorted((p.ina.job, p.ina.seq) for p in out) == [(2, 0), (2, 1), (2, 1), (2, 2), (2, 3), (2, 5), (3, 1)]
    assert all(p.ina.flags & FLAG_COLLISION and not p.ina.flags & FLAG_EVICTED for p in out)
    assert (stat(target, "esa_evicted"), stat(target, "collision_bypassed")) == (0, 7)
    assert [rt.register_read("agg_job", slot) for slot in range(4)] == [1, 1, 3, 4]


# -- link impairments ------------------------------------------------------------------------

def gradient(seq, worker=1, elems=4, ecn=0):
    """A gradient packet of ``worker`` to the PS, which the switch forwards as it is (no ina_filter entry)."""
    ip, mac = HOSTS[worker]
    header = InaHeader(job=1, flags=FLAG_DATA, elems=elems, agg_node=PS_NODE, fanin=1, count=1, seq=seq,
                       bitmap=1 << worker)
    return build_ina_frame(SW_MAC, mac, ip, PS_IP, header, lanes_of(seq, elems), ecn=ecn)


def impairment_counts(target, port):
    return {label: target.runtime.counter_read(counter, port)[0] for label, counter in program.IMPAIR_COUNTERS.items()}


def seqs_of(frames, port=PS_PORT):
    assert all(p == port for p, _ in frames), [p for p, _ in frames]
    return [parse_frame(f).ina.seq for _, f in frames]


def binomial_bounds(n, p, sds=5.0):
    """[low, high] of a Binomial(n, p) count, ``sds`` standard deviations either side of the mean."""
    spread = sds * math.sqrt(n * p * (1 - p))
    return n * p - spread, n * p + spread


def test_impairment_drop_one_loses_everything_probability_zero_nothing(target):
    """drop 1: nothing leaves the port, every packet counted (after port_ina_tx: it was sent, the link lost
    it); a port whose probabilities are all 0 is untouched and not reported."""
    rt = target.runtime
    install_routes(rt)
    rt.set_port_impairment(PS_PORT, 1.0, 0.0, 0.0, 1)
    rt.set_port_impairment(2, 0.0, 0.0, 0.0, 1)
    n = 20
    to_ps = [(1, gradient(seq)) for seq in range(n)]
    to_w2 = [(1, build_frame(SW_MAC, HOSTS[1][1], HOSTS[1][0], HOSTS[2][0], bytes([seq]) * 60, src_port=5000,
                             dst_port=5001)) for seq in range(n)]
    target.send_seq(to_ps + to_w2)
    out = target.recv(n, timeout_s=3.0) + target.quiet()
    assert [port for port, _ in out] == [2] * n                               # none to the PS
    assert [frame[42] for _, frame in out] == list(range(n))                  # port 2: each once, in order
    assert all(parse_frame(f).ttl == 63 and parse_frame(f).ip_checksum_ok for _, f in out)
    assert impairment_counts(target, PS_PORT) == {"dropped": n, "duplicated": 0, "reordered": 0}
    assert impairment_counts(target, 2) == {"dropped": 0, "duplicated": 0, "reordered": 0}
    assert rt.counter_read("port_ina_tx", PS_PORT)[0] == n
    assert rt.counters()["impairment"] == {PS_PORT: {"dropped": n, "duplicated": 0, "reordered": 0}}


def test_impairment_duplicate_one_sends_each_packet_twice_counted_and_marked_once(target):
    """duplicate 1 on a shaped port with ECN marking: every packet leaves twice, the copy identical to the
    packet as it left (CE included), yet port_ina_tx and port_ecn_marked count it once."""
    rt = target.runtime
    install_routes(rt)
    rt.register_write("ecn_threshold", 0, 2)
    rt.set_port_shaping(PS_PORT, 80_000, 64)         # 10 kB/s: a burst of INA frames queues up
    rt.set_port_impairment(PS_PORT, 0.0, 1.0, 0.0, 1)
    n = 8
    target.send_seq([(1, gradient(seq, elems=LANES, ecn=2)) for seq in range(n)])
    out = target.recv(2 * n, timeout_s=8.0) + target.quiet()
    copies = collections.defaultdict(list)
    for seq, (_, frame) in zip(seqs_of(out), out):
        copies[seq].append(frame)
    assert sorted(copies) == list(range(n)) and all(len(c) == 2 for c in copies.values())
    assert all(a == b for a, b in copies.values())
    assert all(parse_frame(f).ttl == 63 and parse_frame(f).ip_checksum_ok for _, f in out)
    marked = sum(parse_frame(a).ecn == 3 for a, _ in copies.values())
    assert marked >= 1                                  # the queue built up, so the marking rule was exercised
    assert rt.counter_read("port_ecn_marked", PS_PORT)[0] == marked
    assert rt.counter_read("port_ina_tx", PS_PORT)[0] == n
    assert impairment_counts(target, PS_PORT) == {"dropped": 0, "duplicated": n, "reordered": 0}


def test_impairment_reorder_one_sends_each_packet_once(target):
    """reorder 1: every packet goes round once more (bmv2: recirculated) and leaves exactly once, with its
    first pass's TTL; Ingress counts it once, Egress once."""
    rt = target.runtime
    install_routes(rt)
    rt.set_port_impairment(PS_PORT, 0.0, 0.0, 1.0, 1)
    n = 20
    target.send_seq([(1, gradient(seq)) for seq in range(n)])
    out = target.recv(n, timeout_s=3.0) + target.quiet()
    assert sorted(seqs_of(out)) == list(range(n))
    assert all(parse_frame(f).ttl == 63 and parse_frame(f).ip_checksum_ok for _, f in out)
    assert impairment_counts(target, PS_PORT) == {"dropped": 0, "duplicated": 0, "reordered": n}
    assert rt.counter_read("port_ina_tx", PS_PORT)[0] == n
    assert (stat(target, "ina_rx"), stat(target, "forwarded")) == (n, n)


def test_impairment_probabilities_are_drawn_per_packet(target):
    """0.3 of each over 300 packets: what leaves matches the counters exactly, and the counts lie within
    5 standard deviations of their binomial means (duplication and reordering are drawn for the packets
    the loss spared)."""
    rt = target.runtime
    install_routes(rt)
    rt.set_port_impairment(PS_PORT, 0.3, 0.3, 0.3, 5)
    n, batch = 300, 20              # batches: a bmv2 port queue (64 packets) never fills with copies
    out = []
    for start in range(0, n, batch):
        target.send_seq([(1, gradient(seq)) for seq in range(start, start + batch)])
        out += target.quiet(0.1)
    out += target.quiet(0.5)
    counts = impairment_counts(target, PS_PORT)
    seen = collections.Counter(seqs_of(out))
    assert len(out) == n - counts["dropped"] + counts["duplicated"]
    assert len(seen) == n - counts["dropped"] and max(seen.values()) <= 2
    assert sum(1 for c in seen.values() if c == 2) == counts["duplicated"]
    assert rt.counter_read("port_ina_tx", PS_PORT)[0] == n
    low, high = binomial_bounds(n, 0.3)
    assert low <= counts["dropped"] <= high, counts
    survivors = n - counts["dropped"]
    for label in ("duplicated", "reordered"):
        low, high = binomial_bounds(survivors, 0.3)
        assert low <= counts[label] <= high, counts


def test_duplicate_without_its_mirror_session_is_counted_but_not_sent(target):
    """The impair_duplicate register alone (no set_port_impairment, so no mirror session): the clone goes
    nowhere, as bmv2 drops a clone to an unconfigured session; the draw is still counted."""
    rt = target.runtime
    install_routes(rt)
    rt.register_write("impair_duplicate", PS_PORT, program.IMPAIR_SCALE)
    target.send_seq([(1, gradient(seq)) for seq in range(4)])
    out = target.recv(4, timeout_s=3.0) + target.quiet()
    assert seqs_of(out) == [0, 1, 2, 3]
    assert impairment_counts(target, PS_PORT) == {"dropped": 0, "duplicated": 4, "reordered": 0}


# -- PA-ATP (GACKs, progress, AECN) ----------------------------------------------------------

PA_JOB = 5
PA_INDEX = 2          # a row other than 0: the register layout (pa_index x PA_WORKERS + worker) is exercised


def pa_setup(rt, job=PA_JOB, pa_index=PA_INDEX, aecn=1, count=8, sessions=(1, 2, 3), **entry):
    """Routes, the job's ina_aggregate entry, its PA-ATP opt-in and the GACK mirror sessions of ``sessions``."""
    install_routes(rt)
    rt.table_add(aggregate_entry(job=job, count=count, **entry))
    rt.table_add(TableEntry("pa_job", "pa_enable", (job,), (("pa_index", pa_index), ("aecn", aecn))))
    for port in sessions:
        rt.mirroring_add(program.gack_session(port), port)


def ina_of(frame):
    """The INA header of any frame (a GACK may go to a UDP port other than the INA port)."""
    return InaHeader.unpack(frame, INA_OFFSET)


def assert_gack_of(frame, worker, job, seq, progress, ce=False, iteration=0, fanin=3, src_port=INA_UDP_PORT):
    """``frame`` is the switch's GACK of ``worker``'s gradient: its headers back, without lanes."""
    ip, mac = HOSTS[worker]
    pkt = parse_frame(frame)
    ina = ina_of(frame)
    assert len(frame) == PAYLOAD_OFFSET                                     # no lanes
    assert ina.flags == (FLAG_GACK | FLAG_ECN_ECHO if ce else FLAG_GACK)
    assert (ina.job, ina.seq, ina.iteration, ina.fanin, ina.progress) == (job, seq, iteration, fanin, progress)
    assert (ina.elems, ina.bitmap, ina.count, ina.level, ina.agg_node) == (0, 1 << worker, 1, 0, SW_NODE)
    assert (pkt.src_ip, pkt.dst_ip, pkt.src_mac, pkt.dst_mac) == (SW_ADDR, ip, SW_MAC, mac)
    assert (pkt.ttl, pkt.ecn, pkt.ip_checksum_ok) == (program.GACK_TTL, 0, True)
    assert int.from_bytes(frame[16:18], "big") == program.GACK_IPV4_BYTES
    assert int.from_bytes(frame[38:40], "big") == program.GACK_UDP_BYTES and udp_checksum_of(frame) == 0
    assert (int.from_bytes(frame[34:36], "big"), pkt.dst_port) == (INA_UDP_PORT, src_port)


def test_pa_atp_retx_of_a_contribution_the_partial_lacks_still_joins(target):
    """PA-ATP's jobs keep the join a plain job's RETX may not make (see the test above): a GACKed member
    retransmits only on an AACK gap or its hold timer, so a partial the resent gradient skipped would wait
    for one."""
    rt = target.runtime
    pa_setup(rt, aecn=0)
    parts = {w: lanes_of(35 + w) for w in (1, 2, 3)}
    target.send_seq([(1, contribution(1, PA_JOB, 9, parts[1])), (2, contribution(2, PA_JOB, 9, parts[2]))])
    assert sorted(p for p, _ in target.recv(2)) == [1, 2]           # their GACKs
    target.send(3, contribution(3, PA_JOB, 9, parts[3], flags=FLAG_DATA | FLAG_RETX))
    frames = target.recv(2)
    aggregate = [parse_frame(f) for p, f in frames if p == PS_PORT]
    assert len(aggregate) == 1 and aggregate[0].ina.bitmap == 0b1110
    assert np.array_equal(aggregate[0].lanes, wrap_sum(parts[1], parts[2], parts[3]))
    assert [p for p, _ in frames if p != PS_PORT] == [3]            # the resent gradient's GACK
    assert stat(target, "retx_bypassed") == 0


def result_frame(job, seq, worker=1, lanes=None, iteration=0):
    """The PS's RESULT (AACK) of ``seq`` to ``worker``, unicast through the switch."""
    lanes = lanes_of(300 + seq) if lanes is None else lanes
    header = InaHeader(job=job, flags=FLAG_RESULT, elems=len(lanes), agg_node=PS_NODE, count=3, iteration=iteration,
                       seq=seq, bitmap=0b1110)
    frame = bytearray(build_ina_frame(SW_MAC, PS_MAC, PS_IP, HOSTS[worker][0], header, lanes))
    frame[40:42] = PS_UDP_CHECKSUM.to_bytes(2, "big")     # the PS's kernel checksums what it sends
    return bytes(frame)


#: Stands for the UDP checksum the PS's kernel computed over a RESULT (the tests read it, nothing checks it).
PS_UDP_CHECKSUM = 0xBEEF


def test_pa_gack_for_an_absorbed_gradient(target):
    """A raw gradient of an opted-in job absorbed into its slot comes back out of its ingress port as the
    GACK: its headers without lanes, flags GACK (+ ECN_ECHO when it arrived CE), progress S_sum, addresses
    and UDP ports swapped, lengths and checksums fixed; GACKs are not gradients for port_ina_tx."""
    rt = target.runtime
    pa_setup(rt)
    ip, mac = HOSTS[1]
    header = InaHeader(job=PA_JOB, flags=FLAG_DATA, elems=LANES, agg_node=SW_NODE, fanin=3, count=1, iteration=2,
                       seq=5, slot=slot_index(5, 0, 8), bitmap=1 << 1)
    target.send(1, build_ina_frame(SW_MAC, mac, ip, SW_ADDR, header, lanes_of(200), ecn=3, src_port=40123))
    (port, frame), = target.recv(1)
    assert port == 1
    assert_gack_of(frame, 1, PA_JOB, 5, progress=5, ce=True, iteration=2, src_port=40123)
    target.send(2, contribution(2, PA_JOB, 5, lanes_of(201), iteration=2, ecn=2))      # ECT(0), not CE
    _, frame = only(target.recv(1), port=2)
    assert_gack_of(frame, 2, PA_JOB, 5, progress=5 + 5, iteration=2)
    assert target.quiet() == []
    slot = slot_index(5, 0, 8)
    assert (rt.register_read("agg_count", slot), rt.register_read("agg_bitmap", slot)) == (2, 0b110)  # aggregated
    assert (stat(target, "gacked"), stat(target, "aggregated"), stat(target, "forwarded")) == (2, 2, 0)
    assert rt.counter_read("port_ina_tx", 1)[0] == rt.counter_read("port_ina_tx", 2)[0] == 0
    assert rt.register_read("agg_used", PA_INDEX) == 1                            # the job's row


def test_pa_gack_for_the_completing_gradient(target):
    """The gradient that completes the aggregate leaves as the aggregate, exact as ever, and its sender gets
    its GACK too: an ingress clone out of its ingress port (mirror session gack_session(port)), CE echoed.
    A port without its session gets no GACK for a completing gradient (bmv2 clones to no session)."""
    rt = target.runtime
    pa_setup(rt, sessions=(1, 2, 3))
    parts = {w: lanes_of(210 + w) for w in (1, 2, 3)}
    target.send_seq([(w, contribution(w, PA_JOB, 6, parts[w])) for w in (1, 2)])
    assert sorted(port for port, _ in target.recv(2)) == [1, 2]                 # the two absorbed: GACKs
    target.send(3, contribution(3, PA_JOB, 6, parts[3], ecn=3))
    out = dict(target.recv(2))
    assert sorted(out) == [3, PS_PORT]
    aggregate = parse_frame(out[PS_PORT])
    assert np.array_equal(aggregate.lanes, wrap_sum(*parts.values()))
    assert (aggregate.ina.count, aggregate.ina.bitmap, aggregate.ina.flags) == (3, 0b1110, FLAG_DATA)
    assert (aggregate.src_ip, aggregate.dst_ip, aggregate.ttl) == (SW_ADDR, PS_IP, 63)
    assert_gack_of(out[3], 3, PA_JOB, 6, progress=18, ce=True)
    assert (stat(target, "gacked"), stat(target, "emitted")) == (3, 1)
    # Three packets reached a queue as themselves (two GACKs, the aggregate); the clone is not counted: bmv2
    # starts it without an ingress timestamp. Every wait is of this test's moments, not of the switch's uptime.
    packets, total_us, longest_us = rt.register_read_all("switch_wait")
    assert packets == 3 and longest_us <= total_us and longest_us < 500_000
    assert rt.register_read("agg_used", PA_INDEX) == 0                          # released on emit

    # Seq 7, completed by a gradient arriving on a port without a GACK session (the PS's): the aggregate only.
    target.send_seq([(w, contribution(w, PA_JOB, 7, parts[w])) for w in (1, 2)])
    assert sorted(port for port, _ in target.recv(2)) == [1, 2]
    target.send(PS_PORT, contribution(3, PA_JOB, 7, parts[3]))
    pkt, _ = only(target.recv(1) + target.quiet(), port=PS_PORT)
    assert pkt.ina.count == 3 and np.array_equal(pkt.lanes, wrap_sum(*parts.values()))
    assert stat(target, "gacked") == 6                                          # counted, as bmv2 counts it


def test_pa_progress_sum_over_workers_retransmission_and_new_iteration(target):
    """S_n follows each worker's latest seq, retransmissions and a new iteration's low seqs included, and
    S_sum = sum of the S_n (delta updates, §IV Fig. 7), carried in the progress field of whatever the
    gradient becomes (a GACK, a bypass, a flush), in the registers' row pa_index."""
    rt = target.runtime
    pa_setup(rt)
    row = PA_INDEX * program.PA_WORKERS

    def send(worker, seq, iteration=0, flags=FLAG_DATA):
        target.send(worker, contribution(worker, PA_JOB, seq, lanes_of(400 + seq), iteration=iteration, flags=flags))
        return target.recv(1)

    steps = [((1, 3), 3), ((2, 1), 4), ((1, 4), 5), ((3, 2), 7)]
    for (worker, seq), progress in steps:
        (port, frame), = send(worker, seq)
        assert port == worker and ina_of(frame).flags == FLAG_GACK and ina_of(frame).progress == progress
    # Worker 1 retransmits seq 3 (already in its slot): a RETX duplicate flushes the partial to the PS, no
    # GACK; S_1 goes back to 3.
    (port, frame), = send(1, 3, flags=FLAG_DATA | FLAG_RETX)
    assert port == PS_PORT and ina_of(frame).progress == 3 + 1 + 2 and ina_of(frame).bitmap == 0b10
    # A new iteration: worker 2 starts again at seq 0.
    (port, frame), = send(2, 0, iteration=1)
    assert port == 2 and ina_of(frame).progress == 3 + 0 + 2 and ina_of(frame).iteration == 1
    assert [rt.register_read("pa_seq", row + w) for w in (1, 2, 3)] == [3, 0, 2]
    assert rt.register_read("pa_seq_sum", PA_INDEX) == 5
    assert rt.register_read("pa_seq_sum", 0) == 0 and rt.register_read("pa_seq", 1) == 0     # other rows untouched
    # A seq below a worker's last (its S_n) makes S_sum go down by the difference, even for a gradient that
    # collides (its slot holds iteration 1's seq 0): the bypass carries it to the PS; 32-bit wrap included.
    (port, frame), = send(3, 0)
    assert port == PS_PORT and ina_of(frame).flags == FLAG_DATA | FLAG_COLLISION and ina_of(frame).progress == 3
    (port, frame), = send(3, 2**32 - 2)
    assert port == 3 and ina_of(frame).progress == (3 + 2**32 - 2) % 2**32
    assert rt.register_read("pa_seq_sum", PA_INDEX) == 1
    assert stat(target, "gacked") == 6


def test_pa_aecn_marks_results_once_the_threshold_is_exceeded_and_not_before(target):
    """A RESULT of the job is marked AECN when the slots it holds (agg_used of its row) plus its overflowed
    gradients (COLLISION bypasses of the job, outstanding until a RESULT of their seq passes; pa_overflowed
    of its row) exceed its row's aecn_threshold, as the RESULT finds them; another job's slots count in no
    row, its RESULTs are never marked; threshold 0 marks nothing."""
    rt = target.runtime
    pa_setup(rt, count=4, pa_index=1, sessions=())
    rt.register_write("aecn_threshold", 1, 3)
    other = 7
    rt.table_add(aggregate_entry(job=other, base=4, count=4))

    def result_flags(seq, job=PA_JOB):
        target.send(PS_PORT, result_frame(job, seq))
        pkt, frame = only(target.recv(1), port=1)
        assert pkt.dst_ip == HOSTS[1][0] and pkt.ttl == 63 and pkt.ip_checksum_ok
        # A marked RESULT's header changed: its UDP checksum must go (0), or the worker's kernel drops it.
        assert udp_checksum_of(frame) == (0 if pkt.ina.flags & FLAG_AECN else PS_UDP_CHECKSUM)
        return pkt.ina.flags

    for seq in (0, 1, 2):                                        # three slots held (fanin 2: absorbed)
        target.send(1, contribution(1, PA_JOB, seq, lanes_of(500 + seq), fanin=2, count=4))
        only(target.recv(1), port=1)                             # GACK
    assert rt.register_read("agg_used", 1) == 3
    assert result_flags(10) == FLAG_RESULT                      # 3 + 0 is not above 3
    target.send(1, contribution(1, PA_JOB, 4, lanes_of(504), fanin=2, count=4))   # slot 0 held by seq 0
    bypassed, _ = only(target.recv(1), port=PS_PORT)
    assert bypassed.ina.flags == FLAG_DATA | FLAG_COLLISION and bypassed.ina.progress == 4   # no GACK: the PS's
    assert (rt.register_read("pa_overflowed", 1), rt.register_read("pa_overflow", program.pa_seq_cell(1, 4))) == (1, 1)
    assert result_flags(11) == FLAG_RESULT | FLAG_AECN          # 3 + 1 > 3
    target.send(1, contribution(1, other, 8, lanes_of(508), fanin=2, count=4, base=4))   # the other job's slot
    assert target.quiet() == []
    assert rt.register_read_all("agg_used") == [0, 3] + [0] * (program.PA_JOBS - 2)     # counted in no row
    assert result_flags(11, job=other) == FLAG_RESULT           # not opted in: never marked
    assert result_flags(4) == FLAG_RESULT | FLAG_AECN           # marked as found, then seq 4 stops counting
    assert rt.register_read("pa_overflowed", 1) == 0 and rt.register_read("pa_overflow", program.pa_seq_cell(1, 4)) == 0
    assert result_flags(11) == FLAG_RESULT
    target.send(2, contribution(2, PA_JOB, 0, lanes_of(505), fanin=2, count=4))   # completes seq 0: slot freed
    only(target.recv(1), port=PS_PORT)                           # the aggregate (no GACK session here)
    assert rt.register_read("agg_used", 1) == 2
    for seq in (5, 6):                                           # slots 1, 2 held: two overflowed gradients
        target.send(2, contribution(2, PA_JOB, seq, lanes_of(506), fanin=2, count=4))
        only(target.recv(1), port=PS_PORT)
    assert result_flags(12) == FLAG_RESULT | FLAG_AECN          # 2 + 2 > 3
    rt.register_write("aecn_threshold", 1, 0)
    assert result_flags(13) == FLAG_RESULT                      # 0: AECN off
    assert (stat(target, "aecn_marked"), stat(target, "collision_bypassed")) == (3, 3)
    assert rt.register_read("pa_overflowed", 1) == 2


@pytest.mark.parametrize("aecn", [1, 0])
def test_pa_contributions_follow_their_overflowed_sibling_to_the_ps(target, aecn):
    """Worker 1's seq 4 collides (slot 0 holds seq 0) and goes to the PS. Once seq 0 completes and frees the
    slot, workers 2 and 3's seq 4 do not start a partial there that worker 1's would never join: they follow
    it to the PS unchanged (``overflow_followed``, each an overflowed gradient of seq 4's cell, no GACK from
    the switch). When the RESULT of seq 4 has passed, seq 4's next use aggregates in the slot again. Where
    the switch does not count the job's overflow (``aecn`` 0: it does not see the job's RESULTs) nothing
    follows: the contributions start a partial, as before."""
    rt = target.runtime
    pa_setup(rt, count=4, aecn=aecn)
    cell = program.pa_seq_cell(PA_INDEX, 4)
    parts = {w: lanes_of(700 + w) for w in (1, 2, 3)}
    target.send_seq([(w, contribution(w, PA_JOB, 0, parts[w], count=4)) for w in (1, 2)])
    assert sorted(port for port, _ in target.recv(2)) == [1, 2]                   # absorbed: GACKs
    target.send(1, contribution(1, PA_JOB, 4, parts[1], count=4))
    collided, _ = only(target.recv(1), port=PS_PORT)
    assert collided.ina.flags == FLAG_DATA | FLAG_COLLISION
    target.send(3, contribution(3, PA_JOB, 0, parts[3], count=4))                # completes seq 0: slot 0 free
    assert sorted(port for port, _ in target.recv(2)) == [3, PS_PORT]
    for w in (2, 3):
        target.send(w, contribution(w, PA_JOB, 4, parts[w], count=4))
        if aecn:
            pkt, _ = only(target.recv(1) + target.quiet(0.1), port=PS_PORT)
            assert pkt.ina.flags == FLAG_DATA and pkt.ina.bitmap == 1 << w and np.array_equal(pkt.lanes, parts[w])
        else:
            only(target.recv(1), port=w)                                          # absorbed: its GACK
    if not aecn:
        assert stat(target, "overflow_followed") == 0 and rt.register_read("agg_count", 0) == 2
        return
    assert (stat(target, "overflow_followed"), rt.register_read("agg_count", 0)) == (2, 0)
    assert (rt.register_read("pa_overflow", cell), rt.register_read("pa_overflowed", PA_INDEX)) == (3, 3)
    target.send(PS_PORT, result_frame(PA_JOB, 4))                                 # the PS completed seq 4
    only(target.recv(1), port=1)
    assert (rt.register_read("pa_overflow", cell), rt.register_read("pa_overflowed", PA_INDEX)) == (0, 0)
    target.send(1, contribution(1, PA_JOB, 4, parts[1], count=4, iteration=1))
    only(target.recv(1), port=1)                                                  # absorbed: its GACK
    assert rt.register_read("agg_count", 0) == 1 and stat(target, "overflow_followed") == 2


def test_jobs_without_the_opt_in_are_unchanged_and_gacks_in_transit_are_forwarded(target):
    """A job without a pa_job entry, on a switch where another job has one: no GACK, progress untouched,
    no PA-ATP register moves, its RESULTs unmarked. A GACK passing through (the PS's, to a worker) is
    forwarded as unicast even where its header names an aggregation entry: never aggregated."""
    rt = target.runtime
    pa_setup(rt)
    rt.register_write("aecn_threshold", PA_INDEX, 1)
    plain = 1
    rt.table_add(aggregate_entry(job=plain, base=8, count=8))
    parts = {w: lanes_of(600 + w) for w in (1, 2, 3)}
    frames = []
    for w in (1, 2, 3):
        ip, mac = HOSTS[w]
        header = InaHeader(job=plain, flags=FLAG_DATA, elems=LANES, agg_node=SW_NODE, fanin=3, count=1, seq=2,
                           slot=slot_index(2, 8, 8), bitmap=1 << w, progress=77)
        frames.append((w, build_ina_frame(SW_MAC, mac, ip, SW_ADDR, header, parts[w], ecn=3)))
    target.send_seq(frames[:2])
    assert target.quiet() == []                                   # absorbed, silently, as today
    target.send(3, frames[2][1])
    pkt, _ = only(target.recv(1) + target.quiet(), port=PS_PORT)
    assert np.array_equal(pkt.lanes, wrap_sum(*parts.values())) and pkt.ina.progress == 77
    assert pkt.ina.flags == FLAG_DATA and pkt.ina.count == 3
    target.send(1, contribution(1, PA_JOB, 1, lanes_of(610)))    # the opted-in job's: one slot held
    only(target.recv(1), port=1)
    target.send(PS_PORT, result_frame(plain, 2))
    pkt, _ = only(target.recv(1), port=1)
    assert pkt.ina.flags == FLAG_RESULT                           # above the threshold, but not opted in
    assert rt.register_read_all("pa_seq_sum") == [0] * PA_INDEX + [1] + [0] * (program.PA_JOBS - PA_INDEX - 1)
    assert stat(target, "gacked") == 1 and stat(target, "aecn_marked") == 0

    # The PS's GACK of an overflowed gradient, on its way back to worker 2 (agg_node is this switch's).
    header = InaHeader(job=PA_JOB, flags=FLAG_GACK, elems=0, agg_node=SW_NODE, fanin=3, count=1, seq=3,
                       slot=slot_index(3, 0, 8), bitmap=1 << 2, progress=9)
    target.send(PS_PORT, build_ina_frame(SW_MAC, PS_MAC, PS_IP, HOSTS[2][0], header, np.zeros(0, dtype=np.int32)))
    pkt, frame = only(target.recv(1), port=2)
    assert ina_of(frame) == header and (pkt.ttl, pkt.dst_mac, len(frame)) == (63, HOSTS[2][1], PAYLOAD_OFFSET)
    assert rt.register_read("agg_count", slot_index(3, 0, 8)) == 0 and stat(target, "aggregated") == 4
    assert rt.counter_read("port_ina_tx", 2)[0] == 0
    assert rt.register_read("pa_seq", PA_INDEX * program.PA_WORKERS + 2) == 0


def test_pa_entries_are_refused_clearly(target):
    rt = target.runtime
    with pytest.raises(DataplaneError, match=rf"pa_index {program.PA_JOBS} outside"):
        rt.table_add(TableEntry("pa_job", "pa_enable", (1,), (("pa_index", program.PA_JOBS), ("aecn", 1))))
    with pytest.raises(DataplaneError, match="aecn 2 is not 0"):
        rt.table_add(TableEntry("pa_job", "pa_enable", (1,), (("pa_index", 0), ("aecn", 2))))
    with pytest.raises(DataplaneError, match="mirror session id 0 outside"):
        rt.mirroring_add(0, 1)
    with pytest.raises(DataplaneError, match="port 511 must be"):
        rt.mirroring_add(program.gack_session(1), 511)
    rt.table_add(TableEntry("pa_job", "pa_enable", (1,), (("pa_index", program.PA_JOBS - 1), ("aecn", 0))))


# -- Rina (rack aggregation at the ToR, pulls, finished chunks) --------------------------------

RINA_JOB = 5
PULL_GRP, GATHER_GRP, RACK_GRP = 3, 4, 6
AGENT = 1                       # the rack: workers W1 (the agent), W2, W3; the next member behind port 4


def install_rina(rt, base=8, count=8):
    install_routes(rt)
    rt.mc_group_create(PULL_GRP, [2, 3])
    rt.mc_group_create(GATHER_GRP, [1, 2, 3, PS_PORT])
    rt.mc_group_create(RACK_GRP, [1, 2, 3])
    for port in (1, 2, 3):
        ip, mac = HOSTS[port]
        rt.table_add(TableEntry("ina_mcast_rewrite", "mcast_rewrite", (port,), (("dstAddr", mac), ("ipDstAddr", ip))))
    rt.table_add(TableEntry("rina_rack", "rina_aggregate", (RINA_JOB, SW_NODE), (
        ("switch_addr", SW_ADDR), ("slot_base", base), ("slot_count", count), ("pull_grp", PULL_GRP),
        ("gather_grp", GATHER_GRP))))
    rt.table_add(TableEntry("rina_gather", "ina_multicast", (RINA_JOB, HOSTS[AGENT][0]), (("mcast_grp", RACK_GRP),)))


def rina_shard(worker, seq, lanes, iteration=0, flags=FLAG_DATA):
    """A shard of ``worker`` (bit worker - 1 of the rack) toward the next member, to be summed at this ToR."""
    ip, mac = HOSTS[worker]
    header = InaHeader(job=RINA_JOB, flags=flags, elems=len(lanes), agg_node=SW_NODE, fanin=3, count=1,
                       iteration=iteration, seq=seq, slot=0, bitmap=1 << (worker - 1))
    return build_ina_frame(SW_MAC, mac, ip, PS_IP, header, lanes)


def rina_task(seq, lanes, iteration=0, flags=0):
    return rina_shard(AGENT, seq, lanes, iteration, FLAG_DATA | FLAG_TASK | flags)


def test_rina_task_pulls_the_rack_and_the_rack_sum_goes_on_to_the_next_member(target):
    rt = target.runtime
    install_rina(rt)
    seq = rina_seq(2, 13)
    slot = slot_index(seq, 8, 8)
    parts = {w: lanes_of(300 + w) for w in (1, 2, 3)}
    target.send(1, rina_task(seq, parts[1]))
    out = target.recv(2)
    assert sorted(port for port, _ in out) == [2, 3]
    for port, frame in out:          # the pull: the task's header alone, to each other worker of the rack
        pkt = parse_frame(frame)
        assert (pkt.dst_ip, pkt.dst_mac, pkt.src_ip) == (*HOSTS[port], HOSTS[1][0])
        assert (pkt.ina.flags, pkt.ina.elems, pkt.ina.seq, pkt.ina.job, len(frame)) == (FLAG_PULL, 0, seq, RINA_JOB,
                                                                                       PAYLOAD_OFFSET)
        assert pkt.ip_checksum_ok and udp_checksum_of(frame) == 0
    assert (stat(target, "rina_pulled"), rt.register_read("agg_count", slot), rt.register_read("agg_bitmap", slot)) \
        == (1, 1, 0b001)
    target.send_seq([(2, rina_shard(2, seq, parts[2])), (2, rina_shard(2, seq, parts[2]))])
    assert target.quiet() == []                       # absorbed; its duplicate dropped
    target.send(3, rina_shard(3, seq, parts[3]))
    pkt, frame = only(target.recv(1), port=PS_PORT)
    assert np.array_equal(pkt.lanes, wrap_sum(parts[1], parts[2], parts[3]))
    assert (pkt.ina.flags, pkt.ina.level, pkt.ina.agg_node, pkt.ina.count, pkt.ina.bitmap) == (FLAG_DATA, 1, 0, 3, 7)
    assert (pkt.src_ip, pkt.dst_ip, pkt.dst_mac, pkt.ttl) == (SW_ADDR, PS_IP, PS_MAC, 63)
    assert pkt.ip_checksum_ok and udp_checksum_of(frame) == 0
    # The slot keeps the sum: a resent task sends it again; a shard of a tag it does not hold is dropped.
    target.send(1, rina_task(seq, parts[1], flags=FLAG_RETX))
    again, _ = only(target.recv(1), port=PS_PORT)
    assert np.array_equal(again.lanes, pkt.lanes) and again.ina.flags == FLAG_DATA
    target.send(2, rina_shard(2, rina_seq(3, 13), parts[2]))
    assert target.quiet() == []
    assert (stat(target, "aggregated"), stat(target, "emitted"), stat(target, "duplicate_dropped"),
            stat(target, "rina_reemitted"), stat(target, "rina_stale_dropped")) == (3, 2, 2, 1, 1)
    assert stat(target, "multicast") == 1               # the pull; the sums went on as unicast
    # port_ina_tx counts gradients: the two sums, not the pull's two header-only copies
    assert [rt.counter_read("port_ina_tx", p)[0] for p in (2, 3, PS_PORT)] == [0, 0, 2]


def test_rina_resent_task_pulls_again_and_only_a_newer_task_reclaims_the_slot(target):
    rt = target.runtime
    install_rina(rt, base=0, count=4)
    seq = rina_seq(1, 6)
    parts = {w: lanes_of(310 + w) for w in (1, 2, 3)}
    target.send(1, rina_task(seq, parts[1]))
    assert len(target.recv(2)) == 2
    target.send(2, rina_shard(2, seq, parts[2]))
    target.send(1, rina_task(seq, parts[1], flags=FLAG_RETX))       # W3's shard is missing: pulled again
    assert sorted(port for port, _ in target.recv(2)) == [2, 3]
    target.send_seq([(2, rina_shard(2, seq, parts[2])), (3, rina_shard(3, seq, parts[3]))])
    pkt, _ = only(target.recv(1), port=PS_PORT)
    assert np.array_equal(pkt.lanes, wrap_sum(parts[1], parts[2], parts[3]))
    # An older task (lower seq) is dropped; a later iteration's task of the same slot reclaims it.
    target.send(1, rina_task(rina_seq(0, 6), parts[1]))
    assert target.quiet() == []
    target.send(1, rina_task(rina_seq(0, 6), parts[3], iteration=1))
    assert len(target.recv(2)) == 2
    slot = slot_index(seq, 0, 4)
    assert (rt.register_read("agg_count", slot), rt.register_read("agg_iteration", slot)) == (1, 1)
    assert (stat(target, "rina_pulled"), stat(target, "rina_stale_dropped"), stat(target, "stale_reclaimed")) == (3, 1, 1)


def test_rina_a_new_ring_generation_reclaims_the_slot_an_older_one_completed(target):
    """Rina §IV-C2: after an agent's error the new ring redoes the interrupted iteration with the same seqs; its
    generation in the iteration field's top bits (wire.rina_iteration) makes the task newer than the older ring's
    completed sum, so the slot is pulled afresh instead of sending that sum again, and the old ring's resent task
    is stale."""
    rt = target.runtime
    install_rina(rt, base=0, count=4)
    seq = rina_seq(1, 2)
    old, new = rina_iteration(0, 5), rina_iteration(1, 5)
    parts = {w: lanes_of(330 + w) for w in (1, 2, 3)}
    target.send(1, rina_task(seq, parts[1], iteration=old))
    assert len(target.recv(2)) == 2
    target.send_seq([(2, rina_shard(2, seq, parts[2], iteration=old)),
                     (3, rina_shard(3, seq, parts[3], iteration=old))])
    only(target.recv(1), port=PS_PORT)
    target.send(1, rina_task(seq, parts[2], iteration=new))                 # the new ring's sum differs
    pulls = target.recv(2)
    assert sorted(port for port, _ in pulls) == [2, 3]
    assert all(parse_frame(f).ina.iteration == new for _, f in pulls)
    slot = slot_index(seq, 0, 4)
    assert (rt.register_read("agg_count", slot), rt.register_read("agg_iteration", slot)) == (1, new)
    target.send(1, rina_task(seq, parts[1], iteration=old, flags=FLAG_RETX))
    assert target.quiet() == []
    target.send_seq([(2, rina_shard(2, seq, parts[1], iteration=new)),
                     (3, rina_shard(3, seq, parts[3], iteration=new))])
    pkt, _ = only(target.recv(1), port=PS_PORT)
    assert pkt.ina.iteration == new and np.array_equal(pkt.lanes, wrap_sum(parts[2], parts[1], parts[3]))
    assert (stat(target, "rina_stale_dropped"), stat(target, "rina_reemitted")) == (1, 0)


def test_rina_finished_chunk_goes_to_the_whole_rack_and_to_the_next_member(target):
    rt = target.runtime
    install_rina(rt)
    seq = rina_seq(4, 0)
    parts = {w: lanes_of(320 + w) for w in (1, 2, 3)}
    target.send(1, rina_task(seq, parts[1], flags=FLAG_GATHER))
    pulls = target.recv(2)
    assert all(parse_frame(f).ina.flags == FLAG_PULL | FLAG_GATHER for _, f in pulls)
    target.send_seq([(2, rina_shard(2, seq, parts[2], flags=FLAG_DATA | FLAG_GATHER)),
                     (3, rina_shard(3, seq, parts[3], flags=FLAG_DATA | FLAG_GATHER))])
    out = target.recv(4)
    assert sorted(port for port, _ in out) == [1, 2, 3, PS_PORT]    # W3, whose shard completed it, too
    total = wrap_sum(parts[1], parts[2], parts[3])
    for port, frame in out:      # the rack's copies addressed to each worker; the next member's as it was
        pkt = parse_frame(frame)
        assert (pkt.dst_ip, pkt.dst_mac) == (HOSTS[port] if port != PS_PORT else (PS_IP, SW_MAC))
        assert pkt.src_ip == SW_ADDR and pkt.ina.flags == FLAG_DATA | FLAG_GATHER and np.array_equal(pkt.lanes, total)
    # A finished chunk arriving for the agent from outside the rack: to every worker of the rack.
    header = InaHeader(job=RINA_JOB, flags=FLAG_DATA | FLAG_GATHER, elems=LANES, level=1, seq=rina_seq(5, 1))
    target.send(PS_PORT, build_ina_frame(SW_MAC, PS_MAC, PS_IP, HOSTS[AGENT][0], header, total))
    out = target.recv(3)
    assert sorted(port for port, _ in out) == [1, 2, 3]
    assert all(parse_frame(f).dst_ip == HOSTS[p][0] for p, f in out)
    assert stat(target, "multicast") == 3               # the pull, the rack's finished chunk, the arriving one
    # Other jobs' finished chunks, and the job's chunks for another address, are plain traffic.
    target.send(PS_PORT, build_ina_frame(SW_MAC, PS_MAC, PS_IP, HOSTS[2][0], header, total))
    only(target.recv(1), port=2)


# -- bad input --------------------------------------------------------------------------

def test_bad_entries_are_refused_clearly(target):
    rt = target.runtime
    cases = [
        (TableEntry("no_such_table", "drop", ()), "unknown table 'no_such_table'"),
        (TableEntry("ipv4_lpm", "route_forward", ("10.0.0.0/8",), (("dstAddr", PS_MAC), ("port", 1))),
         "unknown action 'route_forward'"),
        (TableEntry("ipv4_lpm", "ipv4_forward", ("10.0.0.0/8",), (("mac", PS_MAC), ("port", 1))),
         "expected parameters (dstAddr, port)"),
        (TableEntry("ipv4_lpm", "ipv4_forward", ("10.0.0.0/8",), (("dstAddr", PS_MAC), ("port", 512))),
         "parameter port"),
        (TableEntry("route", "route_forward", ("10.0.0.1",), (("dstAddr", PS_MAC), ("port", 1))),
         "expected 2 match values"),
        (aggregate_entry(job=1, base=SLOTS - 4, count=8), f"outside the switch's {SLOTS} slots"),
        (aggregate_entry(job=1, base=0, count=0), "is empty"),
        (aggregate_entry(job=1, release_mode=4), "release_mode 4 is not supported"),
        (TableEntry("ina_result", "ina_release", (1, PS_IP), (("slot_base", 0), ("slot_count", SLOTS + 1),
                                                              ("mcast_grp", 0))), "outside the switch's"),
    ]
    for entry, message in cases:
        with pytest.raises(DataplaneError, match=message.replace("(", r"\(").replace(")", r"\)")):
            rt.table_add(entry)
    with pytest.raises(DataplaneError, match="multicast group id 0"):
        rt.mc_group_create(0, [1, 2])
    with pytest.raises(DataplaneError, match="unknown register"):
        rt.register_read("nope", 0)
    with pytest.raises(DataplaneError, match="out of range"):
        rt.register_read("agg_count", SLOTS)
    with pytest.raises(DataplaneError, match="does not fit bit<16>"):
        rt.register_write("agg_count", 0, 1 << 16)
    with pytest.raises(DataplaneError, match="unknown counter"):
        rt.counter_read("nope", 0)
    with pytest.raises(DataplaneError, match=r"drop probability 1.5 outside \[0, 1\]"):
        rt.set_port_impairment(1, 1.5, 0.0, 0.0, 1)
    with pytest.raises(DataplaneError, match=r"impairment on port 64: .* hold ports 0\.\.63"):
        rt.set_port_impairment(program.MAX_PORTS, 0.1, 0.0, 0.0, 1)
    rt.table_add(aggregate_entry(job=1, base=SLOTS - 8, count=8))    # the last slots are fine


def test_malformed_ina_packets_are_counted_drops(target):
    install_routes(target.runtime)
    target.runtime.table_add(aggregate_entry(job=1))
    good = lanes_of(110)
    ip, mac = HOSTS[1]
    short_payload = contribution(1, 1, 0, good)[:80 + 4 * 10]                       # header says 64 lanes, 10 sent
    too_many = contribution(1, 1, 0, np.zeros(LANES + 1, dtype=np.int32))           # elems 65 > 64 lanes
    short_header = build_frame(SW_MAC, mac, ip, SW_ADDR, b"\x00" * 20)               # INA port, 20-byte header
    target.send_seq([(1, short_payload), (1, too_many), (1, short_header)])
    assert target.quiet() == []
    assert stat(target, "malformed_dropped") == 3 and stat(target, "aggregated") == 0
    # ... and the switch keeps working.
    parts = {w: lanes_of(111 + w) for w in (1, 2)}
    target.send_seq([(1, contribution(1, 1, 0, parts[1], fanin=2)), (2, contribution(2, 1, 0, parts[2], fanin=2))])
    pkt, _ = only(target.recv(1), port=PS_PORT)
    assert np.array_equal(pkt.lanes, wrap_sum(parts[1], parts[2]))


def test_short_fragment_zero_pads_the_slot(target):
    """A fragment of fewer lanes (a tensor's last) aggregates those lanes only; the slot's rest reads 0."""
    rt = target.runtime
    install_routes(rt)
    rt.table_add(aggregate_entry(job=4))
    parts = {w: lanes_of(120 + w, n=5) for w in (1, 2)}
    target.send_seq([(1, contribution(1, 4, 1, parts[1], fanin=2)), (2, contribution(2, 4, 1, parts[2], fanin=2))])
    pkt, frame = only(target.recv(1), port=PS_PORT)
    assert pkt.ina.elems == 5 and np.array_equal(pkt.lanes, wrap_sum(parts[1], parts[2]))
    assert len(frame) == 80 + 4 * 5
    slot = slot_index(1, 0, 8)
    assert rt.register_read("agg_value", slot * LANES + 5) == 0


def test_registers_write_read_reset(target):
    """Every bit<64> value is written exactly; a read is exact or, where the target cannot report the value
    (bmv2's Thrift read saturates at 2^63-1), a DataplaneError naming the limit, never a wrong value."""
    rt = target.runtime
    rt.register_write("agg_bitmap", 3, (1 << 64) - 1)
    rt.register_write("agg_value", 7, 0xFFFFFFFE)
    if target.name == "bmv2":
        with pytest.raises(DataplaneError, match=r"saturates at 2\^63-1"):
            rt.register_read("agg_bitmap", 3)
    else:
        assert rt.register_read("agg_bitmap", 3) == (1 << 64) - 1
    assert rt.register_read("agg_value", 7) == 0xFFFFFFFE
    rt.register_write("agg_bitmap", 3, (1 << 63) - 2)           # the widest value every target reads back
    assert rt.register_read("agg_bitmap", 3) == (1 << 63) - 2
    rt.register_reset("agg_bitmap")
    assert rt.register_read("agg_bitmap", 3) == 0


def test_register_write_of_bit_63_reaches_the_pipeline(target):
    """A control-plane write of bit 63 of agg_bitmap is held exactly (not clamped to 2^63-1): a contribution
    whose bitmap is bit 63 is then a duplicate of the slot's holder."""
    rt = target.runtime
    install_routes(rt)
    rt.table_add(aggregate_entry(job=1))
    target.send(1, contribution(1, 1, 0, lanes_of(60)))          # claims the slot: count 1 of 3
    assert target.quiet() == []
    rt.register_write("agg_bitmap", slot_index(0, 0, 8), 1 << 63)
    target.send(2, contribution(2, 1, 0, lanes_of(61), bitmap=1 << 63))
    assert target.quiet() == []
    assert (stat(target, "duplicate_dropped"), stat(target, "aggregated")) == (1, 1)


def test_scapy_crafted_packet_through_the_switch(target):
    from scapy.all import IP, UDP, Ether, raw
    from testbed.dataplane.scapy_ina import INA
    install_routes(target.runtime)
    target.runtime.table_add(aggregate_entry(job=2))
    ip, mac = HOSTS[1]
    pkt = (Ether(dst=SW_MAC, src=mac) / IP(src=ip, dst=SW_ADDR) / UDP(sport=INA_UDP_PORT, dport=INA_UDP_PORT) /
           INA(job=2, flags="DATA", agg_node=SW_NODE, fanin=1, count=1, seq=3, slot=3, bitmap=2, lanes=[7, -8, 9]))
    target.send(1, raw(pkt))
    frames = target.recv(1)
    assert len(frames) == 1
    out = Ether(frames[0][1])
    assert out[INA].lanes == [7, -8, 9] and out[INA].level == 1 and out[IP].src == SW_ADDR
    assert int(out[INA].flags) == FLAG_DATA and out[UDP].chksum == 0
    header = raw(out[IP])[:20]
    assert ipv4_checksum(header[:10] + b"\x00\x00" + header[12:]) == out[IP].chksum


def fuzzed_frames(rng, count):
    """Valid INA frames with random header fields, truncated frames, flipped bytes and plain noise."""
    frames = []
    for k in range(count):
        port = int(rng.integers(1, 4))
        header = InaHeader(job=int(rng.integers(0, 4)), flags=int(rng.integers(0, 1 << 16)),
                           elems=int(rng.integers(0, 256)), level=int(rng.integers(0, 256)),
                           agg_node=int(rng.choice([SW_NODE, PS_NODE, int(rng.integers(0, 1 << 16))])),
                           fanin=int(rng.integers(0, 1 << 16)), count=int(rng.integers(0, 1 << 16)),
                           submodel=int(rng.integers(0, 3)), iteration=int(rng.integers(0, 1 << 32)),
                           seq=int(rng.integers(0, 1 << 32)), slot=int(rng.integers(0, 2 * SLOTS)),
                           bitmap=int(rng.integers(0, 1 << 63)), progress=int(rng.integers(0, 1 << 32)))
        lanes = rng.integers(-2**31, 2**31, size=int(rng.integers(0, LANES + 1)), dtype=np.int64).astype(np.int32)
        ip, mac = HOSTS[port]
        frame = bytearray(build_ina_frame(SW_MAC, mac, ip, SW_ADDR, header, lanes))
        kind = k % 4
        if kind == 1:
            frame = frame[:int(rng.integers(14, len(frame)))]
        elif kind == 2:
            for _ in range(8):
                frame[int(rng.integers(0, len(frame)))] = int(rng.integers(0, 256))
        elif kind == 3:
            frame = bytearray(rng.integers(0, 256, size=int(rng.integers(14, 400)), dtype=np.uint8).tobytes())
        frames.append((port, bytes(frame)))
    return frames


def test_fuzzed_frames_leave_the_switch_alive_and_exact(target):
    """Hostile input: thousands of malformed, truncated and random frames (seeded); the switch counts
    and survives them, and a job aggregates exactly afterwards in slots the garbage could not pin."""
    rt = target.runtime
    install_routes(rt)
    rt.table_add(aggregate_entry(job=1, base=0, count=8))
    rng = np.random.default_rng(2026)
    for port, frame in fuzzed_frames(rng, 1500 if target.out_of_process else 20000):
        target.send(port, frame)
    target.quiet(1.0)
    assert stat(target, "ina_rx") + stat(target, "malformed_dropped") > 0
    assert_job_1_aggregates_exactly_in_its_slots(target)


def assert_job_1_aggregates_exactly_in_its_slots(target):
    """Iteration 1 of job 1 in every one of its 8 slots: exact, whatever garbage came before."""
    for seq in range(8):
        parts = {w: lanes_of(1000 + 10 * seq + w) for w in (1, 2, 3)}
        target.send_seq([(w, contribution(w, 1, seq, parts[w], iteration=1)) for w in (1, 2, 3)])
        out = [parse_frame(f) for _, f in target.recv(1, timeout_s=5.0)]
        done = [p for p in out if p.ina is not None and p.ina.seq == seq and p.ina.count == 3]
        assert done and np.array_equal(done[0].lanes, wrap_sum(*parts.values())), f"seq {seq}: {out}"
