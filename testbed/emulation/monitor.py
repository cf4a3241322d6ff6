"""Watching a running emulation until its workers are done: the orchestrator's monitor loop.

:class:`Monitor` samples the switch ports' kernel counters (``metrics.jsonl``, a thread) and the
programmable switches' INA counters (``switch_stats.jsonl``), shows progress, and ends the run at once
when it must: an agent or switch process died (with the tail of its log), no job progressed for the stall
bound (``diagnosis.json`` says why, :mod:`testbed.emulation.stall`), or the run outlived ``run_timeout``.
An agent that a failure injection killed is not a failure: its Rina job falls back to the next ring
generation (:class:`testbed.emulation.failover.RingFallback`).
"""

import json
import time

from testbed.atomic_io import write_text_atomic
from testbed.dataplane import program
from testbed.emulation.nodes import log_tail
from testbed.emulation.progress import Progress, line_count
from testbed.emulation.stall import StallWatch, diagnose, stall_bound_s
from testbed.errors import EmulationError, RunStalled
from testbed.metrics import counters

#: The monitor loop's period (agents, stall, progress, switch counters), or the sample interval when shorter.
MONITOR_PERIOD_S = 0.25
#: The least time between two full reads of the switches' counters kept for a stall's diagnosis (wall s).
STALL_COUNTERS_PERIOD_S = 1.0
#: The agents whose finishing ends a job: workers of every kind.
WORKER_ROLES = ("worker", "ring", "rina")


class Monitor:
    """The monitor of one run (``run`` the orchestrator's :class:`~testbed.emulation.orchestrator.Run`, read
    for its world, network, runtimes, launcher, injections' effects, ring fallback, event log and interrupt
    latch). ``sampler`` (the switch ports' counters) and ``fallbacks`` (what each failure led to) are
    results; ``stalled`` is the one-line reason when the run stalled."""

    def __init__(self, run, left_out: set):
        self.run = run
        self.left_out = left_out       # workers whose gradients a K-of-N scheme does not count
        self.sampler = None
        self.stat_series = None
        self.fallbacks = []
        self.stalled = None

    # -- the loop ---------------------------------------------------------------------------
    def watch(self, ps_ports: list) -> None:
        """Until every worker that counts is done and background with its own duration has ended."""
        run, world = self.run, self.run.world
        switch_ifaces = [intf.name for sw in run.network.net.switches for intf in sw.intfList()
                         if intf.name != "lo"]
        self.sampler = counters.CounterSampler(switch_ifaces, run.run_dir / "metrics.jsonl",
                                               world.metrics.sample_interval_s)
        self.sampler.start()
        self.stat_series = counters.SwitchStatSeries(run.run_dir / "switch_stats.jsonl",
                                                     world.metrics.sample_interval_s)
        progress = Progress(run.scenario, run.run_dir, run.stream, run.time_dilation)
        deadline = time.monotonic() + world.run_timeout_s
        watch = StallWatch(stall_bound_s(run.scenario) * run.time_dilation, time.monotonic())
        counters_at_progress, counters_read_s = {}, 0.0
        timed_background = [i for i, spec in enumerate(run.scenario.background) if spec.duration_s]
        try:
            while True:
                run.interrupts.check()
                self.check_agents()
                now = time.monotonic()
                # Progress is a job's: once every worker is done (background with its own duration may
                # keep the run going), there is nothing left to stall.
                if self.workers_running() and watch.observe(self._progress_marker(), now):
                    self.stalled = self._diagnose_stall(watch, counters_at_progress)
                    raise RunStalled(self.stalled)
                if watch.last_progress_s == now and now - counters_read_s >= STALL_COUNTERS_PERIOD_S:
                    counters_at_progress = {n: r.counters() for n, r in run.runtimes.items()}
                    counters_read_s = now
                # Workers finish on their own (those left out of K-of-N iterations need not);
                # PSs keep answering late retransmissions until stopped; background with its
                # own duration runs to its end.
                if not self.workers_running() and not run.launcher.background_still_due(timed_background):
                    break
                if time.monotonic() > deadline:
                    raise EmulationError(f"run exceeded run_timeout ({run.scenario.run_timeout_s:.0f}s, "
                                         f"{world.run_timeout_s:.0f}s of wall time); agents still running: "
                                         f"{', '.join(run.launcher.running_agents())}")
                progress.update(self.sampler.rate_bps(ps_ports))
                self._sample_switch_stats(time.monotonic())
                time.sleep(min(MONITOR_PERIOD_S, world.metrics.sample_interval_s))
            progress.update(self.sampler.rate_bps(ps_ports))     # the final state, iterations all done
        finally:
            progress.finish()

    def stop(self) -> None:
        if self.sampler is not None:
            self.sampler.stop()

    # -- what it looks at -----------------------------------------------------------------------
    def check_agents(self) -> None:
        """An agent or switch process that died ends the run at once, with the last lines of its own log."""
        run = self.run
        for sw in run.scenario.topology.switches():
            death = run.network.switch(sw.name).died()
            if death:
                raise EmulationError(f"switch {sw.name} ({run.target}) died ({death})")
        failing = run.injection_effects.failing
        for name, agent in run.launcher.agents.items():
            code = agent.proc.poll()
            if name in failing:
                if code is not None and name not in run.fallback.failed:
                    self._fall_back(name)
                continue
            if code not in (None, 0):
                raise EmulationError(f"{agent.role} agent {name} failed (exit {code}); last lines of "
                                     f"{agent.log}:\n{log_tail(agent.log)}")

    def workers_running(self) -> bool:
        """Some worker (of a ring too) whose gradient counts has not finished (those left out of K-of-N
        iterations need not)."""
        done_or_excused = self.left_out | self.run.injection_effects.failing
        return not all(agent.proc.poll() == 0 for name, agent in self.run.launcher.agents.items()
                       if agent.role in WORKER_ROLES and name not in done_or_excused)

    def _fall_back(self, failed: str) -> None:
        """Rina §IV-C2: the next ring generation of ``failed``'s job (testbed.emulation.failover)."""
        run = self.run
        outcome = run.fallback.after_failure(failed)
        self.fallbacks.append({"worker": failed, **outcome})
        run.events.write("fallback", failed, **outcome)
        if "generation" in outcome:
            run.say(f"{failed} failed: job {outcome['job']} falls back to a ring of {outcome['members']} members "
                    f"(generation {outcome['generation']}), redoing iteration {outcome['redo_from_iteration']}")

    def _sample_switch_stats(self, now_s: float) -> None:
        """One ``switch_stats.jsonl`` line of the programmable switches' INA counters, when due."""
        if not self.stat_series.due(now_s):
            return
        runtimes = self.run.runtimes
        readings = {sw.name: {name: runtimes[sw.name].counter_read("ina_stats", program.STAT_INDICES[name])[0]
                              for name in counters.SAMPLED_STATS}
                    for sw in self.run.scenario.topology.programmable_switches()}
        self.stat_series.write(now_s, time.time(), readings)

    def _progress_marker(self) -> tuple:
        records = self.run.run_dir / "records"
        return tuple(line_count(records / f"{name}.jsonl") for name in sorted(self.run.launcher.agents))

    def _diagnose_stall(self, watch, counters_at_progress) -> str:
        """Write ``diagnosis.json`` and return the one-line reason (testbed.emulation.stall.diagnose)."""
        run = self.run
        agents = run.launcher.agents
        running = {name: agent.proc.pid for name, agent in agents.items() if agent.proc.poll() is None}
        diagnosis = diagnose(run.runtimes, run.plan.control.slot_ranges, counters_at_progress, running,
                             list(agents), run.run_dir / "agents", watch, time.monotonic())
        write_text_atomic(run.run_dir / "diagnosis.json", json.dumps(diagnosis, indent=2, default=str))
        return diagnosis["reason"]
