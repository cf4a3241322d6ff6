"""Placement -> entries and agent configs."""

import textwrap

from testbed import controller
from testbed.dataplane.entries import validate_entry
from testbed.schemes import compute_placement
from testbed.scenario import parse_scenario

RACK = textwrap.dedent("""\
    version: 1
    scale: 0.0001
    topology: {kind: explicit, switches: [s1, s2], hosts: [w1, w2, w3, w4, ps],
               links: [[w1, s1], [w2, s1], [w3, s1], [w4, s1], [s1, s2], [ps, s2]]}
    jobs: [{workers: [w1, w2, w3, w4], ps: ps, policy: atp, window: 16, submodels: 2,
            policy_options: {atp: {levels: 1}}}]
    """)


def plan_for(text, *overrides):
    scenario = parse_scenario(text, "t.yaml", overrides)
    placement = compute_placement(scenario)
    return scenario, placement, controller.control_plan(scenario, placement)


def test_atp_aggregates_at_the_first_programmable_switch():
    scenario, placement, plan = plan_for(RACK)
    job = placement.jobs["job0"]
    assert {job.first_hop[w][0] for w in ("w1", "w2", "w3", "w4")} == {"s1"}
    assert job.fanin(0, "s1") == 4 and job.fanin(0, "ps") == 1
    filters = [e for e in plan.switches["s1"].entries if e.table == "ina_filter"]
    assert len(filters) == 2
    params = dict(filters[0].params)
    assert params["next_dst"] == scenario.topology.node("ps").ip
    assert params["next_fanin"] == 1
    assert not [e for e in plan.switches["s2"].entries if e.table == "ina_filter"]
    for config in plan.switches.values():
        for entry in config.entries:
            validate_entry(entry)


def test_workers_address_their_aggregation_switch_within_its_slots():
    _, _, plan = plan_for(RACK)
    worker = next(a for a in plan.agents if a.name == "w1")
    assert worker.window <= worker.submodels[0].slot_count
    assert worker.submodels[0].agg_ip == "10.255.0.1"
    assert worker.submodels[0].fanin == 4
    ps = next(a for a in plan.agents if a.role == "ps")
    assert sum(p.fragments for p in ps.submodels) == worker.total_fragments


def test_ps_policy_installs_no_aggregation():
    _, _, plan = plan_for(RACK, "policy=ps")
    assert not any(e.table == "ina_filter" for c in plan.switches.values() for e in c.entries)
    worker = next(a for a in plan.agents if a.name == "w1")
    assert worker.submodels[0].agg_ip == "10.0.0.5" and worker.submodels[0].fanin == 4


def test_every_switch_routes_every_host_and_switch_address():
    scenario, _, plan = plan_for(RACK)
    for sw, config in plan.switches.items():
        routed = {e.match[0] for e in config.entries if e.table == "ipv4_lpm"}
        expected = {f"{n.ip}/32" for n in scenario.topology.nodes.values() if n.name != sw}
        assert routed == expected


def test_switch_ports_are_shaped_once_at_link_rate():
    scenario, _, plan = plan_for(RACK)
    shaping = plan.switches["s1"].port_shaping
    assert len(shaping) == 5
    assert all(s.rate_bps == scenario.topology.links[0].rate_bps for s in shaping)


def test_multi_ps_jobs_split_submodels_among_their_servers():
    text = RACK.replace("ps]", "ps, p2]").replace("[ps, s2]]", "[ps, s2], [p2, s2]]") \
        .replace("ps: ps", "ps: [ps, p2]").replace("submodels: 2", "submodels: 4")
    _, placement, plan = plan_for(text)
    owners = placement.jobs["job0"].ps_of_submodel
    assert set(owners.values()) == {"ps", "p2"}
    ps_agents = [a for a in plan.agents if a.role == "ps"]
    assert sorted(len(a.submodels) for a in ps_agents) == [2, 2]


def test_atp_releases_slots_on_the_ps_result():
    scenario, scheme, plan = plan_for(RACK)
    entries = [e for e in plan.switches["s1"].entries if e.table == "ina_result"]
    workers = {scenario.topology.node(w).ip for w in ("w1", "w2", "w3", "w4")}
    group_ip = plan.result_groups[("job0", "ps")]
    unicast = [e for e in entries if e.match[1] != group_ip]
    assert {e.match[1] for e in unicast} == workers               # a PS's unicast answer to one worker
    base, count = plan.slot_ranges[("job0", "s1")]
    assert all(dict(e.params) == {"slot_base": base, "slot_count": count, "mcast_grp": 0} for e in unicast)
    (multicast,) = [e for e in entries if e.match[1] == group_ip]  # the RESULT to every worker
    assert multicast.action == "ina_release"
    assert dict(multicast.params) == {"slot_base": base, "slot_count": count, "mcast_grp": 1}
    _, _, emit_plan = plan_for(RACK, "jobs.0.policy_options={atp: {levels: 1, release: emit}}")
    assert [e.action for e in emit_plan.switches["s1"].entries if e.table == "ina_result"] == ["ina_multicast"]


def test_results_of_ina_jobs_are_multicast_along_the_default_route_tree():
    scenario, scheme, plan = plan_for(RACK)
    topo = scenario.topology
    (group,) = plan.switches["s1"].multicast_groups
    ports = {topo.port("s1", topo.host_link(w)) for w in ("w1", "w2", "w3", "w4")}
    assert set(group.ports) == ports and group.group_id == 1
    rewrites = {e.match[0]: dict(e.params) for e in plan.switches["s1"].entries if e.table == "ina_mcast_rewrite"}
    assert {p: r["ipDstAddr"] for p, r in rewrites.items()} == \
        {topo.port("s1", topo.host_link(w)): topo.node(w).ip for w in ("w1", "w2", "w3", "w4")}
    (ps,) = [a for a in plan.agents if a.role == "ps"]
    assert ps.result_group_ip == plan.result_groups[("job0", "ps")] == "10.254.1.1"
    assert plan.host_neighbors == [("ps", "10.254.1.1", topo.node("s2").mac)]   # the PS's own switch
    (upper,) = plan.switches["s2"].multicast_groups                 # s2 replicates toward s1 only
    assert upper.ports == (topo.port("s2", next(l for l in topo.links_of("s2") if topo.neighbor("s2", l) == "s1")),)
    assert not [e for e in plan.switches["s2"].entries if e.table == "ina_mcast_rewrite"]
    _, _, ps_plan = plan_for(RACK, "policy=ps")                   # no INA: BytePS's unicast pull
    assert not ps_plan.result_groups and not ps_plan.switches["s1"].multicast_groups
    assert [a.result_group_ip for a in ps_plan.agents if a.role == "ps"] == [""]


def test_k_of_n_workers_left_out_send_to_the_ps_which_counts_only_participants():
    scenario, scheme, plan = plan_for(RACK, "policy=ksgd",
                                      "jobs.0.policy_options={ksgd: {k: 3, intervals: {w1: 1s, w2: 1s, w3: 1s, "
                                      "w4: 3s}}}")
    agents = {a.name: a for a in plan.agents}
    assert [agents[w].participant for w in ("w1", "w2", "w3", "w4")] == [True, True, True, False]
    assert agents["w4"].submodels[0].agg_ip == scenario.topology.node("ps").ip
    assert agents["ps"].participants == [0, 1, 2]


ESA_TWO_JOBS = textwrap.dedent("""\
    version: 1
    scale: 0.0001
    topology: {kind: explicit, switches: [s1, s2], hosts: [w1, w2, w3, w4, w5, w6, ps, p2, p3],
               links: [[w1, s1], [w2, s1], [w3, s1], [w4, s1], [w5, s1], [w6, s1], [s1, s2], [ps, s2], [p2, s2],
                       [p3, s2]]}
    jobs: [{workers: [w1, w2], ps: ps, policy: esa, window: 16, submodels: 2,
            policy_options: {esa: {priority: 3}}},
           {workers: [w3, w4], ps: p2, policy: esa, window: 12, submodels: 1},
           {workers: [w5, w6], ps: p3, policy: atp, window: 8}]
    """)


def test_esa_jobs_share_a_slot_range_per_switch_and_get_their_eviction_entries():
    """Two ESA jobs aggregating at s1 and s2 share one range there (16 + 12 slots), the ATP job keeps its own;
    each ESA job gets its priority (esa_job) and, per sub-model, its priority, fan-in and overflow target
    (esa_evict: ATP's level 2 at s1, the PS at s2)."""
    scenario, placement, plan = plan_for(ESA_TWO_JOBS)
    assert placement.shared_slot_ranges(["job0", "job1", "job2"]) == {"s1": ["job0", "job1"], "s2": ["job0", "job1"]}
    for sw in ("s1", "s2"):
        assert plan.slot_ranges[("job0", sw)] == plan.slot_ranges[("job1", sw)] == (0, 28)
        assert plan.slot_ranges[("job2", sw)] == (28, 8)
    topo = scenario.topology
    ids = {job.name: job.job_id for job in scenario.jobs}

    def entries(sw, table):
        return {e.match: dict(e.params) for e in plan.switches[sw].entries if e.table == table}

    assert entries("s1", "esa_job") == {(ids["job0"],): {"priority": 3}, (ids["job1"],): {"priority": 0}}
    evict = entries("s1", "esa_evict")
    assert sorted(evict) == [(ids["job0"], 0), (ids["job0"], 1), (ids["job1"], 0)]
    assert evict[(ids["job0"], 1)] == {"priority": 3, "fanin": 2, "overflow_dst": topo.node("s2").ip,
                                       "overflow_agg_node": topo.node("s2").node_id, "overflow_fanin": 2,
                                       "overflow_slot_base": 0, "overflow_slot_count": 28}
    assert entries("s2", "esa_evict")[(ids["job1"], 0)] == {
        "priority": 0, "fanin": 2, "overflow_dst": topo.ps_ip("p2"), "overflow_agg_node": topo.node("p2").node_id,
        "overflow_fanin": 1, "overflow_slot_base": 0, "overflow_slot_count": 0}
    filters = entries("s1", "ina_filter")
    assert {(f["slot_base"], f["slot_count"]) for (job, _, _), f in filters.items() if job != ids["job2"]} == {(0, 28)}


def test_emulation_refuses_esa_with_a_transport_that_reads_gacks():
    import pytest

    from testbed.plan import check_emulable
    from testbed.errors import PlacementError
    scenario, placement, _ = plan_for(ESA_TWO_JOBS)
    check_emulable(scenario, placement)
    scenario, placement, _ = plan_for(ESA_TWO_JOBS, "jobs.1.transport=pa-atp")
    with pytest.raises(PlacementError, match=r"jobs.job1.transport: esa preempts slots, .* \(pa-atp\); expected one "
                                          r"of atp, paced, switchml"):
        check_emulable(scenario, placement)


def test_a_colocated_ps_answers_at_its_hosts_second_address():
    """A PS beside one of its job's workers (Rina §VI-A4): its agent ``w1-ps`` runs on w1 at 10.253.0.1, which
    every switch routes and every aggregation entry names; the multicast tree leaves w1 out, and the PS
    unicasts each RESULT to the worker on its own host."""
    scenario = parse_scenario(textwrap.dedent("""\
        version: 1
        topology: {kind: explicit, switches: [t1, t2], hosts: [w1, w2, w3, w4],
                   links: [[w1, t1], [w2, t1], [w3, t2], [w4, t2], [t1, t2]]}
        jobs: [{gradient_size: 1MB, workers: [w1, w2, w3, w4], ps: [w1], policy: atp}]
        """))
    plan = controller.control_plan(scenario, compute_placement(scenario))
    ps = next(a for a in plan.agents if a.role == "ps")
    assert (ps.name, ps.host, ps.ip, ps.bind_ip, ps.local_worker_ip) == ("w1-ps", "w1", "10.253.0.1", "10.253.0.1",
                                                                         "10.0.0.1")
    worker = next(a for a in plan.agents if a.name == "w1")
    assert worker.ip == "10.0.0.1" and {p.ps_ip for p in worker.submodels} == {"10.253.0.1"}
    for sw in ("t1", "t2"):
        lpm = {e.match[0] for e in plan.switches[sw].entries if e.table == "ipv4_lpm"}
        assert {"10.0.0.1/32", "10.253.0.1/32"} <= lpm
    filters = [dict(e.params) for config in plan.switches.values() for e in config.entries if e.table == "ina_filter"]
    assert filters and all(f["bypass_dst"] == "10.253.0.1" for f in filters)
    assert {f["next_dst"] for f in filters} <= {"10.253.0.1", scenario.topology.node("t1").ip}
    ports = {g.ports for g in plan.switches["t1"].multicast_groups}
    w1_port = scenario.topology.port("t1", scenario.topology.host_link("w1"))
    assert ports and all(w1_port not in p for p in ports)
