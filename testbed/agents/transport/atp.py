"""ATP's congestion control (Lao et al., NSDI'21), as the papers compare against it.

A window of fragments per worker: +1 per RESULT, halved on an ECN echo (the
PS echoes the CE mark the switch queues set, ECN_ECHO on the RESULT) or on a
loss (a timeout or a gap), kept within [1, 100] and the job's ``window``. At
most one cut per window (RFC 3168 §6.1.2): a signal about a fragment sent
before the last cut was already answered by it, so one congested window is
one halving, as in TCP/DCTCP. After the first cut
the growth is +1 per window of RESULTs (+1/cwnd each, TCP's congestion
avoidance): +1 per RESULT doubles the window every round trip, so one
halving per round trip never brings an incast of several workers below the
switch queue, and the queue tail-drops (measured: 117 drops at the PS port
of GOAT's testbed under ``ps``, 8 workers). RESULTs go to every
worker of the job, so all workers of a job slide and cut their windows
together (PA-ATP §II-B). ``transport_options``: ``initial_window``, in
fragments within [1, min(100, the job's window)] (default 8: eight 64-lane
frames per worker keep the PS queue of an 8-worker incast below the default
ECN threshold of 64 packets, half the 128-packet queue); ``slot_bound`` (default true): the window stays within
the job's slots at the worker's aggregation switch, so no fragment meets its
slot still held by the fragment a window earlier. False is ATP as published
(its aggregator index is a hash of the sequence number, and the congestion
window alone bounds what is in flight): the job's ``window`` may then exceed
``switch.slots``, and a fast worker's fragment that finds its slot held
overflows (GOAT §III-A's asynchronous arrival).
"""

from testbed.agents.transport.base import Transport, window_increase

MIN_WINDOW = 1
MAX_WINDOW = 100
DEFAULT_INITIAL_WINDOW = 8


class AtpTransport(Transport):
    name = "atp"
    OPTIONS = {"initial_window": ("window", MAX_WINDOW), "slot_bound": ("bool",)}

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.max_window = min(MAX_WINDOW, self.window_cap)
        initial = self.options.get("initial_window", DEFAULT_INITIAL_WINDOW)
        self.cwnd = float(max(MIN_WINDOW, min(self.max_window, initial)))
        self.recover_order = 0    # sends up to this one were out when the window was last cut
        self.slow_start = True

    @classmethod
    def window_within_slots(cls, options: dict) -> bool:
        return options.get("slot_bound", True)

    def window(self) -> int:
        return int(self.cwnd)

    def on_ack(self, now_s: float, seq: int, aecn: bool):
        self.cwnd = min(float(self.max_window), self.cwnd + window_increase(self.cwnd, self.slow_start))

    def on_congestion(self, now_s: float, reason: str, sent_order: int):
        if sent_order <= self.recover_order:
            return
        self.recover_order = self.sends
        self.slow_start = False
        self.cwnd = max(float(MIN_WINDOW), self.cwnd / 2)
        self.stats["window_cuts"] += 1
