"""Control-plane policies: one module per family of schemes, one registry (``SCHEMES``: each family declares
its schemes and their ``policy_options`` beside its code; the scenario's checker reads them from here).

Policies are pure: they read a Scenario's jobs and a Topology and return a
:class:`~testbed.policy.base.Policy`; no network, no target knowledge.

Families: ``baselines`` (ps, atp, esa, switchml, geryon, lbmm, ksgd),
``goat`` (KRGS, GOAT-Async), ``grid``, ``inart`` (L-InArt + R-InArt,
R-InArt with an equal split); ``routing_lp`` is the LP GRID and R-InArt share,
``lp`` the solver wrapper, ``common`` the network view and load model.
"""

import time

from testbed.errors import PolicyError
from testbed.policy import baselines, goat, grid, inart, ring
from testbed.policy.base import JobPolicy, Policy, Scheme

#: Every scheme by name (a job's ``policy:``), as its family declares it beside its code, with its options.
SCHEMES = {scheme.name: scheme for family in (baselines, goat, grid, inart, ring) for scheme in family.SCHEMES}


def compute_policy(scenario) -> Policy:
    """Every job's policy; each JobPolicy's notes carry ``policy_s`` (wall time of its scheme)."""
    jobs = {}
    for job in scenario.jobs:
        scheme = SCHEMES.get(job.policy)
        if scheme is None:
            raise PolicyError(f"unknown policy {job.policy!r}; available: {', '.join(sorted(SCHEMES))}")
        start = time.perf_counter()
        jobs[job.name] = scheme.place(job, scenario)
        jobs[job.name].notes.setdefault("policy_s", time.perf_counter() - start)
    return Policy(jobs, scenario.seed)


__all__ = ["SCHEMES", "compute_policy", "Policy", "JobPolicy", "Scheme"]
