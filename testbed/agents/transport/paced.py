"""A fixed-rate transport: InArt §5.3's workers, which replay their gradient at one rate (tcpreplay).

Every worker sends at ``rate_bps`` frame bits per second (at most its host
link's rate), whatever the network says: no congestion control, so ECN
echoes and losses change nothing but the retransmissions themselves. The
window is the job's ``window`` (at most the slots of its switches), fixed,
so fragments in flight never share a slot; a rate the window cannot carry
over the round trip is the window's, not the pacer's.

``transport_options.rate``: the rate (scaled like link rates), or, when left
out, the rate the scheme plans for the job: the synchronous rate the
flow-level simulator gives its slowest worker under the job's placement (InArt's
and GRID's LPs maximise exactly that rate; for the other schemes it is the
max-min fair rate on their routes). The controller fills it in
(``paths.transport_options_of``), so a run measures whether the network
delivers the plan: its communication time, retransmissions and losses.

Loss recovery is the base's: RTO timers (RFC 6298) and gap detection.
"""

from testbed.agents.transport.base import Pacer, Transport


class PacedTransport(Transport):
    name = "paced"
    OPTIONS = {"rate": ("rate",)}

    def __init__(self, window_cap: int, link_rate_bps: float, frame_bytes: int, min_rto_s: float,
                 first_result_timeout_s: float = 1.0, options: dict = None):
        super().__init__(window_cap, link_rate_bps, frame_bytes, min_rto_s, first_result_timeout_s, options)
        rate_bps = self.options.get("rate_bps")
        if not rate_bps or rate_bps <= 0:
            raise ValueError("transport paced needs transport_options rate_bps > 0 (the controller fills in the "
                             "planned rate)")
        self.rate_bps = min(rate_bps, link_rate_bps) if link_rate_bps > 0 else rate_bps
        self.pacer = Pacer(self.rate_bps, frame_bytes)

    def start_iteration(self, total: int, acked_seqs=(), now_s: float = 0.0, path_keys=None):
        """As every transport's, but the pacer keeps no credit from the idle time before (compute): its
        catch-up covers a sender woken late while sending, and a burst after compute would outrun the rate."""
        super().start_iteration(total, acked_seqs, now_s, path_keys)
        self.pacer.next_s = max(self.pacer.next_s, now_s)

    def state(self) -> dict:
        return {"rate_bps": self.rate_bps}
