"""The ``topology`` section resolved into a :class:`testbed.topology.Topology`: the builder of its kind
(explicit, dumbbell, leaf-spine, fat-tree, dragonfly, GOAT's testbed) at the scaled link rate, which switches
are programmable, pinned paths, RESULT multicast and ECMP."""

from testbed import topology
from testbed.errors import TopologyError, brief_repr as _brief
from testbed.scenario.schema import ECMP_MODES, INCREMENTAL_ORDERS, RESULT_MULTICAST, TOPOLOGY_KEYS, TOPOLOGY_KINDS


def resolve_topology(c, spec, scale, seed, workers=()):
    path = "topology"
    if not isinstance(spec, dict):
        c.fail(path, "expected a mapping with a kind")
    kind = spec.get("kind")
    if not isinstance(kind, str) or kind not in TOPOLOGY_KINDS:
        c.fail(f"{path}.kind", f"unknown topology kind {_brief(kind)}; expected one of {', '.join(TOPOLOGY_KINDS)}")
    c.keys(spec, path, TOPOLOGY_KEYS[kind])
    rate = c.rate_bps(spec.get("link_rate", "100Gbps"), f"{path}.link_rate") * scale
    try:
        if kind == "explicit":
            topo = _explicit(c, spec, rate, scale)
        elif kind == "dumbbell":
            core = spec.get("core_rate")
            topo = topology.dumbbell(
                "dumbbell", rate, c.integer(spec.get("hosts_left", 2), f"{path}.hosts_left", 1, 64),
                c.integer(spec.get("hosts_right", 2), f"{path}.hosts_right", 1, 64),
                c.integer(spec.get("paths", 1), f"{path}.paths", 1, 16),
                c.rate_bps(core, f"{path}.core_rate") * scale if core is not None else None)
        elif kind == "leaf-spine":
            topo = topology.leaf_spine(
                "leaf-spine", rate, c.integer(spec.get("spines", 2), f"{path}.spines", 1, 64),
                c.integer(spec.get("leaves", 2), f"{path}.leaves", 1, 64),
                c.integer(spec.get("hosts_per_leaf", 2), f"{path}.hosts_per_leaf", 1, 64))
        elif kind == "fat-tree":
            topo = topology.fat_tree("fat-tree", rate, c.integer(spec.get("k", 4), f"{path}.k", 2, 16),
                                     c.integer(spec["hosts_per_edge"], f"{path}.hosts_per_edge", 1, 64)
                                     if "hosts_per_edge" in spec else None)
        elif kind == "dragonfly":
            # Rina §VI-C: a=4, g=9, h=2; two hosts per router (not stated): the balanced dragonfly of
            # Kim et al., a = 2p = 2h.
            a = c.integer(spec.get("a", 4), f"{path}.a", 1, 16)
            h = c.integer(spec.get("h", 2), f"{path}.h", 1, 16)
            topo = topology.dragonfly("dragonfly", rate, a, c.integer(spec.get("g", a * h + 1), f"{path}.g", 2, 64),
                                      h, c.integer(spec.get("hosts_per_router", max(1, a // 2)),
                                                   f"{path}.hosts_per_router", 1, 64))
        else:
            topo = topology.goat_testbed("goat-testbed", rate, c.integer(
                spec.get("workers_per_rack", 4), f"{path}.workers_per_rack", 1, 32))
    except TopologyError as exc:
        c.fail(path, str(exc))
    # No rule keeps the builder's flags (every switch programmable, or the
    # explicit topology's per-switch ``programmable``).
    rule = spec.get("programmable")
    switch_names = {s.name for s in topo.switches()}
    if isinstance(rule, list):
        for i, sw in enumerate(rule):
            if not isinstance(sw, str) or sw not in switch_names:
                c.fail(f"{path}.programmable.{i}", f"{_brief(sw)} is not a switch of this topology")
    elif isinstance(rule, dict) and "fraction" in rule:
        c.keys(rule, f"{path}.programmable", {"fraction"})
        c.number(rule.get("fraction"), f"{path}.programmable.fraction", 0, 1, low_open=True)
    elif isinstance(rule, dict):
        c.keys(rule, f"{path}.programmable", {"count", "order"})
        if "count" not in rule:
            c.fail(f"{path}.programmable", "expected {fraction: F} or {count: K, order: rina}")
        c.integer(rule["count"], f"{path}.programmable.count", 0, len(switch_names))
        c.choice(rule.get("order", INCREMENTAL_ORDERS[0]), f"{path}.programmable.order", INCREMENTAL_ORDERS)
    elif rule not in ("all", "none", None):
        c.fail(f"{path}.programmable", "expected all, none, a list of switch names, {fraction: F} or "
                                       "{count: K, order: rina}")
    if "pinned_paths" in spec:
        topo.pinned_paths = _resolve_pinned_paths(c, spec["pinned_paths"], f"{path}.pinned_paths", topo)
    topo.result_multicast = c.choice(spec.get("result_multicast", "programmable"), f"{path}.result_multicast",
                                     RESULT_MULTICAST)
    topo.ecmp = c.choice(spec.get("ecmp", "pair"), f"{path}.ecmp", ECMP_MODES)
    return topology.mark_programmable(topo, rule, seed, workers)


def _resolve_pinned_paths(c, spec, path, topo):
    """``pinned_paths: {hl1: 1, hl2: 2}``: the traffic a host sends crosses the k-th (from 1, in link order;
    PA-ATP's p1-p4) of the parallel links between two switches; stored 0-based."""
    if not isinstance(spec, dict) or not spec:
        c.fail(path, "expected a mapping {host: path number}, e.g. {hl1: 1, hl2: 2}")
    most = topo.parallel_link_count()
    if most < 2:
        c.fail(path, "this topology joins no two switches by parallel links; there is no path to pin")
    hosts = {h.name for h in topo.hosts()}
    out = {}
    for host, number in spec.items():
        if host not in hosts:
            c.fail(f"{path}.{host}", f"host {_brief(host)} is not defined in the topology")
        out[host] = c.integer(number, f"{path}.{host}", 1, most) - 1
    return out


def _explicit(c, spec, rate, scale):
    path = "topology"
    switches = []
    for i, item in enumerate(c.items(spec.get("switches"), f"{path}.switches", "switch names")):
        sp = f"{path}.switches.{i}"
        if isinstance(item, str):
            switches.append((c.node_name(item, sp), True))
        elif isinstance(item, dict):
            c.keys(item, sp, {"name", "programmable"})
            programmable = c.boolean(item.get("programmable", True), f"{sp}.programmable")
            switches.append((c.node_name(item.get("name"), f"{sp}.name"), programmable))
        else:
            c.fail(sp, "expected a name or {name, programmable}")
    if not switches:
        c.fail(f"{path}.switches", "an explicit topology needs at least one switch")
    hosts = spec.get("hosts") or []
    if not isinstance(hosts, list) or not all(isinstance(h, str) for h in hosts) or not hosts:
        c.fail(f"{path}.hosts", "expected a non-empty list of host names")
    for i, h in enumerate(hosts):
        c.node_name(h, f"{path}.hosts.{i}")
    defined = {s for s, _ in switches} | set(hosts)
    links = []
    for i, item in enumerate(c.items(spec.get("links"), f"{path}.links", "links [a, b] or [a, b, rate]")):
        lp = f"{path}.links.{i}"
        link_rate = None
        if isinstance(item, list) and len(item) in (2, 3):
            a, b = item[0], item[1]
            if len(item) == 3:
                link_rate = c.rate_bps(item[2], lp) * scale
        elif isinstance(item, dict):
            c.keys(item, lp, {"a", "b", "rate"})
            a, b = item.get("a"), item.get("b")
            if "rate" in item:
                link_rate = c.rate_bps(item["rate"], f"{lp}.rate") * scale
        else:
            c.fail(lp, "expected [a, b], [a, b, rate] or {a, b, rate}")
        for end in (a, b):
            if not isinstance(end, str) or end not in defined:
                c.fail(lp, f"node {_brief(end)} is not defined in topology.switches or topology.hosts")
        links.append((a, b, link_rate))
    return topology.explicit("explicit", rate, switches, hosts, links)
