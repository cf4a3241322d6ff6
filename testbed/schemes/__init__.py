"""The schemes: one module per family of schemes, one registry (``SCHEMES``: each family declares
its schemes and their ``policy_options`` beside its code; the scenario's checker reads them from here).

Schemes are pure: they read a Scenario's jobs and a Topology and return a
:class:`~testbed.schemes.base.Placement`; no network, no target knowledge.

Families: ``baselines`` (ps, atp, esa, switchml, geryon, lbmm, ksgd),
``goat`` (KRGS, GOAT-Async), ``grid``, ``inart`` (L-InArt + R-InArt,
R-InArt with an equal split); ``routing_lp`` is the LP GRID and R-InArt share,
``lp`` the solver wrapper, ``common`` the network view and load model.
"""

import time

from testbed.errors import PlacementError
from testbed.schemes import baselines, goat, grid, inart, ring
from testbed.schemes.base import JobPlacement, Placement, Scheme

#: Every scheme by name (a job's ``policy:``), as its family declares it beside its code, with its options.
SCHEMES = {scheme.name: scheme for family in (baselines, goat, grid, inart, ring) for scheme in family.SCHEMES}


def compute_placement(scenario) -> Placement:
    """Every job's placement; each JobPlacement's notes carry ``placement_s`` (wall time of its scheme)."""
    jobs = {}
    for job in scenario.jobs:
        scheme = SCHEMES.get(job.scheme)
        if scheme is None:
            raise PlacementError(f"unknown scheme {job.scheme!r}; available: {', '.join(sorted(SCHEMES))}")
        start = time.perf_counter()
        jobs[job.name] = scheme.place(job, scenario)
        jobs[job.name].notes.setdefault("placement_s", time.perf_counter() - start)
    return Placement(jobs, scenario.seed)


__all__ = ["SCHEMES", "compute_placement", "Placement", "JobPlacement", "Scheme"]
