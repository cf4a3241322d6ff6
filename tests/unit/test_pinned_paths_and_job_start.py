"""PA-ATP §V-B's set-up in the schema: flows pinned to parallel paths (``topology.pinned_paths``) and a job that
starts late (``jobs[].start``), resolved by the scenario and honoured by the controller's plan; the simulator
puts each flow on the parallel link the controller's entries pick, pinned or spread."""

import textwrap

import pytest

from testbed import controller, sim
from testbed.sim.routes import Routes, link_name
from testbed.errors import ScenarioError, TopologyError
from testbed.schemes import compute_placement
from testbed.scenario import parse_scenario

BASE = textwrap.dedent("""\
    version: 1
    scale: 0.001
    topology: {kind: dumbbell, hosts_left: 5, hosts_right: 2, paths: 4, link_rate: 4Gbps, programmable: [s2]}
    jobs:
      - {name: a, workers: [hl1, hl2], ps: hr1, policy: atp, submodel_elements: [64000]}
      - {name: b, workers: [hl3, hl4], ps: hr2, policy: atp, submodel_elements: [64000], start: 1.5s}
    """)


def parse(*overrides, text=BASE):
    return parse_scenario(text, "t.yaml", overrides)


def route_ports(scenario, switch="s1"):
    """{(src host, dst address): egress port} of the exact ``route`` entries at ``switch``."""
    plan = controller.control_plan(scenario, compute_placement(scenario))
    by_ip = {n.ip: n.name for n in scenario.topology.nodes.values()}
    return {(by_ip[e.match[0]], e.match[1]): dict(e.params)["port"]
            for e in plan.switches[switch].entries if e.table == "route"}


def core_ports(scenario, switch="s1"):
    topo = scenario.topology
    return [topo.port(switch, l) for l in sorted(topo.links, key=lambda l: l.index) if {l.a, l.b} == {"s1", "s2"}]


def test_pinned_hosts_send_on_their_path_everywhere_others_are_spread():
    scenario = parse("topology.pinned_paths.hl1=1", "topology.pinned_paths.hl2=2", "topology.pinned_paths.hl5=1")
    assert scenario.topology.pinned_paths == {"hl1": 0, "hl2": 1, "hl5": 0}
    p1, p2, _, _ = core_ports(scenario)
    ports = route_ports(scenario)
    s2_ina = scenario.topology.node("s2").ip
    for (src, dst), port in ports.items():
        if src in ("hl1", "hl5"):
            assert port == p1, (src, dst)
        elif src == "hl2":
            assert port == p2, (src, dst)
    assert {ports[("hl1", s2_ina)], ports[("hl2", s2_ina)]} == {p1, p2}   # the gradients toward the aggregator
    unpinned = {port for (src, _), port in ports.items() if src in ("hl3", "hl4")}
    assert len(unpinned) > 1                                              # still spread, as ECMP would
    assert route_ports(parse()) != ports


def route_entries(scenario, switch):
    """{(src host, dst host or switch): (action, params)} of the exact ``route`` entries at ``switch``."""
    plan = controller.control_plan(scenario, compute_placement(scenario))
    by_ip = {n.ip: n.name for n in scenario.topology.nodes.values()}
    return {(by_ip[e.match[0]], by_ip[e.match[1]]): (e.action, dict(e.params))
            for e in plan.switches[switch].entries if e.table == "route"}


def test_ecmp_flow_hashes_each_flow_of_a_host_without_agents_and_leaves_the_jobs_and_the_pinned_alone():
    pair = parse("topology.hosts_left=6", "topology.pinned_paths.hl5=2")
    flow = parse("topology.hosts_left=6", "topology.pinned_paths.hl5=2", "topology.ecmp=flow")
    assert (pair.topology.ecmp, flow.topology.ecmp) == ("pair", "flow")
    for switch in ("s1", "s2"):
        first = min(core_ports(flow, switch))
        by_pair, by_flow = route_entries(pair, switch), route_entries(flow, switch)
        assert by_pair.keys() == by_flow.keys()
        # hl6 runs no agent and is not pinned: only its flows are hashed (hl5 is pinned; switches are no hosts)
        hashed = {k: v for k, v in by_flow.items() if k[0] == "hl6"}
        assert hashed and {k: v for k, v in by_flow.items() if k[0] != "hl6"} == \
            {k: v for k, v in by_pair.items() if k[0] != "hl6"}
        for (src, dst), (action, params) in hashed.items():
            assert action == "route_ecmp" and params["first_port"] == first and params["ports"] == 4, (src, dst)
            assert params["dstAddr"] == by_pair[(src, dst)][1]["dstAddr"]


def test_ecmp_flow_over_parallel_links_on_scattered_ports_is_a_one_line_error():
    scenario = parse("topology.ecmp=flow", text=textwrap.dedent("""\
        version: 1
        scale: 0.001
        topology:
          kind: explicit
          link_rate: 4Gbps
          switches: [s1, s2]
          hosts: [w1, w2, bg, ps]
          links: [[w1, s1], [s1, s2], [w2, s1], [bg, s1], [s1, s2], [ps, s2]]
        jobs:
          - {name: a, workers: [w1, w2], ps: ps, policy: atp, submodel_elements: [64000]}
        """))
    with pytest.raises(TopologyError) as info:
        controller.control_plan(scenario, compute_placement(scenario))
    assert str(info.value) == ("topology.ecmp: flow needs the links from s1 to s2 on consecutive ports, "
                               "they are on 2, 5")


@pytest.mark.parametrize("override, field, words", [
    ("topology.pinned_paths.hl1=5", "topology.pinned_paths.hl1", "[1, 4], got 5"),
    ("topology.pinned_paths.hl1=0", "topology.pinned_paths.hl1", "[1, 4]"),
    ("topology.pinned_paths.zz=1", "topology.pinned_paths.zz", "not defined in the topology"),
    ("topology.paths=1", "topology.pinned_paths", "no two switches by parallel links"),
    ("topology.ecmp=5tuple", "topology.ecmp", "expected one of pair, flow, got '5tuple'"),
    ("jobs.1.start=-1s", "jobs.1.start", ""),
    ("jobs.1.start=soon", "jobs.1.start", ""),
])
def test_bad_pins_and_starts_are_one_line_errors(override, field, words):
    overrides = ["topology.pinned_paths.hl1=1", override] if override == "topology.paths=1" else [override]
    with pytest.raises(ScenarioError) as info:
        parse(*overrides)
    err = info.value
    assert err.field == field and words in err.message and "\n" not in str(err)


def test_a_job_starts_late_and_its_workers_are_told():
    scenario = parse()
    assert [job.start_s for job in scenario.jobs] == [0.0, 1.5]
    plan = controller.control_plan(scenario, compute_placement(scenario))
    starts = {a.name: a.start_s for a in plan.agents}
    assert starts == {"hl1": 0.0, "hl2": 0.0, "hr1": 0.0, "hl3": 1.5, "hl4": 1.5, "hr2": 1.5}


def test_the_simulator_crosses_the_parallel_link_the_controller_installs_for_each_flow():
    for overrides in ((), ("topology.pinned_paths.hl1=2", "topology.pinned_paths.hl3=2")):
        scenario = parse(*overrides)
        placement = compute_placement(scenario)
        routes = Routes(scenario.topology, placement)
        ports = core_ports(scenario)
        by_ip = {n.ip: n.name for n in scenario.topology.nodes.values()}
        checked = 0
        for (src, dst_ip), port in route_ports(scenario).items():
            dst = by_ip[dst_ip]
            if scenario.topology.nodes[dst].kind != "host" or "s1" not in routes.walk(src, dst):
                continue                        # (entries for every pair; only some packets reach s1)
            core = [link for link in routes.links(src, dst) if link[:2] == ("s1", "s2")]
            assert [ports[link[2]] for link in core] == [port], (src, dst)
            checked += 1
        assert checked == 10          # hl1..hl5 to hr1, hr2
    assert [link for link in routes.links("hl1", "hr1") if link[:2] == ("s1", "s2")] == [("s1", "s2", 1)]
    assert link_name(("s1", "s2", 1)) == "s1>s2/p2" and link_name(("hl1", "s1")) == "hl1>s1"


def test_flows_pinned_to_one_path_share_its_rate_in_the_simulator():
    """Job a's two workers aggregated at s2 (RESULTs left out): pinned to the same path they each get half of
    it, and it is the bottleneck; pinned apart, each gets its whole access link."""
    def evaluate(*pins):
        scenario = parse(*pins, "jobs=[{name: a, workers: [hl1, hl2], ps: hr1, policy: atp, "
                         "submodel_elements: [64000]}]", "simulation.results=false")
        return sim.evaluate(scenario, compute_placement(scenario))

    shared = evaluate("topology.pinned_paths.hl1=1", "topology.pinned_paths.hl2=1")
    assert shared["min_sending_rate_bps"] == pytest.approx(2e6, rel=1e-9)
    assert shared["bottleneck_links"] == ["s1>s2/p1"] and "s1>s2/p2" not in shared["link_load"]
    apart = evaluate("topology.pinned_paths.hl1=1", "topology.pinned_paths.hl2=2")
    assert apart["min_sending_rate_bps"] == pytest.approx(4e6, rel=1e-9)
    assert [apart["link_load"][f"s1>s2/p{k}"]["utilisation"] for k in (1, 2)] == pytest.approx([1.0, 1.0])
