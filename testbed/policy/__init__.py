"""Control-plane policies: one module per family of schemes, one registry.

Policies are pure: they read a Scenario's jobs and a Topology and return a
:class:`~testbed.policy.base.Policy`; no network, no target knowledge.
"""

from testbed.errors import PolicyError
from testbed.policy import baselines
from testbed.policy.base import JobPolicy, Policy

#: scheme name -> function(job, scenario) -> JobPolicy (scenario gives topology, switch settings, seed)
SCHEMES = {
    "ps": baselines.ps_policy,
    "atp": baselines.atp_policy,
}


def compute_policy(scenario) -> Policy:
    jobs = {}
    for job in scenario.jobs:
        scheme = SCHEMES.get(job.policy)
        if scheme is None:
            raise PolicyError(f"unknown policy {job.policy!r}; available: {', '.join(sorted(SCHEMES))}")
        jobs[job.name] = scheme(job, scenario)
    return Policy(jobs, scenario.seed)


__all__ = ["SCHEMES", "compute_policy", "Policy", "JobPolicy"]
