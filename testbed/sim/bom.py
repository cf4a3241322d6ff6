"""Rina §III-B's Bandwidth-Occupation Model (BOM) of PS-based INA: the reference curve of Rina Fig. 5.

BOM's assumptions: synchronous training (BSP), every worker's gradient
travels to one PS over exactly one path (here the default routes, the tree
every worker's route to the PS forms), and an INA switch aggregates all it
receives. On each link toward the PS, every stream crossing it shares it
equally. Then:

- Lemma 1: below regular switches only, W workers share the root's link:
  each gets 1/W of it;
- Lemma 2: an INA switch with its children is one worker to its parent: it
  sends one stream, whatever it aggregates;
- Lemma 3: an INA switch is as fast as its slowest child, and every worker
  of a synchronous job as fast as the slowest.

So a worker's throughput is the smallest, over the tree's links, of the
link's rate over the streams crossing it (a worker or an INA switch with
workers below sends one; a regular switch forwards every stream it gets).
:func:`bom_rate_bps` is pure.
"""

from testbed.topology import DefaultRoutes, route_tree, streams_up


def bom_rate_bps(topology, workers, ps: str, ina_switches) -> float:
    """The rate every worker of a synchronous PS-based INA job sends at under BOM (bits per second), on
    ``topology`` with ``workers`` (host names) sending to ``ps`` and ``ina_switches`` aggregating."""
    workers = set(workers)
    children, unreachable = route_tree(DefaultRoutes(topology), sorted(workers), ps)
    if unreachable:
        raise ValueError(f"worker {unreachable[0]} does not reach PS {ps}")
    ina = set(ina_switches)
    capacity = topology.capacity_bps()
    return min((capacity[(child, parent)] / streams_up(children, child, workers, ina)
                for parent, kids in children.items() for child in kids), default=float("inf"))
