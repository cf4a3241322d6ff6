"""Time dilation: run a scenario N times slower and report it in virtual time.

At 1/1000 scale a paper's testbed asks for more packets per second than
Python switches and agents move on two cores. A scenario's
``time_dilation: N`` runs everything N times slower (time-warped
emulation, as DieCast and Gupta et al.'s "To Infinity and Beyond: Time-Warped
Network Emulation" do it), so each process sees N times fewer packets per
wall second, while every packet, window, slot and queue behaves as at N = 1.
Everything reported is in virtual time: wall time divided by N.

One factor, three places:

- **The network** runs in wall time, slowed: :func:`network_scenario` is the
  world the network side builds (links shaped by the hosts' htb and the
  switches' egress, switch aggregation capacity, timed rate changes: rates
  divided by N; background flows' start and window, straggler injections'
  times, ``run_timeout`` and the counters' sampling interval: times N).
  Background arrival rates follow from load x link rate, so they slow with
  the links; flow sizes, frame sizes, queue depths in packets and ECN and
  AECN thresholds in packets do not change, and neither does anything a
  placement decides (it is computed on the scenario as written: scaling every
  rate by one factor leaves its LPs' solutions proportional).
- **The agents** keep virtual values (compute times, straggler delays, a
  job's start, the transports' timers and pacing rate, ring ACK delays) and
  run on a clock N times slower (:class:`testbed.agents.common.AgentClock`):
  a wait of t virtual seconds takes N t wall seconds, and their records are
  in virtual time already.
- **What the orchestrator measures itself** in wall time (interface and
  switch counters, events, iftop samples, background flow records) is
  converted here (:func:`virtual_samples`, :func:`virtual_pairs`, :func:`virtual_record`), so
  ``summary.json``, ``iterations.csv``, the iftop tables, the plots and the
  progress display all speak virtual time. The summary states N
  (``time_dilation``) and the wall time (``wall_s``).

What does not dilate: the kernel's TCP timers of background flows other than
the minimum RTO (which :func:`tcp_rto_min_ms` scales per route): the delayed
ACK (40-200 ms of wall time, so N times shorter in virtual time), the 1 s
initial RTO of a SYN, and CUBIC's window growth, a function of wall time since
the last loss (N times faster per virtual second; Reno and DCTCP grow per
round trip and dilate exactly). CPU shares are wall figures, which is the
point: a process busy s of a core at N = 1 is busy s / N at N.
"""

import copy
import dataclasses

#: Linux's minimum TCP RTO (TCP_RTO_MIN, 200 ms); dilated per route for background flows.
LINUX_TCP_RTO_MIN_MS = 200
#: The kernel keeps a route's ``rto_min`` in jiffies inside a 32-bit field; well above any dilation used.
MAX_ROUTE_RTO_MIN_MS = 120_000


def network_scenario(scenario, factor: float):
    """The wall-clock world of ``scenario`` under ``factor`` (a copy; ``scenario`` is not changed): what the
    network side builds and times (the module docstring lists what changes)."""
    if factor == 1:
        return scenario
    world = copy.deepcopy(scenario)
    world.topology.links = [dataclasses.replace(link, rate_bps=link.rate_bps / factor) for link in world.topology.links]
    world.switch.aggregation_capacity_bps /= factor
    for spec in world.background:
        spec.start_s *= factor
        spec.duration_s *= factor
    for inj in world.stragglers.injections:
        inj.at_s *= factor
        inj.duration_s *= factor
        inj.rate_bps /= factor
    world.run_timeout_s *= factor
    world.metrics.sample_interval_s *= factor
    return world


def virtual_epoch_s(t_epoch_s: float, start_epoch_s: float, factor: float) -> float:
    """A wall-clock instant as the virtual clock reads it: the run's start is the same instant in both."""
    return start_epoch_s + (t_epoch_s - start_epoch_s) / factor


def virtual_samples(samples: list, start_epoch_s: float, factor: float, key: str = "t") -> list:
    """Timestamped samples (dicts with an epoch time under ``key``: counters, switch stats, events) in virtual
    time; what they count is unchanged, so rates computed from them come out in virtual time."""
    if factor == 1 or start_epoch_s is None:
        return samples
    return [{**s, key: virtual_epoch_s(s[key], start_epoch_s, factor)} for s in samples]


def virtual_pairs(samples: list, start_epoch_s: float, factor: float) -> list:
    """``(epoch time, value)`` samples (the iftop meter's) in virtual time, as :func:`virtual_samples`."""
    if factor == 1 or start_epoch_s is None:
        return samples
    return [(virtual_epoch_s(t, start_epoch_s, factor), value) for t, value in samples]


def virtual_record(row: dict, factor: float) -> dict:
    """A record of wall-clock durations and rates in virtual time, by the units its field names carry:
    ``*_s`` divided by N, ``*_bps`` times N; counts and everything else as they are."""
    if factor == 1:
        return row
    out = {}
    for key, value in row.items():
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            if key.endswith("_s"):
                value = value / factor
            elif key.endswith("_bps"):
                value = value * factor
        out[key] = value
    return out


def tcp_rto_min_ms(factor: float) -> int:
    """The per-route minimum RTO (``ip route ... rto_min``) that keeps Linux's 200 ms in virtual time."""
    return min(MAX_ROUTE_RTO_MIN_MS, round(LINUX_TCP_RTO_MIN_MS * factor))
