"""pyswitch's link impairments against its own clock: where a reordered packet or a duplicate rejoins the
port's queue, and that a port's draws repeat with its seed.

The packet tests (test_packets.py) check what every target agrees on; the queue positions depend on
when packets leave, which only the in-process model lets a test set exactly (``now`` is an argument).
p4/README.md states the semantics: an impaired packet's duplicate, and a reordered packet, rejoin the
tail of the port's queue at the moment the packet leaves, and that departure spends its tokens.
"""

from testbed.dataplane.entries import TableEntry
from testbed.dataplane.pyswitch.core import LocalRuntime, PySwitchCore
from testbed.dataplane.wire import build_frame

SW_MAC, SRC = "02:00:00:00:01:00", ("10.0.0.1", "02:00:00:00:00:01")
DST = ("10.0.0.2", "02:00:00:00:00:02")
PORT = 2
FRAME_BYTES = 1000
RATE_BPS = 80_000          # 10 kB/s: a 1000-byte frame every 0.1 s; the 1600-byte burst lets one go at once


def switch():
    core = PySwitchCore("t", 4, 8)
    runtime = LocalRuntime(core)
    runtime.table_add(TableEntry("ipv4_lpm", "ipv4_forward", (f"{DST[0]}/32",), (("dstAddr", DST[1]), ("port", PORT))))
    return core, runtime


def frame(tag):
    return bytearray(build_frame(SW_MAC, SRC[1], SRC[0], DST[0], bytes([tag]) * (FRAME_BYTES - 42), src_port=5000,
                                 dst_port=5001))


def queued_burst(impairment):
    """Frames 1, 2, 3 arrive at t=0 on a shaped port (1 leaves at once, 2 and 3 queue); ``impairment``
    (drop, duplicate, reorder) applies to frame 2's departure only. The tags that left, as drains at
    0.1 s, 0.2 s and 0.3 s find them."""
    core, runtime = switch()
    runtime.set_port_shaping(PORT, RATE_BPS, 16)
    out = []

    def send(port, buf):
        assert port == PORT
        out.append(buf[42])

    for tag in (1, 2, 3):
        core.receive(frame(tag), 1, 0.0, send)
    seen = [list(out)]
    runtime.set_port_impairment(PORT, *impairment, 1)
    core.egress.drain(0.1, send)          # frame 2 leaves, impaired
    runtime.set_port_impairment(PORT, 0.0, 0.0, 0.0, 1)
    for now in (0.2, 0.3):
        core.egress.drain(now, send)
        seen.append(list(out))
    return seen


def test_a_reordered_packet_rejoins_the_tail_behind_what_is_queued():
    # 2 goes round when it leaves at 0.1 s (its departure spent the port's tokens), behind 3
    assert queued_burst((0.0, 0.0, 1.0)) == [[1], [1, 3], [1, 3, 2]]


def test_a_duplicate_joins_the_tail_when_its_original_leaves():
    assert queued_burst((0.0, 1.0, 0.0)) == [[1], [1, 2, 3], [1, 2, 3, 2]]


def test_a_dropped_packet_spends_its_departure():
    # 2 is lost on the link at 0.1 s; 3 leaves at 0.2 s, not earlier
    assert queued_burst((1.0, 0.0, 0.0)) == [[1], [1, 3], [1, 3]]


def impaired_run(seed):
    """The tags leaving an unshaped port impaired 0.3 / 0.3 / 0.3 over 200 frames, and the counts."""
    core, runtime = switch()
    runtime.set_port_impairment(PORT, 0.3, 0.3, 0.3, seed)
    out = []
    for k in range(200):
        core.receive(frame(k), 1, 0.0, lambda port, buf: out.append(buf[42]))
    return out, runtime.counters()["impairment"]


def test_draws_repeat_with_the_seed_and_differ_without():
    first, again, other = impaired_run(3), impaired_run(3), impaired_run(4)
    assert first == again
    assert first != other
    counts = first[1][PORT]
    assert len(first[0]) == 200 - counts["dropped"] + counts["duplicated"]


def test_setting_an_impairment_restarts_the_draws_from_its_seed():
    core, runtime = switch()
    runtime.set_port_impairment(PORT, 0.5, 0.0, 0.0, 11)
    for k in range(50):
        core.receive(frame(k), 1, 0.0, lambda port, buf: None)
    runtime.set_port_impairment(PORT, 0.3, 0.3, 0.3, 3)
    runtime.counter_reset("port_impair_dropped")
    runtime.counter_reset("port_impair_duplicated")
    runtime.counter_reset("port_impair_reordered")
    out = []
    for k in range(200):
        core.receive(frame(k), 1, 0.0, lambda port, buf: out.append(buf[42]))
    assert (out, runtime.counters()["impairment"]) == impaired_run(3)
