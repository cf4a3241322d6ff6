"""Ring all-reduce schemes (Rina §II-B 2, §III-A): no PS and no aggregation in the network.

A ring scheme's placement routes and aggregates nothing: no sub-model has a PS, no worker a
first hop. Its notes say how the workers form their rings, which
:mod:`testbed.agents.ring_schedule` turns into steps and
:mod:`testbed.agents.ring` runs over the switches' default routes, as plain
traffic. ``testbed.scenario.RING_SCHEMES`` lists these schemes (a job of
one has no ``ps``).

- ``rar``: one ring of the job's workers in the order the scenario lists
  them (notes ``ring``).
- ``h-ar``: Hybrid AllReduce as §III-A describes it: a ScatterReduce within
  each rack, an all-reduce between the racks, an AllGather within the rack.
  A rack is the workers under one ToR (the switch at the other end of each
  worker's host link), in the order they are listed, racks in the order of
  their first worker (notes ``racks``: the workers' indices per rack). The
  rack-to-rack all-reduce pairs the workers of equal position in their
  racks, so every rack must hold as many of the job's workers.
- ``rina``: Rina's agent-worker ring (§IV-A): the workers under a
  programmable ToR are one abstracted worker (a Rina rack: its agent, the
  lowest-rank worker, asks the ToR to pull the rack's shards and aggregate
  them, §IV-B), every other worker an autonomous RAR worker; RAR runs over
  these members in the order of their first worker (notes ``members``: per
  member its workers and its ToR, None for an autonomous worker). Each
  Rina rack's ToR reserves the job ``window`` contiguous slots (``slots``;
  Rina §V-1), where it sums the rack's shards (p4/ina.p4's Rina branch;
  testbed/agents/rina.py runs the members).
"""

from testbed.errors import PlacementError
from testbed.schemes.base import JobPlacement, Scheme


def rar_placement(job, scenario) -> JobPlacement:
    return JobPlacement(job.name, "rar", {}, {w: {} for w in job.workers}, notes={"ina": False, "ring": list(job.workers)})


def racks_of(job, topology) -> dict:
    """The job's workers' indices grouped by their ToR (ToR -> indices), in the order of the workers."""
    racks = {}
    for index, w in enumerate(job.workers):
        racks.setdefault(topology.neighbor(w, topology.host_link(w)), []).append(index)
    return racks


def har_placement(job, scenario) -> JobPlacement:
    racks = racks_of(job, scenario.topology)
    if len({len(r) for r in racks.values()}) > 1:
        described = ", ".join(f"{tor}: {len(r)}" for tor, r in racks.items())
        raise PlacementError(f"h-ar: job {job.name} needs as many workers under every ToR (the rack-to-rack "
                          f"all-reduce pairs them by position); it has {described}")
    return JobPlacement(job.name, "h-ar", {}, {w: {} for w in job.workers},
                     notes={"ina": False, "racks": list(racks.values())})


def rina_placement(job, scenario) -> JobPlacement:
    topology = scenario.topology
    members = []
    for tor, indices in racks_of(job, topology).items():
        workers = [job.workers[i] for i in indices]
        if topology.nodes[tor].programmable:
            members.append((indices[0], {"workers": workers, "tor": tor}))
        else:
            members.extend((i, {"workers": [job.workers[i]], "tor": None}) for i in indices)
    members = [m for _, m in sorted(members, key=lambda pair: pair[0])]
    # Each Rina rack's ToR reserves the job a contiguous range of slots (Rina §V-1): one per fragment in flight.
    slots = {m["tor"]: min(job.window, scenario.switch.slots) for m in members if m["tor"]}
    return JobPlacement(job.name, "rina", {}, {w: {} for w in job.workers}, slots=slots,
                     notes={"ina": any(m["tor"] for m in members), "members": members})


def fallback_members(members: list, failed: str) -> list:
    """Rina's members after the error of worker ``failed`` (§IV-C2), ``members`` as the placement's notes have
    them (per member its ``workers`` and its ``tor``, None for an autonomous worker):

    - a Rina rack's agent: "the other workers in the corresponding rack can default to regular RAR": they
      become autonomous members in its place, in rack order;
    - another worker of a Rina rack: its agent "can promptly detect and exclude the faulty node from
      subsequent aggregation processes": the rack goes on without it;
    - an autonomous worker: "other workers will automatically bypass the node": the ring goes on without it.

    Every other member stays as it was."""
    if all(failed not in m["workers"] for m in members):
        raise ValueError(f"{failed} is not a member's worker")
    out = []
    for m in members:
        if failed not in m["workers"]:
            out.append(m)
        elif m["tor"] is not None and m["workers"][0] == failed:
            out.extend({"workers": [w], "tor": None} for w in m["workers"][1:])
        elif m["tor"] is not None:
            out.append({"workers": [w for w in m["workers"] if w != failed], "tor": m["tor"]})
    return out


#: The ring schemes' per-step delay (Rina Eq. 1: a step's fixed overhead O and its spread sigma): each worker
#: waits a draw of a normal of mean ``step_overhead`` and std ``step_jitter``, clipped at 0, before each step.
RING_OPTIONS = {"step_overhead": ("duration",), "step_jitter": ("duration",)}
#: This family's schemes: rings of workers (all-reduce) without a PS.
SCHEMES = (
    Scheme("rar", rar_placement, dict(RING_OPTIONS), ring=True),
    Scheme("h-ar", har_placement, dict(RING_OPTIONS), ring=True),
    Scheme("rina", rina_placement, dict(RING_OPTIONS), ring=True),
)
