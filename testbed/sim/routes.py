"""Hop-by-hop routes exactly as the controller installs them, for both simulator models.

A packet at switch ``n`` with IPv4 (source, destination) takes the ``route``
entry a policy installed for that pair at ``n`` (``JobPolicy.paths``), else
the ``ipv4_lpm`` default: ``topology.DefaultRoutes``, the trees the
controller installs. Sources
are the original sender: a worker for raw and bypassed fragments, a switch
for its aggregates.
"""

from testbed.errors import PolicyError
from testbed.topology import DefaultRoutes


class Routes:
    def __init__(self, topology, policy):
        self.topology = topology
        self.graph = topology.graph()
        self.entries = {}
        for jp in policy.jobs.values():
            for key, nodes in jp.paths.items():
                src, dst = key.split(">")
                for here, nxt in zip(nodes, nodes[1:]):
                    if topology.nodes[here].kind == "switch":
                        self.entries[(here, src, dst)] = nxt
        self.default = DefaultRoutes(topology)
        self._walks = {}
        self.capacity_bps = topology.capacity_bps()

    def _next_default(self, node, dst):
        nxt = self.default.next_hop(node, dst)
        if nxt is None:
            raise PolicyError(f"simulate: no route from {node} to {dst}")
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
                raise PolicyError(f"simulate: the routes of ({src}, {dst}) loop: {' > '.join(nodes[:12])}")
        self._walks[key] = nodes
        return nodes

    def hops(self, a: str, b: str) -> int:
        return len(self.walk(a, b)) - 1
