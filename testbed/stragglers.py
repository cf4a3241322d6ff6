"""A straggler's delay, drawn: the one sampler of ``compute_delay`` distributions, shared by the scenario (a
persistent straggler's delay, drawn once when the scenario is resolved) and the agents (a delay per
iteration). Plain Python, no imports: the agents' processes load it without the scenario package.
"""


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
