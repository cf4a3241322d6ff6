"""Ring all-reduce schemes (Rina §II-B 2): no PS and no aggregation in the network.

``rar``: the job's workers form one ring in the order the scenario lists
them; each sends to the next over the switches' default routes, as plain
traffic (:mod:`testbed.agents.ring` runs it). The policy therefore routes
and aggregates nothing: no sub-model has a PS, no worker a first hop, and
the notes name the ring. ``testbed.scenario.RING_POLICIES`` lists these
schemes (a job of one has no ``ps``).
"""

from testbed.policy.base import JobPolicy


def rar_policy(job, scenario) -> JobPolicy:
    return JobPolicy(job.name, "rar", {}, {w: {} for w in job.workers}, notes={"ina": False, "ring": list(job.workers)})
