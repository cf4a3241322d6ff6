"""A straggler's delay, drawn: the one sampler of ``compute_delay`` distributions, shared by the scenario (a
persistent straggler's delay, drawn once when the scenario is resolved) and the agents (a delay per
iteration), and what the planner expects of it (:func:`expected_slowest_delay_s`). Plain Python, no imports
beyond the standard library: the agents' processes load it without the scenario package.
"""

import math

#: Steps of the numerical integral of the slowest of several clipped normal draws (error far below a percent).
SLOWEST_NORMAL_STEPS = 400


def straggler_delay_s(compute_delay: dict, rng) -> float:
    """One draw of a :class:`testbed.scenario.model.ComputeDelaySpec` (as a dict, the agent config's: fixed, uniform, or normal clipped
    to [low, high]; empty = none) with ``rng``: a worker's straggler delay of an iteration (its RNG seeded per
    (seed, job, worker): :func:`testbed.agents.common.straggler_rng`), or a persistent straggler's for the run."""
    if not compute_delay:
        return 0.0
    kind = compute_delay["distribution"]
    if kind == "fixed":
        return compute_delay["value_s"]
    if kind == "uniform":
        return rng.uniform(compute_delay["low_s"], compute_delay["high_s"])
    return min(compute_delay["high_s"], max(compute_delay["low_s"],
                                            rng.gauss(compute_delay["mean_s"], compute_delay["std_s"])))


def expected_slowest_delay_s(compute_delay: dict, draws: int) -> float:
    """The expected largest of ``draws`` independent draws of ``compute_delay`` (the form
    :func:`straggler_delay_s` takes): what a synchronous iteration of ``draws`` workers, each drawing its delay
    afresh, waits for. A normal clipped to [low, high]: low + the integral over [low, high] of
    1 - Phi((x - mean) / std) ** draws (the clipped draw's largest is the largest draw, clipped)."""
    if not compute_delay or draws < 1:
        return 0.0
    kind = compute_delay["distribution"]
    if kind == "fixed":
        return compute_delay["value_s"]
    low, high = compute_delay["low_s"], compute_delay["high_s"]
    if kind == "uniform":
        return low + (high - low) * draws / (draws + 1)
    mean, std = compute_delay["mean_s"], compute_delay["std_s"]
    if std <= 0:
        return min(high, max(low, mean))
    top = min(high, mean + 10 * std)          # beyond 10 std the integrand is 0 to double precision
    if top <= low:
        return low
    step = (top - low) / SLOWEST_NORMAL_STEPS

    def above(x):
        return 1.0 - (0.5 * (1.0 + math.erf((x - mean) / (std * math.sqrt(2))))) ** draws

    # Simpson's rule over [low, top]
    total = above(low) + above(top) + sum((4 if i % 2 else 2) * above(low + i * step)
                                           for i in range(1, SLOWEST_NORMAL_STEPS))
    return low + total * step / 3
