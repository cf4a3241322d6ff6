"""What every scheme needs from the network and the job, computed one way.

- :class:`NetworkView`: the topology as the schemes see it: default paths
  exactly as the controller routes them (BFS tree toward each destination,
  ties broken by node order, ``controller._default_routes``), the k shortest
  alternative paths, hop distances and per-direction link capacities (a pair
  of parallel links is one node-level hop: the controller forwards on the
  lowest-index link, so that link's rate is the hop's capacity).
- Sub-model shares (``phi_g`` = elements of g / elements of the model) and the
  split of sub-models among a job's PSs.
- :class:`LoadModel`: the linear load model of a fixed assignment without
  overflow: per unit of the common worker sending rate, the load each
  directed link and each capacity-limited switch carries; the common rate is
  ``min(capacity / load)``. GRID's and InArt's LP, ATP's flow admission,
  Geryon and LBMM evaluate candidates with it; ``testbed.sim`` is the
  reference evaluator (it adds best-effort overflow).
- Seeded randomness per (scenario seed, job, scheme); never global state.
"""

import zlib
from dataclasses import dataclass, field

import networkx as nx
import numpy as np

from testbed.errors import PlacementError
from testbed.topology import DefaultRoutes

#: Relative tolerance for "fits" and "saturated" comparisons of rates.
RATE_TOLERANCE = 1e-9


class NetworkView:
    """Paths, distances and capacities of a scenario's topology (read-only)."""

    def __init__(self, scenario):
        topo = scenario.topology
        self.topology = topo
        self.graph = topo.graph()
        self.simple = nx.Graph(self.graph)
        self.capacity_bps = topo.capacity_bps()
        self.switch_capacity_bps = scenario.switch.aggregation_capacity_bps
        self.default = DefaultRoutes(topo)
        self._k_paths = {}

    def is_switch(self, name: str) -> bool:
        return self.topology.nodes[name].kind == "switch"

    def default_path(self, src: str, dst: str):
        """The node list a packet from ``src`` to ``dst`` follows on default routes; None if unreachable."""
        path = self.default.path(src, dst)
        return list(path) if path is not None else None

    def hops(self, src: str, dst: str):
        path = self.default_path(src, dst)
        return len(path) - 1 if path is not None else None

    def k_paths(self, src: str, dst: str, k: int, slack_hops: int = 2) -> list:
        """The default path, then up to ``k - 1`` other simple paths at most ``slack_hops`` longer."""
        key = (src, dst, k, slack_hops)
        if key in self._k_paths:
            return self._k_paths[key]
        default = self.default_path(src, dst)
        if default is None:
            self._k_paths[key] = []
            return []
        paths = [default]
        if k > 1:
            limit = len(default) + slack_hops
            for path in nx.shortest_simple_paths(self.simple, src, dst):
                if len(path) > limit or len(paths) >= k:
                    break
                if path != default:
                    paths.append(path)
        self._k_paths[key] = paths
        return paths


def link_pairs(path):
    return list(zip(path, path[1:]))


def allowed_switches(job, topo, scheme: str) -> list:
    """Switches the job may aggregate on (``aggregation_switches`` or every programmable one), in topology order."""
    names = job.aggregation_switches or [s.name for s in topo.programmable_switches()]
    if not names:
        raise PlacementError(f"{scheme}: job {job.name}: no programmable switch in topology {topo.name}")
    return list(names)


def require_path(net: NetworkView, scheme: str, job, src: str, dst: str) -> list:
    path = net.default_path(src, dst)
    if path is None:
        role = "worker" if src in job.workers else "node"
        raise PlacementError(f"{scheme}: job {job.name}: no path from {role} {src} to PS {dst}")
    return path


def check_reachable(net: NetworkView, scheme: str, job, owner: dict):
    for w in job.workers:
        for ps in sorted(set(owner.values())):
            require_path(net, scheme, job, w, ps)


def require_multiple_ps(job, scheme: str):
    if len(job.ps) < 2:
        raise PlacementError(f"{scheme}: job {job.name} has one parameter server ({job.ps[0]}); "
                          f"{scheme} splits the model among several (give the job a list of ps)")


def shares(job) -> list:
    """``phi_g``: the fraction of the model's elements in each sub-model."""
    total = float(sum(job.submodel_elements))
    return [n / total for n in job.submodel_elements]


def ps_shares(job, owner: dict) -> dict:
    """Fraction of the model each PS owns under ``owner`` (sub-model -> PS)."""
    phi = shares(job)
    out = {ps: 0.0 for ps in job.ps}
    for g, ps in owner.items():
        out[ps] += phi[g]
    return out


def split_submodels(job) -> dict:
    """Contiguous, size-balanced assignment of sub-models to the job's PSs (the default split)."""
    sizes = job.submodel_elements
    total = sum(sizes)
    owner, acc = {}, 0
    for g, size in enumerate(sizes):
        index = min(len(job.ps) - 1, int(acc * len(job.ps) / total)) if total else 0
        owner[g] = job.ps[index]
        acc += size
    for k, ps in enumerate(job.ps):
        if ps not in owner.values():
            owner[min(k, len(sizes) - 1)] = ps
    return owner


def realize_split(job, target: dict) -> dict:
    """Assign whole sub-models to PSs so that each PS's share approaches ``target`` (PS -> fraction).

    Largest sub-model first, each to the PS furthest below its target; every
    PS with a positive target gets at least one sub-model when there are
    enough. Deterministic (ties by PS order).
    """
    sizes = job.submodel_elements
    total = float(sum(sizes))
    assigned = {ps: 0.0 for ps in job.ps}
    owner = {}
    for g in sorted(range(len(sizes)), key=lambda g: (-sizes[g], g)):
        ps = max(job.ps, key=lambda p: (target.get(p, 0.0) * total - assigned[p], -job.ps.index(p)))
        owner[g] = ps
        assigned[ps] += sizes[g]
    for ps in job.ps:
        if target.get(ps, 0.0) > 0 and ps not in owner.values():
            counts = {p: [g for g in owner if owner[g] == p] for p in job.ps}
            donor = max(job.ps, key=lambda p: len(counts[p]))
            if len(counts[donor]) > 1:
                owner[min(counts[donor], key=lambda g: sizes[g])] = ps
    return dict(sorted(owner.items()))


def rng_for(scenario, job, scheme: str) -> np.random.Generator:
    """The scheme's random stream for this job: a function of the scenario seed only."""
    return np.random.default_rng(np.random.SeedSequence([scenario.seed, job.job_id, zlib.crc32(scheme.encode())]))


def options(job, scheme: str) -> dict:
    return dict(job.policy_options.get(scheme, {}))


def window_slots(scenario, job) -> int:
    """Aggregator slots a hash-slot scheme takes at a switch: its window, at most the switch's slots."""
    return min(scenario.switch.slots, job.window)


@dataclass
class Stream:
    """One directed stream per unit of common rate: links it crosses and the switch whose capacity it uses."""
    links: np.ndarray       # resource indices
    coef: float
    switch: int = -1        # resource index of the aggregating switch, or -1
    #: Whether no link repeats (a path's do not): then a load is added with one indexed addition, not ``np.add.at``.
    distinct: bool = field(init=False)

    def __post_init__(self):
        self.distinct = len(np.unique(self.links)) == len(self.links)


class LoadModel:
    """Linear per-unit-rate loads of directed links and capacity-limited switches (no overflow)."""

    def __init__(self, net: NetworkView, switch_capacity_bps: dict = None):
        self.net = net
        self.index = {}
        caps = []
        for pair, rate in sorted(net.capacity_bps.items()):
            self.index[pair] = len(caps)
            caps.append(rate)
        for sw, rate in sorted((switch_capacity_bps or {}).items()):
            if rate > 0:
                self.index[("switch", sw)] = len(caps)
                caps.append(rate)
        self.capacity = np.array(caps, dtype=float)
        self.names = [None] * len(caps)
        for key, i in self.index.items():
            self.names[i] = key[1] if key[0] == "switch" else f"{key[0]}>{key[1]}"

    def path_indices(self, path) -> np.ndarray:
        return np.array([self.index[p] for p in link_pairs(path)], dtype=int)

    def switch_index(self, switch: str) -> int:
        return self.index.get(("switch", switch), -1)

    def zeros(self) -> np.ndarray:
        return np.zeros(len(self.capacity))

    def add(self, loads: np.ndarray, stream: Stream, sign: float = 1.0):
        amount = sign * stream.coef
        if stream.distinct:
            loads[stream.links] += amount
        else:
            np.add.at(loads, stream.links, amount)
        if stream.switch >= 0:
            loads[stream.switch] += amount

    def rate(self, loads: np.ndarray):
        """(common rate, number of resources within tolerance of binding) for per-unit ``loads``: a resource
        counts when its load is above 1e-15. The local searches call this for every move they try, so it divides
        every resource at once and sets the unused ones' ratios to infinity (no boolean selection)."""
        with np.errstate(divide="ignore", invalid="ignore"):
            ratios = self.capacity / loads
        ratios[loads <= 1e-15] = np.inf
        best = float(ratios.min())
        if best == np.inf:
            return best, 0
        return best, int(np.count_nonzero(ratios <= best * (1 + 1e-9)))


def tree_loads(net: NetworkView, model: LoadModel, job, first_hop: dict, next_hop: dict, paths: dict,
               owner: dict) -> np.ndarray:
    """Per-unit loads of a fixed aggregation tree (no overflow): raw streams, aggregates, switch inputs."""
    phi = shares(job)
    loads = model.zeros()

    def path_of(src, dst):
        return paths.get(f"{src}>{dst}") or net.default_path(src, dst)

    for w, hops in first_hop.items():
        for g, node in hops.items():
            model.add(loads, Stream(model.path_indices(path_of(w, node)), phi[g],
                                    model.switch_index(node) if node not in owner.values() else -1))
    for sw, hops in next_hop.items():
        for g, node in hops.items():
            model.add(loads, Stream(model.path_indices(path_of(sw, node)), phi[g],
                                    model.switch_index(node) if node not in owner.values() else -1))
    return loads
