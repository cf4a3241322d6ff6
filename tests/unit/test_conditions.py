"""Validation of the background-traffic and straggler sections of a scenario."""

import textwrap

import pytest

from testbed import bpf_build
from testbed.emulation import background
from testbed.emulation.host_checks import check_host_supports
from testbed.emulation.interrupts import InterruptLatch
from testbed.errors import EnvironmentMissingError, ScenarioError
from testbed.scenario import parse_scenario
from testbed.traffic import dctcp_bpf

BASE = textwrap.dedent("""\
    version: 1
    scale: 1
    topology: {kind: dumbbell, hosts_left: 3, hosts_right: 3, link_rate: 20Mbps}
    jobs: [{workers: [hl1, hl2], ps: hr1, policy: ps}]
    """)


def parse(extra):
    return parse_scenario(BASE + textwrap.dedent(extra), "t.yaml")


def error_of(extra):
    with pytest.raises(ScenarioError) as info:
        parse(extra)
    return info.value


def test_background_defaults_to_the_hosts_no_job_uses():
    s = parse("background: [{distribution: hadoop, load: 0.5}]")
    spec = s.background[0]
    assert spec.senders == ["hl3", "hr2", "hr3"] and spec.receivers == ["hl3", "hr2", "hr3"]
    assert spec.load == 0.5


@pytest.mark.parametrize("load", [0, 1.5, -0.2])
def test_load_outside_zero_one_is_rejected(load):
    err = error_of(f"background: [{{distribution: hadoop, load: {load}}}]")
    assert err.field == "background.0.load"


def test_unknown_distribution_lists_the_known_ones():
    err = error_of("background: [{distribution: netflix, load: 0.5}]")
    assert err.field == "background.0.distribution"
    assert "hadoop" in err.message and "web_search" in err.message


def test_background_tcp_congestion_control_is_cubic_unless_set_and_checked_against_the_kernel():
    assert parse("background: [{load: 0.5}]").background[0].congestion_control == "cubic"
    assert parse("background: [{load: 0.5, congestion_control: reno}]").background[0].congestion_control == "reno"
    assert parse("background: [{distribution: constant, load: 0.5, senders: [hl3], receivers: [hr3]}]") \
        .background[0].congestion_control is None
    err = error_of("background: [{load: 0.5, congestion_control: Cubic!}]")
    assert err.field == "background.0.congestion_control" and "cubic, reno, bbr" in err.message
    err = error_of("background: [{distribution: constant, load: 0.5, congestion_control: cubic}]")
    assert err.field == "background.0.congestion_control" and "UDP" in err.message
    check_host_supports(parse("background: [{load: 0.5, congestion_control: reno}]"))   # reno: always built in
    with pytest.raises(EnvironmentMissingError, match=r"^background\.0\.congestion_control: this kernel has no "
                                                     r"TCP congestion control 'nosuchcc'"):
        check_host_supports(parse("background: [{load: 0.5, congestion_control: nosuchcc}]"))


def test_background_dctcp_runs_as_the_projects_bpf_dctcp_where_the_kernel_has_none(monkeypatch, tmp_path):
    scenario = parse("background: [{load: 0.5, congestion_control: dctcp, ecn: true}]")
    monkeypatch.setattr(bpf_build, "cache_dir", lambda: tmp_path)
    substitutes = check_host_supports(scenario)
    if "dctcp" in dctcp_bpf.available():
        assert substitutes == {}                                  # the kernel's own
        return
    substitute = substitutes["dctcp"]
    assert (substitute.requested, substitute.used) == ("dctcp", "inatb_dctcp")
    assert substitute.object_path.parent == tmp_path and substitute.object_path.stat().st_size > 0
    assert check_host_supports(scenario)["dctcp"] == substitute   # built once per kernel and source
    monkeypatch.setattr(dctcp_bpf, "missing_prerequisite", lambda: "clang not installed (scripts/bootstrap.sh "
                                                                    "installs them)")
    with pytest.raises(EnvironmentMissingError, match=r"^background\.0\.congestion_control: this kernel has no TCP "
                                                     r"congestion control 'dctcp', and its BPF substitute cannot be "
                                                     r"built: clang not installed"):
        check_host_supports(scenario)


def test_bottleneck_must_be_a_link():
    err = error_of("background: [{load: 0.5, bottleneck: [hl1, hr1]}]")
    assert err.field == "background.0.bottleneck"


def test_straggler_naming_a_host_that_is_not_a_worker():
    err = error_of("stragglers: {pauses: [{worker: hr1, at: 1s, duration: 1s}]}")
    assert err.field == "stragglers.pauses.0.worker" and "not a worker" in err.message
    err = error_of("stragglers: {compute_delay: [{workers: [hl3], distribution: fixed, value: 1s}]}")
    assert err.field == "stragglers.compute_delay.0.workers.0"


def test_overlapping_rate_changes_on_one_interface():
    err = error_of("""\
        stragglers:
          rate_changes:
            - {host: hl1, at: 1s, duration: 2s, rate: 5Mbps}
            - {host: hl1, at: 2s, duration: 2s, rate: 2Mbps}
        """)
    assert err.field == "stragglers.rate_changes.1" and "overlaps stragglers.rate_changes.0" in err.message


def test_rate_change_and_link_degradation_on_the_same_link_overlap():
    err = error_of("""\
        stragglers:
          rate_changes: [{host: hl1, at: 0s, duration: 2s, rate: 5Mbps}]
          link_degradations: [{link: [hl1, s1], at: 1s, duration: 2s, rate: 1Mbps}]
        """)
    assert "overlaps" in err.message


def test_goat_normal_delay_defaults():
    s = parse("stragglers: {compute_delay: [{workers: all}]}")
    d = s.stragglers.compute_delays[0]
    assert (d.distribution, d.mean_s, d.std_s, d.low_s, d.high_s) == ("normal", 0.0, 0.2, 0.0, 1.0)
    assert d.workers == ["hl1", "hl2"]


def test_heterogeneous_links_are_seeded_and_in_range():
    a = parse("stragglers: {heterogeneous_links: {range: [10Mbps, 30Mbps]}}")
    b = parse("stragglers: {heterogeneous_links: {range: [10Mbps, 30Mbps]}}")
    rates = [a.topology.host_link(h.name).rate_bps for h in a.topology.hosts()]
    assert rates == [b.topology.host_link(h.name).rate_bps for h in b.topology.hosts()]
    assert all(10e6 <= r <= 30e6 for r in rates) and len(set(rates)) == len(rates)
    core = next(l for l in a.topology.links if {l.a, l.b} == {"s1", "s2"})
    assert core.rate_bps == 20e6


def test_normal_heterogeneous_links_are_a_seeded_ratio_of_each_host_link():
    a = parse("stragglers: {heterogeneous_links: {normal: {std: 0.2}}}")
    b = parse("stragglers: {heterogeneous_links: {normal: {std: 0.2}}}")
    hosts = [h.name for h in a.topology.hosts()]
    rates = [a.topology.host_link(h).rate_bps for h in hosts]
    assert rates == [b.topology.host_link(h).rate_bps for h in hosts]
    assert all(0.05 * 20e6 <= r <= 20e6 for r in rates) and len(set(rates)) > 1
    same = parse("stragglers: {heterogeneous_links: {normal: {std: 0}}}")
    assert {same.topology.host_link(h).rate_bps for h in hosts} == {20e6}       # std 0: every link its own rate
    wide = parse("stragglers: {heterogeneous_links: {normal: {mean: 0.5, std: 5}}}")
    assert {wide.topology.host_link(h).rate_bps for h in hosts} <= {0.05 * 20e6, 20e6}   # clipped both ways


def test_heterogeneous_links_take_one_distribution():
    for bad, field_path in (("{}", "stragglers.heterogeneous_links"),
                            ("{range: [1Mbps, 2Mbps], normal: {std: 0.1}}", "stragglers.heterogeneous_links"),
                            ("{normal: {std: -1}}", "stragglers.heterogeneous_links.normal.std"),
                            ("{normal: {mean: 0}}", "stragglers.heterogeneous_links.normal.mean"),
                            ("{normal: {sd: 1}}", "stragglers.heterogeneous_links.normal.sd")):
        with pytest.raises(ScenarioError, match=field_path.replace(".", r"\.")):
            parse(f"stragglers: {{heterogeneous_links: {bad}}}")


def test_worker_gets_its_delay_distribution_in_its_run_config():
    from testbed import controller
    from testbed.schemes import compute_placement
    s = parse("stragglers: {compute_delay: [{workers: [hl2], distribution: uniform, low: 0.1s, high: 0.3s}]}")
    plan = controller.control_plan(s, compute_placement(s))
    by_name = {a.name: a for a in plan.agents}
    assert by_name["hl1"].compute_delay == {}
    assert by_name["hl2"].compute_delay["distribution"] == "uniform"
    assert by_name["hl2"].compute_delay["high_s"] == 0.3


def test_constant_rate_flows_become_udp_roles_paced_in_frame_bits(tmp_path):
    """PA-ATP §V-B's UDP flow: ``load`` 0.8 of the 20 Mb/s bottleneck in Ethernet frames, from ``start`` for
    ``duration``; 256-byte datagrams are 284 IP bytes and 298 frame bytes."""
    s = parse("""\
        background:
          - {distribution: constant, load: 0.8, senders: [hl3], receivers: [hr3], bottleneck: [s1, s2],
             start: 0.5s, duration: 2s, port: 5101}
          - {distribution: hadoop, load: 0.2, senders: [hl3], receivers: [hr2], start: 1s, duration: 3s}
        """)
    assert [(b.start_s, b.duration_s) for b in s.background] == [(0.5, 2.0), (1.0, 3.0)]
    configs = background.flowgen_configs(s, 60.0, 1000.0, tmp_path)
    roles = {name: (index, config["role"]) for index, _, name, config in configs}
    assert roles == {"bg0-sink-hr3": (0, "udp-sink"), "bg0-source-hl3": (0, "udp-source"),
                     "bg1-sink-hr2": (1, "sink"), "bg1-source-hl3": (1, "source")}
    udp = next(c for _, _, name, c in configs if name == "bg0-source-hl3")
    assert udp["stop_epoch_s"] == 1000.0 + 0.5 + 2.0
    (flow,) = udp["flows"]
    assert flow == {"dst": s.topology.node("hr3").ip, "port": 5101, "start_s": 0.5, "duration_s": 2.0,
                    "rate_bps": pytest.approx(0.8 * 20e6 * 284 / 298), "datagram_bytes": 256}
    tcp = next(c for _, _, name, c in configs if name == "bg1-source-hl3")
    assert tcp["flows"] and all(1.0 <= f["start_s"] < 4.0 for f in tcp["flows"])
    assert tcp["congestion_control"] == "cubic" and "congestion_control" not in udp     # cubic unless set
    sinks = {name: c for _, _, name, c in configs if c["role"].endswith("sink")}
    assert sinks["bg1-sink-hr2"]["congestion_control"] == "cubic" and "congestion_control" not in sinks["bg0-sink-hr3"]
    # a name the run provides otherwise (testbed.traffic.dctcp_bpf) is what both ends of the flows use
    renamed = {name: c for _, _, name, c in background.flowgen_configs(s, 60.0, 1000.0, tmp_path, {"cubic": "other"})}
    assert renamed["bg1-source-hl3"]["congestion_control"] == renamed["bg1-sink-hr2"]["congestion_control"] == "other"
    sent = [{"sent_datagrams": 100, "sent_bytes": 28400}]
    got = [{"peer": "10.0.0.3", "flow": 0, "datagrams": 90, "bytes": 25560, "lost": 10}]
    cut_off = [{"peer": "10.0.0.3:40312", "bytes": 15000, "completed": False}]     # a TCP flow running at the end
    (summary, tcp) = background.summarise(s, {0: sent, 1: []}, {0: 2.0, 1: 3.0}, {0: got, 1: cut_off})
    assert summary["distribution"] == "constant" and summary["lost_datagrams"] == 10
    assert summary["achieved_load"] == pytest.approx(8 * 90 * 298 / 2.0 / 20e6)
    assert tcp["achieved_load"] == 0 and tcp["received_bytes"] == 15000
    assert tcp["received_load"] == pytest.approx(8 * 15000 / 3.0 / tcp["capacity_bps"])


def test_constant_rate_flows_have_no_sizes():
    err = error_of("background: [{distribution: constant, load: 0.5, max_flow_size: 1MB}]")
    assert err.field == "background.0.max_flow_size" and "no flow sizes" in err.message
    err = error_of("background: [{distribution: constant, load: 0.5, flow_size_scale: 0.1}]")
    assert err.field == "background.0.flow_size_scale" and "no flow sizes to scale" in err.message
    err = error_of("background: [{distribution: netflix, load: 0.5}]")
    assert "or constant (one UDP flow at a constant rate)" in err.message


def test_flow_size_scale_shrinks_the_flows_and_keeps_the_load_with_more_of_them(tmp_path):
    """A tenth of every size at the same load: ten times the flows, the same bytes offered, and the cap
    applies to the scaled sizes."""
    def planned(extra):
        s = parse(f"background: [{{distribution: hadoop, load: 0.5, senders: [hl3], receivers: [hr3], "
                  f"duration: 200s{extra}}}]")
        flows = next(c for _, _, name, c in background.flowgen_configs(s, 200.0, 1000.0, tmp_path)
                     if name == "bg0-source-hl3")["flows"]
        return s.background[0], [f["size_bytes"] for f in flows]
    spec, whole = planned("")
    tenth_spec, tenth = planned(", flow_size_scale: 0.1")
    capped_spec, capped = planned(", flow_size_scale: 0.1, max_flow_size: 50KB")
    assert (spec.flow_size_scale, tenth_spec.flow_size_scale) == (1.0, 0.1)
    assert 8 < len(tenth) / len(whole) < 12 and max(tenth) <= 1_000_000 < max(whole)
    assert 0.7 < sum(tenth) / sum(whole) < 1.4          # Hadoop's tail: the bytes of 200 s vary by a third
    assert max(capped) == 50_000 and capped_spec.max_flow_bytes == 50_000
    for bad in ("0", "1.5", "ten"):
        assert error_of(f"background: [{{load: 0.5, flow_size_scale: {bad}}}]").field == "background.0.flow_size_scale"


@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")    # the swallowed interrupt
def test_an_interrupt_swallowed_where_it_was_raised_is_raised_again_at_the_next_check():
    """Python drops an exception raised in a finalizer ("Exception ignored in ..."): the latch remembers the
    signal, so the run's loop raises it at its next check instead of running on."""
    import gc
    import os
    import signal as signals

    latch = InterruptLatch()
    latch.check()                                                    # nothing requested: no-op

    class RaisesInFinalizer:
        def __del__(self):
            os.kill(os.getpid(), signals.SIGINT)                     # handled here, in the finalizer ...
            for _ in range(1000):
                pass

    before = signals.getsignal(signals.SIGINT)                       # the default, or ignored under nohup
    with pytest.raises(KeyboardInterrupt):                           # raised again as the block ends, too
        with latch.installed():
            assert signals.getsignal(signals.SIGINT) == latch.handle
            RaisesInFinalizer()
            gc.collect()                                             # ... whose exception Python ignores
            assert latch.requested
            with pytest.raises(KeyboardInterrupt):
                latch.check()
    assert signals.getsignal(signals.SIGINT) == before                 # put back as it was


@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")    # the swallowed interrupt
def test_an_interrupt_swallowed_after_the_last_check_is_raised_when_the_latch_block_ends():
    """A signal taken after the run's waiting loops made their last check, and swallowed where it was raised
    (a finalizer, or a library's bare except), is not lost: the block raises it as it ends."""
    import os
    import signal as signals

    latch = InterruptLatch()
    with latch.installed():
        pass                                                         # nothing requested: the block just ends
    before = signals.getsignal(signals.SIGINT)
    with pytest.raises(KeyboardInterrupt):
        with latch.installed():
            try:
                os.kill(os.getpid(), signals.SIGINT)
                for _ in range(1000):
                    pass
            except KeyboardInterrupt:                                # swallowed, as a bare except would
                pass
            assert latch.requested
    assert signals.getsignal(signals.SIGINT) == before


def test_a_persistent_delay_is_drawn_once_per_worker_from_the_seed_and_k_of_n_leaves_the_slow_out():
    persistent = "stragglers: {compute_delay: [{workers: all, mean: 0.5s, persistent: true}]}"
    s = parse(persistent)
    (d,) = s.stragglers.compute_delays
    assert set(d.persistent_s) == {"hl1", "hl2"} and all(0 <= v <= 1 for v in d.persistent_s.values())
    assert parse(persistent).stragglers.compute_delays[0].persistent_s == d.persistent_s   # seeded: the same every time
    assert parse("seed: 9\n" + persistent).stragglers.compute_delays[0].persistent_s != d.persistent_s
    assert parse("stragglers: {compute_delay: [{workers: all}]}").stragglers.compute_delays[0].persistent_s == {}
    from testbed import controller
    slow = max(d.persistent_s, key=d.persistent_s.get)
    assert controller._compute_delay_of(s, slow) == {"distribution": "fixed", "value_s": d.persistent_s[slow]}
    from testbed.schemes.baselines import estimated_intervals_s
    intervals = estimated_intervals_s(s.jobs[0], s, None)            # no draw: the workers' own delays
    assert max(intervals, key=intervals.get) == slow
    assert error_of("stragglers: {compute_delay: [{workers: all, persistent: yes please}]}").field == \
        "stragglers.compute_delay.0.persistent"


def test_a_background_summary_counts_flows_that_negotiated_ecn_and_those_that_fell_back():
    """A flow whose SYN had to be sent again runs without ECN (Linux's ``net.ipv4.tcp_ecn_fallback``): the
    summary counts it apart from the flows that negotiated ECN, and a flow that never asked in neither."""
    s = parse("background: [{distribution: hadoop, load: 0.5, ecn: true}]")
    flow = lambda ecn, syn_again: {"size_bytes": 1000, "start_s": 0.1, "fct_s": 0.01, "completed": True,  # noqa
                                   "congestion_control": "cubic", "ecn": ecn, "syn_retransmitted": syn_again}
    records = [flow(True, False), flow(True, True), flow(False, True), flow(False, False)]
    (summary,) = background.summarise(s, {0: records}, {0: 2.0})
    assert (summary["ecn_negotiated_flows"], summary["ecn_fallback_flows"]) == (2, 1)
