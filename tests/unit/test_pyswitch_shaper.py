"""pyswitch's port shaper keeps its rate when the switch process wakes late, and banks no idle time.

Times are injected: ``Egress.enqueue`` and ``Egress.drain`` take ``now``, so each case is exact.
"""

from testbed.dataplane.pyswitch.core import PySwitchCore
from testbed.dataplane.pyswitch.egress import BACKLOG_CATCHUP_S

FRAME_BYTES = 1000
RATE_BPS = 1_000_000             # 125,000 bytes/s: one 1000-byte frame per 8 ms
PORT = 1


def shaped_switch(depth_pkts=100):
    core = PySwitchCore("t", 64, 64)
    core.control({"op": "set_port_shaping", "port": PORT, "rate_bps": RATE_BPS, "depth_pkts": depth_pkts})
    return core.egress


def offer(egress, count, now, sent):
    for _ in range(count):
        egress.enqueue(PORT, bytearray(FRAME_BYTES), now, lambda port, frame: sent.append(now))


def test_a_backlogged_port_woken_late_sends_what_the_link_would_have_sent():
    egress, sent = shaped_switch(), []
    offer(egress, 20, 0.0, sent)
    assert len(sent) == 1          # the 1600-byte burst lets one frame go at once; 19 wait
    # The process next runs 40 ms late: the link was busy all along and sent 5 more frames' worth.
    egress.drain(0.040, lambda port, frame: sent.append(0.040))
    assert len(sent) == 1 + 5      # 600 bytes left + 40 ms x 125,000 B/s = 5,600 bytes: 5 frames


def test_an_idle_port_banks_only_its_burst():
    egress, sent = shaped_switch(), []
    offer(egress, 1, 0.0, sent)
    offer(egress, 10, 1.0, sent)   # idle for a second: no second's worth of frames at once
    assert len(sent) == 1 + 1


def test_catch_up_is_bounded():
    egress, sent = shaped_switch(depth_pkts=1000), []
    offer(egress, 500, 0.0, sent)
    egress.drain(10.0, lambda port, frame: sent.append(10.0))   # a 10 s stall is not made up for
    allowed_bytes = RATE_BPS / 8 * BACKLOG_CATCHUP_S
    assert len(sent) == 1 + int((allowed_bytes) // FRAME_BYTES)
