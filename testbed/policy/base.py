"""The Policy: what a scheme decides, as plain data (serialised to ``policy.json``).

Per job (:class:`JobPolicy`):

- ``ps_of_submodel``: which parameter server owns each sub-model (InArt's
  model split; one PS owns all in the single-PS schemes);
- ``first_hop``: for every worker and sub-model, the aggregation node its raw
  gradient goes to: a programmable switch, or the PS itself (no INA);
- ``next_hop``: for every switch that aggregates a sub-model, where its
  aggregate goes next: another switch (multi-level, ATP's second level) or
  the sub-model's PS;
- ``paths``: explicit routes (``"src>dst"`` -> node list) for schemes that
  route gradients (GRID, InArt, Geryon); flows without one take the default
  shortest path;
- ``slots``: aggregator slots the job gets at each switch it aggregates on;
- ``participants``: workers counted per iteration (asynchronous schemes),
  empty for synchronous ones;
- ``release_mode``: how switch slots are freed (program.RELEASE_*).

Fan-in is derived, not stored: the number of raw contributions and child
aggregates that reach a node for a sub-model (:meth:`JobPolicy.fanin`), so
the policy cannot contradict itself.
"""

import json
from dataclasses import asdict, dataclass, field

POLICY_FORMAT_VERSION = 1


@dataclass
class JobPolicy:
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

    def submodels(self):
        return sorted(self.ps_of_submodel)

    def contributors(self, submodel: int, node: str) -> list:
        """Workers and child switches whose contribution for ``submodel`` arrives at ``node``."""
        raw = [w for w, hops in self.first_hop.items() if hops[submodel] == node]
        children = [s for s, hops in self.next_hop.items() if hops.get(submodel) == node]
        return raw + children

    def fanin(self, submodel: int, node: str) -> int:
        return len(self.contributors(submodel, node))

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
        return d

    @classmethod
    def from_dict(cls, d):
        d = dict(d)
        d["ps_of_submodel"] = {int(k): v for k, v in d["ps_of_submodel"].items()}
        d["first_hop"] = {w: {int(g): n for g, n in hops.items()} for w, hops in d["first_hop"].items()}
        d["next_hop"] = {s: {int(g): n for g, n in hops.items()} for s, hops in d.get("next_hop", {}).items()}
        return cls(**d)


@dataclass
class Policy:
    jobs: dict                     # job name -> JobPolicy
    seed: int = 0

    def to_json(self) -> str:
        return json.dumps({"version": POLICY_FORMAT_VERSION, "seed": self.seed,
                           "jobs": {n: j.to_dict() for n, j in self.jobs.items()}}, indent=2, sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> "Policy":
        d = json.loads(text)
        return cls({n: JobPolicy.from_dict(j) for n, j in d["jobs"].items()}, d.get("seed", 0))
