"""What a run creates on the machine while it lives, created in order and removed in reverse.

:class:`LiveRun` holds the network with its switch runtimes (and, on bmv2, the Thrift guard), the launcher
with the agents and meters, the event log, the injections, the ring fallback, the CPU sampler and the
monitor. :meth:`LiveRun.build` makes the network, :meth:`LiveRun.start` starts everything that runs on
it up to the start signal, :meth:`LiveRun.watch` follows the run to its end and reads what it left,
:meth:`LiveRun.stop` removes whatever exists of it, and :meth:`LiveRun.observe` adds what the parts saw to
the run's observations. Each of these works on a run that failed part way: what was never made is
skipped. The sequence itself is :class:`testbed.emulation.orchestrator.Run`'s.
"""

import os
import time

from testbed.dataplane.runtime import install
from testbed.emulation.bmv2_node import thrift_ports
from testbed.emulation.events import EventLog, InjectionScheduler
from testbed.emulation.failover import RingFallback
from testbed.emulation.injections import InjectionEffects
from testbed.emulation.launch import READY_TIMEOUT_S, Launcher, agents_ready_timeout_s
from testbed.emulation.monitor import Monitor
from testbed.emulation.network import add_neighbors, build_network, stop_network
from testbed.emulation.nodes import SWITCH_TARGETS, switch_node_params
from testbed.emulation.progress import building_line
from testbed.emulation.readings import process_ids, read_host_losses, read_switches
from testbed.emulation.results import ps_port_interfaces
from testbed.emulation.state import delete_interfaces, kill_recorded, unpin_recorded, unregister_recorded
from testbed.emulation.thrift_guard import ThriftGuard
from testbed.metrics.cpu import CpuSampler
from testbed.plan import describe

#: Lead time of the common start epoch, so background sources and sinks are running when it comes.
START_LEAD_S = 0.5
CPU_SAMPLE_INTERVAL_S = 1.0


class LiveRun:
    """The parts of one run of ``plan`` on this machine (each None until made), recorded in ``state``
    (:class:`testbed.emulation.state.RunState`) so that what :meth:`stop` cannot stop is removed from the
    record. ``substitutes`` are the background congestion controls the run provides
    (:func:`testbed.emulation.host_checks.check_host_supports`)."""

    def __init__(self, plan, run_dir, state, substitutes: dict, interrupts, say, stream):
        self.plan, self.run_dir, self.state, self.substitutes = plan, run_dir, state, substitutes
        self.interrupts, self.say, self.stream = interrupts, say, stream
        self.thrift_guard = self.network = self.launcher = self.events = None
        self.injection_effects = self.monitor = self.fallback = self.injections = self.cpu = None
        self.runtimes = {}

    def build(self) -> None:
        """The network of the world's topology with the target's switches, each switch's entries installed
        and the hosts' neighbours set."""
        plan = self.plan
        for line in describe(plan):     # what ``inatb validate`` prints of the same plan
            self.say(line)
        self.say(building_line(plan, self.run_dir))
        if plan.target == "bmv2":
            # Thrift has no authentication: only root on this machine may reach the switches' ports.
            self.thrift_guard = ThriftGuard(self.state.data["run_id"], thrift_ports(plan.scenario.topology))
            self.thrift_guard.install()
        self.network = build_network(plan.world.topology, SWITCH_TARGETS[plan.target],
                                     switch_node_params(plan, self.run_dir / "logs", self.state), self.state)
        for sw in plan.scenario.topology.switches():
            self.runtimes[sw.name] = self.network.switch(sw.name).runtime()
        for name, config in plan.control.switches.items():
            install(config, self.runtimes[name])
        add_neighbors(self.network, plan.control.host_neighbors)

    def start(self, seen) -> None:
        """Meters, captures and agents started and ready; the start signal written ``START_LEAD_S`` ahead
        (its epoch into ``seen``), then the background, the injections and the CPU sampler started."""
        scenario, world, control = self.plan.scenario, self.plan.world, self.plan.control
        launcher = self.launcher = Launcher(self.network, self.state, self.run_dir, self.say)
        launcher.start_meters(scenario.metrics.iftop_interfaces or [ps for job in scenario.jobs for ps in job.ps])
        launcher.start_captures(scenario.metrics.pcap_interfaces, scenario.metrics.pcap_max_bytes)
        launcher.start_agents(control.agents)
        self.injection_effects = InjectionEffects(world, self.network, self.runtimes, launcher.agents)
        self.monitor = Monitor(self.plan, self.run_dir, network=self.network, runtimes=self.runtimes,
                               launcher=launcher, injection_effects=self.injection_effects,
                               interrupts=self.interrupts, say=self.say, stream=self.stream)
        launcher.wait_agents_ready(check=lambda: (self.interrupts.check(), self.monitor.check_agents()),
                                   timeout_s=agents_ready_timeout_s(self.plan))
        start_epoch = seen.start_epoch_s = time.time() + START_LEAD_S
        self.events = EventLog(self.run_dir / "events.jsonl", start_epoch, self.plan.time_dilation)
        launcher.start_background(world, start_epoch, self.substitutes, self.plan.time_dilation)
        (self.run_dir / "agents" / "go").write_text(f"{start_epoch:.6f}\n")
        self.events.write("start", "run", phase="start")
        agents = launcher.agents
        self.fallback = RingFallback(self.run_dir, {a.name: a for a in control.agents},
                                     {job.name: job.window for job in scenario.jobs},
                                     lambda name, signum: os.kill(agents[name].proc.pid, signum),
                                     lambda name: agents[name].proc.poll(), READY_TIMEOUT_S)
        if world.stragglers.injections:
            self.injections = InjectionScheduler(world.stragglers.injections, self.injection_effects.apply,
                                                 self.injection_effects.revert, self.events)
            self.injections.begin(time.monotonic() + (start_epoch - time.time()))
        self.cpu = CpuSampler(process_ids(self.network, scenario.topology, agents), interval_s=CPU_SAMPLE_INTERVAL_S)
        self.cpu.start()

    def watch(self, seen) -> None:
        """Until every worker has finished (:class:`testbed.emulation.monitor.Monitor`); then the end epoch,
        the switches' final counters and the hosts' losses into ``seen``."""
        scenario = self.plan.scenario
        self.monitor.watch(ps_port_interfaces(scenario), self.fallback, self.events)
        seen.end_epoch_s = time.time()
        self.cpu.stop()
        read_switches(seen, self.runtimes, self.network, scenario.topology)
        read_host_losses(seen, self.network, scenario.jobs)

    def stop(self, seen) -> list:
        """Every part that exists stopped and removed, in reverse order of making, each step even if an
        earlier one fails; the switches' counters read first if :meth:`watch` did not get to them. Returns
        what failed, one phrase per step."""
        steps = [("injections", lambda: self.injections and self.injections.stop()),
                 ("cpu sampler", lambda: self.cpu and self.cpu.stop()),
                 ("switch counters", lambda: read_switches(seen, self.runtimes, self.network,
                                                           self.plan.scenario.topology)),
                 ("counter sampler", lambda: self.monitor and self.monitor.stop()),
                 ("agents and meters", lambda: self.launcher and self.launcher.stop_all()),
                 ("switch runtimes", lambda: [r.close() for r in self.runtimes.values()]),
                 ("network", lambda: self.network and stop_network(self.network.net, self.network.device_group)),
                 ("thrift guard", lambda: self.thrift_guard and self.thrift_guard.remove()),
                 # Whatever the steps above could not stop (a crash mid-way) is removed from the record.
                 ("recorded processes", lambda: kill_recorded(self.state.data["processes"])),
                 ("recorded congestion controls", lambda: unregister_recorded(self.state.data)),
                 ("recorded ebpf pins", lambda: unpin_recorded(self.state.data)),
                 ("recorded interfaces", lambda: delete_interfaces(self.state.data["interfaces"],
                                                                   self.state.data.get("device_group", 0))),
                 ("run state", self.state.remove)]
        failures = []
        for what, step in steps:
            try:
                step()
            except Exception as exc:  # noqa: BLE001 - keep cleaning, report at the end
                failures.append(f"{what}: {exc}")
        return failures

    def observe(self, seen) -> None:
        """What the parts saw, into ``seen``: the processes' CPU shares, the workers made to fail, the ring
        fallbacks, the injections' errors and the hosts metered."""
        seen.cpu_shares = self.cpu.shares() if self.cpu else {}
        seen.failed_workers = sorted(self.injection_effects.failing) if self.injection_effects else []
        seen.fallbacks = self.monitor.fallbacks if self.monitor else []
        seen.injection_errors = self.injections.errors if self.injections else []
        seen.metered_hosts = list(self.launcher.meters) if self.launcher else []
