"""GRID: gradient routing with in-network aggregation (Fang et al., ToN 2023).

The papers folder holds only GRID's motivation (§Motivation, Fig. 1); the
algorithm follows the authors' public code (Fangjin98/distributed-training-INA,
``routing/algs/GRID.py``), re-derived, not copied: an LP maximising lambda,
the minimum worker sending rate, in which each worker splits its gradient
between the PS and the switches that may aggregate it (the split sums to 1),
switch use is bounded by the switch's processing capacity and the PS by its
ingress bandwidth; then randomized rounding with the LP values as
probabilities. GRID's title and §Motivation add routing ("per-worker choice
of ... path"; Fig. 1's Geryon and GRID schedule paths), which the authors'
LP leaves out; we solve the path-based version in
:mod:`testbed.schemes.routing_lp` (shared with InArt's R-InArt, whose LP is
GRID's with several PSs), where link bandwidth is a constraint per directed
link and the PS's ingress limit is its access link.

Choices where the paper and code are silent (also documented in
``routing_lp``): candidate paths (``policy_options.grid.paths``, default 4:
the default route and up to 3 others at most 2 hops longer); aggregation
switches are the job's programmable switches on a candidate path; best of
``roundings`` draws (default 8) and single-move improvement (``improve``,
default on). A job with several PSs keeps the default contiguous split and
routes each (worker, PS) flow. The aggregate of a switch goes straight to the
PS (one level, slots released when the aggregate leaves).

Fig. 1 (1 PS behind S3 with 9 Gb/s ingress, 3 Gb/s links, 9 Gb/s switch
capacity): the LP optimum is 3 Gb/s (the worker links' rate) and rounding
reaches it: W1-W3 aggregate at S1, W4 at S2 over S1-S2, W5-W8 as in ATP.
"""

from testbed.schemes.common import (NetworkView, allowed_switches, options, ps_shares, rng_for,
                                   split_submodels)
from testbed.schemes.base import Scheme
from testbed.schemes.routing_lp import ROUTING_OPTIONS, route_and_round


def grid_placement(job, scenario):
    net = NetworkView(scenario)
    allowed = allowed_switches(job, scenario.topology, "grid")
    owner = split_submodels(job)
    placement, _ = route_and_round(net, job, scenario, "grid", owner, ps_shares(job, owner), allowed,
                                options(job, "grid"), rng_for(scenario, job, "grid"), default_paths=4)
    return placement


#: This family's scheme and the ``policy_options`` it takes.
SCHEMES = (Scheme("grid", grid_placement, dict(ROUTING_OPTIONS)),)
