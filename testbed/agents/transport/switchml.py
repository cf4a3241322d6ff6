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
"""

from testbed.agents.transport.base import Transport

#: SwitchML's worker timeout (NSDI'21): a retransmission after 10 ms without a result.
PAPER_TIMEOUT_S = 0.010
#: The default timeout covers this many round trips of a path whose switch queue is full.
FULL_QUEUE_RTTS = 2


def default_timeout_s(full_queue_rtt_s: float) -> float:
    """SwitchML's 10 ms, or ``FULL_QUEUE_RTTS`` round trips of the worker's path with its queue full."""
    return max(PAPER_TIMEOUT_S, FULL_QUEUE_RTTS * full_queue_rtt_s)


class SwitchMLTransport(Transport):
    name = "switchml"
    OPTIONS = {"timeout": ("duration",)}

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.fixed_timeout_s = float(self.options.get("timeout_s", PAPER_TIMEOUT_S))

    def _timeout_s(self, seq: int) -> float:
        return self.fixed_timeout_s

    def state(self) -> dict:
        return {"timeout_s": self.fixed_timeout_s}
