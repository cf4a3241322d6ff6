"""What every worker transport shares: the sender state of one iteration, RTT estimation, pacing.

A transport is a pure state machine with an injectable clock (every method
takes ``now_s``): the worker agent asks it what to send next, tells it what
was sent and which RESULTs came back, and sleeps until its next deadline. It
never touches a socket, so each branch is unit-tested without a network
(tests/unit/test_transports.py).

Per iteration the sender tracks, for every fragment ``seq``, whether its
RESULT arrived (``acked``), when it was last sent and how many times. Which
fragment may leave is a sliding window over seq: ``seq`` < lowest
unacknowledged + ``window()``, so fragments in flight never share a slot at
their aggregation switch (slot = seq mod slots, window <= slots; SwitchML's
self-clocking), unless the scenario gives ATP's a larger window (its
collisions overflow, ATP's best effort). Subclasses decide ``window()``
(congestion control) and react to ECN echoes and losses; one with more than one window (PA-ATP's CWD
and AWD) replaces ``send_limit()``, and may let fragments outrun the job's
slots on purpose (PA-ATP §II-B 3: the overflow goes to the PS). Transports that use PA-ATP's per-fragment
acknowledgments (GACKs) read them in ``on_gack``; the others ignore them.

Retransmission (RFC 6298 estimator, Karn's rule): RTO = max(min RTO,
SRTT + 4 RTTVAR), 1 s before the first sample, doubled per attempt, at most
``MAX_RTO_S``. A RESULT
answers only once every worker's contribution is in, so the time a worker
waits for a straggler is not network round-trip time: a fragment's timer and
its RTT sample start at the later of its sending and the first RESULT of the
iteration (the moment every worker is known to be sending). Until that first
RESULT, fragments wait ``first_result_timeout_s`` (the straggler allowance)
before they count as lost. A gap (RESULTs for ``DUPTHRESH`` fragments sent
after an unacknowledged one) retransmits it at once, without waiting for its
timer (PA-ATP §III-A: "once a sequence number gap ... is detected").
"""

import heapq
from collections import deque

MAX_RTO_S = 1.0
INITIAL_RTO_S = 1.0     # RFC 6298 (2.1): before the first RTT sample
DUPTHRESH = 3
PACING_CREDIT_FRAMES = 32


class RttEstimator:
    """RFC 6298 smoothed RTT and variance; ``rto_s`` never below ``min_rto_s``."""

    def __init__(self, min_rto_s: float, initial_rto_s: float):
        self.min_rto_s = min_rto_s
        self.initial_rto_s = initial_rto_s
        self.srtt_s = None
        self.rttvar_s = None

    def sample(self, rtt_s: float):
        if self.srtt_s is None:
            self.srtt_s, self.rttvar_s = rtt_s, rtt_s / 2
        else:
            self.rttvar_s = 0.75 * self.rttvar_s + 0.25 * abs(self.srtt_s - rtt_s)
            self.srtt_s = 0.875 * self.srtt_s + 0.125 * rtt_s

    def rto_s(self) -> float:
        if self.srtt_s is None:
            return max(self.min_rto_s, self.initial_rto_s)
        return min(MAX_RTO_S, max(self.min_rto_s, self.srtt_s + 4 * self.rttvar_s))


class Pacer:
    """Departures no faster than the host link: one frame every frame_bits / rate on average.

    A sender woken late (the agent's loop sleeps in ``select``, and shares two cores with the
    switches and the other agents, against a gap of half a millisecond at 5 Mb/s) may catch up by
    at most ``credit_frames`` frames (17 ms at 5 Mb/s), so it keeps the link's rate on average
    without bursting after a pause; the host's htb shapes the wire exactly either way, so a
    catch-up waits in the host's qdisc, not in a switch queue.
    """

    def __init__(self, rate_bps: float, frame_bytes: int, credit_frames: int = PACING_CREDIT_FRAMES):
        self.gap_s = 8 * frame_bytes / rate_bps if rate_bps > 0 else 0.0
        self.credit_s = credit_frames * self.gap_s
        self.next_s = 0.0

    def ready(self, now_s: float) -> bool:
        return now_s >= self.next_s

    def sent(self, now_s: float):
        self.next_s = max(self.next_s, now_s - self.credit_s) + self.gap_s


def window_increase(window: float, slow_start: bool) -> float:
    """What one acknowledgement adds to a congestion window: one in slow start (the window doubles per
    round trip), 1/window after it (one per round trip: TCP's congestion avoidance, RFC 5681 §3.1)."""
    return 1.0 if slow_start else 1.0 / window


class Transport:
    """The sender state of one worker; a subclass names its congestion control.

    ``window_cap`` is the scenario's ``window`` (at most the slots the job has
    at its first aggregation switch, but for transport atp's with ``slot_bound``
    false); ``link_rate_bps`` and ``frame_bytes`` set the pacing; ``min_rto_s`` is the job's ``retransmit_timeout``.
    """

    name = "base"

    #: ``transport_options`` the scenario may give, by name: ("window", most) (an integer in
    #: [1, min(most, the job's window)]; most None = the job's window), ("fragments",) (an integer in
    #: [1, the fragments a worker sends per iteration]), ("weight",) (a number in (0, 1]), ("bool",),
    #: ("duration",) (a positive duration, given to the transport in seconds as ``<option>_s``), ("rate",) (a
    #: rate, scaled like link rates, given in bits per second as ``<option>_bps``).
    #: testbed/scenario/resolve_jobs.py enforces them; defaults and meaning live in the subclass.
    OPTIONS = {}
    #: Whether workers send ahead of the job's slowest on purpose (acknowledged per fragment, not by the
    #: job's RESULTs), so fragments past the job's slots overflow to the PS by design: how many depends on
    #: the windows' dynamics, which the flow-level simulator does not model (testbed.fidelity).
    ASYNCHRONOUS = False
    #: RTT samples from RESULTs (after the iteration's first): the round trip a RESULT closes. PA-ATP
    #: samples its GACKs instead, since its RESULTs also wait for the job's slower workers.
    RTT_FROM_RESULTS = True

    @classmethod
    def option_conflict(cls, options: dict):
        """(option, reason) when ``options`` (each valid on its own) contradict each other, else None."""
        return None

    @classmethod
    def window_within_slots(cls, options: dict) -> bool:
        """Whether, with ``options`` (the job's ``transport_options``), the job's ``window`` is at most
        ``switch.slots`` and each worker's at most its slots at its aggregation switch (the controller
        caps it)."""
        return True

    @classmethod
    def overflows_by_design(cls, options: dict) -> bool:
        """Whether, with ``options``, workers send past the job's slots on purpose, so fragments overflow to
        the PS in numbers the flow-level simulator does not model (testbed.fidelity leaves such counts
        unjudged): an asynchronous transport's always, and one whose window may outrun the slots."""
        return cls.ASYNCHRONOUS or not cls.window_within_slots(options)

    def __init__(self, window_cap: int, link_rate_bps: float, frame_bytes: int, min_rto_s: float,
                 first_result_timeout_s: float = 1.0, options: dict = None):
        self.window_cap = max(1, int(window_cap))
        self.options = dict(options or {})
        self.rtt = RttEstimator(min_rto_s, INITIAL_RTO_S)
        self.pacer = Pacer(link_rate_bps, frame_bytes)
        self.first_result_timeout_s = first_result_timeout_s
        self.stats = dict(sent=0, retransmitted=0, timeouts=0, fast_retransmits=0, ecn_echoes=0, window_cuts=0,
                          releases=0, retx_before_first_result=0)
        self.total = 0
        self.sends = 0

    # -- congestion control: subclasses ------------------------------------------------
    def window(self) -> int:
        return self.window_cap

    def on_ack(self, now_s: float, seq: int, aecn: bool):
        """A RESULT acknowledged fragment ``seq`` for the first time; ``aecn``: it carried PA-ATP's
        aggregator-overflow mark (AECN, §III-B 3)."""

    def on_gack(self, seq: int, now_s: float, progress_sum: int = 0, fanin: int = 1, ecn_echo: bool = False,
                at_ps: bool = False):
        """PA-ATP's gradient ACK (GACK, §III-B 1): fragment ``seq`` of this iteration reached its
        aggregation node; ``progress_sum`` is the node's S_sum over the ``fanin`` workers it
        aggregates, ``ecn_echo`` the CE mark the fragment met, ``at_ps`` whether the PS took it (it
        overflowed the switch, or had no switch) rather than a switch's slot. Transports without GACKs
        ignore it."""

    def state(self) -> dict:
        """Congestion-control state beyond ``window()`` and ``stats``, for the stall diagnosis."""
        return {}

    def on_congestion(self, now_s: float, reason: str, sent_order: int):
        """An ECN echo (``"ecn"``) or a loss (``"loss"``) about a fragment that left as send number
        ``sent_order`` (sends are numbered across iterations, so a subclass can react once per window:
        to signals about fragments sent after its last reaction, RFC 3168 §6.1.2)."""

    # -- one iteration ------------------------------------------------------------------
    def start_iteration(self, total: int, acked_seqs=(), now_s: float = 0.0, path_keys=None):
        """A new iteration of ``total`` fragments; ``acked_seqs`` already have their RESULT.

        ``path_keys[seq]`` names the path a fragment takes (its aggregation node): RESULTs are
        compared for gaps only along one path, since different paths reorder legitimately.
        """
        self.total = total
        self.path_keys = list(path_keys) if path_keys is not None else [0] * total
        self.acked = bytearray(total)
        for seq in acked_seqs:
            self.acked[seq] = 1
        self.done = sum(self.acked)
        self.base = 0
        self.next_seq = 0
        self.sent_at = [0.0] * total
        self.send_order = [0] * total          # when (in sends, counted across iterations) each seq last left
        self.attempts = [0] * total
        self.timers = []                       # heap of (deadline, seq, version): only a seq's newest counts
        self.timer_version = [0] * total
        self.first_result_s = None
        self.first_ack_s = None                # the iteration's first acknowledgement of any kind
        self.started_s = now_s
        self.pending_retx = []                 # seqs to resend at once (gaps, timeouts)
        # Per path, (send number, seq) of every send of this iteration in sending order, for gap detection:
        # an entry leaves once DUPTHRESH later sends of its path were answered (:meth:`_detect_gaps`).
        self.sends_by_path = {}

    def finished(self) -> bool:
        return self.done >= self.total

    def _advance_base(self):
        while self.base < self.total and self.acked[self.base]:
            self.base += 1

    def next_send(self, now_s: float):
        """The next (seq, is_retransmission) to send now, or None (window full, paced, or nothing due)."""
        if not self.pacer.ready(now_s):
            return None
        self._fire_timers(now_s)
        while self.pending_retx:
            seq = self.pending_retx.pop(0)
            if not self.acked[seq]:
                return seq, True
        limit = self.send_limit()
        while self.next_seq < limit:
            seq = self.next_seq
            self.next_seq += 1
            if not self.acked[seq]:
                return seq, False
        return None

    def send_limit(self) -> int:
        """First seq that may not leave yet: the window's right edge (capped at the iteration's end)."""
        self._advance_base()
        return min(self.total, self.base + self.window())

    def on_sent(self, seq: int, retransmission: bool, now_s: float):
        self.pacer.sent(now_s)
        self.sends += 1
        self.send_order[seq] = self.sends
        self.sent_at[seq] = now_s
        if retransmission:
            self.attempts[seq] += 1
            self.stats["retransmitted"] += 1
            if self.first_result_s is None:     # while the job may still wait for a straggler to start
                self.stats["retx_before_first_result"] += 1
        self.stats["sent"] += 1
        self._arm(seq, self._deadline(seq, now_s))
        path = self.path_keys[seq]
        sends = self.sends_by_path.get(path)
        if sends is None:
            sends = self.sends_by_path[path] = deque()
        sends.append((self.sends, seq))

    def _arm(self, seq: int, deadline_s: float):
        """(Re)start ``seq``'s timer: an earlier one of the same seq no longer counts."""
        self.timer_version[seq] += 1
        heapq.heappush(self.timers, (deadline_s, seq, self.timer_version[seq]))

    def _timeout_s(self, seq: int) -> float:
        """How long ``seq`` may go unanswered: the RTO, doubled per attempt (subclasses may hold longer)."""
        return min(MAX_RTO_S, self._rto_s() * (2 ** self.attempts[seq]))

    def _rto_s(self) -> float:
        """The retransmission timeout before doubling (subclasses with more than one estimator choose)."""
        return self.rtt.rto_s()

    def _deadline(self, seq: int, now_s: float) -> float:
        if self.first_result_s is None:
            return now_s + max(self._timeout_s(seq), self.first_result_timeout_s)
        return now_s + self._timeout_s(seq)

    def _answered(self, seq: int) -> bool:
        """Whether ``seq`` needs no loss recovery now (its RESULT came; subclasses may know more)."""
        return bool(self.acked[seq])

    def on_result(self, seq: int, now_s: float, ecn_echo: bool = False, aecn: bool = False):
        """A RESULT (PA-ATP's AACK) for ``seq`` of this iteration arrived, with the PS's ECN_ECHO and
        the switch's AECN flags."""
        if ecn_echo:
            self.stats["ecn_echoes"] += 1
            self.on_congestion(now_s, "ecn", self.send_order[seq] if seq < self.total else self.sends)
        if seq >= self.total or self.acked[seq]:
            return
        if self.first_result_s is None:
            self.first_result_s = now_s
            if self.first_ack_s is None:
                self.first_ack_s = now_s
            self._restart_timers(now_s)
        elif self.attempts[seq] == 0 and self.RTT_FROM_RESULTS:
            self.rtt.sample(now_s - max(self.sent_at[seq], self.first_result_s))
        self.acked[seq] = 1
        self.done += 1
        self.on_ack(now_s, seq, aecn)
        if self.attempts[seq] == 0:
            # A RESULT for a retransmitted fragment may answer its original (Karn): it proves no gap.
            self._detect_gaps(seq, now_s)

    def _restart_timers(self, now_s: float):
        """The first RESULT: every worker is sending; outstanding fragments get a network timeout from now."""
        outstanding = {seq for _, seq, version in self.timers if version == self.timer_version[seq]}
        self.timers = []
        for seq in sorted(outstanding):
            self._arm(seq, now_s + self._timeout_s(seq))

    def _detect_gaps(self, acked_seq: int, now_s: float):
        """Fragments of the same path sent ``DUPTHRESH`` sends before ``acked_seq`` and still unanswered
        (:meth:`_answered`), in seq order. Each send is looked at once: the path's sends are in sending
        order, so those at least ``DUPTHRESH`` before this one are at its front, and leave it here. A send
        that was superseded (its seq sent again later), answered (answers are never withdrawn within an
        iteration) or waiting to be resent needs no more looking at: a resend is a new entry."""
        sends = self.sends_by_path.get(self.path_keys[acked_seq])
        if not sends:
            return
        before = self.send_order[acked_seq] - DUPTHRESH
        send_order, answered, pending = self.send_order, self._answered, self.pending_retx
        gaps = []
        while sends and sends[0][0] <= before:
            order, seq = sends.popleft()
            if send_order[seq] == order and not answered(seq) and seq not in pending:
                gaps.append(seq)
        for seq in sorted(gaps):
            self._on_gap(seq, now_s)

    def _on_gap(self, seq: int, now_s: float):
        """``seq`` is unanswered behind answered ones: lost, so retransmit it at once (a loss signal)."""
        self.stats["fast_retransmits"] += 1
        self.pending_retx.append(seq)
        self.on_congestion(now_s, "loss", self.send_order[seq])

    def _fire_timers(self, now_s: float):
        while self.timers and self.timers[0][0] <= now_s:
            _, seq, version = heapq.heappop(self.timers)
            if self.acked[seq] or version != self.timer_version[seq] or seq in self.pending_retx:
                continue
            self._on_timer(seq, now_s)

    def _on_timer(self, seq: int, now_s: float):
        """``seq``'s timer expired unanswered: lost, so retransmit it (a loss signal). Subclasses that know
        where a fragment is (PA-ATP's GACKs) may wait longer or retransmit it for another reason."""
        self.stats["timeouts"] += 1
        self.pending_retx.append(seq)
        self.on_congestion(now_s, "loss", self.send_order[seq])

    def next_deadline_s(self, now_s: float):
        """When the worker must look again even if nothing arrives (a timer, or the pacer)."""
        times = []
        if self.timers:
            times.append(self.timers[0][0])
        if self.pending_retx or self.next_seq < self.send_limit():
            times.append(self.pacer.next_s)
        return min(times) if times else None
