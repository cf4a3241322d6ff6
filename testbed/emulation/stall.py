"""A stall is diagnosed, not waited out.

A job makes progress when any of its agents finishes an iteration (a new
line in a record file). :class:`StallWatch` (pure, injectable clock) says
when no job has progressed for ``bound_s``; the bound comes from the
expected iteration time (:func:`expected_iteration_s`):

    expected = compute_time + the widest compute-delay spread
               + every worker's fragments of one iteration through the
                 slowest host link, one worker after another (``ps``'s
                 incast at the PS link, the slowest a scheme can be
                 without loss)
    bound    = max(STALL_MIN_S, STALL_FACTOR x expected of the slowest job)
               + the latest job ``start`` (a job scheduled to start late
                 has not stalled while it waits)

so a run stops ``bound`` after its last progress with status ``stalled``,
a one-line reason and ``diagnosis.json`` (:func:`diagnose`: per switch the
counters that moved since the last progress and the slots still held; per
agent what it waits for).
"""

import json
import os
import signal
import time

from testbed.controller import compute_delay_spread_s
from testbed.dataplane.wire import ina_frame_bytes
from testbed.gradient_profiles import fragments_per_submodel

STALL_MIN_S = 10.0
STALL_FACTOR = 10.0
#: How long a stalled run waits for its agents to say what they wait for.
STATUS_WAIT_S = 2.0


def expected_iteration_s(scenario, job) -> float:
    """The time one iteration of ``job`` should take at worst without loss (see the module docstring)."""
    topo = scenario.topology
    fragments = sum(fragments_per_submodel(job.submodel_elements, scenario.switch.lanes))
    frame_bits = 8 * ina_frame_bytes(scenario.switch.lanes)
    slowest_bps = min(topo.host_link(h).rate_bps for h in list(job.workers) + list(job.ps))
    return (job.compute_time_s + compute_delay_spread_s(scenario, job)
            + fragments * len(job.workers) * frame_bits / slowest_bps)


def stall_bound_s(scenario) -> float:
    return (max(STALL_MIN_S, STALL_FACTOR * max(expected_iteration_s(scenario, job) for job in scenario.jobs))
            + max(job.start_s for job in scenario.jobs))


class StallWatch:
    """``observe(marker, now_s)``: True once ``marker`` (any value that changes with progress) has not
    changed for ``bound_s``."""

    def __init__(self, bound_s: float, now_s: float):
        self.bound_s = bound_s
        self.marker = None
        self.last_progress_s = now_s

    def observe(self, marker, now_s: float) -> bool:
        if marker != self.marker:
            self.marker = marker
            self.last_progress_s = now_s
            return False
        return now_s - self.last_progress_s > self.bound_s

    def idle_s(self, now_s: float) -> float:
        return now_s - self.last_progress_s


def counters_moved(before: dict, after: dict) -> dict:
    """The scalar counters of one switch that changed between two reads: ``{name: delta}``."""
    return {name: value - before.get(name, 0) for name, value in after.items()
            if isinstance(value, (int, float)) and value != before.get(name, 0)}


def slots_held(runtime, slot_ranges: dict, switch: str) -> dict:
    """Per job, the slots of ``switch`` whose ``agg_count`` is not 0 (held by a partial or a kept aggregate)."""
    return {job: sum(1 for slot in range(base, base + count) if runtime.register_read("agg_count", slot))
            for (job, sw), (base, count) in slot_ranges.items() if sw == switch and count}


def ask_agents(running: dict, names, agents_dir, wait_s: float = STATUS_WAIT_S) -> dict:
    """SIGUSR1 to every running agent (``{name: pid}``), then each one's ``<name>.status.json`` as it
    writes it (``{"status": "no answer"}`` for one that is stopped, dead or too slow)."""
    for pid in running.values():
        os.kill(pid, signal.SIGUSR1)
    deadline = time.monotonic() + wait_s
    waiting = set(running)
    while waiting and time.monotonic() < deadline:
        waiting = {n for n in waiting if not (agents_dir / f"{n}.status.json").exists()}
        time.sleep(0.02)
    answers = {}
    for name in names:
        path = agents_dir / f"{name}.status.json"
        answers[name] = json.loads(path.read_text()) if path.exists() else {"status": "no answer"}
    return answers


def diagnose(runtimes: dict, slot_ranges: dict, counters_at_progress: dict, running: dict, names, agents_dir,
             watch: StallWatch, now_s: float) -> dict:
    """The diagnosis of a stalled run: the one-line reason, per switch the counters that moved since the
    last progress and the slots held, per agent what it waits for."""
    switches = {name: {"moved_since_progress": counters_moved(counters_at_progress.get(name, {}), runtime.counters()),
                       "slots_held": slots_held(runtime, slot_ranges, name)}
                for name, runtime in runtimes.items()}
    reason = (f"stalled: no iteration completed for {watch.idle_s(now_s):.0f}s (bound {watch.bound_s:.0f}s = "
              f"max({STALL_MIN_S:.0f}s, {STALL_FACTOR:.0f} x the expected iteration time); see diagnosis.json")
    return {"reason": reason, "switches": switches, "agents": ask_agents(running, names, agents_dir)}
