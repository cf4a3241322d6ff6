"""ATP's congestion control (Lao et al., NSDI'21), as the papers compare against it.

A window of fragments per worker: +1 per RESULT, halved on an ECN echo (the
PS echoes the CE mark the switch queues set, ECN_ECHO on the RESULT) or on a
loss (a timeout or a gap), kept within [1, 100] and the job's ``window``. At
most one cut per round trip (SRTT, or the RTO before the first sample), so
one congested window is one halving, as in TCP/DCTCP. RESULTs go to every
worker of the job, so all workers of a job slide and cut their windows
together (PA-ATP §II-B). ``transport_options``: ``initial_window`` (default
8: eight 64-lane frames per worker keep the PS queue of a 8-worker incast
inside the default 64-packet queue).
"""

from testbed.agents.transport.base import Transport

MIN_WINDOW = 1
MAX_WINDOW = 100
DEFAULT_INITIAL_WINDOW = 8


class AtpTransport(Transport):
    name = "atp"

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.max_window = min(MAX_WINDOW, self.window_cap)
        initial = self.options.get("initial_window", DEFAULT_INITIAL_WINDOW)
        self.cwnd = float(max(MIN_WINDOW, min(self.max_window, initial)))
        self.last_cut_s = None

    def window(self) -> int:
        return int(self.cwnd)

    def on_ack(self, now_s: float):
        self.cwnd = min(float(self.max_window), self.cwnd + 1.0)

    def on_congestion(self, now_s: float, reason: str):
        round_trip_s = self.rtt.srtt_s if self.rtt.srtt_s is not None else self.rtt.rto_s()
        if self.last_cut_s is not None and now_s - self.last_cut_s < round_trip_s:
            return
        self.last_cut_s = now_s
        self.cwnd = max(float(MIN_WINDOW), self.cwnd / 2)
        self.stats["window_cuts"] += 1
