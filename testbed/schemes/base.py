"""The Placement: what a scheme decides, as plain data (serialised to ``placement.json``).

Per job (:class:`JobPlacement`):

- ``ps_of_submodel``: which parameter server owns each sub-model (InArt's
  model split; one PS owns all in the single-PS schemes);
- ``first_hop``: for every worker and sub-model, the aggregation node its raw
  gradient goes to: a programmable switch, or the PS itself (no INA);
- ``next_hop``: for every switch that aggregates a sub-model, where its
  aggregate goes next: another switch (multi-level, ATP's second level) or
  the sub-model's PS;
- ``bypass_hop``: for a switch whose overflow (slot collision or exhausted
  aggregation capacity) should aggregate again further up (ATP's second
  level), the node it goes to; absent = the sub-model's PS. The flow- and
  fragment-level simulator honour it, and so does the data plane
  (``ina_aggregate``'s ``overflow_*``: a switch target gets the packet
  addressed as its own contribution);
- ``paths``: explicit routes (``"src>dst"`` -> node list) for schemes that
  route gradients (GRID, InArt, Geryon); flows without one take the default
  shortest path;
- ``slots``: aggregator slots the job gets at each switch it aggregates on;
- ``participants``: workers counted per iteration (asynchronous schemes),
  empty for synchronous ones;
- ``release_mode``: how switch slots are freed (program.RELEASE_*);
- ``collision``: what a fragment does when its slot holds another one:
  ``bypass`` (ATP's best effort, and every scheme whose slots are dedicated),
  ``preempt`` (ESA: the higher priority keeps the slot), ``wait``
  (SwitchML's self-clocked workers never collide). Jobs that preempt share
  one slot range at every switch where two or more of them aggregate
  (:meth:`Placement.shared_slot_ranges`), so they meet in its slots;

Fan-in is derived, not stored (:meth:`JobPlacement.fanin`), so the placement
cannot contradict itself. A switch compares the contribution ``count`` it has
summed (workers) with the fan-in, so a switch's fan-in is the number of
(participating) workers whose gradients reach it through the tree; in a
one-level tree that is its raw contributors, at ATP's second level it counts
the workers behind each child aggregate too. A PS aggregates by contributor
bitmap; its fan-in is the number of streams that reach it (raw workers and
child switches).
"""

import json
from dataclasses import asdict, dataclass, field
from typing import Callable

PLACEMENT_FORMAT_VERSION = 1


@dataclass
class JobPlacement:
    job: str
    scheme: str
    ps_of_submodel: dict                 # submodel -> PS host
    first_hop: dict                      # worker -> {submodel: node}
    next_hop: dict = field(default_factory=dict)   # switch -> {submodel: node}
    paths: dict = field(default_factory=dict)      # "src>dst" -> [nodes]
    slots: dict = field(default_factory=dict)      # switch -> slot count
    participants: list = field(default_factory=list)
    release_mode: int = 0
    notes: dict = field(default_factory=dict)      # solver, objective, seed ...
    bypass_hop: dict = field(default_factory=dict)  # switch -> {submodel: node} for its overflow; default the PS
    collision: str = "bypass"                      # slot held by another fragment: bypass | preempt | wait

    def submodels(self):
        return sorted(self.ps_of_submodel)

    def contributors(self, submodel: int, node: str) -> list:
        """Workers and child switches whose contribution for ``submodel`` arrives at ``node``."""
        raw = [w for w, hops in self.first_hop.items() if hops[submodel] == node]
        children = [s for s, hops in self.next_hop.items() if hops.get(submodel) == node]
        return raw + children

    def fanin(self, submodel: int, node: str) -> int:
        """Contributions ``node`` collects for ``submodel`` (see the module docstring for the units)."""
        if node in self.ps_of_submodel.values():
            counted = set(self.participants) if self.participants else None
            return sum(1 for c in self.contributors(submodel, node)
                       if c in self.next_hop or counted is None or c in counted)
        behind = len(self.workers_behind(submodel, node))
        # A switch whose workers all straggle (none participates) still passes each fragment on.
        return max(1, behind) if self.contributors(submodel, node) else 0

    def workers_behind(self, submodel: int, node: str) -> set:
        """(Participating) workers whose ``submodel`` gradient reaches ``node`` through the aggregation tree."""
        counted = set(self.participants) if self.participants else None
        found, stack, seen = set(), [node], set()
        while stack:
            here = stack.pop()
            if here in seen:
                continue
            seen.add(here)
            for c in self.contributors(submodel, here):
                if c in self.next_hop:
                    stack.append(c)
                elif counted is None or c in counted:
                    found.add(c)
        return found

    def aggregation_depth(self) -> int:
        """The most aggregation nodes (switches, then the PS) a worker's gradient passes on its way: a
        retransmission can meet what it repeats at each of them."""
        depth = 1
        for hops in self.first_hop.values():
            for g, node in hops.items():
                chain, seen = 1, {node}
                while g in self.next_hop.get(node, {}) and self.next_hop[node][g] not in seen:
                    node = self.next_hop[node][g]
                    seen.add(node)
                    chain += 1
                depth = max(depth, chain)
        return depth

    def aggregating_switches(self, submodel: int = None) -> list:
        nodes = set(self.next_hop)
        if submodel is not None:
            nodes = {s for s in nodes if submodel in self.next_hop[s]}
        return sorted(nodes)

    def to_dict(self):
        d = asdict(self)
        # JSON keys are strings; keep sub-model ids readable.
        d["ps_of_submodel"] = {str(k): v for k, v in self.ps_of_submodel.items()}
        d["first_hop"] = {w: {str(g): n for g, n in hops.items()} for w, hops in self.first_hop.items()}
        d["next_hop"] = {s: {str(g): n for g, n in hops.items()} for s, hops in self.next_hop.items()}
        d["bypass_hop"] = {s: {str(g): n for g, n in hops.items()} for s, hops in self.bypass_hop.items()}
        return d

    @classmethod
    def from_dict(cls, d):
        d = dict(d)
        d["ps_of_submodel"] = {int(k): v for k, v in d["ps_of_submodel"].items()}
        d["first_hop"] = {w: {int(g): n for g, n in hops.items()} for w, hops in d["first_hop"].items()}
        d["next_hop"] = {s: {int(g): n for g, n in hops.items()} for s, hops in d.get("next_hop", {}).items()}
        d["bypass_hop"] = {s: {int(g): n for g, n in hops.items()} for s, hops in d.get("bypass_hop", {}).items()}
        return cls(**d)


@dataclass
class Placement:
    jobs: dict                     # job name -> JobPlacement
    seed: int = 0

    def to_json(self) -> str:
        return json.dumps({"version": PLACEMENT_FORMAT_VERSION, "seed": self.seed,
                           "jobs": {n: j.to_dict() for n, j in self.jobs.items()}}, indent=2, sort_keys=True)

    def shared_slot_ranges(self, job_order) -> dict:
        """{switch: [job, ...]} (jobs in ``job_order``) where two or more jobs that collide by preemption
        (ESA) aggregate: there they share one slot range, as many slots as they would hold apart, so that
        their fragments meet and the higher rank keeps the slot (ESA's memory shared by priority). The
        controller allocates these ranges and the fragment model simulates them."""
        pooled = {}
        for name in job_order:
            jp = self.jobs[name]
            if jp.collision == "preempt":
                for sw in sorted(jp.slots):
                    pooled.setdefault(sw, []).append(name)
        return {sw: names for sw, names in pooled.items() if len(names) > 1}

    @classmethod
    def from_json(cls, text: str) -> "Placement":
        d = json.loads(text)
        return cls({n: JobPlacement.from_dict(j) for n, j in d["jobs"].items()}, d.get("seed", 0))


@dataclass(frozen=True)
class Scheme:
    """A scheme as the registry (``testbed.schemes.SCHEMES``) and the scenario's checker know it, declared beside
    its code: ``name`` (a job's ``policy:``), ``place(job, scenario) -> JobPlacement``, the ``policy_options``
    it takes (option -> kind as :mod:`testbed.scenario.schema` reads it: ("int", low, high), ("number", low,
    high), ("bool",), ("choice", values), ("int_or", low, high, word), ("duration",) -> stored as
    ``<key>_s``, ("worker_durations",) -> ``<key>_s`` = {worker: seconds}; defaults and meaning live in
    the scheme's module), and whether its jobs are rings of workers without a PS (``ring``)."""
    name: str
    place: Callable
    options: dict = field(default_factory=dict)
    ring: bool = False
