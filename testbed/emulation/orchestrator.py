"""Run one scenario end to end on an emulated network: the orchestrator only sequences.

Order of a run (each step's output is kept in the run directory):

1. the plan comes made (:func:`testbed.plan.make_plan`: the placement, the control plan, the time
   dilation; nothing here computes them); write what will run (:func:`results.write_inputs`);
2. take the run lock, record the run's state, build the Mininet network with the target's switch nodes,
   install every switch config through its SwitchRuntime;
3. start the meters and the agents in their hosts and wait until all announce readiness
   (:mod:`testbed.emulation.launch`), write the start signal, start the background, the straggler
   injections (:mod:`testbed.emulation.injections`) and the CPU sampler, and watch the run until every
   worker has finished (:mod:`testbed.emulation.monitor`);
4. read the switches' final counters, stop everything, delete every interface, process and state entry
   the run created (also on failure and Ctrl-C), then write what the run observed and its summary, plots
   and tables (:mod:`testbed.emulation.results`);
5. started through sudo, hand the run directory (and the directories made on the way to it) to the user
   who typed it (:mod:`testbed.ownership`), whatever the run's end.

Nothing here knows which target runs beyond choosing its node class.
"""

import contextlib
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from testbed.dataplane.runtime import install
from testbed.emulation.bmv2_node import thrift_ports
from testbed.emulation.events import EventLog, InjectionScheduler
from testbed.emulation.failover import RingFallback
from testbed.emulation.host_checks import check_host_supports, preflight
from testbed.emulation.injections import InjectionEffects
from testbed.emulation.interrupts import InterruptLatch, interrupts_deferred
from testbed.emulation.launch import READY_TIMEOUT_S, Launcher
from testbed.emulation.monitor import Monitor
from testbed.emulation.network import add_neighbors, build_network, mininet_log_to, stop_network
from testbed.emulation.nodes import SWITCH_TARGETS, switch_node_params
from testbed.emulation.progress import ReaderSafeStream, building_line
from testbed.emulation.readings import process_ids, read_host_losses, read_switches
from testbed.emulation.results import (RunObservations, log_compute_delays, make_run_dir, ps_port_interfaces,
                                       summarise, write_inputs)
from testbed.emulation.state import RunLock, RunState, cleanup_stale, delete_interfaces, kill_recorded, \
    unpin_recorded, unregister_recorded
from testbed.emulation.thrift_guard import ThriftGuard
from testbed.errors import EmulationError, RunStalled
from testbed.metrics.cpu import CpuSampler
from testbed.metrics.summary import load_records, new_run_id
from testbed.ownership import handing_over, invoking_user, missing_dirs, new_tree
from testbed.plan import describe, make_plan

#: Lead time of the common start epoch, so background sources and sinks are running when it comes.
START_LEAD_S = 0.5
CPU_SAMPLE_INTERVAL_S = 1.0


def run_status(error) -> str:
    """``ok``, or why not: ``stalled`` (no progress for the stall bound), ``interrupted`` (Ctrl-C or a
    termination signal), ``failed`` (anything else: the ``error`` field says what)."""
    if error is None:
        return "ok"
    if isinstance(error, RunStalled):
        return "stalled"
    return "interrupted" if isinstance(error, KeyboardInterrupt) else "failed"


@dataclass
class RunResult:
    run_dir: Path
    summary: dict


class Run:
    """One emulated run of a plan (:class:`testbed.plan.RunPlan`); ``execute`` always leaves the machine
    clean. Under a time dilation N the network side builds and times the slowed ``world``; the agents, the
    placement and every figure reported keep the scenario's virtual values (testbed/dilation.py)."""

    def __init__(self, plan, out_root: Path, stream=sys.stderr, on_finished=None):
        self.plan = plan
        self.on_finished = on_finished      # called with the RunResult once its results are written
        self.scenario = plan.scenario
        self.world = plan.world
        self.time_dilation = plan.time_dilation
        self.target = plan.target
        self.stream = ReaderSafeStream(stream)    # a reader that goes away silences the display, not the run
        self.out_root = Path(out_root)
        self.run_id = new_run_id()
        self.run_dir = None
        self.interrupts = InterruptLatch()
        self.seen = RunObservations(self.run_id, self.target, self.time_dilation, started_epoch_s=time.time())
        self.substitutes = {}     # background congestion controls the run provides (dctcp_bpf.Substitute by name)
        # What the run creates, in order; each None until created (teardown stops what exists).
        self.state = self.thrift_guard = self.network = self.launcher = self.events = None
        self.injection_effects = self.monitor = self.fallback = self.injections = self.cpu = None
        self.runtimes = {}

    def say(self, text):
        self.stream.write(text + "\n")
        self.stream.flush()

    def execute(self) -> RunResult:
        invoking_user()                # a bad SUDO_UID is refused before anything is written
        self.substitutes = check_host_supports(self.scenario)
        lock = RunLock()
        lock.acquire(f"scenario {self.scenario.name}, run {self.run_id}")
        t0 = time.monotonic()
        error = result = None
        stack = contextlib.ExitStack()
        made_on_the_way = missing_dirs(self.out_root / self.scenario.name)
        try:
            self.run_id, self.run_dir = make_run_dir(self.out_root, self.scenario.name, self.run_id)
            self.seen.run_id = self.run_id
        except BaseException:
            lock.release()
            raise
        try:
            try:
                write_inputs(self.run_dir, self.plan)
                stack.enter_context(mininet_log_to(self.run_dir / "logs" / "mininet.log"))
                self._prepare_host()
                try:
                    with self.interrupts.installed():
                        self._emulate()
                finally:
                    self._teardown()
            except BaseException as exc:
                error = exc
                raise
        finally:
            stack.close()
            lock.release()
            # The results are written whole even if Ctrl-C comes again meanwhile (it is delivered after).
            # Then, started through sudo, they are handed to the user who typed it, whatever came first.
            with interrupts_deferred(), handing_over(new_tree(self.run_dir, made_on_the_way), say=self.say):
                try:
                    result = self._finish(time.monotonic() - t0, error)
                except Exception:  # noqa: BLE001 - never mask the run's own error
                    if error is None:
                        raise
            if result is not None and self.on_finished is not None:
                self.on_finished(result)     # a failed or stalled run's results too, before its error goes on
        return result

    def _prepare_host(self):
        """Leftovers of an earlier run removed, interfaces of this run's names refused when something else
        made them, the run's state record begun."""
        for line in cleanup_stale():
            self.say(f"leftovers of an earlier run: {line}")
        clashes = [i for i in self.world.topology.switch_port_interfaces() if Path(f"/sys/class/net/{i}").exists()]
        if clashes:
            raise EmulationError(f"interfaces {', '.join(clashes[:4])} already exist and were not created "
                                 f"by a run of this tool; remove them (ip link del NAME) before running")
        self.state = RunState(self.run_id)

    # -- the emulated part ---------------------------------------------------------
    def _emulate(self):
        scenario, world, control = self.scenario, self.world, self.plan.control
        self._build_network()
        self.launcher = Launcher(self.network, self.state, self.run_dir, self.say)
        self.launcher.start_meters(scenario.metrics.iftop_interfaces or [ps for job in scenario.jobs
                                                                         for ps in job.ps])
        self.launcher.start_captures(scenario.metrics.pcap_interfaces, scenario.metrics.pcap_max_bytes)
        self.launcher.start_agents(control.agents)
        self.injection_effects = InjectionEffects(world, self.network, self.runtimes, self.launcher.agents)
        self.monitor = Monitor(self.plan, self.run_dir, network=self.network, runtimes=self.runtimes,
                               launcher=self.launcher, injection_effects=self.injection_effects,
                               interrupts=self.interrupts, say=self.say, stream=self.stream)
        self.launcher.wait_agents_ready(check=lambda: (self.interrupts.check(), self.monitor.check_agents()))
        start_epoch = self.seen.start_epoch_s = time.time() + START_LEAD_S
        self.events = EventLog(self.run_dir / "events.jsonl", start_epoch, self.time_dilation)
        self.launcher.start_background(world, start_epoch, self.substitutes, self.time_dilation)
        (self.run_dir / "agents" / "go").write_text(f"{start_epoch:.6f}\n")
        self.events.write("start", "run", phase="start")
        agents = self.launcher.agents
        self.fallback = RingFallback(self.run_dir, {a.name: a for a in control.agents},
                                     {job.name: job.window for job in scenario.jobs},
                                     lambda name, signum: os.kill(agents[name].proc.pid, signum),
                                     lambda name: agents[name].proc.poll(), READY_TIMEOUT_S)
        if world.stragglers.injections:
            self.injections = InjectionScheduler(world.stragglers.injections, self.injection_effects.apply,
                                                 self.injection_effects.revert, self.events)
            self.injections.begin(time.monotonic() + (start_epoch - time.time()))
        self.cpu = CpuSampler(process_ids(self.network, scenario.topology, self.launcher.agents),
                              interval_s=CPU_SAMPLE_INTERVAL_S)
        self.cpu.start()
        self.monitor.watch(ps_port_interfaces(scenario), self.fallback, self.events)
        self.seen.end_epoch_s = time.time()
        self.cpu.stop()
        self._read_switches()
        read_host_losses(self.seen, self.network, scenario.jobs)

    def _build_network(self):
        """The network of the world's topology with the target's switches, each switch's entries installed
        and the hosts' neighbours set."""
        for line in describe(self.plan):     # what ``inatb validate`` prints of the same plan
            self.say(line)
        self.say(building_line(self.plan, self.run_dir))
        if self.target == "bmv2":
            # Thrift has no authentication: only root on this machine may reach the switches' ports.
            self.thrift_guard = ThriftGuard(self.run_id, thrift_ports(self.scenario.topology))
            self.thrift_guard.install()
        self.network = build_network(self.world.topology, SWITCH_TARGETS[self.target],
                                     switch_node_params(self.plan, self.run_dir / "logs", self.state), self.state)
        for sw in self.scenario.topology.switches():
            self.runtimes[sw.name] = self.network.switch(sw.name).runtime()
        for name, config in self.plan.control.switches.items():
            install(config, self.runtimes[name])
        add_neighbors(self.network, self.plan.control.host_neighbors)

    def _read_switches(self):
        read_switches(self.seen, self.runtimes, self.network, self.scenario.topology)

    # -- the end --------------------------------------------------------------------------
    def _teardown(self):
        """Stop and remove everything the run created; every step runs even if an earlier one fails.

        Interrupts are held off meanwhile (a second Ctrl-C must not leave half a network behind).
        """
        with interrupts_deferred():
            self._teardown_steps()

    def _teardown_steps(self):
        steps = [("injections", lambda: self.injections and self.injections.stop()),
                 ("cpu sampler", lambda: self.cpu and self.cpu.stop()),
                 ("switch counters", self._read_switches),
                 ("counter sampler", lambda: self.monitor and self.monitor.stop()),
                 ("agents and meters", lambda: self.launcher and self.launcher.stop_all()),
                 ("switch runtimes", lambda: [r.close() for r in self.runtimes.values()]),
                 ("network", lambda: self.network and stop_network(self.network.net)),
                 ("thrift guard", lambda: self.thrift_guard and self.thrift_guard.remove())]
        if self.state is not None:
            # Whatever the steps above could not stop (a crash mid-way) is removed from the record.
            steps += [("recorded processes", lambda: kill_recorded(self.state.data["processes"])),
                      ("recorded congestion controls", lambda: unregister_recorded(self.state.data)),
                      ("recorded ebpf pins", lambda: unpin_recorded(self.state.data)),
                      ("recorded interfaces", lambda: delete_interfaces(self.state.data["interfaces"])),
                      ("run state", self.state.remove)]
        failures = []
        for what, step in steps:
            try:
                step()
            except Exception as exc:  # noqa: BLE001 - keep cleaning, report at the end
                failures.append(f"{what}: {exc}")
        if failures:
            self.say("cleanup problems (run 'inatb cleanup'): " + "; ".join(failures))

    def _finish(self, wall_s: float, error) -> RunResult:
        """What the run observed, written beside its records, and the summary made from them."""
        seen = self.seen
        seen.wall_s = wall_s
        seen.status = run_status(error)
        seen.error = None if error is None else (str(error) or type(error).__name__).splitlines()[0]
        if seen.start_epoch_s is not None and seen.end_epoch_s is None:
            seen.end_epoch_s = time.time()
        seen.cpu_shares = self.cpu.shares() if self.cpu else {}
        seen.failed_workers = sorted(self.injection_effects.failing) if self.injection_effects else []
        seen.fallbacks = self.monitor.fallbacks if self.monitor else []
        seen.injection_errors = self.injections.errors if self.injections else []
        seen.metered_hosts = list(self.launcher.meters) if self.launcher else []
        records = load_records(self.run_dir)
        if self.events is not None:
            log_compute_delays(self.events, self.scenario, records, seen.start_epoch_s)
        seen.write(self.run_dir)
        return RunResult(self.run_dir, summarise(self.run_dir, self.plan, seen, records))


def run_scenario(scenario, out_root="results", target=None, stream=sys.stderr, plan=None,
                 on_finished=None) -> RunResult:
    """Plan ``scenario`` on ``target`` (:func:`testbed.plan.make_plan`; or run the ``plan`` given, made
    once by the caller), validate the environment, then run it; returns the run directory and summary.
    ``on_finished(RunResult)`` is called once the results are written, also when the run then raises (it
    failed, stalled or was interrupted): the caller learns where they are either way."""
    plan = plan or make_plan(scenario, target)
    preflight()
    return Run(plan, Path(out_root), stream, on_finished).execute()
