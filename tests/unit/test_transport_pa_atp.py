"""PA-ATP's worker side (and StrawAsyn, the §VI-D ablations) as a pure state machine: every formula of
PA-ATP §III-B/§III-C pinned with hand-computed values on an injected clock, no network.

Sends are numbered from 1 across iterations; a round (of GACKs or of AACKs) ends at the first
acknowledgment of a fragment sent after it began. Pacing is off (link rate 0).
"""

import math

import pytest

from testbed.agents.config import AgentConfig, SubmodelAssignment
from testbed.agents.transport import TRANSPORTS, make_transport
from testbed.agents.transport.pa_atp import (DEFAULT_AECN_WEIGHT, DEFAULT_ECN_WEIGHT, DEFAULT_INITIAL_CWD,
                                             HOLD_RTOS, PaAtpTransport, StrawAsynTransport, aecn_threshold_factor)
from testbed.agents.worker import Worker
from testbed.dataplane.program import PA_SEQS
from testbed.dataplane.wire import FLAG_AECN, FLAG_ECN_ECHO, FLAG_GACK, FLAG_RESULT, INA_HEADER


def pa(name="pa-atp", window_cap=32, **options):
    return make_transport(name, window_cap=window_cap, link_rate_bps=0.0, frame_bytes=336, min_rto_s=0.2,
                          first_result_timeout_s=10.0, options=options)


def sent(t, now_s=0.0):
    """The seqs the transport lets out now (all first transmissions here)."""
    out = []
    while (due := t.next_send(now_s)) is not None:
        t.on_sent(*due, now_s)
        out.append(due[0])
    return out


def test_registry_defaults_and_strawasyn_is_pa_atp_with_both_modules_off():
    assert TRANSPORTS["pa-atp"] is PaAtpTransport and TRANSPORTS["strawasyn"] is StrawAsynTransport
    assert issubclass(StrawAsynTransport, PaAtpTransport)
    assert not [k for k, v in vars(StrawAsynTransport).items() if callable(v)]   # no code of its own
    t = pa()
    assert (t.progress_aware, t.awd_limit, t.cwd, t.alpha, t.beta) == (True, True, DEFAULT_INITIAL_CWD, 1.0, 1.0)
    assert t.ecn_weight == DEFAULT_ECN_WEIGHT == 0.125 and t.aecn_weight == DEFAULT_AECN_WEIGHT == 0.125
    assert t.awd == 32                                           # the job's window cap
    s = pa("strawasyn")
    assert (s.progress_aware, s.awd_limit) == (False, False)
    assert (pa(awd_limit=False).progress_aware, pa(awd_limit=False).awd_limit) == (True, False)           # +PC
    assert (pa(progress_aware=False).progress_aware, pa(progress_aware=False).awd_limit) == (False, True)  # +AL


def test_cwd_slides_on_gacks_awd_on_aacks_and_the_smaller_right_edge_limits():
    t = pa(initial_cwd=2, initial_awd=4)
    t.start_iteration(20, now_s=0.0)
    assert sent(t) == [0, 1]                                     # CWD edge 0 + 2 < AWD edge 0 + 4
    t.on_gack(0, 0.01)
    assert (t.cwd, t.gbase, t.base) == (3, 1, 0)                 # +1 per GACK; CWD slid past 0
    assert sent(t) == [2, 3]                                     # CWD edge 1 + 3 = AWD edge 0 + 4
    t.on_gack(1, 0.02)
    assert t.cwd == 4 and t.send_limit() == 4                    # CWD edge 2 + 4 = 6, AWD edge 0 + 4 = 4
    assert sent(t) == []
    t.on_result(0, 0.03)                                         # AACK: AWD slides; its round ends, no AECN: +1
    assert (t.base, t.awd) == (1, 5)
    assert sent(t) == [4, 5]                                     # both edges at 6: 2 + 4 and 1 + 5
    t.on_gack(2, 0.04)
    t.on_gack(3, 0.04)
    assert t.cwd == 6 and t.send_limit() == 6                    # CWD edge 4 + 6 = 10, AWD edge 1 + 5 = 6
    t.on_result(1, 0.05)                                         # sent (send 2) before round 2 began (send 4)
    assert t.awd == 5 and sent(t) == [6]                         # AWD edge 2 + 5 = 7


def test_without_gacks_both_windows_slide_on_results_and_awd_stops_at_the_iteration():
    t = pa(initial_cwd=2)
    t.start_iteration(10, now_s=0.0)
    assert t.awd == 10                                           # window cap 32, but 10 fragments
    assert sent(t) == [0, 1]
    t.on_result(0, 0.01)                                         # a RESULT proves the fragment arrived
    assert (t.gbase, t.cwd, t.awd) == (1, 2, 10)                 # no GACK, no growth; AWD capped at 10
    assert sent(t) == [2]


def test_progress_degree_p_avg_and_p_max_from_the_gack_progress_sum():
    t = pa(initial_cwd=10, initial_awd=19)
    t.start_iteration(100, now_s=0.0)
    assert sent(t) == list(range(10))
    assert t.progress() is None                                  # no GACK yet: unknown
    for seq in range(6):
        t.on_gack(seq, 0.01, progress_sum=24, fanin=4)           # 4 workers, last seqs summing to 24
    t.on_result(0, 0.02)                                         # AACK round ends: AWD 19 + 1
    t.on_result(1, 0.02)
    assert (t.base, t.gbase, t.awd) == (2, 6, 20)
    # p_l = last_GACK 5 - last_AACK 1 = 4; s_avg = 24 / 4 = 6; p_avg = 6 - 1 = 5; p = 4/5; p_max = 20/5
    assert t.progress() == (4, 5.0, 0.8, 4.0)
    assert t.alpha == 0.875                                      # the GACK round ended at seq 0: e = 0
    assert t.decrease_factor() == pytest.approx(0.875 ** 0.8) == pytest.approx(0.898683, abs=1e-6)
    t.on_gack(6, 0.03, progress_sum=0, fanin=4)                  # p_avg = 0 - 1 < 0: progress unknown
    assert t.progress() is None and t.decrease_factor() == 0.875  # d = alpha (DCTCP)


def test_progress_degree_is_clipped_to_p_max():
    t = pa(initial_cwd=10, initial_awd=10)
    t.start_iteration(100, now_s=0.0)
    sent(t)
    for seq in range(8):
        t.on_gack(seq, 0.01, progress_sum=16, fanin=4)
    t.on_result(0, 0.02, aecn=True)                              # AECN round: AWD 10 x (1 - 1/2) = 5
    assert t.awd == 5
    # p_l = 7 - 0 = 7; p_avg = 16/4 - 0 = 4; p = 7/4 = 1.75 > p_max = 5/4: clipped, so d = alpha^0 = 1
    assert t.progress() == (7, 4.0, 1.25, 1.25)
    assert t.decrease_factor() == 1.0


def test_without_awd_p_max_is_the_number_of_workers():
    t = pa(initial_cwd=10, awd_limit=False)                      # StrawAsyn+PC
    t.start_iteration(100, now_s=0.0)
    sent(t)
    for seq in range(6):
        t.on_gack(seq, 0.01, progress_sum=8, fanin=4)
    t.on_result(0, 0.02)
    t.on_result(1, 0.02)
    assert t.progress() == (4, 1.0, 4.0, 4.0)                    # p = 4/1, p_max = N = 4
    assert t.decrease_factor() == 1.0
    t.on_gack(6, 0.03, progress_sum=24, fanin=4)                 # p_l = 5, p_avg = 6 - 1 = 5: p = 1
    assert t.progress() == (5, 5.0, 1.0, 4.0)
    assert t.decrease_factor() == pytest.approx(t.alpha ** 0.75)


def test_progress_unaware_decrease_factor_is_alpha():
    for t in (pa(initial_cwd=10, progress_aware=False), pa("strawasyn", initial_cwd=10)):
        t.start_iteration(100, now_s=0.0)
        sent(t)
        for seq in range(6):
            t.on_gack(seq, 0.01, progress_sum=8, fanin=4)
        assert t.progress() is None and t.decrease_factor() == t.alpha == 0.875


def test_alpha_is_updated_once_per_round_and_cwd_cut_by_one_minus_d_over_two():
    # d = alpha, to pin alpha alone; +1 per GACK throughout, to pin the cuts apart from the growth
    t = pa(initial_cwd=4, ecn_weight=0.5, progress_aware=False, congestion_avoidance=False)
    t.start_iteration(50, now_s=0.0)
    assert sent(t) == [0, 1, 2, 3]                               # sends 1-4
    t.on_gack(0, 0.01)                                           # round 1 ends: e = 0
    assert (t.alpha, t.cwd) == (0.5, 5)                          # (1 - 0.5) x 1 + 0.5 x 0
    assert sent(t) == [4, 5]                                     # sends 5, 6
    t.on_gack(1, 0.02, ecn_echo=True)                            # CE: CWD x (1 - 0.5/2), no +1
    assert t.cwd == 3.75 and t.stats["window_cuts"] == 1
    t.on_gack(2, 0.03, ecn_echo=True)                            # sent before the cut: no second cut; +1
    assert t.cwd == 4.75
    t.on_gack(3, 0.04)
    t.on_gack(4, 0.05, ecn_echo=True)                            # send 5 > 4: round 2 ends, e = 3/4
    assert t.cwd == 6.75 and t.alpha == 0.625                    # 0.5 x 0.5 + 0.5 x 0.75
    assert sent(t) == [6, 7, 8, 9, 10]                           # gbase 5 + 6; sends 7-11
    t.on_gack(6, 0.06, ecn_echo=True)                            # after the cut (send 6): cut with alpha 0.625
    assert t.cwd == pytest.approx(6.75 * (1 - 0.625 / 2)) == pytest.approx(4.640625)
    assert t.alpha == 0.8125                                     # round 3 (one GACK, marked): 0.5 x 0.625 + 0.5
    assert t.stats["window_cuts"] == 2 and t.stats["gack_ce_marks"] == 4 and t.stats["gacks"] == 6


def test_cwd_grows_one_per_gack_until_its_first_cut_then_one_per_round():
    t = pa(initial_cwd=4, progress_aware=False)
    t.start_iteration(100, now_s=0.0)
    assert sent(t) == [0, 1, 2, 3]                               # sends 1-4
    t.on_gack(0, 0.01)
    t.on_gack(1, 0.01)
    assert t.cwd == 6 and t.slow_start                           # slow start: +1 per GACK
    t.alpha = 1.0
    t.on_gack(2, 0.02, ecn_echo=True)                            # alpha 1: d = 1, halved
    assert t.cwd == 3 and not t.slow_start
    t.on_gack(3, 0.03)                                           # congestion avoidance: + 1/CWD
    assert t.cwd == pytest.approx(3 + 1 / 3)
    assert sent(t) == [4, 5, 6]                                  # gbase 4 + CWD 3
    for seq in (4, 5, 6):
        t.on_gack(seq, 0.04)
    cwd = 3 + 1 / 3
    for _ in range(3):
        cwd += 1 / cwd
    assert t.cwd == pytest.approx(cwd) and 4 < t.cwd < 4.2       # a window of GACKs: about +1
    literal = pa(initial_cwd=4, progress_aware=False, congestion_avoidance=False)
    literal.start_iteration(100, now_s=0.0)
    sent(literal)
    literal.on_gack(0, 0.01, ecn_echo=True)
    literal.on_gack(1, 0.02)
    assert literal.cwd == 3                                      # the paper's literal rule: 2 + 1 after the cut
    assert pa("strawasyn").congestion_avoidance and not pa("strawasyn", congestion_avoidance=False).congestion_avoidance


def test_cwd_grows_only_while_it_holds_the_worker_back():
    """RFC 7661: a worker that AWD holds back does not grow a CWD it cannot use; once CWD binds it grows."""
    t = pa(initial_cwd=8, initial_awd=2, progress_aware=False)
    t.start_iteration(100, now_s=0.0)
    assert sent(t) == [0, 1]                                     # AWD's edge: base 0 + 2, below CWD's 8
    t.on_gack(0, 0.01)
    t.on_gack(1, 0.01)
    assert t.cwd == 8 and t.flight == 0                          # 2 in flight at most: 8 >= 2 x 2, no growth
    wide = pa(initial_cwd=4, initial_awd=100, progress_aware=False)
    wide.start_iteration(100, now_s=0.0)
    assert sent(wide) == [0, 1, 2, 3]                            # CWD's edge binds
    wide.on_gack(0, 0.01)
    assert wide.cwd == 5 and wide.flight == 3                    # 4 in flight: 4 < 2 x 4, slow start's +1
    wide.on_result(1, 0.02)                                      # a RESULT lands a fragment too
    assert wide.flight == 2
    wide.alpha = 1.0
    wide.on_gack(2, 0.03, ecn_echo=True)                         # cut: 5 x (1 - 1/2), congestion avoidance
    assert wide.cwd == 2.5 and not wide.slow_start
    wide.on_gack(3, 0.04)                                        # 4 were in flight this round or the last
    assert wide.cwd == pytest.approx(2.5 + 1 / 2.5)
    assert wide.state()["in_flight"] == 0


@pytest.mark.parametrize("gacked_before, results_before, expected_cwd", [
    (range(7), (), 15 * (1 - 1.0 / 2)),                          # leading: p_l = 8 = AWD, d = alpha^0 = 1
    (range(3), (), 11 * (1 - math.sqrt(0.5) / 2)),               # p_l = 4 = AWD / 2: d = 0.5^(1/2)
    ((), range(6), 8 * (1 - 0.5 / 2)),                           # most stalled: p_l = 0, d = alpha (DCTCP)
])
def test_leading_workers_cut_harder_than_stalled_ones(gacked_before, results_before, expected_cwd):
    t = pa(initial_cwd=8, initial_awd=8)
    t.start_iteration(100, now_s=0.0)
    assert sent(t) == list(range(8))
    for seq in gacked_before:
        t.on_gack(seq, 0.01)
    for seq in results_before:
        t.on_result(seq, 0.01)
    t.alpha, t.awd = 0.5, 8.0                                    # the same congestion level and AWD for all three
    last = len(gacked_before) if gacked_before else 7
    t.on_gack(last, 0.02, progress_sum=40, fanin=4, ecn_echo=True)
    assert t.cwd == pytest.approx(expected_cwd)


def test_awd_grows_by_one_per_round_and_is_cut_on_aecn_with_beta():
    t = pa(initial_cwd=4, initial_awd=4, aecn_weight=0.5)
    t.start_iteration(50, now_s=0.0)
    assert sent(t) == [0, 1, 2, 3]                               # sends 1-4
    t.on_result(0, 0.01)                                         # round 1 ends without AECN: +1
    assert (t.awd, t.beta) == (5, 0.5)                           # beta = 0.5 x 1 + 0.5 x 0
    t.on_result(1, 0.02, aecn=True)
    t.on_result(2, 0.03, aecn=True)
    assert t.awd == 5                                            # round 2 open: sends 2, 3 precede it
    assert sent(t) == [4, 5, 6]                                  # CWD edge 3 + 4 = 7 < AWD edge 3 + 5
    t.on_result(3, 0.04)
    t.on_result(4, 0.05, aecn=True)                              # send 5 > 4: round 2 ends, g = 3/4
    assert t.awd == 3.75                                         # 5 x (1 - beta 0.5 / 2)
    assert t.beta == 0.625                                       # 0.5 x 0.5 + 0.5 x 0.75
    assert t.stats["awd_cuts"] == 1 and t.stats["aecn_marks"] == 3
    assert sent(t) == [7]                                        # AWD edge 5 + 3 = 8 < CWD edge 5 + 4


def test_awd_never_below_one():
    t = pa(window_cap=4, initial_cwd=1, initial_awd=2)
    t.start_iteration(40, now_s=0.0)
    for seq in range(40):
        assert sent(t) == [seq]
        t.on_result(seq, 0.01 * seq, aecn=True)                 # every RESULT ends a marked round
    assert t.awd == 1 and t.stats["awd_cuts"] == 40 and t.finished()


def leading_worker(t, total=100, results=0):
    """The seqs a worker sends with every fragment GACKed and no RESULT (the job's other workers stall),
    then those it sends once the job's first ``results`` RESULTs come."""
    t.start_iteration(total, now_s=0.0)
    out = []
    while batch := sent(t):
        out += batch
        for seq in batch:
            t.on_gack(seq, 0.01)
    for seq in range(results):
        t.on_result(seq, 0.02)
    return out + sent(t)


def test_asynchrony_unlimited_without_awd_limited_with_it():
    assert leading_worker(pa("strawasyn")) == list(range(100))  # StrawAsyn: only the iteration stops it
    assert leading_worker(pa(awd_limit=False)) == list(range(100))   # StrawAsyn+PC
    assert leading_worker(pa(initial_awd=20)) == list(range(20))     # PA-ATP: base 0 + AWD 20
    assert leading_worker(pa(initial_awd=20, progress_aware=False)) == list(range(20))   # StrawAsyn+AL


def test_no_worker_runs_the_switchs_overflow_cells_or_more_ahead_of_the_jobs_last_result():
    """A seq PA_SEQS past one not yet AACKed would share its overflow cell at the switch (ina.p4's
    pa_overflow): whatever the windows allow, a worker stops PA_SEQS past its base."""
    total = PA_SEQS + 200
    assert leading_worker(pa("strawasyn", window_cap=total), total) == list(range(PA_SEQS))
    assert leading_worker(pa(window_cap=total, initial_awd=PA_SEQS + 100), total) == list(range(PA_SEQS))
    assert leading_worker(pa(window_cap=total, initial_awd=PA_SEQS + 100), total,
                          results=50) == list(range(PA_SEQS + 50))   # the job's RESULTs move the edge on


def test_strawasyn_ignores_aecn_and_keeps_no_awd():
    t = pa("strawasyn", initial_cwd=4)
    t.start_iteration(20, now_s=0.0)
    sent(t)
    for seq in range(4):
        t.on_result(seq, 0.01, aecn=True)
    assert t.state()["awd"] is None and t.stats["awd_cuts"] == 0 and t.stats["aecn_marks"] == 4
    assert t.send_limit() == 4 + 4                               # gbase + CWD only


def test_cwd_within_one_and_the_window_cap():
    t = pa(window_cap=10, initial_cwd=8)
    t.start_iteration(100, now_s=0.0)
    for seq in sent(t):
        t.on_gack(seq, 0.01)
    assert t.cwd == 10 and t.window() == 10
    assert pa(window_cap=4, initial_cwd=8).cwd == 4
    for k in range(20):
        t.sends += 1
        t.on_congestion(float(k), "loss", t.sends)
    assert t.cwd == 1 and t.window() == 1


def test_aack_gap_retransmits_at_once_and_halves_cwd_but_the_ps_echo_does_not_cut():
    t = pa(initial_cwd=8)
    t.start_iteration(20, now_s=0.0)
    assert sent(t) == list(range(8))                             # sends 1-8
    t.on_result(0, 0.01, ecn_echo=True)                          # the PS's job-wide echo: not PA-ATP's signal
    assert t.cwd == 8 and t.stats["window_cuts"] == 0 and t.stats["ecn_echoes"] == 1
    for seq in (2, 3, 4):
        t.on_result(seq, 0.02)                                   # 4 left (send 5) 3 sends after 1 (send 2)
    assert t.pending_retx == [1] and t.stats["fast_retransmits"] == 1
    assert t.cwd == 4 and t.stats["window_cuts"] == 1            # a loss halves CWD ...
    t.on_congestion(0.03, "loss", 3)
    assert t.cwd == 4                                            # ... once per round
    assert t.next_send(0.03) == (1, True)


def test_a_gacked_fragment_waits_the_hold_time_an_ungacked_one_the_rto():
    t = pa(initial_cwd=2)
    t.first_result_timeout_s = 0.0
    t.start_iteration(4, now_s=0.0)
    assert sent(t) == [0, 1]                                     # armed at the initial RTO, 1 s
    t.on_gack(0, 0.01)                                           # RTT sample 0.01 s: RTO = min RTO 0.2 s
    assert t.rtt.srtt_s == 0.01 and t.rtt.rto_s() == 0.2
    assert sent(t, 0.02) == [2, 3]                               # CWD 3 from gbase 1; armed at 0.02 + 0.2
    assert t.next_send(0.21) is None
    assert t.next_send(0.22) == (2, True)                        # un-GACKed: the RTO
    assert t.next_send(0.22) == (3, True)
    assert t.next_send(0.80) is None                             # GACKed at 0.01: holds 4 x 0.2 s ...
    assert t.next_send(0.81) == (0, True)                        # ... then releases what the switch holds
    assert t.next_send(1.0) == (1, True)                         # un-GACKed, armed before the sample
    assert t.stats["timeouts"] == 3 and t.stats["held_timeouts"] == 1 and t.stats["releases"] == 1


def test_results_are_no_rtt_samples_gacks_are():
    t = pa(initial_cwd=4)
    t.start_iteration(4, now_s=0.0)
    sent(t)
    t.on_result(0, 0.5)                                          # first RESULT: no sample anyway
    t.on_result(1, 0.9)                                          # waited for other workers: not a round trip
    assert t.rtt.srtt_s is None
    t.on_gack(2, 0.05)
    assert t.rtt.srtt_s == 0.05


def test_gacks_out_of_order_are_no_loss():
    t = pa(initial_cwd=8)
    t.start_iteration(20, now_s=0.0)
    assert sent(t) == list(range(8))
    for seq in (0, 2, 3, 4, 5):
        t.on_gack(seq, 0.01)                     # 1 may have overflowed: its GACK comes later, from the PS
    assert t.pending_retx == [] and t.stats["fast_retransmits"] == 0


def test_an_aack_gap_releases_switch_held_fragments_and_leaves_the_ps_held_ones():
    t = pa(initial_cwd=8)
    t.start_iteration(20, now_s=0.0)
    sent(t)
    t.on_gack(0, 0.01, at_ps=True)                               # overflowed: the PS has it
    for seq in range(1, 8):
        t.on_gack(seq, 0.01)                                     # in a slot of the switch
    cwd = t.cwd
    for seq in (2, 3, 4, 5):
        t.on_result(seq, 0.02)                                   # 0 and 1 have no RESULT: a gap
    assert t.pending_retx == [1]                                 # RETX releases 1's partial aggregate ...
    assert t.stats["releases"] == 1 and t.stats["fast_retransmits"] == 0
    assert t.cwd == cwd and t.stats["window_cuts"] == 0          # ... which is no loss: no window cut


def test_an_aack_gap_behind_an_ungacked_fragment_is_a_loss():
    t = pa(initial_cwd=8)
    t.start_iteration(20, now_s=0.0)
    sent(t)
    for seq in range(1, 8):
        t.on_gack(seq, 0.01)                                     # 0's GACK never came: lost on its way
    cwd = t.cwd
    for seq in (1, 2, 3):
        t.on_result(seq, 0.02)
    assert t.pending_retx == [0] and t.stats["fast_retransmits"] == 1 and t.stats["releases"] == 0
    assert t.cwd == cwd / 2 and t.stats["window_cuts"] == 1


def test_a_held_fragment_waits_while_the_job_progresses():
    """A GACKed fragment's hold time (HOLD_RTOS x RTO) counts from the latest new RESULT: while RESULTs of
    earlier fragments keep coming, the other workers are catching up to it."""
    t = make_transport("pa-atp", window_cap=8, link_rate_bps=0.0, frame_bytes=336, min_rto_s=0.2,
                       first_result_timeout_s=0.0, options={"initial_cwd": 4})
    t.start_iteration(4, now_s=0.0)
    assert sent(t) == [0, 1, 2, 3]
    for seq in range(4):
        t.on_gack(seq, 0.01)                                     # RTO: the 0.2 s floor
    hold = HOLD_RTOS * 0.2
    for k, now in enumerate((0.5, 1.0, 1.5)):
        t.on_result(k, now)                                      # the job progresses every 0.5 s < hold
        assert t.next_send(now + 0.49) is None
    assert t.next_send(1.5 + hold - 0.01) is None and t.stats["timeouts"] == 0
    assert t.next_send(1.5 + hold + 0.01) == (3, True)           # no RESULT for a hold time: released
    assert t.stats["held_timeouts"] == 1 and t.stats["releases"] == 1 and t.stats["timeouts"] == 0
    assert t.stats["window_cuts"] == 0                           # a release is no loss


def test_a_fragment_the_ps_holds_times_out_as_a_loss_when_the_job_stands_still():
    t = make_transport("pa-atp", window_cap=8, link_rate_bps=0.0, frame_bytes=336, min_rto_s=0.2,
                       first_result_timeout_s=0.0, options={"initial_cwd": 2})
    t.start_iteration(2, now_s=0.0)
    assert sent(t) == [0, 1]
    t.on_gack(0, 0.01, at_ps=True)
    t.on_result(1, 0.02)
    assert t.next_send(0.02 + HOLD_RTOS * 0.2 + 0.01) == (0, True)
    assert t.stats["timeouts"] == 1 and t.stats["held_timeouts"] == 1 and t.stats["releases"] == 0
    assert t.stats["window_cuts"] == 1


def test_an_ungacked_fragment_waits_the_longer_of_the_switch_and_the_ps_gack_rtos():
    """GACKs from the switch (20 ms: RTO 20 + 4 x 10 = 60 ms) and from the PS (100 ms: RTO 300 ms) are
    measured apart; a fragment sent afterwards, not GACKed yet, may be answered by either, so its timer is
    the longer RTO; with both samples in one estimator it would be 140 ms."""
    def after_gacks(ps_gack):
        t = make_transport("pa-atp", window_cap=8, link_rate_bps=0.0, frame_bytes=336, min_rto_s=0.01,
                           first_result_timeout_s=10.0, options={"initial_cwd": 4})   # GACKed ones: held
        t.start_iteration(6, now_s=0.0)
        assert sent(t) == [0, 1, 2, 3]
        t.on_gack(0, 0.02)
        t.on_gack(1, 0.1, at_ps=ps_gack)
        assert sent(t, 0.1) == [4, 5]
        return t

    t = after_gacks(ps_gack=True)
    assert t.rtt.srtt_s == pytest.approx(0.02) and t.state()["ps_gack_srtt_s"] == pytest.approx(0.1)
    assert t.next_send(0.399) is None and t.next_send(0.401) == (4, True)
    t = after_gacks(ps_gack=False)                  # both samples in one estimator: 0.03 + 4 x 0.0275
    assert t.state()["ps_gack_srtt_s"] is None
    assert t.next_send(0.239) is None and t.next_send(0.241) == (4, True)


def test_gacks_of_fragments_already_acknowledged_or_out_of_range_change_no_window():
    t = pa(initial_cwd=2)
    t.start_iteration(4, now_s=0.0)
    sent(t)
    t.on_result(0, 0.01)
    t.on_gack(0, 0.02)                                           # after its RESULT
    t.on_gack(9, 0.02)                                           # not of this iteration
    t.on_gack(1, 0.03)
    t.on_gack(1, 0.04)                                           # duplicate
    assert t.cwd == 3 and t.stats["gacks"] == 1


def test_eta_is_the_upper_bound_of_eq_9():
    # M = 40K aggregators, BDP 416 packets (100 Gb/s, 10 us), C_A = BDP / 2, N = 8 jobs (PA-ATP Fig. 6)
    eta = aecn_threshold_factor(40000, 416, 208, 8)
    assert eta == pytest.approx(1 - 216 / 40416) == pytest.approx(0.994655582, abs=1e-9)
    assert eta * (40000 + 416) + 8 == pytest.approx(40000 + 416 - 208)   # R_max (Eq. 7) = M + BDP - C_A (Eq. 8)
    assert aecn_threshold_factor(100, 20, 10, 2) == pytest.approx(0.9)
    with pytest.raises(ValueError, match="no AECN threshold fits"):
        aecn_threshold_factor(10, 0, 9, 1)                       # C_A + N = M + BDP
    with pytest.raises(ValueError, match="N >= 1"):
        aecn_threshold_factor(100, 20, 10, 0)


def test_option_conflict_awd_options_without_awd():
    assert PaAtpTransport.option_conflict({"awd_limit": False, "initial_awd": 5})[0] == "initial_awd"
    assert PaAtpTransport.option_conflict({"awd_limit": False, "aecn_weight": 0.5})[0] == "aecn_weight"
    assert PaAtpTransport.option_conflict({"initial_awd": 5, "progress_aware": False}) is None


# -- the worker agent feeds the transport ---------------------------------------------------------

def worker(transport):
    config = AgentConfig(role="worker", name="w1", ip="10.0.0.1", job="j", job_id=3, seed=1, iterations=2,
                         lanes=64, scale_bits=20, gradient_bound=1.0, total_workers=2,
                         submodels=[SubmodelAssignment(0, 640, 10, "ps", "10.0.0.9", ps_node=9, agg_node=7,
                                                 agg_ip="10.255.0.1", fanin=2, slot_base=0, slot_count=16)],
                         total_fragments=10, layout=[(640, 10)], window=16, transport=transport)
    w = Worker(config, sock=None, records=None)
    w.transport.start_iteration(10, now_s=0.0)
    sent(w.transport)
    return w


def header(flags, seq, iteration=0, job=3, fanin=2, progress=0, agg_node=7):
    return INA_HEADER.unpack(INA_HEADER.pack(job, flags, 0, 0, agg_node, fanin, 1, 0, iteration, seq, 0, 1, progress))


def test_worker_hands_gacks_and_aecn_to_the_transport():
    w = worker("pa-atp")
    t = w.transport
    w.receive(header(FLAG_GACK | FLAG_ECN_ECHO, 0, fanin=2, progress=5), 0, 0.01)
    assert t.gacked[0] and (t.progress_sum, t.progress_workers) == (5, 2) and t.stats["gack_ce_marks"] == 1
    assert not t.at_ps[0]                                        # the switch (node 7) took it
    w.receive(header(FLAG_GACK, 3, agg_node=9), 0, 0.01)
    assert t.gacked[3] and t.at_ps[3]                            # the PS (node 9) took it
    w.receive(header(FLAG_RESULT | FLAG_AECN, 0), 0, 0.02)
    assert t.acked[0] and t.stats["aecn_marks"] == 1
    w.receive(header(FLAG_GACK, 1, job=4), 0, 0.03)              # another job
    w.receive(header(FLAG_GACK, 2, iteration=1), 0, 0.03)        # not this iteration
    w.receive(header(FLAG_GACK, 10), 0, 0.03)                    # no such fragment
    assert t.stats["gacks"] == 2
    w.receive(header(FLAG_RESULT, 4, iteration=1), 0, 0.04)      # a RESULT of a later iteration is kept
    assert w.early_results == {1: {4}} and not t.acked[4]


def test_transports_without_gacks_ignore_them():
    w = worker("atp")
    t = w.transport
    before = (t.window(), dict(t.stats))
    w.receive(header(FLAG_GACK | FLAG_ECN_ECHO, 0, progress=5), 0, 0.01)
    assert (t.window(), t.stats) == before and not t.acked[0]
    w.receive(header(FLAG_RESULT | FLAG_AECN, 0), 0, 0.02)
    assert t.acked[0] and t.window() == before[0] + 1
