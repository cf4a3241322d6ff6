"""A ring receiver's acknowledgements: cumulative over runs of fragments, delayed a little (TCP's delayed
ACK, RFC 1122 §4.2.3.2 and RFC 5681 §4.2).

An ACK names a run of fragments of one step, ``count`` consecutive indices
from ``first``. One per fragment would be a 58-byte frame back for every
314-byte one, and the ACKs share each worker's downlink with its
predecessor's data: 18% of that link, and on bmv2, whose ports shape in
packets per second of full frames, half of it. So the receiver answers a
run once it holds ``every`` fragments, once the step's chunk is complete,
once a fragment met a CE mark (the echo goes at once, as DCTCP's receiver
does), or ``delay_s`` after the run's first fragment, whichever comes first;
a fragment that does not extend the run (out of order, or another step's)
closes it, and a duplicate (the sender's retransmission: its ACK was lost or
late) is answered at once on its own.

Pure: the ring agent (:mod:`testbed.agents.ring`) passes the clock in and
sends what comes out.
"""

from dataclasses import dataclass
from typing import Optional

#: Fragments per ACK, and the longest an ACK waits (well under the ring's 200 ms minimum RTO).
ACK_EVERY = 4
ACK_DELAY_S = 0.002


@dataclass
class Ack:
    key: tuple          # (iteration, step)
    first: int
    count: int
    ce: bool            # a fragment of the run met a CE mark: ECN_ECHO


@dataclass
class _Run:
    first: int
    count: int
    ce: bool
    due_s: float


class DelayedAcks:
    def __init__(self, every: int = ACK_EVERY, delay_s: float = ACK_DELAY_S):
        self.every = every
        self.delay_s = delay_s
        self.runs = {}          # (iteration, step) -> the run not yet acknowledged

    def on_data(self, key: tuple, index: int, ce: bool, duplicate: bool, complete: bool, now_s: float) -> list:
        """Fragment ``index`` of step ``key`` arrived (``duplicate``: it was here already; ``complete``: it
        completes the step's chunk). The ACKs to send now."""
        out = []
        run = self.runs.get(key)
        if run is not None and (duplicate or run.first + run.count != index):
            out.append(self._close(key))
            run = None
        if duplicate:
            return out + [Ack(key, index, 1, ce)]
        if run is None:
            run = self.runs[key] = _Run(index, 0, False, now_s + self.delay_s)
        run.count += 1
        run.ce |= ce
        if run.count >= self.every or complete or ce:
            out.append(self._close(key))
        return out

    def due(self, now_s: float) -> list:
        """The runs whose delay has run out, acknowledged."""
        return [self._close(key) for key, run in list(self.runs.items()) if run.due_s <= now_s]

    def next_due_s(self) -> Optional[float]:
        return min((run.due_s for run in self.runs.values()), default=None)

    def _close(self, key) -> Ack:
        run = self.runs.pop(key)
        return Ack(key, run.first, run.count, run.ce)
