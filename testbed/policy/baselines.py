"""Baseline schemes: ``ps`` (no INA) and ATP.

``ps`` (BytePS-style, no INA): every worker sends every sub-model to its PS.

``atp`` (ATP, NSDI'21, as GOAT §III-B, GRID Fig. 1 and InArt §2.1 model it):
the first level aggregates at the first programmable switch on each worker's
path to the sub-model's PS; the aggregate then goes to the PS. The second
level (aggregating partial aggregates and overflow again at the programmable
switch nearest the PS) comes with the full control plane. Switch memory is
shared best-effort: a fragment whose slot is held by another tag bypasses to
the PS (the data plane's COLLISION path).

Sub-models are split among several PSs in contiguous, size-balanced order
(the same split for every scheme unless the scheme decides it, as InArt does).
"""

import networkx as nx

from testbed.errors import PolicyError
from testbed.policy.base import JobPolicy


def split_submodels(job) -> dict:
    """Contiguous, size-balanced assignment of sub-models to the job's PSs."""
    sizes = job.submodel_elements
    total = sum(sizes)
    owner, acc = {}, 0
    for g, size in enumerate(sizes):
        index = min(len(job.ps) - 1, int(acc * len(job.ps) / total)) if total else 0
        owner[g] = job.ps[index]
        acc += size
    # Every PS owns at least one sub-model when there are enough of them.
    for k, ps in enumerate(job.ps):
        if ps not in owner.values():
            owner[min(k, len(sizes) - 1)] = ps
    return owner


def shortest_path(graph, src, dst):
    try:
        return nx.shortest_path(graph, src, dst)
    except (nx.NetworkXNoPath, nx.NodeNotFound):
        raise PolicyError(f"no path from {src} to {dst}")


def ps_policy(job, scenario) -> JobPolicy:
    owner = split_submodels(job)
    first_hop = {w: {g: owner[g] for g in owner} for w in job.workers}
    return JobPolicy(job.name, "ps", owner, first_hop)


def atp_policy(job, scenario) -> JobPolicy:
    topo = scenario.topology
    owner = split_submodels(job)
    graph = topo.graph()
    allowed = set(job.aggregation_switches) or {s.name for s in topo.programmable_switches()}
    if not allowed:
        raise PolicyError(f"atp: job {job.name}: no programmable switch in topology {topo.name}")
    first_hop, next_hop = {}, {}
    for w in job.workers:
        first_hop[w] = {}
        for g, ps in owner.items():
            path = shortest_path(graph, w, ps)
            agg = next((n for n in path[1:-1] if n in allowed), ps)
            first_hop[w][g] = agg
            if agg != ps:
                next_hop.setdefault(agg, {})[g] = ps
    slots = {s: min(scenario.switch.slots, job.window) for s in next_hop}
    return JobPolicy(job.name, "atp", owner, first_hop, next_hop, slots=slots,
                     notes={"level": "first programmable switch on the path (level 1 only)"})
