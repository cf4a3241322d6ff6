"""Hop-by-hop routes exactly as the controller installs them, for both simulator models.

A packet at switch ``n`` with IPv4 (source, destination) takes the ``route``
entry a placement installed for that pair at ``n`` (``JobPlacement.paths``), else
the ``ipv4_lpm`` default: ``topology.DefaultRoutes``, the trees the
controller installs. Sources
are the original sender: a worker for raw and bypassed fragments, a switch
for its aggregates.
"""

from testbed.errors import PlacementError
from testbed.topology import DefaultRoutes


class Routes:
    def __init__(self, topology, placement):
        self.topology = topology
        self.graph = topology.graph()
        self.entries = {}
        for jp in placement.jobs.values():
            for key, nodes in jp.paths.items():
                src, dst = key.split(">")
                for here, nxt in zip(nodes, nodes[1:]):
                    if topology.nodes[here].kind == "switch":
                        self.entries[(here, src, dst)] = nxt
        self.default = DefaultRoutes(topology)
        self._walks = {}
        self._links = {}                # (src, dst, start) -> links(src, dst, start)
        self.capacity_bps = {}          # directed link key -> bps
        self._parallel = {}             # (a, b) joined by more than one link -> how many
        for a, b in {(l.a, l.b) for l in topology.links}:
            joining = topology.links_between(a, b)
            for x, y in ((a, b), (b, a)):
                if len(joining) == 1:
                    self.capacity_bps[(x, y)] = joining[0].rate_bps
                else:
                    self._parallel[(x, y)] = len(joining)
                    for k, link in enumerate(joining):
                        self.capacity_bps[(x, y, k)] = link.rate_bps

    def link(self, a: str, b: str, flow_key: int = 0) -> tuple:
        """The key of the directed link from ``a`` to ``b`` that ``flow_key`` picks (``Topology.link_for``)."""
        count = self._parallel.get((a, b))
        return (a, b) if count is None else (a, b, flow_key % count)

    def links(self, src: str, dst: str, start: str = None) -> tuple:
        """Keys of the directed links a packet (src, dst) crosses from ``start`` (default ``src``); computed
        once per triple (the fluid model asks for each stream on every pass)."""
        cached = self._links.get((src, dst, start))
        if cached is not None:
            return cached
        nodes = self.walk(src, dst, start)
        key = self.topology.flow_key(src, dst) if any(hop in self._parallel for hop in zip(nodes, nodes[1:])) else 0
        links = tuple(self.link(a, b, key) for a, b in zip(nodes, nodes[1:]))
        self._links[(src, dst, start)] = links
        return links

    def multicast_link(self, switch: str, child: str, ps: str) -> tuple:
        """The link a switch's copy of ``ps``'s multicast RESULT crosses toward ``child`` (the controller
        keys it by (PS, child))."""
        return self.link(switch, child, self.topology.flow_key(ps, child))

    def _next_default(self, node, dst):
        nxt = self.default.next_hop(node, dst)
        if nxt is None:
            raise PlacementError(f"simulate: no route from {node} to {dst}")
        return nxt

    def walk(self, src: str, dst: str, start: str = None) -> list:
        """Nodes a packet (src, dst) visits from ``start`` (default ``src``) to ``dst``, both included."""
        start = start or src
        key = (src, dst, start)
        cached = self._walks.get(key)
        if cached is not None:
            return cached
        nodes, node = [start], start
        while node != dst:
            nxt = self.entries.get((node, src, dst)) or self._next_default(node, dst)
            nodes.append(nxt)
            node = nxt
            if len(nodes) > len(self.topology.nodes) + 1:
                raise PlacementError(f"simulate: the routes of ({src}, {dst}) loop: {' > '.join(nodes[:12])}")
        self._walks[key] = nodes
        return nodes

    def hops(self, a: str, b: str) -> int:
        return len(self.walk(a, b)) - 1


def link_name(key: tuple) -> str:
    """``a>b``, or ``a>b/pK`` for the K-th (1-based) of parallel links."""
    return f"{key[0]}>{key[1]}" if len(key) == 2 else f"{key[0]}>{key[1]}/p{key[2] + 1}"
