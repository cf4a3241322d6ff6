"""Host-induced delay: the meter every agent and pyswitch process keeps, the kernel's receive timestamps it
reads, a job's round, and the distorted mark they make together."""

import socket
import time

import pytest

from testbed import controller
from testbed.agents.common import ANCILLARY_BYTES, arrived_ce, open_endpoint, pending_datagrams, wait_readable
from testbed.fidelity import RATE_TOLERANCE
from testbed.metrics.distortion import (HOST_DELAY_COMM_SHARE, HOST_DELAY_STEP_SHARE, HOST_DELAY_WINDOW_SHARE, Evidence,
                                        assess)
from testbed.metrics.host_delay import (BLOCKS_KEPT, FOLD_EVERY, TIMESTAMP_CMSG_BYTES, HostDelayMeter, by_role,
                                        enable_receive_timestamps, kernel_timestamp_s, merge_role,
                                        switch_wait_summary)
from testbed.metrics.rounds import JobRound, job_rounds, round_trip_host_delay_s, round_trip_summary
from testbed.schemes import compute_placement
from testbed.scenario import parse_scenario
from testbed.sim import synchronous_rates_bps


def test_receive_waits_give_count_mean_tail_and_maximum():
    meter = HostDelayMeter()
    for k in range(100):
        meter.received(1000.0, 1000.0 + (0.010 if k == 99 else 0.001))
    meter.received(0.0, 5.0)                 # unstamped: not counted
    wait = meter.summary()["receive_wait"]
    assert wait["count"] == 100
    assert wait["mean_s"] == pytest.approx((99 * 0.001 + 0.010) / 100)
    assert wait["max_s"] == pytest.approx(0.010)
    # The 99th percentile is the upper edge of the 1 ms wait's bin: within 10% above it, never below.
    assert 0.001 <= wait["p99_s"] <= 0.0011
    assert meter.summary()["send_lateness"] == {"count": 0, "mean_s": None, "p99_s": None, "max_s": None}


def test_a_sampled_frame_counts_for_the_frames_it_stands_for():
    """A busy switch stamps one frame in eight of a batch: ten quiet frames of 0.1 ms, each alone in its wake-up,
    and a batch of 81 that waited 4 ms, sampled at its first frame and ten more, weigh 10 against 81."""
    meter = HostDelayMeter()
    for _ in range(10):
        meter.received_for(1000.0, 1000.0001, 1)
    meter.received_for(1000.0, 1000.004, 1)
    for _ in range(10):
        meter.received_for(1000.0, 1000.004, 8)
    meter.received_for(0.0, 5.0, 8)                 # unstamped: not counted
    wait = meter.summary()["receive_wait"]
    assert wait["count"] == 91
    assert wait["mean_s"] == pytest.approx((10 * 0.0001 + 81 * 0.004) / 91)
    assert 0.004 <= wait["p99_s"] <= 0.0044


def test_waits_fold_into_a_fixed_histogram_and_a_clock_step_back_reads_as_no_wait():
    meter = HostDelayMeter()
    for k in range(FOLD_EVERY * 2 + 7):
        meter.woke(10.0, 10.0 + (k % 2) * 0.002)
    meter.woke(10.0, 9.0)
    late = meter.summary()["send_lateness"]
    assert late["count"] == FOLD_EVERY * 2 + 8
    assert late["mean_s"] == pytest.approx(0.002 * (FOLD_EVERY + 3) / late["count"])
    assert late["max_s"] == pytest.approx(0.002)
    assert late["p99_s"] == pytest.approx(0.002)        # the maximum caps the bin edge above it


def test_the_kernel_stamps_a_datagram_and_the_stamp_comes_before_it_is_read():
    receiver = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sender = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        enable_receive_timestamps(receiver)
        receiver.bind(("127.0.0.1", 0))
        before = time.time()
        sender.sendto(b"x", receiver.getsockname())
        data, ancillary, _, _ = receiver.recvmsg(64, TIMESTAMP_CMSG_BYTES)
        after = time.time()
    finally:
        receiver.close()
        sender.close()
    assert data == b"x"
    assert before - 0.001 <= kernel_timestamp_s(ancillary) <= after
    assert kernel_timestamp_s([]) == 0.0


def stamped_on_arrival(sock, sender, attempts: int = 100) -> bool:
    """Whether the kernel stamps ``sock``'s datagrams as they arrive. It turns arrival stamping on a moment
    after the first socket of the machine asks for it (a deferred static key); until then it stamps a
    datagram as it is read, which would read as no wait. Probes until a datagram read 5 ms after it was
    sent shows the wait; the probes are left out of the meter's figures by a fresh meter."""
    for _ in range(attempts):
        sender.sendto(b"probe", sock.getsockname())
        time.sleep(0.005)
        _, ancillary, _, _ = sock.recvmsg(64, TIMESTAMP_CMSG_BYTES + socket.CMSG_SPACE(1))
        if time.time() - kernel_timestamp_s(ancillary) >= 0.004:
            return True
    return False


def test_an_endpoint_meters_its_datagrams_and_still_reads_their_ce_mark():
    sock = open_endpoint("127.0.0.1", 0, "127.0.0.1")
    sender = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        assert stamped_on_arrival(sock, sender)
        sock.host_delay = HostDelayMeter()
        sender.setsockopt(socket.IPPROTO_IP, socket.IP_TOS, 0x03)       # CE
        sender.sendto(b"marked", sock.getsockname())
        sender.setsockopt(socket.IPPROTO_IP, socket.IP_TOS, 0x02)       # ECT(0)
        sender.sendto(b"clear", sock.getsockname())
        assert wait_readable(sock, 1.0, 0.05)
        time.sleep(0.01)
        got = {data: arrived_ce(ancillary) for data, ancillary, _ in pending_datagrams(sock)}
        assert not wait_readable(sock, 0.01, 0.05)       # a timed wait that ran out: its lateness is metered
    finally:
        sock.close()
        sender.close()
    assert got == {b"marked": True, b"clear": False}
    summary = sock.host_delay.summary()
    assert summary["receive_wait"]["count"] == 2 and summary["receive_wait"]["mean_s"] >= 0.005
    assert summary["send_lateness"]["count"] == 1
    assert ANCILLARY_BYTES >= TIMESTAMP_CMSG_BYTES + socket.CMSG_SPACE(1)


def test_roles_merge_weighted_by_count_with_the_slowest_processes_tail_and_in_virtual_time():
    fast = {"receive_wait": {"count": 300, "mean_s": 0.001, "p99_s": 0.002, "max_s": 0.003},
            "send_lateness": {"count": 0, "mean_s": None, "p99_s": None, "max_s": None}}
    slow = {"receive_wait": {"count": 100, "mean_s": 0.005, "p99_s": 0.02, "max_s": 0.04},
            "send_lateness": {"count": 10, "mean_s": 0.001, "p99_s": 0.001, "max_s": 0.002}}
    merged = merge_role([fast, slow])
    assert merged["receive_wait"] == {"count": 400, "mean_s": pytest.approx(0.002), "p99_s": 0.02, "max_s": 0.04}
    roles = by_role([("worker", fast), ("worker", slow), ("switch", slow)], factor=4)
    assert set(roles) == {"switch", "worker"}
    assert roles["worker"]["receive_wait"]["mean_s"] == pytest.approx(0.0005)
    assert roles["switch"]["send_lateness"] == {"count": 10, "mean_s": 0.00025, "p99_s": 0.00025, "max_s": 0.0005}



def test_a_bmv2_switchs_wait_register_reads_as_a_meter_without_a_tail_and_merges_with_one():
    """bmv2 counts its in-switch wait in register switch_wait (packets, summed and longest microseconds)."""
    bmv2 = switch_wait_summary([4, 2000, 900])
    assert bmv2 == {"receive_wait": {"count": 4, "mean_s": pytest.approx(0.0005), "p99_s": None, "max_s": 0.0009},
                    "send_lateness": {"count": 0, "mean_s": None, "p99_s": None, "max_s": None}}
    assert switch_wait_summary([0, 0, 0])["receive_wait"]["count"] == 0
    pyswitch = {"receive_wait": {"count": 4, "mean_s": 0.0001, "p99_s": 0.0002, "max_s": 0.0003},
                "send_lateness": {"count": 0, "mean_s": None, "p99_s": None, "max_s": None}}
    merged = merge_role([bmv2, pyswitch])["receive_wait"]
    assert merged == {"count": 8, "mean_s": pytest.approx(0.0003), "p99_s": 0.0002, "max_s": 0.0009}
    assert merge_role([bmv2])["receive_wait"]["p99_s"] is None

RING = """\
version: 1
name: ring
scale: 0.00005
topology:
  kind: explicit
  link_rate: 100Gbps
  switches: [t1, t2]
  hosts: [w1, w2, w3, w4]
  links: [[w1, t1], [w2, t1], [w3, t2], [w4, t2], [t1, t2, 400Gbps]]
jobs:
  - {name: job, model: vgg16, workers: [w1, w2, w3, w4], policy: rar, iterations: 2}
"""


def _agents(text, overrides=()):
    scenario = parse_scenario(text, "s.yaml", list(overrides))
    return scenario, controller.control_plan(scenario, compute_placement(scenario)).agents


def _placement_and_rates(scenario) -> tuple:
    """(the scenario's policy, the fluid model's rate per job) that :func:`job_rounds` takes."""
    placement = compute_placement(scenario)
    return placement, synchronous_rates_bps(scenario, placement)


def test_a_ring_jobs_round_is_its_step_on_the_longest_ring_hop():
    scenario, agents = _agents(RING)
    (job_round,) = job_rounds(scenario, *_placement_and_rates(scenario))
    frame_bits = 8 * 314          # a ring frame of 64 lanes
    # w2 -> w3 (and w4 -> w1) cross both ToRs: 5, 20 and 5 Mb/s, a frame each way on each.
    round_trip_s = 2 * (frame_bits / 5e6 + frame_bits / 20e6 + frame_bits / 5e6)
    assert job_round.kind == "ring step" and job_round.switch_hops == 2
    assert job_round.round_trip_s == pytest.approx(round_trip_s)
    fragments = agents[0].total_fragments
    # A quarter of the gradient a step (the largest quarter: the ranges are whole fragments).
    assert job_round.round_s == pytest.approx(fragments / 4 * frame_bits / 5e6 + round_trip_s, rel=0.01)
    assert job_round.comm_s == pytest.approx(6 * job_round.round_s)       # 2 (N - 1) steps of four workers


def test_a_windowed_jobs_round_is_its_window_or_its_round_trip():
    scenario, agents = _agents(RING, ["policy=ps", "jobs.0.ps=[w4]", "jobs.0.workers=[w1, w2, w3]",
                                      "jobs.0.window=4"])
    (job_round,) = job_rounds(scenario, *_placement_and_rates(scenario))
    frame_bits = 8 * 336
    assert job_round.kind == "window" and job_round.sender == "worker" and job_round.receiver == "ps"
    assert job_round.round_s == pytest.approx(max(job_round.round_trip_s, 4 * frame_bits / 5e6))
    # Three workers into w4's 5 Mb/s link: a third of it each, the whole gradient, then a round trip.
    fragments = agents[0].total_fragments
    assert job_round.comm_s == pytest.approx(fragments * frame_bits / (5e6 / 3) + job_round.round_trip_s, rel=0.01)


def test_a_round_trip_waits_at_the_sender_at_each_switch_both_ways_and_at_both_ends():
    job_round = JobRound("job", "window", "worker", "ps", 2, 0.002, 0.010, 0.1)
    host_delay = {"worker": {"receive_wait": {"mean_s": 0.0002}, "send_lateness": {"mean_s": 0.0001}},
                  "ps": {"receive_wait": {"mean_s": 0.0003}, "send_lateness": {"mean_s": None}},
                  "switch": {"receive_wait": {"mean_s": 0.0004}}}
    parts = round_trip_host_delay_s(job_round, host_delay)
    assert parts == pytest.approx({"sender_lateness_s": 0.0001, "switches_s": 0.0016, "receiver_s": 0.0003,
                                   "sender_s": 0.0002})
    summary = round_trip_summary({"job": (job_round, parts)})["job"]
    assert summary["wait_s"] == pytest.approx(0.0022) and summary["share_of_round"] == pytest.approx(0.22)


def test_a_run_whose_round_trips_waited_past_the_share_of_a_round_is_distorted_and_says_why():
    job_round = JobRound("job", "ring step", "ring", "ring", 2, 0.002, 0.010, 0.06)
    below = {"sender_lateness_s": 0.001, "switches_s": 0.001, "receiver_s": 0.0005, "sender_s": 0.0005}
    assert assess(Evidence(round_trip_delays={"job": (job_round, below)})) == []
    above = {**below, "switches_s": 0.004}
    (reason,) = assess(Evidence(round_trip_delays={"job": (job_round, above)}))
    assert reason.startswith("host delay: a round trip of job job waited 6 ms")
    assert "60% of its 10 ms ring step (limit 33%)" in reason and "time_dilation" in reason


def test_the_limit_on_a_rounds_wait_is_where_a_ring_step_reads_at_the_fidelity_bound_on_rates():
    # A round that waits s of its length runs at 1 / (1 + s) of the model's rate.
    assert 1 / (1 + HOST_DELAY_STEP_SHARE) == pytest.approx(1 - RATE_TOLERANCE)


def test_a_ring_step_is_the_schemes_own_rar_over_every_worker_h_ar_by_phases_rina_over_its_members():
    scenario, agents = _agents(RING)
    total = agents[0].total_fragments
    frame_s = 8 * 314 / 5e6
    rounds = {scheme: job_rounds(s, *_placement_and_rates(s))[0]
              for scheme, s in ((p, parse_scenario(RING, "s.yaml", [f"policy={p}"])) for p in ("rar", "h-ar", "rina"))}
    # RAR: 6 steps of a quarter each. H-AR over two racks of two: 2 steps of a half within the rack, 2 of a
    # quarter between the racks, 2 of a half again: 2.5 gradients in 6 steps. Rina with both ToRs programmable:
    # two members, 2 steps of a half.
    assert rounds["rar"].round_s == pytest.approx(total / 4 * frame_s + rounds["rar"].round_trip_s, rel=0.01)
    assert rounds["h-ar"].round_s > rounds["rar"].round_s
    assert rounds["rina"].round_s == pytest.approx(total / 2 * frame_s + rounds["rina"].round_trip_s, rel=0.01)
    assert rounds["rina"].sender == "rina" and rounds["rar"].sender == "ring"


def test_what_arrives_while_a_worker_computes_waits_by_design_and_counts_from_when_it_listens():
    sock = open_endpoint("127.0.0.1", 0, "127.0.0.1")
    sender = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        sender.sendto(b"result", sock.getsockname())
        time.sleep(0.05)                                    # computing, not reading
        listening_since_s = time.time()
        assert [data for data, _, _ in pending_datagrams(sock, listening_since_s)] == [b"result"]
    finally:
        sock.close()
        sender.close()
    assert sock.host_delay.summary()["receive_wait"]["max_s"] < 0.01


def test_a_windowed_job_of_few_windows_is_distorted_by_a_delay_past_the_share_of_its_communication():
    """One window and a tenth: the delay comes at the start and the end, whatever share of a window it is."""
    job_round = JobRound("job", "window", "worker", "ps", 5, 0.0065, 0.054, 0.066)
    parts = {"sender_lateness_s": 0.0001, "switches_s": 0.0155, "receiver_s": 0.0002, "sender_s": 0.0003}
    (reason,) = assess(Evidence(round_trip_delays={"job": (job_round, parts)}))   # 30% of its window: within
    assert "24% of its 66 ms communication (limit 15%)" in reason
    below = {**parts, "switches_s": HOST_DELAY_COMM_SHARE * 0.066 - 0.0007}
    assert assess(Evidence(round_trip_delays={"job": (job_round, below)})) == []
    ring = JobRound("job", "ring step", "ring", "ring", 2, 0.0065, 0.054, 0.108)   # a ring weighs its steps only
    assert assess(Evidence(round_trip_delays={"job": (ring, parts)})) == []


def test_a_ring_step_is_held_to_a_third_and_a_window_to_its_own_limit():
    """The same wait, 37% of the round: a ring step reads 0.73x the model's rate (outside the bounds), a
    window's frames keep its link busy meanwhile."""
    wait = {"sender_lateness_s": 0.0, "switches_s": 0.0037, "receiver_s": 0.0, "sender_s": 0.0}
    step = JobRound("job", "ring step", "ring", "ring", 2, 0.001, 0.010, 0.14)
    window = JobRound("job", "window", "worker", "ps", 2, 0.001, 0.010, 0.5)
    (reason,) = assess(Evidence(round_trip_delays={"job": (step, wait)}))
    assert "37% of its 10 ms ring step (limit 33%)" in reason
    assert assess(Evidence(round_trip_delays={"job": (window, wait)})) == []
    assert HOST_DELAY_STEP_SHARE < 0.37 < HOST_DELAY_WINDOW_SHARE


def test_the_time_a_packet_waited_while_the_process_sends_waited_for_the_host_link_is_the_links():
    meter = HostDelayMeter()
    meter.received(1000.0, 1000.004)
    meter.sends_unblocked(1000.006, 1000.010)    # sends held by the link's queue: 4 ms, then 2 ms
    meter.sends_unblocked(1000.011, 1000.013)
    meter.received(1000.002, 1000.014)           # arrived before both: 12 ms, 6 of them the link's
    meter.received(1000.008, 1000.014)           # arrived in the first: 6 ms, 2 + 2 the link's
    meter.received(1000.0135, 1000.0145)         # arrived after both: counted whole
    assert meter.summary()["receive_wait"]["mean_s"] == pytest.approx((0.004 + 0.006 + 0.002 + 0.001) / 4)


def test_a_meter_keeps_the_last_spells_of_held_sends_and_counts_older_ones_as_the_packets_wait():
    meter = HostDelayMeter()
    for k in range(BLOCKS_KEPT + 1):             # 1 ms held every 10 ms
        meter.sends_unblocked(1000.0 + 0.01 * k, 1000.001 + 0.01 * k)
    now_s = 1000.0 + 0.01 * (BLOCKS_KEPT + 1)
    meter.received(999.0, now_s)                 # older than every spell kept: the kept ones are the link's
    kept = BLOCKS_KEPT - BLOCKS_KEPT // 2 + 1
    assert meter.summary()["receive_wait"]["mean_s"] == pytest.approx(now_s - 999.0 - kept * 0.001)


def test_an_endpoints_send_that_finds_its_buffer_full_waits_and_tells_the_meter(monkeypatch):
    """The send buffer fills only behind a shaped link (emulation tests): here the socket's own send says so,
    and its blocking send takes 0.2 s."""
    calls = []

    def full_once(sock, data, *flags_and_address):
        calls.append(flags_and_address)
        if len(calls) == 1:
            raise BlockingIOError
        if len(calls) == 2:
            time.sleep(0.2)
        return len(data)

    sock = open_endpoint("127.0.0.1", 0, "127.0.0.1")
    try:
        monkeypatch.setattr(socket.socket, "sendto", full_once)
        stamped_s = time.time()
        assert sock.sendto(b"result", ("127.0.0.1", 9)) == 6
        assert calls == [(socket.MSG_DONTWAIT, ("127.0.0.1", 9)), (("127.0.0.1", 9),)]
        assert sock.sendto(b"result", ("127.0.0.1", 9)) == 6 and len(calls) == 3     # room: no wait
        handled_s = time.time()
        sock.host_delay.received(stamped_s, handled_s)        # waited through the held send
    finally:
        monkeypatch.undo()
        sock.close()
    wait = sock.host_delay.summary()["receive_wait"]
    assert wait["count"] == 1 and 0 <= wait["max_s"] < handled_s - stamped_s - 0.15
