"""PA-ATP's worker side (PA-ATP §III-B, §IV), and StrawAsyn with the ablations of §VI-D, as one state machine.

Dual sliding windows (§III-B 1). Every fragment gets two acknowledgments:
a GACK from the node that took it (its aggregation switch, or the PS for a
fragment that overflowed the aggregators) and an AACK, the RESULT carrying
its aggregate once every worker's fragment is in. ``last_GACK`` and
``last_AACK`` are the highest seqs acknowledged continuously; here, with
per-seq tracking, ``gbase`` = ``last_GACK + 1`` is the lowest seq with
neither a GACK nor a RESULT (a RESULT proves the fragment arrived) and
``base`` = ``last_AACK + 1`` the lowest without a RESULT. The congestion
window CWD slides on GACKs, the asynchronous degree window AWD on AACKs, and
a fragment leaves only below both right edges:
``seq < min(gbase + CWD, base + AWD)`` (the paper's ``snd_next <
min(last_GACK + CWD, last_AACK + AWD)``, counted from the first seq not yet
acknowledged, as every window of :class:`.base.Transport` is).

Progress-aware congestion control (§III-B 2). Each new GACK adds one to CWD
(within [1, the job's window cap]: the scenario's ``window``, at most the
job's slots at its first switch) until CWD is first cut, and 1/CWD (one per
round) after it: DCTCP's growth, which §III-B 2 says PA-ATP follows (RFC
8257 §3.3 keeps TCP's slow start and congestion avoidance). The paper's
sentence "once receiving a GACK packet, the worker will increase its window
by one" read as the only rule doubles CWD every round, while a cut at
congestion level alpha removes alpha/2 of it: the window stops growing only
at alpha = 1, a queue marking every packet, so it grows until the queue
tail-drops (``congestion_avoidance: false`` keeps that reading). Measured on
the two-job testbed (VGG19, Hadoop load 0.8, pyswitch): with +1 per GACK
throughout, 10.5% and 11.0% of the fragments were retransmitted and S1's two
busiest path ports dropped 1265 packets; with congestion avoidance, 0.1% and
0.2%, 14 drops there, and the mean iteration 0.330 s instead of 0.388 s. Nor would
background DCTCP flows keep "a fair shared bandwidth" (§III-B 2) against a
window that doubles every round.

CWD grows only while it is what holds the worker back (congestion window
validation, RFC 7661; Linux's ``tcp_is_cwnd_limited``, which DCTCP runs
under): in slow start while CWD is below twice the most fragments in flight
(sent, neither GACKed nor RESULTed) over this GACK round and the last, after
it while that most reached CWD. A worker held back by AWD or by its pacer
does not grow a window it cannot use: on Fig. 8's set-up job A's leading
worker, held by AWD while it had a path to itself, grew CWD to 64 with 0-2
fragments in flight, and when job B's worker joined that path both windows
overran its 128-packet queue; job B then took 1.9 s instead of 1.1 s.

The GACK's PROG field carries S_sum, the sum over the ``N`` workers the node
aggregates (the GACK's ``fanin``) of the last seq it got from each. Then p_l =
last_GACK - last_AACK, s_avg = S_sum / N, p_avg = s_avg - last_AACK, p = p_l /
p_avg clipped to [0, p_max] with p_max = AWD / p_avg. The congestion level
alpha follows DCTCP: at the end of every round, alpha = (1 - f) alpha + f e, e
the fraction of the round's GACKs that carried a CE mark. A CE-marked GACK
about a fragment sent after the last cut (at most one cut per round, RFC 3168
§6.1.2, as ``atp``) cuts CWD x (1 - d/2) with d = alpha ^ (1 - p / p_max) (Eq.
1): a leading worker (p near p_max) halves whatever alpha is, the most stalled
one (p near 0) cuts as DCTCP does. The cut uses alpha as the rounds before
measured it (alpha_i of Eq. 1); the GACK that cuts does not also grow CWD.

Asynchronous degree control (§III-B 3). At the end of every AACK round,
AWD = AWD x (1 - beta / 2) if any of its RESULTs carried AECN (Eq. 2), else
AWD + 1; then beta = (1 - w) beta + w g, g the fraction of the round's RESULTs
that carried AECN.

A round (DCTCP's RTT round) ends at the first acknowledgment, of its kind,
of a fragment sent after the round began (sends are numbered across
iterations), so rounds need no RTT estimate and follow each ACK clock.

Losses. A GACK proves its fragment reached the node that took it, and says
which (its ``agg_node``: a switch, or the PS when the fragment overflowed),
so loss recovery treats fragments by where they are:

- the RTO is measured on GACKs (the network round trip to the aggregation
  node; RESULTs also wait for the job's slower workers, so they are not
  sampled), the switch's and the PS's apart: a fragment not GACKed yet
  waits the longer of the two measured RTOs, since it may have overflowed
  to the PS, whose GACKs queue behind its RESULTs on its own link (on
  PA-ATP's testbed StrawAsyn resent 14% of its fragments although they had
  arrived while one estimator mixed both);
- an un-GACKed fragment times out after the RTO, and is fast-retransmitted
  when a gap opens in the AACKs of its path (§III-B 1). GACKs do not
  detect gaps: an overflowed fragment's GACK comes from the PS, behind the
  switch's GACKs of later fragments, so their order proves no loss;
- a fragment a switch's slot holds is retransmitted on an AACK gap (§III-B
  1: the retransmission releases the partial aggregate to the PS, where the
  job's other contributions of that seq went when they overflowed). That
  is a *release*, not a loss: it is counted apart (``releases``; the run's
  summary does not count it as a spurious retransmission) and cuts no
  window;
- a fragment the PS took needs nothing: no gap makes it lost;
- a GACKed fragment's timer is the hold time ``HOLD_RTOS`` x RTO (before the
  iteration's first RESULT, at least the straggler allowance), counted from
  the job's latest new RESULT: it waits for the other workers as long as the
  job progresses. Once the job stood still for a hold time (the lowest
  outstanding seqs are all split between a switch's slot and the PS, so no
  RESULT comes to open a gap), a switch-held fragment is released, and a
  PS-held one retransmitted as a loss; an un-GACKed one's timer is the RTO
  from its sending (the node GACKs at once, stragglers or not). The switch
  keeps such splits rare: a contribution whose seq already overflowed to
  the PS follows it there rather than wait in a slot (``overflow_followed``,
  p4/README.md); the hold time covers what remains (seqs sharing an
  overflow cell, a switch that does not count the job's overflow).

Measured on the two-job testbed (VGG19, no background, 5 iterations): with
every AACK gap and the RTO from RESULTs, 6.9% of the fragments were
retransmitted although their originals had arrived; with this split, 3.1%,
all in the first iteration's slow start. On Fig. 8's set-up (a leading and a
lagging worker per job) releases made up most retransmissions, and hold
timers counted from the GACK (not from the job's progress) released 101 of a
leading worker's 586 fragments while its partner caught up. A loss halves
CWD, once per round (TCP's and DCTCP's reaction; the paper names none). The PS's ECN_ECHO on
RESULTs is ignored: it is the job-wide, synchronous signal PA-ATP replaces
by each worker's own marks on its GACKs.

StrawAsyn and the ablations (§V-A, §VI-D Fig. 15) are this code with
switches: ``progress_aware: false`` makes d = alpha (DCTCP, StrawAsyn+AL);
``awd_limit: false`` drops the AWD edge (StrawAsyn+PC); transport
``strawasyn`` is both off (asynchronous windows, no progress, no AWD).
Without AWD, p_max = N: p_l cannot exceed the sum of the N workers' local
progress, N x p_avg.

Choices where the paper is silent:

- initial CWD 8 (``initial_cwd``): ATP's initial window here, so the two
  start alike (eight 64-lane frames per worker keep an 8-worker incast
  inside the default 64-packet ECN threshold);
- initial AWD = the job's window cap (``initial_awd``): the asynchrony the
  job's own slots hold without overflow; beyond it AWD grows only while no
  AECN comes back;
- AWD within [1, the fragments of one iteration]: 1 keeps the job moving;
  above, only AECN bounds it, as in §III-C (R_max = eta (M + BDP) + N, Eq. 7):
  PA-ATP deliberately sends past the aggregators to the PS over idle
  bandwidth (Eq. 11-12), so neither the slots nor the job's window cap AWD;
  past one iteration it limits nothing;
- no worker sends ``PA_SEQS`` (1024) or more past its base, with or without
  AWD (StrawAsyn too): the switch keeps one overflow cell per seq modulo
  ``PA_SEQS`` (ina.p4's ``pa_overflow``), cleared by the seq's RESULT, so a
  seq that far ahead would find the cell of one not yet aggregated and
  follow it to the PS while its siblings aggregate at the switch. Fig. 8's
  job A with 1024 slots per job (1368 fragments, its leading worker AWD
  past its lagging one) stood still so for a hold time (four RTOs), 7.5 s
  against 3.5 s with this bound. It binds only on gradients of over 1024 fragments;
- congestion avoidance after the first cut (``congestion_avoidance``,
  default true; see above);
- alpha and beta start at 1 (Linux DCTCP's initial alpha): until measured,
  a first mark halves as TCP would;
- f = w = 0.125 (``ecn_weight``, ``aecn_weight``), the paper's §V-A values;
- progress unknown (no GACK yet this iteration, or p_avg <= 0: a progress
  sum older than the RESULTs) counts as p = 0: d = alpha, DCTCP's cut; the
  progress is that of the latest GACK (sub-models aggregated at different
  nodes each report their own node's S_sum and N). At an iteration's start
  S_sum may still hold a slower worker's seq of the previous iteration: p_avg
  is overestimated, so workers cut as DCTCP would rather than harder;
- eta, the switch's AECN threshold factor, is a switch parameter:
  :func:`aecn_threshold_factor` gives Eq. 9's upper bound, the paper's choice.
"""

from testbed.agents.transport.base import INITIAL_RTO_S, RttEstimator, Transport, window_increase
from testbed.dataplane.program import PA_SEQS

MIN_CWD = 1
MIN_AWD = 1
#: A GACKed fragment's timer, in RTOs (at least the straggler allowance): it waits for other workers.
HOLD_RTOS = 4
DEFAULT_INITIAL_CWD = 8
DEFAULT_ECN_WEIGHT = 0.125      # f (§V-A)
DEFAULT_AECN_WEIGHT = 0.125     # w (§V-A)
INITIAL_ALPHA = 1.0
INITIAL_BETA = 1.0


def aecn_threshold_factor(aggregators: int, bdp_pkts: float, aggregation_pkts_per_rtt: float, jobs: int) -> float:
    """eta at the upper bound of PA-ATP's Eq. 9: 1 - (C_A + N) / (M + BDP) (§III-C).

    ``aggregators`` is M, the switch's aggregators; ``bdp_pkts`` the bandwidth-delay product in
    packets; ``aggregation_pkts_per_rtt`` C_A, the aggregation throughput (the sum of the most
    stalled workers' rates of all jobs) in packets per round trip; ``jobs`` N, the jobs with
    stragglers sharing the switch. The switch marks AECN once its used aggregators plus overflowed
    gradients exceed eta x (M + BDP) = M + BDP - C_A - N, so the largest total AWD, R_max = eta (M +
    BDP) + N (Eq. 7), equals M + BDP - C_A, the limit of Eq. 8. The paper sets eta to this bound
    "to maximize the throughput". ValueError when no eta in (0, 1) satisfies Eq. 9.
    """
    if aggregators < 0 or bdp_pkts < 0 or aggregation_pkts_per_rtt < 0 or jobs < 1:
        raise ValueError(f"expected M, BDP, C_A >= 0 and N >= 1, got M={aggregators}, BDP={bdp_pkts}, "
                         f"C_A={aggregation_pkts_per_rtt}, N={jobs}")
    capacity = aggregators + bdp_pkts
    eta = 1.0 - (aggregation_pkts_per_rtt + jobs) / capacity if capacity > 0 else 0.0
    if eta <= 0:
        raise ValueError(f"no AECN threshold fits: C_A + N = {aggregation_pkts_per_rtt + jobs:g} is not below "
                         f"M + BDP = {capacity:g} (Eq. 9)")
    return eta


class PaAtpTransport(Transport):
    """PA-ATP's dual windows; ``progress_aware`` and ``awd_limit`` switch its two modules (§VI-D)."""

    name = "pa-atp"
    RTT_FROM_RESULTS = False
    ASYNCHRONOUS = True
    OPTIONS = {"initial_cwd": ("window", None), "initial_awd": ("fragments",), "ecn_weight": ("weight",),
               "aecn_weight": ("weight",), "progress_aware": ("bool",), "awd_limit": ("bool",),
               "congestion_avoidance": ("bool",)}
    #: What ``progress_aware`` and ``awd_limit`` are when not given.
    DEFAULT_PROGRESS_AWARE = True
    DEFAULT_AWD_LIMIT = True
    #: Options that set the AWD module, meaningless once ``awd_limit`` is off.
    AWD_OPTIONS = ("initial_awd", "aecn_weight")

    @classmethod
    def option_conflict(cls, options: dict):
        if not options.get("awd_limit", cls.DEFAULT_AWD_LIMIT):
            for key in cls.AWD_OPTIONS:
                if key in options:
                    return key, "sets the asynchronous degree window, which awd_limit: false turns off"
        return None

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        o = self.options
        self.ps_rtt = RttEstimator(self.rtt.min_rto_s, INITIAL_RTO_S)   # of the GACKs the PS sends
        self.progress_aware = bool(o.get("progress_aware", self.DEFAULT_PROGRESS_AWARE))
        self.awd_limit = bool(o.get("awd_limit", self.DEFAULT_AWD_LIMIT))
        self.ecn_weight = float(o.get("ecn_weight", DEFAULT_ECN_WEIGHT))
        self.aecn_weight = float(o.get("aecn_weight", DEFAULT_AECN_WEIGHT))
        self.max_cwd = self.window_cap
        self.cwd = float(max(MIN_CWD, min(self.max_cwd, o.get("initial_cwd", DEFAULT_INITIAL_CWD))))
        self.awd = float(max(MIN_AWD, o.get("initial_awd", self.window_cap)))
        self.alpha = INITIAL_ALPHA
        self.beta = INITIAL_BETA
        self.recover_order = 0          # sends up to this one were out when CWD was last cut
        self.slow_start = True          # until CWD is first cut: +1 per GACK; after it, +1/CWD
        self.congestion_avoidance = bool(o.get("congestion_avoidance", True))
        self.gack_round_end = 0         # a GACK about a later send ends the GACK round
        self.gack_round = [0, 0]        # [GACKs, CE-marked GACKs] of the round so far
        self.aack_round_end = 0
        self.aack_round = [0, 0]        # [RESULTs, AECN-marked RESULTs]
        self.progress_sum = None        # S_sum of the latest GACK of this iteration, and its N
        self.progress_workers = 1
        self.stats.update(gacks=0, gack_ce_marks=0, aecn_marks=0, awd_cuts=0, held_timeouts=0)
        self.gacked = bytearray(0)
        self.at_ps = bytearray(0)
        self.gbase = 0
        self.last_result_s = None
        self.in_flight = bytearray(0)   # per seq: sent, and neither GACKed nor RESULTed yet
        self.flight = 0                 # how many are in flight
        self.round_flight = [0, 0]      # the most in flight during [the last GACK round, this one]

    # -- the dual windows --------------------------------------------------------------------
    def window(self) -> int:
        return int(self.cwd)

    def start_iteration(self, total: int, acked_seqs=(), now_s: float = 0.0, path_keys=None):
        super().start_iteration(total, acked_seqs, now_s, path_keys)
        self.gacked = bytearray(total)
        self.at_ps = bytearray(total)          # GACKed by the PS: no switch slot holds it
        self.gbase = 0
        self.progress_sum = None
        self.last_result_s = None              # the latest new RESULT of this iteration
        self.in_flight = bytearray(total)
        self.flight = 0
        self.awd = min(self.awd, float(self._max_awd()))

    def _max_awd(self) -> int:
        return max(MIN_AWD, self.total)

    def _advance_base(self):
        super()._advance_base()
        self.gbase = max(self.gbase, self.base)
        while self.gbase < self.total and (self.gacked[self.gbase] or self.acked[self.gbase]):
            self.gbase += 1

    def send_limit(self) -> int:
        """``min(gbase + CWD, base + AWD)``, the AWD edge only with ``awd_limit``, and never ``PA_SEQS`` or
        more past ``base`` (the switch's overflow cells, see the module docstring)."""
        self._advance_base()
        limit = min(self.total, self.gbase + self.window(), self.base + PA_SEQS)
        if self.awd_limit:
            limit = min(limit, self.base + int(self.awd))
        return limit

    # -- progress degree (§III-B 2) -----------------------------------------------------------
    def progress(self):
        """(p_l, p_avg, p, p_max) from the latest GACK's S_sum; None while progress is unknown
        (no GACK yet this iteration, p_avg <= 0, or ``progress_aware`` off)."""
        if not self.progress_aware or self.progress_sum is None:
            return None
        self._advance_base()
        last_aack, last_gack = self.base - 1, self.gbase - 1
        p_local = last_gack - last_aack
        p_avg = self.progress_sum / self.progress_workers - last_aack
        if p_avg <= 0:
            return None
        p_max = self.awd / p_avg if self.awd_limit else float(self.progress_workers)
        p = min(max(p_local / p_avg, 0.0), p_max)
        return p_local, p_avg, p, p_max

    def decrease_factor(self) -> float:
        """d = alpha ^ (1 - p / p_max) (§III-B 2); alpha when progress is unknown or ignored."""
        progress = self.progress()
        if progress is None:
            return self.alpha
        _, _, p, p_max = progress
        return self.alpha ** (1.0 - p / p_max)

    # -- GACKs: CWD ---------------------------------------------------------------------------
    def on_gack(self, seq: int, now_s: float, progress_sum: int = 0, fanin: int = 1, ecn_echo: bool = False,
                at_ps: bool = False):
        if seq >= self.total:
            return
        self.progress_sum, self.progress_workers = progress_sum, max(1, int(fanin))
        if self.gacked[seq] or self.acked[seq]:
            return
        self.gacked[seq] = 1
        self.at_ps[seq] = at_ps
        self._landed(seq)
        if self.first_ack_s is None:
            self.first_ack_s = now_s
        self._advance_base()
        self.stats["gacks"] += 1
        order = self.send_order[seq]
        if self.attempts[seq] == 0:     # Karn: a retransmission's GACK may answer its original
            (self.ps_rtt if at_ps else self.rtt).sample(now_s - self.sent_at[seq])
        self._arm(seq, self._deadline(seq, now_s))
        if ecn_echo:
            self.stats["gack_ce_marks"] += 1
        if ecn_echo and order > self.recover_order:
            self._cut_cwd(self.decrease_factor())
        elif self.cwd_limited():
            step = window_increase(self.cwd, self.slow_start or not self.congestion_avoidance)
            self.cwd = min(float(self.max_cwd), self.cwd + step)
        self.gack_round[0] += 1
        self.gack_round[1] += bool(ecn_echo)
        if order > self.gack_round_end:
            gacks, marked = self.gack_round
            self.alpha = (1 - self.ecn_weight) * self.alpha + self.ecn_weight * marked / gacks
            self.gack_round = [0, 0]
            self.gack_round_end = self.sends
            self.round_flight = [self.round_flight[1], self.flight]

    def on_sent(self, seq: int, retransmission: bool, now_s: float):
        super().on_sent(seq, retransmission, now_s)
        if not (self.in_flight[seq] or self.gacked[seq] or self.acked[seq]):
            self.in_flight[seq] = 1
            self.flight += 1
            self.round_flight[1] = max(self.round_flight[1], self.flight)

    def _landed(self, seq: int):
        """``seq`` was acknowledged (GACK or RESULT): no longer in flight."""
        if self.in_flight[seq]:
            self.in_flight[seq] = 0
            self.flight -= 1

    def cwd_limited(self) -> bool:
        """Whether CWD was what held the sender back (RFC 7661; Linux's ``tcp_is_cwnd_limited``): in slow
        start, CWD below twice the most in flight over this GACK round and the last; after it, that most
        in flight reached CWD."""
        used = max(self.round_flight)
        if self.slow_start or not self.congestion_avoidance:
            return self.cwd < 2 * used
        return used >= int(self.cwd)

    # -- loss recovery: GACKed fragments wait, the others are recovered ------------------------
    def _answered(self, seq: int) -> bool:
        """For AACK gaps: the RESULT came, or the PS holds the fragment (a switch-held one is released)."""
        return bool(self.acked[seq] or self.at_ps[seq])

    def _timeout_s(self, seq: int) -> float:
        rto = super()._timeout_s(seq)
        return HOLD_RTOS * rto if self.gacked[seq] else rto

    def _rto_s(self) -> float:
        """The RTO of the switch's GACKs, or of the PS's once one was measured and it is longer: a fragment
        not GACKed yet may be answered by either, and the PS answers an overflowed one from behind its own
        link's queue (a copy of every RESULT per worker where no switch multicasts), often far later.
        Only measured estimators count; before any sample, RFC 6298's initial RTO."""
        measured = [e.rto_s() for e in (self.rtt, self.ps_rtt) if e.srtt_s is not None]
        return max(measured) if measured else self.rtt.rto_s()

    def _on_timer(self, seq: int, now_s: float):
        """A GACKed fragment waits at its node for the job's other workers for as long as the job makes
        progress: its hold time counts from the latest new RESULT. Were its aggregate or RESULT lost, the
        RESULTs of later fragments would open a gap (:meth:`_answered`), so its timer covers the job
        standing still: its partners are elsewhere (the lowest outstanding seqs all split between a
        switch's slot and the PS, so no RESULT comes to open a gap). A switch-held fragment is then
        retransmitted as a release (:meth:`_on_gap`), not as a loss; a PS-held one as a loss."""
        if not self.gacked[seq]:
            super()._on_timer(seq, now_s)
            return
        if self.last_result_s is not None:
            deadline_s = self.last_result_s + self._timeout_s(seq)
            if deadline_s > now_s:
                self._arm(seq, deadline_s)
                return
        self.stats["held_timeouts"] += 1
        if self.at_ps[seq]:
            super()._on_timer(seq, now_s)
        else:
            self._release(seq)

    def _deadline(self, seq: int, now_s: float) -> float:
        """An un-GACKed fragment waits one RTO even before the iteration's first RESULT: its node GACKs
        at once, whatever the other workers do, so the straggler allowance is only for GACKed ones."""
        if self.gacked[seq]:
            return super()._deadline(seq, now_s)
        return now_s + self._timeout_s(seq)

    def _on_gap(self, seq: int, now_s: float):
        """A gap in the AACKs behind a fragment a switch's slot holds (it was GACKed, not by the PS) is no
        loss: the fragment's partners went elsewhere (they overflowed to the PS, or met another seq in
        the slot), so its aggregate cannot complete there. Retransmitting it releases the partial
        aggregate to the PS (§III-B 1): a release, counted apart (``releases``), which cuts no window."""
        if not self.gacked[seq]:
            super()._on_gap(seq, now_s)
            return
        self._release(seq)

    def _release(self, seq: int):
        self.stats["releases"] += 1
        self.pending_retx.append(seq)

    def _cut_cwd(self, d: float):
        self.slow_start = False
        self.cwd = max(float(MIN_CWD), self.cwd * (1 - d / 2))
        self.recover_order = self.sends
        self.stats["window_cuts"] += 1

    def on_congestion(self, now_s: float, reason: str, sent_order: int):
        """A loss halves CWD once per round; the PS's ECN echo on RESULTs is not PA-ATP's signal."""
        if reason == "loss" and sent_order > self.recover_order:
            self._cut_cwd(1.0)

    # -- AACKs (RESULTs): AWD (§III-B 3) -----------------------------------------------------------
    def on_ack(self, now_s: float, seq: int, aecn: bool):
        self.last_result_s = now_s
        self._landed(seq)
        self._advance_base()
        if aecn:
            self.stats["aecn_marks"] += 1
        self.aack_round[0] += 1
        self.aack_round[1] += bool(aecn)
        if self.send_order[seq] <= self.aack_round_end:
            return
        results, marked = self.aack_round
        if self.awd_limit:
            if marked:
                self.awd = max(float(MIN_AWD), self.awd * (1 - self.beta / 2))
                self.stats["awd_cuts"] += 1
            else:
                self.awd = min(float(self._max_awd()), self.awd + 1)
        self.beta = (1 - self.aecn_weight) * self.beta + self.aecn_weight * marked / results
        self.aack_round = [0, 0]
        self.aack_round_end = self.sends

    def state(self) -> dict:
        progress = self.progress()
        return {"cwd": self.cwd, "awd": self.awd if self.awd_limit else None, "alpha": self.alpha,
                "beta": self.beta, "progress_degree": progress[2] if progress else None, "in_flight": self.flight,
                "progress_aware": self.progress_aware, "awd_limit": self.awd_limit,
                "ps_gack_srtt_s": self.ps_rtt.srtt_s}


class StrawAsynTransport(PaAtpTransport):
    """StrawAsyn (§V-A): PA-ATP's asynchronous CWD without progress awareness or AWD."""

    name = "strawasyn"
    OPTIONS = {"initial_cwd": ("window", None), "ecn_weight": ("weight",), "congestion_avoidance": ("bool",)}
    DEFAULT_PROGRESS_AWARE = False
    DEFAULT_AWD_LIMIT = False
