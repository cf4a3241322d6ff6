"""SwitchML's transport (Sapio et al., NSDI'21): self-clocked, no congestion control, a fixed timeout.

A worker streams fragment ``i`` into slot ``i mod s`` and sends fragment
``i + s`` only after the RESULT of fragment ``i`` came back: the window is
fixed at the job's ``window`` (at most the slots of its switch) and never
shrinks. Departures are paced at the host link rate like every transport here.

Loss is recovered by a fixed timeout, as SwitchML's workers do (10 ms in
SwitchML, against ATP's adaptive 200 us-class timer): no RTT estimation and no
back-off, every unanswered fragment is resent once per ``timeout_s``; and by
gaps, as every transport here. SwitchML's 10 ms is far above its rack's round
trip even with a full switch queue, so its timeout means a loss, not a
queue. Scaled with the run: the default (:func:`default_timeout_s`) is those
10 ms, or twice the round trip of the worker's path with the switch queue
full (the controller's ``rtt_estimate_s`` with ``queue_depth`` frames queued)
when that is longer, which it is on every scaled run (a 5 Mb/s link queues
128 frames in about 70 ms). ``transport_options``: ``timeout`` (a duration)
overrides it.

The window is SwitchML's pool: s slots, s fragments in flight. SwitchML has
no congestion control, so a pool beyond the round trip only queues, and a
queue longer than the timeout makes every fragment look lost. The default
(:func:`default_pool_frames`, which the controller computes) is twice the
unloaded bandwidth-delay product of the worker's path, the margin covering
the switches' processing time that the estimate leaves out; at most the
job's ``window``. ``transport_options.pool`` sets it. (With the job's window
of 100 on PA-ATP's testbed, where a PS's link carries a copy of every RESULT
per worker, that queue reached 200 frames, 130 ms, and 65% of the
fragments were resent.)
"""

import math

from testbed.agents.transport.base import Transport

#: SwitchML's worker timeout (NSDI'21): a retransmission after 10 ms without a result.
PAPER_TIMEOUT_S = 0.010
#: The default timeout covers this many round trips of a path whose switch queue is full.
FULL_QUEUE_RTTS = 2


#: The default pool covers this many unloaded round trips of the worker's path.
POOL_BDPS = 2


def default_pool_frames(unloaded_bdp_frames: float) -> int:
    """``POOL_BDPS`` unloaded bandwidth-delay products of the worker's path, in whole frames (at least 1)."""
    return max(1, math.ceil(POOL_BDPS * unloaded_bdp_frames - 1e-9))


def default_timeout_s(full_queue_rtt_s: float) -> float:
    """SwitchML's 10 ms, or ``FULL_QUEUE_RTTS`` round trips of the worker's path with its queue full."""
    return max(PAPER_TIMEOUT_S, FULL_QUEUE_RTTS * full_queue_rtt_s)


class SwitchMLTransport(Transport):
    name = "switchml"
    OPTIONS = {"timeout": ("duration",), "pool": ("window", None)}

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.fixed_timeout_s = float(self.options.get("timeout_s", PAPER_TIMEOUT_S))
        self.pool = min(self.window_cap, int(self.options.get("pool", self.window_cap)))

    def window(self) -> int:
        return self.pool

    def _timeout_s(self, seq: int) -> float:
        return self.fixed_timeout_s

    def state(self) -> dict:
        return {"timeout_s": self.fixed_timeout_s, "pool": self.pool}
