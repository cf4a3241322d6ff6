"""Rina's incremental deployment, pure parts: the dragonfly topology (§VI-C), the replacement order of §IV-D
(``topology.programmable: {count, order: rina}``), the Bandwidth-Occupation Model of §III-B (Lemmas 1-3), and
Rina's agent-worker ring (§IV-A) in the policy and the simulator."""

from collections import Counter

import networkx as nx
import pytest

from testbed.agents.ring_acks import ACK_EVERY
from testbed.dataplane.wire import ina_frame_bytes, ring_frame_bytes
from testbed.errors import ScenarioError, TopologyError
from testbed.gradient_profiles import fragments_per_submodel
from testbed.schemes import compute_placement
from testbed.scenario import emulation_limits, parse_scenario, require_emulable
from testbed.sim import evaluate
from testbed.sim.bom import bom_rate_bps
from testbed.sim.fluid import rina_streams
from testbed.topology import dragonfly, explicit, incremental_order

FAT_TREE = """version: 1
topology: {kind: fat-tree, k: 4, link_rate: 10Gbps, programmable: %s}
jobs:
  - {name: j, gradient_size: 98MB, workers: [%s], policy: rar, iterations: 2}
"""
ALL_HOSTS = ", ".join(f"h{i}" for i in range(1, 17))


def test_rinas_dragonfly_joins_every_pair_of_groups_once():
    topo = dragonfly("d", 1e9, a=4, g=9, h=2, hosts_per_router=2)
    assert len(topo.switches()) == 36 and len(topo.hosts()) == 72
    inter = [(l.a, l.b) for l in topo.links if topo.nodes[l.a].kind == topo.nodes[l.b].kind == "switch"]
    degree = Counter(end for pair in inter for end in pair)
    assert set(degree.values()) == {3 + 2}                                  # a - 1 local + h global links each
    groups = Counter(frozenset((a[:a.index("r")], b[:b.index("r")])) for a, b in inter
                     if a[:a.index("r")] != b[:b.index("r")])
    assert len(groups) == 9 * 8 // 2 and set(groups.values()) == {1}      # one global link per pair of groups
    assert nx.diameter(nx.Graph(topo.graph())) == 5                       # host, local, global, local, host
    with pytest.raises(TopologyError, match="at most a\\*h \\+ 1 = 9 groups"):
        dragonfly("d", 1e9, a=4, g=10, h=2, hosts_per_router=2)
    scenario = parse_scenario("version: 1\ntopology: {kind: dragonfly, link_rate: 10Gbps}\n"
                              "jobs: [{name: j, gradient_size: 1MB, workers: [h1, h72], policy: rar, iterations: 1}]\n")
    assert len(scenario.topology.hosts()) == 72                            # a=4, g=9, h=2, two hosts per router


def test_rinas_order_replaces_the_tors_with_the_most_workers_first_then_the_most_downstream():
    topo = parse_scenario(FAT_TREE % ("none", ALL_HOSTS)).topology
    workers = [f"h{i}" for i in range(1, 17)]
    order = incremental_order(topo, workers)
    assert order[:8] == [f"e{i}" for i in range(1, 9)]                      # eight ToRs of two workers each
    # Rooted at h1: its aggregation switch a1 carries the other seven racks (each INA ToR now one worker),
    # then core c1 the six of the other pods, then each pod's aggregation switch on the tree.
    assert order[8:13] == ["a1", "c1", "a3", "a5", "a7"]
    assert sorted(order) == sorted(s.name for s in topo.switches())
    uneven = incremental_order(topo, ["h5", "h1", "h2", "h3"])               # e1 has two workers, e2 and e3 one
    assert uneven[:3] == ["e1", "e2", "e3"]
    for k in (0, 3, 9, 20):
        chosen = {s.name for s in parse_scenario(FAT_TREE % (f"{{count: {k}, order: rina}}", ALL_HOSTS))
                  .topology.programmable_switches()}
        assert chosen == set(order[:k])


@pytest.mark.parametrize("rule, field, expected", [
    ("{count: 21}", "topology.programmable.count", "[0, 20], got 21"),
    ("{count: 2, order: random}", "topology.programmable.order", "rina"),
    ("{order: rina}", "topology.programmable", "{count: K, order: rina}"),
    ("{count: 2, fraction: 0.5}", "topology.programmable", "fraction"),
])
def test_a_bad_incremental_rule_is_one_line_naming_the_field(rule, field, expected):
    with pytest.raises(ScenarioError) as err:
        parse_scenario(FAT_TREE % (rule, ALL_HOSTS))
    message = str(err.value)
    assert field in message and expected in message and "\n" not in message


def rina_fig4(ina):
    """Rina Fig. 4: the PS under switch 4, which holds worker w0 and switch 3; switch 3 holds w1, w2 and
    switch 2; switch 2 (the sub-topology T1) holds four workers."""
    links = [("ps", "s4", None), ("w0", "s4", None), ("s3", "s4", None), ("w1", "s3", None), ("w2", "s3", None),
             ("s2", "s3", None)] + [(f"w{i}", "s2", None) for i in range(3, 7)]
    topo = explicit("fig4", 1e9, [(s, s in ina) for s in ("s2", "s3", "s4")], ["ps"] + [f"w{i}" for i in range(7)],
                    links)
    return bom_rate_bps(topo, [f"w{i}" for i in range(7)], "ps", ina)


def test_the_bandwidth_occupation_model_follows_rinas_lemmas():
    assert rina_fig4(set()) == pytest.approx(1e9 / 7)            # Lemma 1: seven workers share the PS's link
    assert rina_fig4({"s3"}) == pytest.approx(1e9 / 4)           # Lemmas 2-3: s3 is one worker, T1 holds it back
    assert rina_fig4({"s2", "s3"}) == pytest.approx(1e9 / 2)     # s3 and w0 share switch 4's link to the PS
    assert rina_fig4({"s2", "s3", "s4"}) == pytest.approx(1e9)
    assert rina_fig4({"s2"}) == pytest.approx(1e9 / 4)           # w0, w1, w2 and s2's aggregate at the PS's link


RINA_RACKS = """version: 1
topology:
  kind: explicit
  link_rate: 1Gbps
  switches: [t1, {name: t2, programmable: false}]
  hosts: [w1, w2, w3, w4]
  links: [[w1, t1], [w2, t1], [w3, t2], [w4, t2], [t1, t2]]
jobs:
  - {name: j, gradient_size: 1MB, workers: [%s], policy: rina, iterations: 2}
"""


def test_rina_makes_a_rack_under_a_programmable_tor_one_member_of_the_ring():
    scenario = parse_scenario(RINA_RACKS % "w3, w1, w2, w4")
    members = compute_placement(scenario).jobs["j"].notes["members"]
    assert members == [{"workers": ["w3"], "tor": None}, {"workers": ["w1", "w2"], "tor": "t1"},
                       {"workers": ["w4"], "tor": None}]                  # in the order of their first worker
    streams = rina_streams(compute_placement(scenario).jobs["j"], "scatter-reduce")
    assert [(src, dst) for src, dst, _, _ in streams] == [("w3", "w1"), ("w1", "t1"), ("w2", "t1"), ("t1", "w4"),
                                                          ("w4", "w3")]  # shards to the ToR, its sum on
    first_gather = rina_streams(compute_placement(scenario).jobs["j"], "reduce-gather")
    assert [(src, dst) for src, dst, _, _ in first_gather] == [
        ("w3", "t1"), ("t1", "w1"), ("t1", "w2"),                  # w3's finished chunk, replicated to the rack
        ("w1", "t1"), ("w2", "t1"), ("t1", "w1"), ("t1", "w2"),   # the rack's shards, its finished chunk to it
        ("t1", "w4"), ("w4", "w3")]                               # ... and on from its ToR
    gather = rina_streams(compute_placement(scenario).jobs["j"], "all-gather")
    assert [(src, dst) for src, dst, _, _ in gather] == [("w3", "t1"), ("t1", "w1"), ("t1", "w2"), ("w1", "w4"),
                                                         ("w4", "w3")]   # the ToR replicates to its rack


def test_rina_in_the_simulator_by_hand():
    scenario = parse_scenario(RINA_RACKS % "w1, w2, w3, w4")
    result = evaluate(scenario, compute_placement(scenario))["jobs"]["j"]
    frame, header = ina_frame_bytes(scenario.switch.lanes), ina_frame_bytes(0)
    ack_share = ring_frame_bytes(0) / ACK_EVERY / ring_frame_bytes(scenario.switch.lanes)
    # Three members (w1 and w2 under t1, w3, w4): two ScatterReduce steps, the first AllGather step, one
    # more AllGather step. In ScatterReduce and the last step every link carries one stream and another
    # stream's ACKs at most, so every stream runs at 1 Gb/s / (1 + the ACK share); in the first AllGather
    # step t1 -> w1 carries the rack's own finished chunk, w4's (replicated by t1) and the ACKs of w1's
    # shard, so w1, w2 and w4 run at 1 Gb/s / (2 + the ACK share).
    rate, first_gather_rate = 1e9 / (1 + ack_share), 1e9 / (2 + ack_share)
    chunk = -(-sum(fragments_per_submodel(scenario.jobs[0].submodel_elements, scenario.switch.lanes)) // 3)
    pull_step_s = 8 * (frame + 3 * header) / 1e9             # a frame, an ACK, the agent's task and the pull
    step_s = 8 * (frame + header) / 1e9                      # a frame and an ACK
    assert result["comm_time_s"] == pytest.approx(2 * (chunk * 8 * frame / rate + pull_step_s)
                                                  + chunk * 8 * frame / first_gather_rate + pull_step_s
                                                  + chunk * 8 * frame / rate + step_s, rel=1e-9)
    # the slowest sender is w2, a rack worker: its shard in the three pulling steps, one of them at the lower rate
    assert result["min_sending_rate_bps"] == pytest.approx(3 / (2 / rate + 1 / first_gather_rate), rel=1e-9)
    # every worker's shard in the pulling steps (three), the three members' chunks in the last
    assert result["sent_fragments"] == chunk * (3 * 4 + 3) and result["ring"]
    assert result["sent_bytes"] == result["sent_fragments"] * frame
    # switch ports a fragment leaves by: per ScatterReduce step t1's sum to w3 (t1, t2), w3's chunk to w4 (t2)
    # and w4's to w1 (t2, t1): 5; in the first AllGather step t1's finished chunk to w1, w2 and w3 (4), w3's
    # to w4 (1), w4's to the rack (3): 8; in the last w1's chunk to w3 (2), w3's (1), w4's to the rack (3): 6
    assert result["switch_egress_fragments"] == chunk * (2 * 5 + 8 + 6)
    assert result["communication_overhead_bytes"] == result["switch_egress_fragments"] * frame
    # RAR's six steps of a quarter of the model at 1 Gb/s / (1 + the ACK share) take less: here one rack
    # of two saves two steps of its ring and costs a step at half the rate
    rar = parse_scenario((RINA_RACKS % "w1, w2, w3, w4").replace("policy: rina", "policy: rar"))
    assert evaluate(rar, compute_placement(rar))["jobs"]["j"]["comm_time_s"] < result["comm_time_s"]
    # both ToRs programmable: two members, one ScatterReduce step and the first AllGather step
    both = parse_scenario((RINA_RACKS % "w1, w2, w3, w4").replace("{name: t2, programmable: false}", "t2"))
    two = evaluate(both, compute_placement(both))["jobs"]["j"]
    half = -(-sum(fragments_per_submodel(both.jobs[0].submodel_elements, both.switch.lanes)) // 2)
    assert two["sent_fragments"] == half * (4 + 4)


def test_the_emulation_runs_rina_but_refuses_a_ring_of_one_member():
    assert emulation_limits(parse_scenario(RINA_RACKS % "w1, w2, w3, w4")) == []
    one_rack = parse_scenario(RINA_RACKS % "w1, w2")
    assert emulation_limits(one_rack) == ["<scenario>:9: jobs.0.workers: scheme rina: every worker is under one "
                                          "programmable ToR (t1), a ring of one member; the emulated Rina needs two "
                                          "members at least (workers under another ToR)"]
    with pytest.raises(ScenarioError, match="jobs.0.workers: valid for `inatb simulate` only: scheme rina"):
        require_emulable(one_rack)
    assert emulation_limits(parse_scenario((RINA_RACKS % "w1, w2").replace("switches: [t1,", "switches: "
                                                                            "[{name: t1, programmable: false},"))) == []


def test_a_ps_may_share_a_host_with_one_of_its_jobs_workers_in_the_simulator():
    """Rina §VI-A4: the PS baselines co-locate the PS on a worker host. The scenario takes it, the simulator
    models it (the co-located worker's gradient crosses no link), and the emulation runs it (its PS agent is
    ``h16-ps``, answering at the host's second address)."""
    text = FAT_TREE % ("all", ALL_HOSTS)
    scenario = parse_scenario(text.replace("policy: rar", "ps: [h16], policy: atp"))
    assert scenario.jobs[0].ps == ["h16"] and "h16" in scenario.jobs[0].workers
    assert evaluate(scenario, compute_placement(scenario))["jobs"]["j"]["comm_time_s"] > 0
    counts = {}
    for events in (10 ** 9, 0):                    # the event-driven fragment model and the analytic one agree
        small = parse_scenario(text.replace("policy: rar", "ps: [h16], policy: atp").replace("98MB", "1MB")
                               + f"simulation: {{max_fragment_events: {events}}}\n")
        result = evaluate(small, compute_placement(small))
        counts[result["fragment_model"].split()[0]] = result["ps_ingress_fragments"]
    assert len(set(counts.values())) == 1 and set(counts) == {"event", "analytic"}
    assert not any("jobs.0.ps" in line for line in emulation_limits(scenario))
    assert scenario.jobs[0].ps_agents == ["h16-ps"] and scenario.topology.colocated_ps == {"h16"}
    assert scenario.topology.ps_ip("h16") == "10.253.0.16" and scenario.topology.addresses("h16") == [
        "10.0.0.16", "10.253.0.16"]
    other = text.replace("policy: rar", "ps: [h16], policy: atp").replace(
        "iterations: 2}", "iterations: 2}\n  - {name: k, gradient_size: 1MB, workers: [h15, h16], ps: [h1], "
                          "iterations: 1}").replace(f"workers: [{ALL_HOSTS}]", "workers: [h1, h2, h3]")
    with pytest.raises(ScenarioError, match="jobs.1.workers.1: host 'h16' already serves j as ps"):
        parse_scenario(other)


def test_a_colocated_ps_sends_no_result_back_over_its_own_link():
    text = (RINA_RACKS % "w1, w2, w3, w4").replace("switches: [t1, {name: t2, programmable: false}]",
                                                   "switches: [t1, t2]\n  result_multicast: all")
    scenario = parse_scenario(text.replace("policy: rina", "ps: [w4], policy: atp"))
    result = evaluate(scenario, compute_placement(scenario))
    # t2 aggregates w3 with t1's aggregate and sends one stream to the PS on w4; the RESULTs go out over
    # w4's link and back to w1-w3 only, so every worker sends at the link's rate.
    assert result["min_sending_rate_bps"] == pytest.approx(1e9, rel=1e-9)


def test_atp_with_every_level_sends_at_the_bandwidth_occupation_models_rate_on_the_fat_tree():
    """With every switch programmable, BOM (§III-B, every INA switch aggregating) gives the workers the
    link's rate; ATP's two levels leave the aggregation and core switches forwarding the ToRs' partial
    aggregates, seven of them converging on the PS's ToR over its two uplinks, ``levels: all`` aggregates
    there too and reaches BOM's rate."""
    text = FAT_TREE % ("all", ALL_HOSTS)
    rates = {}
    for levels in (2, "all"):
        scenario = parse_scenario(text.replace("policy: rar", f"ps: [h16], policy: atp, "
                                                              f"policy_options: {{atp: {{levels: {levels}}}}}"))
        result = evaluate(scenario, compute_placement(scenario))
        rates[levels] = result["jobs"]["j"]["min_sending_rate_bps"]
        assert result["jobs"]["j"]["bom_rate_bps"] == pytest.approx(10e9)
    assert rates["all"] == pytest.approx(10e9, rel=1e-9) and rates[2] < 0.5 * 10e9


def test_rinas_controller_gives_each_rina_tor_its_rack_and_each_worker_its_member():
    """Rina §IV-B: t1's rack (w1, w2) is one member, w3 and w4 autonomous; t1 sums the rack's shards in the
    job's slots, pulls w2 (its agent w1 sends the tasks), and sends finished chunks to w1, w2 and toward w3."""
    from testbed.agents.rina import repair_runs
    from testbed.controller import control_plan

    scenario = parse_scenario(RINA_RACKS % "w1, w2, w3, w4")
    control = control_plan(scenario, compute_placement(scenario))
    topo = scenario.topology
    t1 = control.switches["t1"]
    groups = {g.group_id: set(g.ports) for g in t1.multicast_groups}
    rack = next(e for e in t1.entries if e.table == "rina_rack")
    params = dict(rack.params)
    port = {n: topo.port("t1", topo.link_for("t1", n)) for n in ("w1", "w2", "t2")}
    assert rack.match == (scenario.jobs[0].job_id, topo.node("t1").node_id)
    assert params["switch_addr"] == topo.node("t1").ip and (params["slot_base"], params["slot_count"]) == (0, scenario.jobs[0].window)
    assert groups[params["pull_grp"]] == {port["w2"]}
    assert groups[params["gather_grp"]] == {port["w1"], port["w2"], port["t2"]}
    gather = next(e for e in t1.entries if e.table == "rina_gather")
    assert gather.match[1] == topo.node("w1").ip and groups[dict(gather.params)["mcast_grp"]] == {port["w1"], port["w2"]}
    assert not any(e.table.startswith("rina") for e in control.switches["t2"].entries)
    agents = {a.name: a for a in control.agents}
    assert [(a.role, a.member_index, a.rack_tor_node != 0, a.rack_rank, a.agent_ip) for a in agents.values()] == [
        ("rina", 0, True, 0, topo.node("w1").ip), ("rina", 0, True, 1, topo.node("w1").ip),
        ("rina", 1, False, 0, topo.node("w3").ip), ("rina", 2, False, 0, topo.node("w4").ip)]
    assert agents["w3"].member_tors == [(0, topo.node("t1").ip), (1, ""), (2, "")]
    assert repair_runs([3, 4, 5, 9, 10, 20]) == [(3, 3), (9, 2), (20, 1)]
