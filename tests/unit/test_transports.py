"""The worker transports as pure state machines: every branch on an injected clock, no network."""

import random

import pytest

from testbed.agents.transport import TRANSPORTS, default_transport, make_transport
from testbed.agents.transport.atp import MAX_WINDOW, AtpTransport
from testbed.agents.transport.switchml import PAPER_TIMEOUT_S, default_pool_frames, default_timeout_s
from testbed.agents.transport.base import DUPTHRESH, INITIAL_RTO_S, MAX_RTO_S, Pacer, RttEstimator

FRAME_BYTES = 336


def transport(name="atp", window_cap=32, rate_bps=0.0, min_rto_s=0.2, first_result_timeout_s=0.5, **options):
    return make_transport(name, window_cap=window_cap, link_rate_bps=rate_bps, frame_bytes=FRAME_BYTES,
                          min_rto_s=min_rto_s, first_result_timeout_s=first_result_timeout_s, options=options)


def drain(t, now_s):
    """Send everything the transport lets out at ``now_s``; returns [(seq, retransmission)]."""
    sent = []
    while (due := t.next_send(now_s)) is not None:
        t.on_sent(*due, now_s)
        sent.append(due)
    return sent


def test_registry_and_defaults_by_placement():
    assert set(TRANSPORTS) == {"atp", "switchml", "strawasyn", "pa-atp", "paced"}
    assert default_transport("switchml") == "switchml"
    assert {default_transport(p) for p in ("ps", "atp", "goat", "grid", "inart")} == {"atp"}
    with pytest.raises(ValueError, match="unknown transport 'tcp'"):
        make_transport("tcp", window_cap=1, link_rate_bps=0, frame_bytes=1, min_rto_s=0.1)


def test_rtt_estimator_follows_rfc6298():
    rtt = RttEstimator(min_rto_s=0.05, initial_rto_s=1.0)
    assert rtt.rto_s() == 1.0
    rtt.sample(0.1)
    assert (rtt.srtt_s, rtt.rttvar_s) == (0.1, 0.05) and rtt.rto_s() == pytest.approx(0.3)
    rtt.sample(0.1)
    assert rtt.rttvar_s == pytest.approx(0.0375) and rtt.rto_s() == pytest.approx(0.25)
    for _ in range(50):
        rtt.sample(0.001)
    assert rtt.rto_s() == 0.05                                   # the floor
    for _ in range(50):
        rtt.sample(10.0)
    assert rtt.rto_s() == MAX_RTO_S                              # the ceiling


def test_pacer_spaces_frames_at_the_link_rate_with_bounded_credit():
    pacer = Pacer(rate_bps=8 * FRAME_BYTES * 1000, frame_bytes=FRAME_BYTES, credit_frames=2)   # 1000 frames/s
    assert pacer.gap_s == pytest.approx(0.001)
    assert pacer.ready(0.0)
    pacer.sent(0.0)
    assert not pacer.ready(0.0005) and pacer.ready(0.001)
    for _ in range(2):                                           # after a pause: two frames of credit ...
        assert pacer.ready(5.0)
        pacer.sent(5.0)
    assert pacer.next_s == pytest.approx(5.0)
    pacer.sent(5.0)                                              # ... and no more
    assert not pacer.ready(5.0) and pacer.next_s == pytest.approx(5.001)
    late = Pacer(rate_bps=8 * FRAME_BYTES * 1000, frame_bytes=FRAME_BYTES)
    late.sent(0.0)
    late.sent(0.0013)                                            # woken 0.3 ms late: the schedule holds
    assert late.next_s == pytest.approx(0.002)


def test_sliding_window_over_seq_and_initial_window():
    t = transport(window_cap=32)
    t.start_iteration(20, now_s=0.0)
    assert [seq for seq, _ in drain(t, 0.0)] == list(range(8))  # ATP's initial window
    t.on_result(1, 0.01)                                         # not the lowest: the window does not slide
    assert t.window() == 9
    assert [seq for seq, _ in drain(t, 0.01)] == [8]             # ... but grew by one
    t.on_result(0, 0.02)
    assert [seq for seq, _ in drain(t, 0.02)] == [9, 10, 11]     # slid past 0 and 1, grew by one


def test_window_grows_per_result_and_respects_caps():
    t = transport(window_cap=12)
    t.start_iteration(100, now_s=0.0)
    for seq, _ in drain(t, 0.0):
        t.on_result(seq, 0.001 * (seq + 1))
    assert t.window() == 12                                      # capped by the job's window
    big = transport(window_cap=1000)
    assert big.max_window == MAX_WINDOW


def test_ecn_echo_halves_once_per_window():
    t = transport()
    t.start_iteration(50, now_s=0.0)
    drain(t, 0.0)                                                # sends 1..8: seq 0..7
    t.on_result(0, 0.01)
    t.on_result(1, 0.02)                                         # an RTT sample: srtt = 0.01
    assert t.cwnd == 10 and t.rtt.srtt_s == pytest.approx(0.01)
    drain(t, 0.02)                                               # sends 9..12: seq 8..11
    t.on_result(2, 0.021, ecn_echo=True)                         # halved; slow start ends: +1/cwnd per RESULT
    assert t.cwnd == pytest.approx(5 + 1 / 5)
    t.on_result(9, 0.022, ecn_echo=True)                         # sent before the cut: already answered by it
    assert t.cwnd == pytest.approx(5.2 + 1 / 5.2)
    cwnd = t.cwnd
    for seq in (3, 4, 5, 6, 7, 8, 10, 11):
        t.on_result(seq, 0.03)
    (fresh, _), = drain(t, 0.03)[:1]                             # the first send after the cut
    cwnd = t.cwnd
    t.on_result(fresh, 0.05, ecn_echo=True)                      # about a fragment sent after the cut: cut again
    assert t.cwnd == pytest.approx(cwnd / 2 + 1 / (cwnd / 2))
    assert t.stats["ecn_echoes"] == 3 and t.stats["window_cuts"] == 2


def test_window_never_below_one():
    t = transport()
    t.start_iteration(10, now_s=0.0)
    for k in range(20):
        t.sends += 1
        t.on_congestion(10.0 * k, "loss", t.sends)
    assert t.window() == 1


def test_first_result_allowance_keeps_straggler_waits_from_timing_out():
    t = transport(min_rto_s=0.05, first_result_timeout_s=2.0)
    t.start_iteration(4, now_s=0.0)
    drain(t, 0.0)
    assert drain(t, 1.9) == []                                   # a straggler is late: no retransmission
    assert t.next_deadline_s(1.9) == pytest.approx(2.0)
    assert drain(t, 2.01) == [(0, True), (1, True), (2, True), (3, True)]   # past the allowance: lost
    assert t.stats["timeouts"] == 4


def test_timers_restart_at_the_first_result_and_samples_exclude_the_wait():
    t = transport(min_rto_s=0.05, first_result_timeout_s=5.0)
    t.start_iteration(3, now_s=0.0)
    drain(t, 0.0)
    t.on_result(0, 2.0)                                          # the straggler arrived at 2 s
    assert t.rtt.srtt_s is None                                  # the first RESULT is no sample
    t.on_result(1, 2.01)
    assert t.rtt.srtt_s == pytest.approx(0.01)                   # measured from the first RESULT
    assert drain(t, 2.0 + INITIAL_RTO_S - 0.01) == []            # fragment 2: timer restarted at 2 s
    assert drain(t, 2.0 + INITIAL_RTO_S + 0.01) == [(2, True)]


def test_retransmission_timeout_backs_off_and_karn_skips_samples():
    t = transport(min_rto_s=0.1, first_result_timeout_s=0.0)
    t.start_iteration(1, now_s=0.0)
    drain(t, 0.0)
    assert drain(t, 1.01) == [(0, True)]                         # initial RTO 1 s
    assert drain(t, 1.5) == []
    assert t.next_deadline_s(1.5) == pytest.approx(1.01 + min(MAX_RTO_S, 2 * INITIAL_RTO_S))
    t.on_result(0, 1.6)
    assert t.rtt.srtt_s is None and t.finished()                 # Karn: no sample from a retransmission


def test_gap_on_one_path_retransmits_at_once_but_not_across_paths():
    t = transport(window_cap=16, first_result_timeout_s=10.0)
    t.start_iteration(8, now_s=0.0, path_keys=["a"] * 4 + ["b"] * 4)
    drain(t, 0.0)
    t.on_result(0, 0.01)
    t.on_result(5, 0.011)                                        # path b: says nothing of path a
    t.on_result(6, 0.012)
    t.on_result(7, 0.013)
    assert t.pending_retx == [4]                                 # 4 left DUPTHRESH sends before 7, on path b
    t.on_result(3, 0.014)                                        # path a: 1 and 2 left fewer than DUPTHRESH before 3
    assert t.pending_retx == [4] and t.stats["fast_retransmits"] == 1 and DUPTHRESH == 3
    assert drain(t, 0.015) == [(4, True)]


def brute_force_gaps(t, acked_seq: int) -> list:
    """The definition the gap detector keeps, by looking at every fragment sent this iteration: unanswered,
    on ``acked_seq``'s path, not waiting to be resent, sent at least DUPTHRESH sends before it."""
    order, path = t.send_order[acked_seq], t.path_keys[acked_seq]
    return [seq for seq in range(t.base, min(t.next_seq, t.total))
            if not t._answered(seq) and t.path_keys[seq] == path and seq not in t.pending_retx
            and order - t.send_order[seq] >= DUPTHRESH]


@pytest.mark.parametrize("name", ["atp", "pa-atp"])
def test_gaps_found_by_each_send_looked_at_once_are_the_definitions_in_every_random_order(name):
    rng = random.Random(7)
    for trial in range(40):
        t = transport(name, window_cap=24, first_result_timeout_s=10.0)
        total = 120
        t.start_iteration(total, now_s=0.0, path_keys=[rng.choice("ab") for _ in range(total)])
        now_s, outstanding = 0.0, []
        while not t.finished() and now_s < 5.0:
            outstanding += [seq for seq, _ in drain(t, now_s)]
            rng.shuffle(outstanding)
            for seq in outstanding[:rng.randint(1, 6)]:
                outstanding.remove(seq)
                now_s += 0.001
                if rng.random() < 0.1:
                    continue                                     # lost: a gap or a timer resends it
                if name == "pa-atp" and rng.random() < 0.5:
                    t.on_gack(seq, now_s, at_ps=rng.random() < 0.3)
                pending, expected = list(t.pending_retx), None
                if not t.acked[seq] and t.attempts[seq] == 0:
                    t.acked[seq] = 1                             # the oracle sees the RESULT as counted ...
                    expected = brute_force_gaps(t, seq)
                    t.acked[seq] = 0                             # ... and the transport counts it itself
                t.on_result(seq, now_s)
                if expected is not None:
                    assert t.pending_retx[len(pending):] == expected, (trial, seq)
            now_s += 0.05


def test_switchml_window_is_fixed():
    t = transport("switchml", window_cap=6)
    t.start_iteration(20, now_s=0.0)
    assert len(drain(t, 0.0)) == 6
    t.on_congestion(1.0, "loss", t.sends)
    t.on_result(0, 1.0, ecn_echo=True)
    assert t.window() == 6 and len(drain(t, 1.0)) == 1


def test_switchml_window_is_its_pool_at_most_the_window_cap():
    """SwitchML's pool s bounds the fragments in flight; the default is twice the unloaded BDP, rounded up."""
    t = transport("switchml", window_cap=6, pool=4)
    t.start_iteration(20, now_s=0.0)
    assert t.window() == 4 and len(drain(t, 0.0)) == 4 and t.state()["pool"] == 4
    assert transport("switchml", window_cap=6, pool=9).window() == 6
    assert transport("switchml", window_cap=6).window() == 6
    assert default_pool_frames(4.0) == 8 and default_pool_frames(3.2) == 7 and default_pool_frames(0.1) == 1


def test_switchml_timeout_is_fixed_without_rtt_estimation_or_back_off():
    """SwitchML resends an unanswered fragment once per fixed timeout (NSDI'21: 10 ms), whatever the RTT."""
    t = transport("switchml", window_cap=2, first_result_timeout_s=0.0, timeout_s=0.05)
    assert default_timeout_s(0.001) == PAPER_TIMEOUT_S and default_timeout_s(0.02) == 0.04
    t.start_iteration(4, now_s=0.0)
    assert drain(t, 0.0) == [(0, False), (1, False)]
    t.on_result(0, 0.01)                                         # the first RESULT: 1's timer restarts at 0.01
    assert drain(t, 0.01) == [(2, False)]
    t.on_result(2, 0.02)                                         # an RTT sample would not change the timeout
    assert t.state() == {"timeout_s": 0.05, "pool": 2} and t.next_deadline_s(0.02) == pytest.approx(0.06)
    assert drain(t, 0.059) == [] and drain(t, 0.0601) == [(1, True)]
    assert drain(t, 0.11) == [] and drain(t, 0.1102) == [(1, True)]  # no doubling: again after 0.05 s
    assert t.stats["timeouts"] == 2 and t.window() == 2
    assert transport("switchml").fixed_timeout_s == PAPER_TIMEOUT_S


def test_already_acknowledged_fragments_are_not_sent():
    t = transport()
    t.start_iteration(5, acked_seqs=[0, 2], now_s=0.0)
    assert [seq for seq, _ in drain(t, 0.0)] == [1, 3, 4]
    for seq in (1, 3, 4):
        t.on_result(seq, 0.1)
    assert t.finished()


def test_atp_option_initial_window():
    t = AtpTransport(window_cap=64, link_rate_bps=0, frame_bytes=FRAME_BYTES, min_rto_s=0.1,
                     options={"initial_window": 2})
    t.start_iteration(10, now_s=0.0)
    assert len(drain(t, 0.0)) == 2


def test_paced_sends_at_its_rate_with_a_fixed_window_whatever_the_network_says():
    """InArt §5.3's fixed-rate workers: one 336-byte frame every 8 x 336 / 1e6 s at 1 Mb/s, on a 10 Mb/s link;
    ECN echoes and losses change neither the rate nor the window."""
    t = make_transport("paced", window_cap=4, link_rate_bps=10e6, frame_bytes=FRAME_BYTES, min_rto_s=0.2,
                       first_result_timeout_s=0.0, options={"rate_bps": 1e6})
    gap_s = 8 * FRAME_BYTES / 1e6
    assert t.pacer.gap_s == pytest.approx(gap_s) and t.state() == {"rate_bps": 1e6}
    t.start_iteration(10, now_s=0.0)
    sent, now = [], 0.0
    while len(sent) < 4:                           # the window (4) fills one frame gap apart
        if (due := t.next_send(now)) is not None:
            t.on_sent(*due, now)
            sent.append(now)
        now += gap_s / 4
    assert sent[-1] - sent[0] >= 3 * gap_s - 1e-9 and t.next_send(now + 10 * gap_s) is None
    t.start_iteration(10, now_s=5.0)
    assert drain(t, 5.0) == [(0, False)]           # after seconds of compute: one frame, no saved-up burst
    t.on_result(0, now, ecn_echo=True)
    t.on_congestion(now, "loss", t.sends)
    assert t.window() == 4 and t.stats["window_cuts"] == 0
    fast = make_transport("paced", window_cap=4, link_rate_bps=1e6, frame_bytes=FRAME_BYTES, min_rto_s=0.2,
                          options={"rate_bps": 5e6})
    assert fast.rate_bps == 1e6                    # never above the host link
    with pytest.raises(ValueError, match="rate_bps"):
        make_transport("paced", window_cap=4, link_rate_bps=1e6, frame_bytes=FRAME_BYTES, min_rto_s=0.2)


def test_resends_before_the_iterations_first_result_are_counted_apart():
    """Without a straggler allowance a fast worker's timer fires while the job waits for its slowest worker:
    the transport counts those resends (``retx_before_first_result``), and none after the first RESULT."""
    t = transport(min_rto_s=0.1, first_result_timeout_s=0.0)
    t.start_iteration(2, now_s=0.0)
    drain(t, 0.0)
    assert drain(t, 1.01) == [(0, True), (1, True)]              # initial RTO 1 s: nobody answered yet
    assert t.stats["retx_before_first_result"] == 2
    t.on_result(0, 1.5)                                          # the straggler started; fragment 1 still out
    assert drain(t, 1.5 + MAX_RTO_S + 0.01) == [(1, True)]
    assert t.stats["retx_before_first_result"] == 2 and t.stats["retransmitted"] == 3
