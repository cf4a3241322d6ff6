"""The figures that say whether a run is a result: CPU shares, losses, the distorted mark, stalls,
and every paper metric of summary.json on a hand-computable run."""

import os
from types import SimpleNamespace

import pytest

from testbed.agents.common import SendTally
from testbed.agents.transport import make_transport
from testbed.emulation.stall import (STALL_FACTOR, STALL_MIN_S, StallWatch, counters_moved, expected_iteration_s,
                                     stall_bound_s)
from testbed.metrics.counters import packet_rate_bound_ports
from testbed.metrics.cpu import (CLOCK_TICKS_PER_S, CpuSampler, available_cores, busiest_thread_peak, cgroup_cpu_limit,
                                 cpu_share, process_stat_times_s, process_times_s, spaced_samples,
                                 stat_cpu_s, thread_cpu_s)
from testbed.metrics.distortion import SPURIOUS_RETX_LIMIT, Evidence, assess
from testbed.metrics.losses import qdisc_dropped, udp_rcvbuf_errors
from testbed.metrics.summary import honest_figures, job_metrics, jobs_headline, run_metrics

FRAME = 336   # 42 B Ethernet/IPv4/UDP + 38 B INA header + 64 lanes x 4 B


def test_cpu_share_mean_and_peak():
    assert cpu_share([(0.0, 1.0)]) is None
    share = cpu_share([(0.0, 0.0), (1.0, 0.5), (2.0, 1.4), (4.0, 1.6)])
    assert share == {"mean": 0.4, "peak": 0.9}
    assert cpu_share([(0.0, 0.0), (1.0, None), (2.0, 1.0)]) == {"mean": 0.5, "peak": 0.5}


def test_process_cpu_seconds_of_this_process():
    import os
    assert sum(process_times_s(os.getpid())) >= 0.0
    assert process_times_s(2 ** 22 + 12345) is None


def test_a_process_times_are_read_apart_and_its_kernel_share_is_part_of_its_mean():
    import os
    stat = "4242 (python3 (agent)) S 1 2 3 0 -1 4194560 100 0 0 0 250 75 0 0 20 0 1 0 99 0 0"
    assert process_stat_times_s(stat) == (250 / CLOCK_TICKS_PER_S, 75 / CLOCK_TICKS_PER_S)
    user_s, system_s = process_times_s(os.getpid())
    assert sum(process_times_s(os.getpid())) >= user_s + system_s >= 0.0
    # A process that spent 0.6 of a core over 2 s, 0.2 of it in the kernel.
    sampler = CpuSampler({"agent": 1}, interval_s=1.0)
    sampler.samples["agent"] = [(0.0, 0.0), (1.0, 0.5), (2.0, 1.2)]
    sampler.system["agent"] = [(0.0, 0.0), (1.0, 0.1), (2.0, 0.4)]
    sampler.machine = [(0.0, 0.0), (1.0, 0.3), (2.0, 0.6)]
    share = sampler.shares()["processes"]["agent"]
    assert share["mean"] == 0.6 and share["system_mean"] == 0.2


def test_busiest_thread_peak_is_one_threads_largest_share_of_a_core():
    assert busiest_thread_peak([(0.0, {1: 0.0})]) is None
    # Two threads at 0.6 and 0.5 of a core: the process used 1.1 cores, its busiest thread 0.6.
    samples = [(0.0, {1: 0.0, 2: 0.0}), (1.0, {1: 0.6, 2: 0.5}), (3.0, {1: 1.0, 2: 0.9, 3: 5.0})]
    assert busiest_thread_peak(samples) == 0.6          # thread 3 was not seen at the start of its interval
    assert busiest_thread_peak(samples + [(4.0, {3: 5.95})]) == 0.95
    assert busiest_thread_peak([(0.0, {}), (1.0, {})]) == 0.0


def test_peaks_leave_out_an_interval_shorter_than_half_the_sampling_interval():
    """The sampler's last reading can come a millisecond after the one before: one 10 ms clock tick over it
    read as 7.5 cores of one thread and marked a run distorted (PA-ATP Fig. 10, ATP at load 0.8)."""
    threads = [(0.0, {7: 0.0}), (1.0, {7: 0.3}), (2.0, {7: 0.6}), (2.0013, {7: 0.61})]
    assert busiest_thread_peak(threads) > 7
    assert spaced_samples(threads, 0.5) == [(0.0, {7: 0.0}), (1.0, {7: 0.3}), (2.0013, {7: 0.61})]
    assert busiest_thread_peak(spaced_samples(threads, 0.5)) == pytest.approx(0.31, abs=0.01)
    assert spaced_samples([(0.0, 1), (0.2, 2), (0.4, 3), (0.6, 4), (0.7, 5)], 0.5) == [(0.0, 1), (0.7, 5)]
    assert spaced_samples([(0.0, 1), (0.1, 2)], 0.5) == [(0.0, 1), (0.1, 2)]    # a run shorter than that
    assert spaced_samples([], 0.5) == []
    sampler = CpuSampler({"me": 1}, interval_s=1.0)
    sampler.samples["me"] = [(0.0, 0.0), (1.0, 0.3), (2.0, 0.6), (2.0013, 0.61)]
    sampler.waits["me"] = [(0.0, 0.0), (1.0, 0.0), (2.0, 0.0), (2.0013, None)]
    sampler.threads["me"] = threads
    sampler.machine = [(0.0, 0.0), (1.0, 0.3), (2.0, 0.6), (2.0013, 0.61)]
    shares = sampler.shares()
    assert shares["processes"]["me"]["peak"] < 0.35 and shares["processes"]["me"]["thread_peak"] < 0.35
    assert shares["machine"]["peak"] < 0.35


def test_thread_cpu_seconds_of_this_process():
    import os
    import threading
    started, stop = threading.Event(), threading.Event()
    worker = threading.Thread(target=lambda: (started.set(), stop.wait()))
    worker.start()
    started.wait()
    try:
        threads = thread_cpu_s(os.getpid())
        assert os.getpid() in threads and worker.native_id in threads
        assert all(seconds >= 0.0 for seconds in threads.values())
    finally:
        stop.set()
        worker.join()
    assert thread_cpu_s(2 ** 22 + 12345) == {}
    clock = iter([0.0, 1.0])
    sampler = CpuSampler({"this": os.getpid()}, clock=lambda: next(clock))
    sampler.sample()
    sampler.sample()
    share = sampler.shares()["processes"]["this"]
    assert share["threads"] >= 1 and 0.0 <= share["thread_peak"] <= share["peak"] + 0.02


def test_distortion_reasons_each_rule():
    quiet = Evidence(fragments_sent=1000, retransmissions=50, spurious_retransmissions=20,
                     cpu={"processes": {"switch s1": {"mean": 0.3, "peak": 0.89}},
                          "machine": {"mean": 0.5, "peak": 0.9}, "cores": 2, "interval_s": 1.0})
    assert assess(quiet) == []                                   # 2.0% spurious is at the limit, not above
    assert SPURIOUS_RETX_LIMIT == 0.02
    busy = Evidence(fragments_sent=1000, spurious_retransmissions=21,
                    cpu={"processes": {"switch s1": {"mean": 0.8, "peak": 0.95}},
                         "machine": {"mean": 0.93, "peak": 1.0}, "cores": 2, "interval_s": 1.0},
                    unmodelled_losses={"host w1 (udp_rcvbuf)": 3})
    reasons = assess(busy)
    assert len(reasons) == 4
    assert reasons[0] == "CPU: switch s1 used 95% of a core over one 1 s interval"
    assert reasons[1] == "CPU: the machine was 93% busy on average over 2 cores"
    assert reasons[2] == "loss outside modelled queues: 3 packets at host w1 (udp_rcvbuf)"
    assert reasons[3] == "spurious retransmissions: 21 of 1000 fragments (2.1% > 2%)"


def test_a_multithreaded_process_is_judged_by_its_busiest_thread():
    """bmv2's pipelines are threads: 1.08 cores in all with no thread short of a core keeps up; one thread at
    0.92 of a core does not, whatever the process's total."""
    def evidence(peak, thread_peak, threads):
        return Evidence(cpu={"processes": {"switch s1": {"mean": 0.6, "peak": peak, "thread_peak": thread_peak,
                                                          "threads": threads}},
                             "machine": {"mean": 0.6, "peak": 0.8}, "cores": 2, "interval_s": 1.0})
    assert assess(evidence(1.08, 0.7, 9)) == []
    assert assess(evidence(0.95, 0.92, 9)) == ["CPU: switch s1 used 92% of a core in one of its threads over one "
                                               "1 s interval"]
    assert assess(evidence(0.95, 0.95, 1)) == ["CPU: switch s1 used 95% of a core over one 1 s interval"]


def test_kernel_loss_parsers():
    snmp = ("Udp: InDatagrams NoPorts InErrors OutDatagrams RcvbufErrors SndbufErrors\n"
            "Udp: 10 0 7 12 5 0\nUdpLite: InDatagrams\nUdpLite: 0\n")
    assert udp_rcvbuf_errors(snmp) == 5
    assert udp_rcvbuf_errors("Ip: Forwarding\nIp: 1\n") == 0
    tc = ("qdisc htb 5: root refcnt 2 r2q 10 default 1\n Sent 100 bytes 2 pkt (dropped 4, overlimits 0 requeues 0)\n"
          "qdisc pfifo 10: parent 5:1 limit 1000p\n Sent 100 bytes 2 pkt (dropped 4, overlimits 0 requeues 0)\n")
    assert qdisc_dropped(tc) == 4
    assert qdisc_dropped("qdisc noqueue 0: root refcnt 2\n") == 0


def test_stall_watch_and_counters_moved():
    watch = StallWatch(bound_s=10.0, now_s=0.0)
    assert not watch.observe((0, 0), 1.0)                        # the first marker is progress
    assert not watch.observe((0, 0), 11.0)
    assert watch.observe((0, 0), 11.01) and watch.idle_s(12.0) == 11.0
    assert not watch.observe((1, 0), 12.0)                       # progress resets the clock
    assert counters_moved({"emitted": 5, "port_ina_tx": {1: 2}}, {"emitted": 9, "aggregated": 3,
                                                                  "port_ina_tx": {1: 7}}) == \
        {"emitted": 4, "aggregated": 3}


def test_expected_iteration_time_and_stall_bound():
    link = SimpleNamespace(rate_bps=8 * FRAME * 1000)            # 1000 frames/s
    delay = SimpleNamespace(workers=["w1"], distribution="normal", high_s=0.2, value_s=0.0)
    scenario = SimpleNamespace(
        topology=SimpleNamespace(host_link=lambda h: link), switch=SimpleNamespace(lanes=64),
        stragglers=SimpleNamespace(compute_delays=[delay]))
    job = SimpleNamespace(submodel_elements=[640, 640], workers=["w1", "w2"], ps=["ps"], compute_time_s=0.02,
                          start_s=0.0)
    # 20 fragments per worker, 2 workers, 1 ms a frame at the slowest link, 0.2 s spread, 20 ms compute
    assert expected_iteration_s(scenario, job) == pytest.approx(0.02 + 0.2 + 0.04)
    assert STALL_MIN_S == 10.0 and STALL_FACTOR == 10.0
    scenario.jobs = [job]
    assert stall_bound_s(scenario) == STALL_MIN_S
    late = SimpleNamespace(**{**vars(job), "compute_time_s": 1.0, "start_s": 25.0})
    scenario.jobs = [job, late]                                  # waiting for a late job's start is no stall
    assert stall_bound_s(scenario) == pytest.approx(STALL_FACTOR * (1.0 + 0.2 + 0.04) + 25.0)


def hand_run():
    """2 workers x 2 iterations x 3 fragments of 336-byte frames; one retransmission; one PS.
    Iteration 0: the switch aggregated everything (3 aggregates at the PS); iteration 1: none
    (6 raw fragments at the PS, one of them a spurious retransmission)."""
    w = lambda retx: {"fragments": 3, "sent_pkts": 3 + retx, "sent_bytes": FRAME * (3 + retx),   # noqa: E731
                      "retx_pkts": retx, "comm_s": 0.1, "sending_rate_bps": 8 * FRAME * (3 + retx) / 0.1,
                      "timeouts": retx}
    ps = lambda pkts, raw, spurious: {"ingress_pkts": pkts, "ingress_bytes": FRAME * pkts, "raw_pkts": raw,  # noqa
                                      "iteration_s": 0.5, "exact": True, "mismatched_fragments": 0,
                                      "bypassed_pkts": 0, "duplicate_pkts": spurious,
                                      "spurious_retx_pkts": spurious}
    records = {"w1": [w(0), w(1)], "w2": [w(0), w(0)], "ps": [ps(3, 0, 0), ps(7, 7, 1)]}
    for rows in records.values():
        for iteration, row in enumerate(rows):
            row["iteration"] = iteration
    job = SimpleNamespace(name="j", scheme="atp", transport="atp", workers=["w1", "w2"], ps=["ps"], iterations=2,
                          is_ring=False, completion_agents=["ps"], ps_agents=["ps"], straggler_allowance=True,
                          training=None)
    return job, records


def test_paper_metrics_on_a_hand_computable_run():
    job, records = hand_run()
    m = job_metrics(job, records)
    assert m["fragments_sent"] == 12
    assert m["gradient_frame_bytes"] == 12 * FRAME               # every worker's fragments once
    assert m["ps_ingress_bytes"] == 10 * FRAME and m["ps_ingress_packets"] == 10
    assert m["ps_ingress_fragments_per_iteration"] == 5
    assert m["ina_amount_bytes"] == 2 * FRAME                    # total size of models - PS overhead (GOAT)
    assert m["retransmitted_packets"] == 1 and m["retransmission_ratio"] == pytest.approx(1 / 12)
    assert m["iteration_time_s"] == 0.5 and m["training_throughput_iter_per_s"] == 2.0
    assert m["counted_gradients_per_s"] == 4.0                   # both workers' gradients, twice a second
    assert job_metrics(job, records, participants=["w1"])["counted_gradients_per_s"] == 2.0   # K-of-N: one
    assert m["comm_time_s"] == pytest.approx(0.1)
    assert m["min_gradient_sending_rate_bps"] == pytest.approx(8 * FRAME * 3 / 0.1)
    assert m["gradient_sending_rate_bps"] == pytest.approx(8 * FRAME * 3.25 / 0.1)
    assert m["worker_sent_bytes"] == 13 * FRAME
    assert m["transport_events"]["timeouts"] == 1 and m["aggregation_exact"]


def test_ina_amount_is_zero_when_the_ps_receives_everything():
    job, records = hand_run()
    records["ps"] = [{**r, "ingress_pkts": 6, "ingress_bytes": 6 * FRAME, "raw_pkts": 6} for r in records["ps"]]
    assert job_metrics(job, records)["ina_amount_bytes"] == 0.0


def test_run_level_honest_figures():
    job, records = hand_run()
    jobs = [job_metrics(job, records)]
    stats = {"s1": {"partial_flushed": 2, "queue_dropped": {1: 0, 3: 5}, "impairment": {2: {"dropped": 1}},
                    "socket_dropped": 4}}
    figures, evidence = honest_figures(jobs, stats, {"w1": {"udp_rcvbuf": 0, "qdisc": 2}}, {})
    assert figures["spurious_retransmissions"] == 3 and figures["spurious_retransmission_ratio"] == 0.25
    assert figures["queue_drops"] == {"s1": {3: 5}} and figures["impairment_drops"] == {"s1": {2: 1}}
    assert figures["unmodelled_losses"] == {"switch s1 port sockets": 4, "host w1 (qdisc)": 2}
    assert evidence.fragments_sent == 12 and len(assess(evidence)) == 3
    records["w1"][1]["releases"] = 2                 # PA-ATP released two partial aggregates on purpose
    released = [job_metrics(job, records)]
    assert released[0]["transport_events"]["releases"] == 2
    figures, _ = honest_figures(released, stats, {}, {})
    assert figures["spurious_retransmissions"] == 1
    records["w1"][1]["releases"] = 5                 # more releases than duplicates counted: none spurious
    assert honest_figures([job_metrics(job, records)], stats, {}, {})[0]["spurious_retransmissions"] == 0


def test_warmup_iterations_leave_out_times_and_the_per_iteration_ingress_not_totals():
    job, records = hand_run()
    records["w1"][0]["comm_s"] = records["w2"][0]["comm_s"] = 2.0          # slow start in iteration 0
    records["ps"][0]["iteration_s"] = 3.0
    everything = job_metrics(job, records)
    steady = job_metrics(job, records, warmup_iterations=1)
    assert everything["comm_time_s"] == pytest.approx(1.05) and steady["comm_time_s"] == pytest.approx(0.1)
    assert everything["iteration_time_s"] == pytest.approx(1.75) and steady["iteration_time_s"] == 0.5
    assert steady["ps_ingress_packets"] == everything["ps_ingress_packets"] == 10
    # Per iteration, the PS's ingress is the steady state's: iteration 1's 7 packets, not (3 + 7) / 2.
    assert everything["ps_ingress_fragments_per_iteration"] == 5 and steady["ps_ingress_fragments_per_iteration"] == 7
    assert steady["retransmitted_packets"] == 1 and steady["worker_sent_bytes"] == 13 * FRAME


def test_run_level_paper_metrics_by_hand():
    job, records = hand_run()
    jobs = [job_metrics(job, records), {**job_metrics(job, records), "job": "k", "comm_time_s": 0.3,
                                        "aggregation_exact": False, "training_throughput_iter_per_s": 1.0}]
    stats = {"s1": {"port_ina_tx": {1: 6, 4: 3}}, "s2": {"port_ina_tx": {2: 3}}}   # gradient packets out
    deltas = {"s1-eth4": {"tx_bytes": 10 * FRAME}, "s1-eth1": {"tx_bytes": 500}, "s2-eth2": {"tx_bytes": 40}}
    m = {**jobs_headline(jobs), **run_metrics(jobs, stats, deltas, ["s1-eth4"], FRAME)}
    assert m["switch_egress_fragments"] == 12
    assert m["communication_overhead_bytes"] == 12 * FRAME           # gradients only, as GOAT counts
    assert m["switch_tx_link_bytes"] == 10 * FRAME + 540             # every frame out of a switch port
    assert m["ps_ingress_link_bytes"] == 10 * FRAME
    assert m["ps_ingress_bytes"] == 20 * FRAME and m["ina_amount_bytes"] == 4 * FRAME
    assert m["comm_time_s"] == pytest.approx(0.2) and m["iteration_time_s"] == 0.5
    assert m["training_throughput_iter_per_s"] == pytest.approx((2.0 + 1.0) / 2)    # PA-ATP Fig. 9's y
    assert m["aggregation_exact"] is False


def test_an_agents_send_tally_counts_what_its_transport_sends_and_the_rate_from_it():
    transport = make_transport("atp", window_cap=3, link_rate_bps=0, frame_bytes=FRAME, min_rto_s=0.2)
    transport.start_iteration(5, (), 0.0)
    sent = []
    tally = SendTally(0.0)
    tally.send_due(transport, 0.01, lambda seq, retx: (("w", 1), bytes(FRAME - 42)), lambda d, a: sent.append(a))
    assert (tally.pkts, tally.retx_pkts, tally.frame_bytes, tally.last_s) == (3, 0, 3 * FRAME, 0.01)
    assert len(sent) == 3 and transport.next_send(0.02) is None            # the window is full
    # Nothing acknowledged yet: 3 frames between the start (0) and 0.01 s plus one frame time on a 1 Mb/s link.
    assert tally.rate_bps(1e6) == pytest.approx(8 * 3 * FRAME / (0.01 + 8 * FRAME / 1e6))
    assert tally.rate_bps(1e9) == pytest.approx(8 * 3 * FRAME / (0.01 + 8 * FRAME / 1e9))
    # GRID's rate as the acknowledgements clock it: the first RESULT (0.05 s) lets seq 3 out at 0.06 s, the
    # second seq 4 at 0.08 s; the first window's burst is left out: 2 frames from 0.05 s to 0.08 s plus a frame.
    transport.on_result(0, 0.05)
    tally.send_due(transport, 0.06, lambda seq, retx: (("w", 1), bytes(FRAME - 42)), lambda d, a: sent.append(a))
    transport.on_result(1, 0.07)
    tally.send_due(transport, 0.08, lambda seq, retx: (("w", 1), bytes(FRAME - 42)), lambda d, a: sent.append(a))
    assert (tally.pkts, tally.clock) == (5, (0.05, 3, 3 * FRAME))
    assert tally.rate_bps(1e6) == pytest.approx(8 * 2 * FRAME / (0.03 + 8 * FRAME / 1e6))
    gacked = make_transport("pa-atp", window_cap=3, link_rate_bps=0, frame_bytes=FRAME, min_rto_s=0.2)
    gacked.start_iteration(5, (), 0.0)
    gacked.on_gack(0, 0.04)
    assert gacked.first_ack_s == 0.04                                      # a GACK clocks PA-ATP's sender


def test_a_bmv2_port_held_by_its_packet_rate_in_small_frames_is_found_and_marks_the_run():
    def sample(t, packets, frame_bytes):
        return {"t": t, "ifaces": {"s1-eth1": [0, 0, packets * frame_bytes, packets],
                                   "s1-eth2": [0, 0, packets * 336, packets]}}
    caps = {"s1-eth1": 1000, "s1-eth2": 1000}
    # s1-eth1: 950 then 400 packets/s of 200-byte frames; s1-eth2: 950 packets/s of full frames (link-bound).
    samples = [{"t": 0.0, "ifaces": {"s1-eth1": [0, 0, 0, 0], "s1-eth2": [0, 0, 0, 0]}}]
    samples.append(sample(1.0, 950, 200))
    later = sample(2.0, 1350, 200)
    later["ifaces"]["s1-eth2"] = [0, 0, 1900 * 336, 1900]
    samples.append(later)
    bound = packet_rate_bound_ports(samples, caps, 336)
    assert bound == {"s1-eth1": {"intervals": 1, "peak_share_of_cap": 0.95, "mean_frame_bytes": 200.0}}
    reasons = assess(Evidence(packet_rate_bound=bound))
    assert reasons == ["packet-rate shaping: bmv2 port s1-eth1 sent at 95% of its packets-per-second cap in "
                       "frames of 200 bytes on average (1 interval(s)), below its link's rate"]
    assert packet_rate_bound_ports(samples, {"s1-eth1": 1000 / 0.75}, 336) == {}         # 71% of a larger cap


def test_resends_while_a_job_without_straggler_allowance_waits_for_its_stragglers_are_the_schemes():
    """A job whose workers do not know its stragglers (``straggler_allowance: false``) resends on purpose while
    it waits for its slowest worker to start: those resends (sent before the iteration's first RESULT) are left
    out of the spurious count that marks a run distorted. With the allowance, a resend that early is not the
    scheme's intent and still counts."""
    job, records = hand_run()
    stats = {"s1": {"partial_flushed": 2}}
    records["w1"][1]["retx_before_first_result"] = 2
    assert honest_figures([job_metrics(job, records)], stats, {}, {})[0]["spurious_retransmissions"] == 3
    job.straggler_allowance = False
    m = job_metrics(job, records)
    assert m["straggler_wait_retransmissions"] == 2 and m["transport_events"]["retx_before_first_result"] == 2
    assert honest_figures([m], stats, {}, {})[0]["spurious_retransmissions"] == 1
    # Under ATP's two levels a resend re-emitted by its ToR flushes the partial above too: one duplicate at each
    # of the job's aggregation nodes (ToR, level-2 switch, PS), and no more.
    deep = job_metrics(job, records, aggregation_depth=3)
    assert deep["aggregation_depth"] == 3
    assert honest_figures([deep], {"s1": {"partial_flushed": 4}, "s2": {"partial_flushed": 3}}, {}, {})[0][
        "spurious_retransmissions"] == 2


def test_a_resend_a_holding_switch_drops_is_as_spurious_as_one_that_flushes():
    """GOAT's switches hold their partials: a RETX duplicate is dropped there (``retx_held``) instead of flushing
    (``partial_flushed``); it repeats what the node held all the same."""
    job, records = hand_run()
    assert honest_figures([job_metrics(job, records)], {"s1": {"retx_held": 2}}, {}, {})[0][
        "spurious_retransmissions"] == 3


def test_a_cpu_quota_in_the_cgroup_or_a_parent_limits_the_cores_a_run_plans_on():
    v1 = "/sys/fs/cgroup/cpu/runs"
    files = {f"{v1}/cpu.cfs_quota_us": "150000", f"{v1}/cpu.cfs_period_us": "100000",
             f"{v1}/one/cpu.cfs_quota_us": "-1", f"{v1}/one/cpu.cfs_period_us": "100000",
             "/sys/fs/cgroup/unified/ci/cpu.max": "50000 100000", "/sys/fs/cgroup/free/cpu.max": "max 100000"}
    read = files.get
    assert cgroup_cpu_limit("1:cpu:/runs/one\n0::/", read) == 1.5           # v1: the parent's quota
    assert cgroup_cpu_limit("0::/ci", read) == 0.5                          # v2 (under cgroup v1's unified mount)
    assert cgroup_cpu_limit("0::/free\n1:cpu,cpuacct:/", read) is None      # no quota anywhere
    assert 0 < available_cores() <= (os.cpu_count() or 1)


def test_the_machines_busy_time_counts_the_runs_cores_only():
    """A run held to core 0 (``taskset``) of a machine busy elsewhere is judged on core 0."""
    stat = ("cpu  300 0 100 1500 100 0 0 0 0 0\n"
            "cpu0 50 0 50 850 50 0 0 0 0 0\n"
            "cpu1 250 0 50 650 50 0 0 0 0 0\n"
            "intr 12345\n")
    ticks = CLOCK_TICKS_PER_S
    assert stat_cpu_s(stat) == pytest.approx((400 / ticks, 2000 / ticks))
    assert stat_cpu_s(stat, frozenset({0})) == pytest.approx((100 / ticks, 1000 / ticks))
    assert stat_cpu_s(stat, frozenset({0, 1})) == pytest.approx((400 / ticks, 2000 / ticks))
