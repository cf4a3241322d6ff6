import pytest

from testbed import topology
from testbed.errors import TopologyError


def _unique(values):
    return len(values) == len(set(values))


def test_fat_tree_counts_and_identity():
    t = topology.fat_tree("ft", 1e9, 4)
    assert len(t.switches()) == 4 + 8 + 8
    assert len(t.hosts()) == 16
    assert len(t.links) == 16 + 16 + 16
    assert _unique([n.ip for n in t.nodes.values()]) and _unique([n.mac for n in t.nodes.values()])
    assert _unique([n.node_id for n in t.nodes.values()])


def test_fat_tree_hosts_per_edge_gives_goat_192_servers():
    t = topology.fat_tree("ft", 1e9, 8, hosts_per_edge=6)
    assert len(t.switches()) == 80
    assert len(t.hosts()) == 192


def test_fat_tree_needs_even_k():
    with pytest.raises(TopologyError, match="even"):
        topology.fat_tree("ft", 1e9, 3)


def test_leaf_spine_goat_shape():
    t = topology.leaf_spine("ls", 1e9, spines=10, leaves=10, hosts_per_leaf=5)
    assert len(t.switches()) == 20 and len(t.hosts()) == 50
    assert len(t.links) == 100 + 50


def test_dumbbell_parallel_paths_get_distinct_ports():
    t = topology.dumbbell("db", 1e9, 4, 7, paths=4)
    core = [l for l in t.links if {l.a, l.b} == {"s1", "s2"}]
    assert len(core) == 4
    assert len({l.port_a for l in core}) == 4
    assert len(t.hosts()) == 11


def test_goat_testbed_fig4():
    t = topology.goat_testbed("goat", 100e9)
    assert sorted(s.name for s in t.switches()) == ["s1", "s2", "s3"]
    assert len(t.hosts()) == 9
    assert t.neighbor("ps", t.host_link("ps")) == "s3"
    assert {t.neighbor(f"w{i}", t.host_link(f"w{i}")) for i in range(1, 5)} == {"s1"}
    assert any({l.a, l.b} == {"s1", "s2"} for l in t.links)


def test_goat_testbed_takes_workers_per_rack_for_the_4_to_16_worker_experiments():
    t = topology.goat_testbed("goat", 100e9, workers_per_rack=8)
    assert len(t.hosts()) == 17
    assert {t.neighbor(f"w{i}", t.host_link(f"w{i}")) for i in range(1, 9)} == {"s1"}
    assert {t.neighbor(f"w{i}", t.host_link(f"w{i}")) for i in range(9, 17)} == {"s2"}


def test_ports_number_from_one_in_link_order():
    t = topology.explicit("e", 1e9, [("s1", True)], ["a", "b"], [("a", "s1", None), ("b", "s1", 5e6)])
    assert [l.port_b for l in t.links] == [1, 2]
    assert t.links[1].rate_bps == 5e6


def test_host_with_two_links_is_rejected():
    with pytest.raises(TopologyError, match="exactly one"):
        topology.explicit("e", 1e9, [("s1", True), ("s2", True)], ["a"], [("a", "s1", None), ("a", "s2", None)])


def test_long_names_are_rejected():
    with pytest.raises(TopologyError, match="letters/digits"):
        topology.explicit("e", 1e9, [("switch_number_one", True)], [], [])


def test_programmable_fraction_is_seeded():
    t1 = topology.mark_programmable(topology.fat_tree("ft", 1e9, 4), {"fraction": 0.2}, seed=3)
    t2 = topology.mark_programmable(topology.fat_tree("ft", 1e9, 4), {"fraction": 0.2}, seed=3)
    chosen = [s.name for s in t1.programmable_switches()]
    assert chosen == [s.name for s in t2.programmable_switches()]
    assert len(chosen) == 4
