"""Control-plane policies: one module per family of schemes, one registry.

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
from testbed.policy.base import JobPolicy, Policy

#: scheme name -> function(job, scenario) -> JobPolicy (scenario gives topology, switch settings, seed)
SCHEMES = {
    "ps": baselines.ps_policy,
    "atp": baselines.atp_policy,
    "switchml": baselines.switchml_policy,
    "esa": baselines.esa_policy,
    "geryon": baselines.geryon_policy,
    "lbmm": baselines.lbmm_policy,
    "ksgd": baselines.ksgd_policy,
    "goat": goat.goat_policy,
    "goat-async": goat.goat_async_policy,
    "grid": grid.grid_policy,
    "inart": inart.inart_policy,
    "inart-equal": inart.inart_equal_policy,
    "rar": ring.rar_policy,
    "h-ar": ring.har_policy,
    "rina": ring.rina_policy,
}


def compute_policy(scenario) -> Policy:
    """Every job's policy; each JobPolicy's notes carry ``policy_s`` (wall time of its scheme)."""
    jobs = {}
    for job in scenario.jobs:
        scheme = SCHEMES.get(job.policy)
        if scheme is None:
            raise PolicyError(f"unknown policy {job.policy!r}; available: {', '.join(sorted(SCHEMES))}")
        start = time.perf_counter()
        jobs[job.name] = scheme(job, scenario)
        jobs[job.name].notes.setdefault("policy_s", time.perf_counter() - start)
    return Policy(jobs, scenario.seed)


__all__ = ["SCHEMES", "compute_policy", "Policy", "JobPolicy"]
