"""Topologies: the graph a scenario describes, with roles, capacities and addresses.

Builders turn a scenario's ``topology`` section into a :class:`Topology`:
``explicit`` (switches/hosts/links), ``dumbbell``, ``leaf-spine``,
``fat-tree`` (k pods; hosts per edge switch is a parameter, as GOAT's
192-server fat-tree needs 6 per edge switch with k = 8), ``dragonfly`` (Rina
§VI-C) and ``goat-testbed`` (GOAT §VII-B Fig. 4: 1 PS, 8 workers, 3
switches). Which switches are programmable is the scenario's rule
(:func:`mark_programmable`; :func:`incremental_order` is Rina §IV-D's order
of replacing them). Builders never touch the
network; the emulation turns a Topology into Mininet nodes and links.

Identity and addressing live here so every stage agrees on them: switches get
ids 1..N (the INA ``agg_node`` of a switch) and an INA address 10.255.x.y;
hosts get ids 0x8000 + i (the ``agg_node`` of a PS), the address 10.0.x.y
and a locally administered MAC; the RESULTs of a job's PS multicast by the
switches are addressed to 10.254.<job id>.<PS index + 1>
(:func:`result_group_ip`). A host that runs a job's PS beside one of its
workers (a co-located PS, Rina §VI-A4; ``Topology.colocated_ps``) serves the
PS at a second address, 10.253.x.y beside its 10.0.x.y (:meth:`Topology.ps_ip`),
so the two agents each bind the INA port; the worker's gradients to that PS
stay within the host (no link, no switch aggregates them). Switch ports are
numbered from 1 in link order; parallel links (PA-ATP's four paths) are
distinct ports.
"""

import random
from collections import Counter, defaultdict
from dataclasses import dataclass, field

import networkx as nx

from testbed.errors import TopologyError

HOST_ID_BASE = 0x8000


def result_group_ip(job_id: int, ps_index: int) -> str:
    """The address a PS sends a job's RESULTs to when the switches multicast them to its workers."""
    return f"10.254.{job_id & 0xFF}.{ps_index + 1}"

MAX_NAME_CHARS = 10  # Mininet interface names are <node>-ethN and must fit IFNAMSIZ (15)


@dataclass(frozen=True)
class NodeSpec:
    name: str
    kind: str                      # "host" | "switch"
    programmable: bool = False
    node_id: int = 0
    ip: str = ""
    mac: str = ""


@dataclass(frozen=True)
class LinkSpec:
    index: int
    a: str
    b: str
    rate_bps: float
    port_a: int = 0   # switch port numbers (0 for a host end)
    port_b: int = 0


@dataclass
class Topology:
    name: str
    nodes: dict = field(default_factory=dict)    # name -> NodeSpec
    links: list = field(default_factory=list)    # LinkSpec, index order
    #: host -> which of two switches' parallel links (0-based, in link order) the traffic it sends crosses,
    #: wherever its path crosses parallel links (PA-ATP §V-B pins flows to paths p1-p3); other hosts' flows
    #: are spread by (source, destination), as ECMP hashing would.
    pinned_paths: dict = field(default_factory=dict)
    #: How parallel links are shared among the flows of hosts that run no job agent (background traffic):
    #: "pair" (by source and destination, as a job's flows) or "flow" (each flow by its five-tuple, ECMP's
    #: hash: every TCP connection draws its own link). A job's flows always keep their pair's link.
    ecmp: str = "pair"
    #: Which switches replicate a job's RESULTs to its workers: "programmable" (only a tree of programmable
    #: switches multicasts; elsewhere the PS sends one copy per worker) or "all" (every switch replicates,
    #: as IP multicast; PA-ATP's S1 is a Tofino without INA functions).
    result_multicast: str = "programmable"
    #: Hosts that run a job's PS beside one of that job's workers: the PS answers at ``ps_ip``.
    colocated_ps: set = field(default_factory=set)

    # -- queries -----------------------------------------------------------------
    def hosts(self):
        return [n for n in self.nodes.values() if n.kind == "host"]

    def switches(self):
        return [n for n in self.nodes.values() if n.kind == "switch"]

    def programmable_switches(self):
        return [n for n in self.switches() if n.programmable]

    def node(self, name: str) -> NodeSpec:
        try:
            return self.nodes[name]
        except KeyError:
            raise TopologyError(f"no node named {name!r} in topology {self.name}")

    def ps_ip(self, name: str) -> str:
        """The address a PS on host ``name`` answers at: its own, or for a co-located PS its second address
        10.253.x.y (the same host index as its 10.0.x.y)."""
        node = self.node(name)
        if name not in self.colocated_ps:
            return node.ip
        index = node.node_id - HOST_ID_BASE
        return f"10.253.{index >> 8}.{index & 0xFF}"

    def addresses(self, name: str) -> list:
        """Every address node ``name`` answers at: its own, and a co-located PS's second one."""
        return [self.node(name).ip] + ([self.ps_ip(name)] if name in self.colocated_ps else [])

    def graph(self) -> nx.MultiGraph:
        g = nx.MultiGraph()
        for n in self.nodes.values():
            g.add_node(n.name, kind=n.kind, programmable=n.programmable)
        for link in self.links:
            g.add_edge(link.a, link.b, key=link.index, rate_bps=link.rate_bps)
        return g

    def links_of(self, name: str):
        return [l for l in self.links if name in (l.a, l.b)]

    def port(self, switch: str, link: LinkSpec) -> int:
        return link.port_a if link.a == switch else link.port_b

    def port_interface(self, switch: str, link: LinkSpec) -> str:
        """The name of the interface of ``switch``'s port on ``link`` (in the emulation's root namespace)."""
        return f"{switch}-eth{self.port(switch, link)}"

    def switch_port_interfaces(self) -> dict:
        """Every switch port's interface name -> its link."""
        return {self.port_interface(sw.name, link): link for sw in self.switches() for link in self.links_of(sw.name)}

    def host_port_interface(self, host: str) -> str:
        """The switch interface facing ``host``: its tx is what the host receives, its rx what it sends."""
        link = self.host_link(host)
        return self.port_interface(self.neighbor(host, link), link)

    def neighbor(self, name: str, link: LinkSpec) -> str:
        return link.b if link.a == name else link.a

    def host_link(self, host: str) -> LinkSpec:
        links = self.links_of(host)
        if len(links) != 1:
            raise TopologyError(f"host {host} has {len(links)} links; hosts have exactly one")
        return links[0]

    def links_between(self, a: str, b: str) -> list:
        """The links joining ``a`` and ``b``, in link order (more than one: parallel links)."""
        return sorted((l for l in self.links if {l.a, l.b} == {a, b}), key=lambda l: l.index)

    def flow_key(self, src: str, dst: str) -> int:
        """Which of parallel links packets from ``src`` to ``dst`` cross (modulo their count): the source's
        pinned path (``pinned_paths``), else a key of the pair, as ECMP hashing would."""
        return self.pinned_paths.get(src, self.node(src).node_id + self.node(dst).node_id)

    def link_for(self, a: str, b: str, flow_key: int = 0) -> LinkSpec:
        """The link from ``a`` to its neighbour ``b`` that ``flow_key`` picks among parallel links."""
        links = self.links_between(a, b)
        if not links:
            raise TopologyError(f"no link joins {a} and {b} in topology {self.name}")
        return links[flow_key % len(links)]

    def parallel_link_count(self) -> int:
        """The most links joining any two switches (1 when no two switches share more than one link)."""
        counts = {}
        for link in self.links:
            if self.nodes[link.a].kind == "switch" and self.nodes[link.b].kind == "switch":
                key = frozenset((link.a, link.b))
                counts[key] = counts.get(key, 0) + 1
        return max(counts.values(), default=1)

    def capacity_bps(self) -> dict:
        """Rate of each direction of each link, {(a, b): bps}; of parallel links, the first's."""
        rates = {}
        for link in sorted(self.links, key=lambda l: l.index, reverse=True):
            rates[(link.a, link.b)] = rates[(link.b, link.a)] = link.rate_bps
        return rates


class DefaultRoutes:
    """Where default routes lead: the BFS tree toward each destination (ties by node order).

    The controller installs exactly these next hops as ``ipv4_lpm`` entries;
    the simulator and the schemes read the same trees, so every stage agrees
    on the path a packet without a placement's route takes.
    """

    def __init__(self, topology: Topology):
        self.graph = topology.graph()
        self._trees = {}

    def tree(self, dst: str) -> dict:
        """{node: [node, ..., dst]} for every node that reaches ``dst``."""
        tree = self._trees.get(dst)
        if tree is None:
            tree = self._trees[dst] = {n: list(reversed(p)) for n, p in
                                       nx.single_source_shortest_path(self.graph, dst).items()}
        return tree

    def path(self, src: str, dst: str):
        """Nodes from ``src`` to ``dst`` on default routes; None if unreachable."""
        return self.tree(dst).get(src)

    def next_hop(self, node: str, dst: str):
        path = self.path(node, dst)
        return path[1] if path is not None and len(path) > 1 else None


class TopologyBuilder:
    """Collects nodes and links, then numbers ports and assigns ids and addresses."""

    def __init__(self, name: str, default_rate_bps: float):
        self.name = name
        self.default_rate_bps = default_rate_bps
        self._nodes = {}   # name -> (kind, programmable)
        self._links = []   # (a, b, rate)

    def switch(self, name: str, programmable: bool = True):
        self._add(name, "switch", programmable)
        return name

    def host(self, name: str):
        self._add(name, "host", False)
        return name

    def _add(self, name, kind, programmable):
        if not name or len(name) > MAX_NAME_CHARS or not name[0].isalpha() or not name.replace("_", "").isalnum():
            raise TopologyError(f"node name {name!r}: use 1-{MAX_NAME_CHARS} letters/digits starting with a letter")
        if name in self._nodes:
            raise TopologyError(f"node {name!r} defined twice")
        self._nodes[name] = (kind, programmable)

    def hosts_under(self, switches, per_switch: int):
        """``per_switch`` new hosts on each of ``switches`` in turn, named on from the hosts so far (h1, h2 ...)."""
        for switch in switches:
            for _ in range(per_switch):
                host = self.host(f"h{sum(kind == 'host' for kind, _ in self._nodes.values()) + 1}")
                self.link(host, switch)

    def link(self, a: str, b: str, rate_bps: float = None):
        for end in (a, b):
            if end not in self._nodes:
                raise TopologyError(f"link {a}-{b}: node {end!r} is not defined")
        if a == b:
            raise TopologyError(f"link {a}-{b}: a link needs two different nodes")
        self._links.append((a, b, rate_bps or self.default_rate_bps))

    def build(self) -> Topology:
        topo = Topology(self.name)
        next_port = {}
        host_index = switch_index = 0
        for name, (kind, programmable) in self._nodes.items():
            if kind == "switch":
                switch_index += 1
                topo.nodes[name] = NodeSpec(name, kind, programmable, switch_index,
                                            f"10.255.{switch_index >> 8}.{switch_index & 0xFF}",
                                            f"02:ff:00:00:{switch_index >> 8:02x}:{switch_index & 0xFF:02x}")
            else:
                host_index += 1
                if host_index > 0x7FFF:
                    raise TopologyError("too many hosts")
                topo.nodes[name] = NodeSpec(name, kind, False, HOST_ID_BASE + host_index,
                                            f"10.0.{host_index >> 8}.{host_index & 0xFF}",
                                            f"02:00:00:00:{host_index >> 8:02x}:{host_index & 0xFF:02x}")
        for index, (a, b, rate) in enumerate(self._links):
            ports = []
            for end in (a, b):
                if topo.nodes[end].kind == "switch":
                    next_port[end] = next_port.get(end, 0) + 1
                    ports.append(next_port[end])
                else:
                    ports.append(0)
            topo.links.append(LinkSpec(index, a, b, rate, ports[0], ports[1]))
        for host in topo.hosts():
            links = topo.links_of(host.name)
            if len(links) != 1:
                raise TopologyError(f"host {host.name} has {len(links)} links; a host needs exactly one")
            if topo.nodes[topo.neighbor(host.name, links[0])].kind != "switch":
                raise TopologyError(f"host {host.name} must attach to a switch")
        return topo


# --- builders ------------------------------------------------------------------

def explicit(name, default_rate_bps, switches, hosts, links):
    """``switches``: [(name, programmable)], ``hosts``: [name], ``links``: [(a, b, rate_bps|None)]."""
    b = TopologyBuilder(name, default_rate_bps)
    for sw, programmable in switches:
        b.switch(sw, programmable)
    for h in hosts:
        b.host(h)
    for a, z, rate in links:
        b.link(a, z, rate)
    return b.build()


def dumbbell(name, default_rate_bps, hosts_left, hosts_right, paths=1, core_rate_bps=None):
    """Two switches ``s1``/``s2`` joined by ``paths`` parallel links (PA-ATP testbed: 4)."""
    b = TopologyBuilder(name, default_rate_bps)
    b.switch("s1")
    b.switch("s2")
    for side, count, sw in (("l", hosts_left, "s1"), ("r", hosts_right, "s2")):
        for i in range(1, count + 1):
            b.host(f"h{side}{i}")
            b.link(f"h{side}{i}", sw)
    for _ in range(paths):
        b.link("s1", "s2", core_rate_bps)
    return b.build()


def leaf_spine(name, default_rate_bps, spines, leaves, hosts_per_leaf):
    b = TopologyBuilder(name, default_rate_bps)
    for s in range(1, spines + 1):
        b.switch(f"sp{s}")
    for l in range(1, leaves + 1):
        b.switch(f"lf{l}")
        for s in range(1, spines + 1):
            b.link(f"lf{l}", f"sp{s}")
    b.hosts_under([f"lf{l}" for l in range(1, leaves + 1)], hosts_per_leaf)
    return b.build()


def fat_tree(name, default_rate_bps, k, hosts_per_edge=None):
    """k-ary fat-tree: (k/2)^2 core, k pods of k/2 aggregation + k/2 edge switches."""
    if k < 2 or k % 2:
        raise TopologyError(f"fat-tree k must be an even number >= 2, got {k}")
    half = k // 2
    hosts_per_edge = half if hosts_per_edge is None else hosts_per_edge
    b = TopologyBuilder(name, default_rate_bps)
    cores = [b.switch(f"c{i + 1}") for i in range(half * half)]
    for pod in range(k):
        aggs = [b.switch(f"a{pod * half + i + 1}") for i in range(half)]
        edges = [b.switch(f"e{pod * half + i + 1}") for i in range(half)]
        for i, agg in enumerate(aggs):
            for j in range(half):
                b.link(agg, cores[i * half + j])
            for edge in edges:
                b.link(edge, agg)
        b.hosts_under(edges, hosts_per_edge)
    return b.build()


def dragonfly(name, default_rate_bps, a: int, g: int, h: int, hosts_per_router: int):
    """Dragonfly (Kim et al., ISCA 2008): ``g`` groups of ``a`` routers, each group's routers linked all to
    all, each router with up to ``h`` global links and ``hosts_per_router`` hosts. Every pair of groups
    shares one global link: group i's global ports 0..a*h-1 (router r holds ports r*h .. r*h+h-1) go to
    groups i+1, i+2, ... in turn (port k to group (i + k + 1) mod g), so g is at most a*h + 1 (Rina
    §VI-C's a=4, g=9, h=2 uses every port). Routers are ``g<group>r<router>``, hosts ``h1``.. router by
    router."""
    if a < 1 or h < 1 or g < 2 or hosts_per_router < 1:
        raise TopologyError(f"dragonfly needs a, h, hosts_per_router >= 1 and g >= 2, got a={a}, g={g}, h={h}, "
                            f"hosts_per_router={hosts_per_router}")
    if g > a * h + 1:
        raise TopologyError(f"dragonfly with a={a}, h={h} joins at most a*h + 1 = {a * h + 1} groups, got g={g}")
    b = TopologyBuilder(name, default_rate_bps)
    routers = [[b.switch(f"g{i + 1}r{r + 1}") for r in range(a)] for i in range(g)]
    for group in routers:
        for r, router in enumerate(group):
            for other in group[r + 1:]:
                b.link(router, other)
    for i in range(g):
        for j in range(i + 1, g):
            port_i, port_j = (j - i - 1) % g, (i - j - 1) % g
            b.link(routers[i][port_i // h], routers[j][port_j // h])
    b.hosts_under([router for group in routers for router in group], hosts_per_router)
    return b.build()


def goat_testbed(name, default_rate_bps, workers_per_rack: int = 4):
    """GOAT Fig. 4: S3 holds the PS; S1 and S2 hold ``workers_per_rack`` workers each (four in Fig. 4;
    Exp#1-#3 vary the workers from 4 to 16: 2 to 8 per rack), w1.. under S1, the rest under S2.

    Fig. 4 says the testbed is "similar to the examples in Fig. 2(a)"; the
    motivating example needs a direct S1-S2 link (its 13-fragment count), so
    the testbed keeps it too.
    """
    b = TopologyBuilder(name, default_rate_bps)
    for s in ("s1", "s2", "s3"):
        b.switch(s)
    b.host("ps")
    b.link("ps", "s3")
    for w in range(1, 2 * workers_per_rack + 1):
        b.host(f"w{w}")
        b.link(f"w{w}", "s1" if w <= workers_per_rack else "s2")
    b.link("s1", "s3")
    b.link("s2", "s3")
    b.link("s1", "s2")
    return b.build()


#: The smallest share of its link a host keeps under a normal draw (a rate of 0 would never finish).
MIN_HOST_LINK_RATIO = 0.05


@dataclass(frozen=True)
class HostLinkDraw:
    """How heterogeneous host links are drawn (``stragglers.heterogeneous_links``), per host, seeded, in link order:

    - ``uniform``: a rate uniformly in [``low_bps``, ``high_bps``] (InArt §5: 10-30 Mb/s);
    - ``normal``: the link's own rate times a ratio drawn from N(``mean_ratio``, ``std_ratio``), clipped to
      [``MIN_HOST_LINK_RATIO``, 1] (GOAT §VII-D: "ratio x 10 Gbps, where ratio in [0, 1] is obtained by
      the probability of normal distribution", std 0.2 by default).
    """
    distribution: str
    low_bps: float = 0.0
    high_bps: float = 0.0
    mean_ratio: float = 1.0
    std_ratio: float = 0.2

    def rate_bps(self, link_rate_bps: float, rng: random.Random) -> float:
        if self.distribution == "uniform":
            return rng.uniform(self.low_bps, self.high_bps)
        ratio = min(1.0, max(MIN_HOST_LINK_RATIO, rng.gauss(self.mean_ratio, self.std_ratio)))
        return link_rate_bps * ratio


def with_host_link_rates(topo: Topology, draw: HostLinkDraw, seed: int) -> Topology:
    """Heterogeneous host links: each host link's rate drawn by ``draw``, seeded, in link order."""
    rng = random.Random(seed * 1_000_003 + 17)
    topo.links = [LinkSpec(l.index, l.a, l.b, draw.rate_bps(l.rate_bps, rng), l.port_a, l.port_b)
                  if "host" in (topo.nodes[l.a].kind, topo.nodes[l.b].kind) else l for l in topo.links]
    return topo


def route_tree(routes: DefaultRoutes, sources, root: str) -> tuple:
    """The tree the default routes from ``sources`` to ``root`` form: ({node: its children}, the sources
    that do not reach ``root``)."""
    children, unreachable = defaultdict(set), []
    for source in sources:
        path = routes.path(source, root)
        if path is None:
            unreachable.append(source)
            continue
        for child, parent in zip(path, path[1:]):
            children[parent].add(child)
    return children, unreachable


def streams_up(children: dict, node: str, sources, aggregating) -> int:
    """The streams ``node`` sends toward the root of a :func:`route_tree`: its own if it is one of the
    ``sources``, and those from below, merged into one where ``node`` is ``aggregating`` (an INA switch
    sends one aggregate, whatever it receives: Rina §III-B's Lemma 2)."""
    below = sum(streams_up(children, c, sources, aggregating) for c in children.get(node, ()))
    return (node in sources) + (min(1, below) if node in aggregating else below)


def incremental_order(topo: Topology, workers) -> list:
    """Every switch, in the order Rina §IV-D replaces them with INA switches for ``workers`` (host names,
    the first one the root): first the ToRs (switches with workers attached), the most workers first;
    then, on the tree of default routes from every worker to the root, the switch with the most
    downstream workers, an INA switch and all its downstream workers counting as one (§IV-D: "treating
    an INA switch and all its downstream worker nodes as a single worker"), one at a time; then the
    switches no worker's route crosses. Ties go to the name. The paper roots its tree at "a specific
    worker node" without saying which: here the first worker listed."""
    workers = [w for w in dict.fromkeys(workers) if w in topo.nodes and topo.nodes[w].kind == "host"]
    attached = Counter(topo.neighbor(w, topo.host_link(w)) for w in workers)
    order = sorted(attached, key=lambda sw: (-attached[sw], sw))
    children = route_tree(DefaultRoutes(topo), workers[1:], workers[0])[0] if workers else {}
    sources, chosen = set(workers), set(order)
    while True:
        candidates = [(streams_up(children, sw, sources, chosen), sw) for sw in sorted(children)
                      if sw not in chosen and topo.nodes[sw].kind == "switch"]
        candidates = [(m, sw) for m, sw in candidates if m > 0]
        if not candidates:
            break
        _, best = min(candidates, key=lambda c: (-c[0], c[1]))
        order.append(best)
        chosen.add(best)
    return order + sorted(s.name for s in topo.switches() if s.name not in chosen)


def mark_programmable(topo: Topology, rule, seed: int, workers=()) -> Topology:
    """Apply the scenario's ``programmable`` rule: all | none | [names] | {fraction: f} | {count: k, order:
    rina} (the first k switches of :func:`incremental_order` for ``workers``, the jobs' workers)."""
    names = [s.name for s in topo.switches()]
    if rule == "all":
        chosen = set(names)
    elif rule == "none":
        chosen = set()
    elif isinstance(rule, (list, tuple)):
        chosen = set(rule)
    elif isinstance(rule, dict) and "fraction" in rule:
        count = max(1, round(rule["fraction"] * len(names)))
        chosen = set(random.Random(seed).sample(sorted(names), count))
    elif isinstance(rule, dict) and "count" in rule:
        chosen = set(incremental_order(topo, workers)[:rule["count"]])
    else:
        return topo
    topo.nodes.update({n: NodeSpec(s.name, s.kind, s.name in chosen, s.node_id, s.ip, s.mac)
                       for n, s in topo.nodes.items() if s.kind == "switch"})
    return topo
