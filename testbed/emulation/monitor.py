"""Watching a running emulation until its workers are done: the orchestrator's monitor loop.

:class:`Monitor` samples the switch ports' kernel counters (``metrics.jsonl``, a thread) and the
programmable switches' INA counters (``switch_stats.jsonl``), shows progress, and ends the run at once
when it must: an agent or switch process died (with the tail of its log), no job progressed for the stall
bound (``diagnosis.json`` says why, :mod:`testbed.emulation.stall`), the run outlived ``run_timeout``, or
a training job's workers' models diverged.
An agent that a failure injection killed is not a failure: its Rina job falls back to the next ring
generation (:class:`testbed.emulation.failover.RingFallback`).
"""

import json
import time

from testbed.agents.ring import job_done_path
from testbed.atomic_io import write_text_atomic
from testbed.dataplane import program
from testbed.emulation.nodes import log_tail
from testbed.emulation.progress import Progress, line_count
from testbed.emulation.stall import StallWatch, diagnose, stall_bound_s
from testbed.errors import EmulationError, RunStalled
from testbed.metrics import counters
from testbed.training.checks import DivergenceWatch

#: The monitor loop's period (agents, stall, progress, switch counters), or the sample interval when shorter.
MONITOR_PERIOD_S = 0.25
#: The least time between two full reads of the switches' counters kept for a stall's diagnosis (wall s).
STALL_COUNTERS_PERIOD_S = 1.0
#: The agents whose finishing ends a job: workers of every kind.
WORKER_ROLES = ("worker", "ring", "rina")


def last_recorded_iteration(path) -> int:
    """The iteration of the last complete record in ``path`` (an agent's ``records/<name>.jsonl``), -1 while
    there is none."""
    try:
        data = path.read_bytes()
    except OSError:
        return -1
    lines = data[:data.rfind(b"\n")].rsplit(b"\n", 1)
    try:
        return int(json.loads(lines[-1])["iteration"]) if lines[-1] else -1
    except (ValueError, KeyError, TypeError):
        return -1


class Monitor:
    """The monitor of one run. It reads the run's ``plan`` (:class:`testbed.plan.RunPlan`: the scenario, its
    slowed world, the time dilation, the target, the control plan) and watches what the orchestrator built:
    the ``network`` and the switches' ``runtimes``, the ``launcher``'s agents and what failure injections did
    to them (``injection_effects``); it checks ``interrupts`` every period, says what happens through ``say``
    and shows progress on ``stream``. ``sampler`` (the switch ports' counters) and ``fallbacks`` (what each
    failure led to) are results; ``stalled`` is the one-line reason when the run stalled."""

    def __init__(self, plan, run_dir, *, network, runtimes, launcher, injection_effects, interrupts, say, stream):
        self.plan, self.run_dir = plan, run_dir
        self.network, self.runtimes, self.launcher = network, runtimes, launcher
        self.injection_effects, self.interrupts, self.say, self.stream = injection_effects, interrupts, say, stream
        # Workers whose gradients a K-of-N scheme does not count.
        self.left_out = {a.name for a in plan.control.agents if a.role == "worker" and not a.participant}
        self.fallback = self.events = None     # given to watch(): the ring fallback and the event log
        self.sampler = None
        self.stat_series = None
        self.fallbacks = []
        self.stalled = None
        # A training job's workers must hold the same model at every iteration: a divergence fails the run.
        self.divergence = {job.name: DivergenceWatch({w: run_dir / "records" / f"{w}.jsonl" for w in job.workers})
                           for job in plan.scenario.jobs if job.training}
        # Ring jobs whose workers may still linger after their last iteration (release_finished_rings).
        self.rings_lingering = [job for job in plan.scenario.jobs if job.is_ring]

    # -- the loop ---------------------------------------------------------------------------
    def watch(self, ps_ports: list, fallback, events) -> None:
        """Until every worker that counts is done and background with its own duration has ended; a Rina
        worker that a failure injection killed falls back through ``fallback``
        (:class:`testbed.emulation.failover.RingFallback`), written to ``events``."""
        self.fallback, self.events = fallback, events
        plan, world = self.plan, self.plan.world
        switch_ifaces = [intf.name for sw in self.network.net.switches for intf in sw.intfList()
                         if intf.name != "lo"]
        self.sampler = counters.CounterSampler(switch_ifaces, self.run_dir / "metrics.jsonl",
                                               world.metrics.sample_interval_s)
        self.sampler.start()
        self.stat_series = counters.SwitchStatSeries(self.run_dir / "switch_stats.jsonl",
                                                     world.metrics.sample_interval_s)
        progress = Progress(plan.scenario, self.run_dir, self.stream, plan.time_dilation)
        deadline = time.monotonic() + world.run_timeout_s
        watch = StallWatch(stall_bound_s(plan.scenario) * plan.time_dilation, time.monotonic())
        counters_at_progress, counters_read_s = {}, 0.0
        timed_background = [i for i, spec in enumerate(plan.scenario.background) if spec.duration_s]
        try:
            while True:
                self.interrupts.check()
                self.check_agents()
                self.check_models()
                self.release_finished_rings()
                now = time.monotonic()
                # Progress is a job's: once every worker is done (background with its own duration may
                # keep the run going), there is nothing left to stall.
                if self.workers_running() and watch.observe(self._progress_marker(), now):
                    self.stalled = self._diagnose_stall(watch, counters_at_progress)
                    raise RunStalled(self.stalled)
                if watch.last_progress_s == now and now - counters_read_s >= STALL_COUNTERS_PERIOD_S:
                    counters_at_progress = {n: r.counters() for n, r in self.runtimes.items()}
                    counters_read_s = now
                # Workers finish on their own (those left out of K-of-N iterations need not);
                # PSs keep answering late retransmissions until stopped; background with its
                # own duration runs to its end.
                if not self.workers_running() and not self.launcher.background_still_due(timed_background):
                    break
                if time.monotonic() > deadline:
                    raise EmulationError(f"run exceeded run_timeout ({plan.scenario.run_timeout_s:.0f}s, "
                                         f"{world.run_timeout_s:.0f}s of wall time); agents still running: "
                                         f"{', '.join(self.launcher.running_agents())}")
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
        for sw in self.plan.scenario.topology.switches():
            death = self.network.switch(sw.name).died()
            if death:
                raise EmulationError(f"switch {sw.name} ({self.plan.target}) died ({death})")
        failing = self.injection_effects.failing      # empty until injections begin, just before watch()
        for name, agent in self.launcher.agents.items():
            code = agent.proc.poll()
            if name in failing:
                if code is not None and name not in self.fallback.failed:
                    self._fall_back(name)
                continue
            if code not in (None, 0):
                raise EmulationError(f"{agent.role} agent {name} failed (exit {code}); last lines of "
                                     f"{agent.log}:\n{log_tail(agent.log)}")

    def check_models(self) -> None:
        """A training job whose workers' models differ at an iteration ends the run as failed: its figures
        would be no job's (testbed.training.checks.DivergenceWatch)."""
        for job, watch in self.divergence.items():
            diverged = watch.poll()
            if diverged:
                iteration, hashes = diverged
                raise EmulationError(f"job {job}: the workers' models diverged at iteration {iteration} "
                                     f"(parameter hashes {', '.join(f'{w} {h}' for w, h in sorted(hashes.items()))})")

    def release_finished_rings(self) -> None:
        """Once every worker of a ring job has recorded its last iteration, nobody awaits an answer: the file
        :func:`testbed.agents.ring.job_done_path` ends their lingering. A job that lost a worker never gets
        there (its failed worker's records stop short), so its survivors linger as before."""
        for job in list(self.rings_lingering):
            if all(last_recorded_iteration(self.run_dir / "records" / f"{w}.jsonl") == job.iterations - 1
                   for w in job.workers):
                write_text_atomic(job_done_path(self.run_dir, job.name), "")
                self.rings_lingering.remove(job)

    def workers_running(self) -> bool:
        """Some worker (of a ring too) whose gradient counts has not finished (those left out of K-of-N
        iterations need not)."""
        done_or_excused = self.left_out | self.injection_effects.failing
        return not all(agent.proc.poll() == 0 for name, agent in self.launcher.agents.items()
                       if agent.role in WORKER_ROLES and name not in done_or_excused)

    def _fall_back(self, failed: str) -> None:
        """Rina §IV-C2: the next ring generation of ``failed``'s job (testbed.emulation.failover)."""
        outcome = self.fallback.after_failure(failed)
        self.fallbacks.append({"worker": failed, **outcome})
        self.events.write("fallback", failed, **outcome)
        if "generation" in outcome:
            self.say(f"{failed} failed: job {outcome['job']} falls back to a ring of {outcome['members']} members "
                    f"(generation {outcome['generation']}), redoing iteration {outcome['redo_from_iteration']}")

    def _sample_switch_stats(self, now_s: float) -> None:
        """One ``switch_stats.jsonl`` line of the programmable switches' INA counters, when due."""
        if not self.stat_series.due(now_s):
            return
        readings = {sw.name: {name: self.runtimes[sw.name].counter_read("ina_stats", program.STAT_INDICES[name])[0]
                              for name in counters.SAMPLED_STATS}
                    for sw in self.plan.scenario.topology.programmable_switches()}
        self.stat_series.write(now_s, time.time(), readings)

    def _progress_marker(self) -> tuple:
        records = self.run_dir / "records"
        return tuple(line_count(records / f"{name}.jsonl") for name in sorted(self.launcher.agents))

    def _diagnose_stall(self, watch, counters_at_progress) -> str:
        """Write ``diagnosis.json`` and return the one-line reason (testbed.emulation.stall.diagnose)."""
        agents = self.launcher.agents
        running = {name: agent.proc.pid for name, agent in agents.items() if agent.proc.poll() is None}
        diagnosis = diagnose(self.runtimes, self.plan.control.slot_ranges, counters_at_progress, running,
                             list(agents), self.run_dir / "agents", watch, time.monotonic())
        write_text_atomic(self.run_dir / "diagnosis.json", json.dumps(diagnosis, indent=2, default=str))
        return diagnosis["reason"]
