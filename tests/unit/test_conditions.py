"""Validation of the background-traffic and straggler sections of a scenario."""

import textwrap

import pytest

from testbed.errors import ScenarioError
from testbed.scenario import parse_scenario

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
    assert (d.distribution, d.mean_s, d.std_s, d.low_s, d.high_s) == ("normal", 0.5, 0.2, 0.0, 1.0)
    assert d.workers == ["hl1", "hl2"]


def test_heterogeneous_links_are_seeded_and_in_range():
    a = parse("stragglers: {heterogeneous_links: {range: [10Mbps, 30Mbps]}}")
    b = parse("stragglers: {heterogeneous_links: {range: [10Mbps, 30Mbps]}}")
    rates = [a.topology.host_link(h.name).rate_bps for h in a.topology.hosts()]
    assert rates == [b.topology.host_link(h.name).rate_bps for h in b.topology.hosts()]
    assert all(10e6 <= r <= 30e6 for r in rates) and len(set(rates)) == len(rates)
    core = next(l for l in a.topology.links if {l.a, l.b} == {"s1", "s2"})
    assert core.rate_bps == 20e6


def test_worker_gets_its_delay_distribution_in_its_run_config():
    from testbed import controller
    from testbed.policy import compute_policy
    s = parse("stragglers: {compute_delay: [{workers: [hl2], distribution: uniform, low: 0.1s, high: 0.3s}]}")
    plan = controller.plan(s, compute_policy(s))
    by_name = {a.name: a for a in plan.agents}
    assert by_name["hl1"].compute_delay == {}
    assert by_name["hl2"].compute_delay["distribution"] == "uniform"
    assert by_name["hl2"].compute_delay["high_s"] == 0.3
