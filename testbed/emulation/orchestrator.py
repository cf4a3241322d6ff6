"""Run one scenario end to end on an emulated network.

Order of a run (each step's output is kept in the run directory):

1. compute the policy and the control plan (pure; errors here never touch
   the network), write ``scenario.yaml``, ``policy.json``, ``entries/``;
2. take the run lock, record the run's state, build the Mininet network with
   the target's switch nodes, wait for every switch by polling its runtime,
   install every switch config through its SwitchRuntime;
3. start the meters (iftop-style, on the PS interfaces) and the agents (PS
   and workers) in their hosts, wait until all announce readiness, write the
   start signal; sample interface counters and the programmable switches'
   INA counters and show progress until every worker has finished (an
   agent failing ends the run at once, with the tail of its log);
4. read the switches' final counters, stop everything, delete every
   interface, process and state entry the run created (also on failure and
   Ctrl-C), then compute metrics, plots and ``summary.json``.

Nothing here knows which target runs beyond choosing its node class.
"""

import contextlib
import datetime
import json
import os
import platform
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import yaml

from testbed import dilation
from testbed.atomic_io import write_text_atomic
from testbed.budget import switch_process_phrase
from testbed.dataplane import program
from testbed.dataplane.entries import queue_rate_pps
from testbed.dataplane.runtime import PySwitchRuntime, install
from testbed.dataplane.wire import ina_frame_bytes
from testbed.emulation import background
from testbed.emulation.bmv2_node import thrift_ports
from testbed.emulation.events import EventLog, InjectionScheduler, htb_rate_argv
from testbed.emulation.failover import RingFallback
from testbed.emulation.network import (build_network, mininet_log_to, neighbor_argv, rto_min_route_argv, run_in,
                                      stop_network)
from testbed.emulation.nodes import SWITCH_TARGETS, log_tail
from testbed.emulation.progress import Progress, ReaderSafeStream, line_count
from testbed.emulation.stall import StallWatch, diagnose, stall_bound_s
from testbed.emulation.state import (RunLock, RunState, cleanup_stale, delete_interfaces, kill_recorded,
                                     stop_process, unregister_recorded)
from testbed.emulation.thrift_guard import ThriftGuard
from testbed.errors import EmulationError, EnvironmentMissingError, RunStalled
from testbed.agents.common import host_delay_path
from testbed.metrics import counters, plots, summary as summary_mod
from testbed.metrics.cpu import CpuSampler
from testbed.metrics.distortion import assess
from testbed.metrics.host_delay import by_role
from testbed.metrics.rounds import round_trip_host_delay_s, round_trip_summary
from testbed.metrics.iftop import format_iftop_table, load_samples
from testbed.metrics.losses import host_losses
from testbed.plan import make_plan
from testbed.provenance import PROJECT_ROOT, git_commit, package_versions
from testbed.traffic import dctcp_bpf
from testbed.traffic.flowgen import congestion_control_error

AGENT_MARKER = "testbed.agents.run"
METER_MARKER = "testbed.metrics.iftop"
FLOWGEN_MARKER = "testbed.traffic.flowgen"
READY_TIMEOUT_S = 30.0
#: Lead time of the common start epoch, so background sources and sinks are running when it comes.
START_LEAD_S = 0.5
CPU_SAMPLE_INTERVAL_S = 1.0
#: The monitor loop's period (agents, stall, progress, switch counters), or the sample interval when shorter.
MONITOR_PERIOD_S = 0.25
RUN_DIR_ATTEMPTS = 5


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


def preflight():
    if os.geteuid() != 0:
        raise EnvironmentMissingError("inatb run needs root: Mininet creates network namespaces and links "
                                      "(run it with sudo)")
    for binary, package in (("mnexec", "mininet"), ("tc", "iproute2"), ("ethtool", "ethtool")):
        if shutil.which(binary) is None:
            raise EnvironmentMissingError(f"{binary} not found; install the Debian package {package} "
                                          f"(the README's set-up command does)")


@contextlib.contextmanager
def _interrupt_handler(handler):
    """``handler`` takes SIGINT and SIGTERM for the block, then the previous handlers are back. Python lets
    only the main thread install handlers: elsewhere the block runs with them unchanged."""
    import threading
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {sig: signal.signal(sig, handler) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)


@contextlib.contextmanager
def interrupts_deferred():
    """Hold SIGINT/SIGTERM until the block ends, then deliver them (main thread only)."""
    received = []
    with _interrupt_handler(lambda signum, frame: received.append(signum)):
        try:
            yield
        finally:
            if received:
                raise KeyboardInterrupt


class InterruptLatch:
    """Ctrl-C (SIGINT) and SIGTERM raise KeyboardInterrupt wherever the main thread is, as Python's own
    handler does, and are remembered. Python swallows an exception raised while a finalizer (``__del__``)
    or a weakref callback runs ("Exception ignored in ..."), so a signal handled there would be lost and
    the run go on (CI saw a quickstart run iterate on for a minute after its Ctrl-C); the run's waiting
    loops call :meth:`check`, which raises it again. Installed in the main thread only."""

    def __init__(self):
        self.requested = False

    def handle(self, signum, frame):
        self.requested = True
        raise KeyboardInterrupt

    def check(self):
        if self.requested:
            raise KeyboardInterrupt

    @contextlib.contextmanager
    def installed(self):
        """A context manager: the latch takes SIGINT and SIGTERM within it, and a signal it took is raised
        again when the block ends without an exception (swallowed after the run's last check, it would be
        forgotten as the run ends, and a sweep would go on to its next point)."""
        with _interrupt_handler(self.handle):
            yield
        self.check()


def check_host_supports(scenario) -> dict:
    """Refuse, before any network exists, what this host's kernel cannot run: a background entry's TCP
    congestion control it does not have, unless the run can provide it (DCTCP as BPF, built here:
    testbed.traffic.dctcp_bpf). Returns {name: dctcp_bpf.Substitute} of those the run provides."""
    substitutes = {}
    for index, spec in enumerate(scenario.background):
        name = spec.congestion_control
        if not name or name in substitutes:
            continue
        try:
            substitute = dctcp_bpf.prepare(name)
        except dctcp_bpf.BpfDctcpError as exc:
            raise EnvironmentMissingError(f"background.{index}.congestion_control: {exc}") from None
        if substitute is not None:
            substitutes[name] = substitute
        elif why := congestion_control_error(name):
            raise EnvironmentMissingError(f"background.{index}.congestion_control: {why}")
    return substitutes


def _port_interface(topo, switch: str, link) -> str:
    """The name of the interface of ``switch``'s port on ``link`` (in the root namespace)."""
    return f"{switch}-eth{topo.port(switch, link)}"


def write_inputs(run_dir: Path, scenario, policy, plan, target: str):
    for sub in ("logs", "agents", "records", "entries", "plots", "iftop"):
        (run_dir / sub).mkdir(parents=True, exist_ok=True)
    (run_dir / "scenario.yaml").write_text(yaml.safe_dump(scenario.resolved, sort_keys=False))
    (run_dir / "policy.json").write_text(policy.to_json())
    for name, config in plan.switches.items():
        (run_dir / "entries" / f"{name}.txt").write_text("\n".join(config.to_cli_lines()) + "\n")
    for agent in plan.agents:
        agent.run_dir = str(run_dir)
        (run_dir / "agents" / f"{agent.name}.json").write_text(agent.to_json())


class Run:
    """State of one emulated run; ``execute`` always leaves the machine clean."""

    def __init__(self, plan, out_root: Path, stream=sys.stderr):
        scenario = plan.scenario
        self.scenario = scenario
        self.policy = plan.policy
        self.budget = plan.budget     # the packet budget's prediction (testbed.budget), for the summary
        # Under a time dilation N the network side builds and times the slowed world; the agents, the
        # policy and every figure reported keep the scenario's virtual values (testbed/dilation.py).
        self.time_dilation = plan.time_dilation
        self.world = dilation.network_scenario(scenario, plan.time_dilation)
        self.target = plan.target
        self.stream = ReaderSafeStream(stream)    # a reader that goes away silences the display, not the run
        self.run_id = summary_mod.new_run_id()
        self.out_root = Path(out_root)
        self.run_dir = self.out_root / scenario.name / self.run_id
        self.agents = {}     # name -> (Popen, log path, role)
        self.meters = {}     # host -> (Popen, samples path)
        self.sampler = None
        self.stat_series = None   # SwitchStatSeries of the programmable switches' INA counters
        self.runtimes = {}
        self.network = None
        self.state = None
        self.switch_stats = {}
        self.switch_host_delay = {}   # switch process (as the CPU figures name it) -> its HostDelayMeter summary
        self.flowgens = {}   # name -> (Popen, log path, flowgen role, background entry index)
        self.left_out = set()  # workers whose gradients a K-of-N scheme does not count
        self.events = None
        self.injections = None
        self.start_epoch = None
        self.end_epoch = None
        self.plan = plan.control
        self.interrupts = InterruptLatch()
        self.cpu = None           # CpuSampler over switches and agents
        self.host_losses = {}     # host -> {"udp_rcvbuf": n, "qdisc": n}
        self.stalled = None       # the one-line reason when the run stalled
        self.thrift_guard = None  # bmv2: the firewall that closes the switches' Thrift ports to all but root
        self.failing = set()      # agents a failure injection killed (stragglers.failures)
        self.fallback = None      # RingFallback: the next ring generation after a Rina job's worker failed
        self.fallbacks = []       # what each failure led to (the summary's)
        self.substitutes = {}     # background congestion controls the run provides (dctcp_bpf.Substitute by name)

    def say(self, text):
        self.stream.write(text + "\n")
        self.stream.flush()

    def execute(self) -> RunResult:
        scenario, policy, plan = self.scenario, self.policy, self.plan
        self.substitutes = check_host_supports(scenario)
        lock = RunLock()
        lock.acquire(f"scenario {scenario.name}, run {self.run_id}")
        started = time.time()
        t0 = time.monotonic()
        error = None
        result = None
        stack = contextlib.ExitStack()
        try:
            self._make_run_dir()
        except BaseException:
            lock.release()
            raise
        try:
            try:
                write_inputs(self.run_dir, scenario, policy, plan, self.target)
                stack.enter_context(mininet_log_to(self.run_dir / "logs" / "mininet.log"))
                for line in cleanup_stale():
                    self.say(f"leftovers of an earlier run: {line}")
                clashes = [i for i in self._switch_ports() if Path(f"/sys/class/net/{i}").exists()]
                if clashes:
                    raise EmulationError(f"interfaces {', '.join(clashes[:4])} already exist and were not created "
                                         f"by a run of this tool; remove them (ip link del NAME) before running")
                self.state = RunState(self.run_id)
                try:
                    with self.interrupts.installed():
                        self._emulate(plan)
                finally:
                    self._teardown()
            except BaseException as exc:
                error = exc
                raise
        finally:
            stack.close()
            lock.release()
            # The results are written whole even if Ctrl-C comes again meanwhile (it is delivered after).
            with interrupts_deferred():
                try:
                    result = self._finish(policy, started, time.monotonic() - t0, error)
                except Exception:  # noqa: BLE001 - never mask the run's own error
                    if error is None:
                        raise
        return result

    def _make_run_dir(self):
        """``--out/<scenario>/<run id>``, created exclusively (an existing directory is never reused) and
        owner-only whatever the umask; always inside ``--out`` (scenario names are checked to allow it)."""
        out = self.out_root
        try:
            (out / self.scenario.name).mkdir(parents=True, exist_ok=True)
            for _ in range(RUN_DIR_ATTEMPTS):
                try:
                    os.mkdir(self.run_dir, 0o700)
                    break
                except FileExistsError:
                    self.run_id = summary_mod.new_run_id()
                    self.run_dir = out / self.scenario.name / self.run_id
            else:
                raise EmulationError(f"--out {out}: could not create a new run directory under "
                                     f"{out / self.scenario.name}")
            os.chmod(self.run_dir, 0o700)
        except OSError as exc:
            raise EmulationError(f"--out {out}: cannot create the run directory: {exc.strerror or exc}") from None
        if out.resolve() not in self.run_dir.resolve().parents:
            raise EmulationError(f"--out {out}: the run directory {self.run_dir} would lie outside it")

    def _switch_ports(self) -> dict:
        """Every switch port's interface name (``<switch>-eth<port>``) -> its link (at its wall-clock rate)."""
        topo = self.world.topology
        return {_port_interface(topo, sw.name, link): link for sw in topo.switches() for link in topo.links_of(sw.name)}

    # -- the emulated part ---------------------------------------------------------
    def _emulate(self, plan):
        scenario = self.scenario
        slowed = f", time dilation {self.time_dilation:g}" if self.time_dilation != 1 else ""
        switches = len(scenario.topology.switches())
        groups = self.budget.switch_groups if self.target == "pyswitch" else None
        shared = f" in {len(groups)} process{'es' if len(groups) > 1 else ''}" \
            if groups and len(groups) < switches else ""
        hosts = len(scenario.topology.hosts())
        self.say(f"building {switches} {self.target} switch{'es' if switches != 1 else ''}{shared}, "
                 f"{hosts} host{'s' if hosts != 1 else ''}{slowed} ({self.run_dir})")
        switch_cls = SWITCH_TARGETS[self.target]
        params = dict(log_dir=str(self.run_dir / "logs"), control_dir=str(self.state.dir),
                      lanes=scenario.switch.lanes, slots=scenario.switch.slots, run_state=self.state)
        if groups is not None:
            params["process_groups"] = groups
        if self.target == "bmv2":
            # Thrift has no authentication: only root on this machine may reach the switches' ports.
            self.thrift_guard = ThriftGuard(self.run_id, thrift_ports(scenario.topology))
            self.thrift_guard.install()
        for warning in self.budget.warnings(self.time_dilation):
            self.say(f"warning: {warning}")
        self.network = build_network(self.world.topology, switch_cls, params, self.state)
        for sw in scenario.topology.switches():
            self.runtimes[sw.name] = self.network.switch(sw.name).runtime()
        for name, config in plan.switches.items():
            install(config, self.runtimes[name])
        for host, address, mac in plan.host_neighbors:
            run_in(self.network.host(host), neighbor_argv(f"{host}-eth0", address, mac), "adding a neighbour")
        self._start_meters()
        self.left_out = {a.name for a in plan.agents if a.role == "worker" and not a.participant}
        for agent in sorted(plan.agents, key=lambda a: a.role != "ps"):
            self._start_agent(agent.name, agent.role, agent.host or agent.name)
        self._wait_ready()
        self.start_epoch = time.time() + START_LEAD_S
        self.events = EventLog(self.run_dir / "events.jsonl", self.start_epoch, self.time_dilation)
        self._start_background()
        (self.run_dir / "agents" / "go").write_text(f"{self.start_epoch:.6f}\n")
        self.events.write("start", "run", phase="start")
        self.fallback = RingFallback(self.run_dir, {a.name: a for a in plan.agents},
                                     {job.name: job.window for job in scenario.jobs},
                                     lambda name, signum: os.kill(self.agents[name][0].pid, signum),
                                     lambda name: self.agents[name][0].poll(), READY_TIMEOUT_S)
        if self.world.stragglers.injections:
            self.injections = InjectionScheduler(self.world.stragglers.injections, self._apply_injection,
                                                 self._revert_injection, self.events)
            self.injections.begin(time.monotonic() + (self.start_epoch - time.time()))
        self.cpu = CpuSampler(self._process_ids(), interval_s=CPU_SAMPLE_INTERVAL_S)
        self.cpu.start()
        self._monitor()
        self.end_epoch = time.time()
        self.cpu.stop()
        self._collect_switch_stats()
        self._collect_host_losses()

    def _popen(self, host_name, argv, log_path, marker):
        host = self.network.host(host_name)
        log = open(log_path, "w")
        try:
            proc = host.popen(argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                              cwd=str(PROJECT_ROOT))
        finally:
            log.close()
        self.state.add_process(proc.pid, marker)
        return proc

    def _start_agent(self, name, role, host):
        log = self.run_dir / "logs" / f"{name}.log"
        argv = [sys.executable, "-I", "-m", AGENT_MARKER, str(self.run_dir / "agents" / f"{name}.json")]
        self.agents[name] = (self._popen(host, argv, log, AGENT_MARKER), log, role)

    def _start_meters(self):
        hosts = self.scenario.metrics.iftop_interfaces or [ps for job in self.scenario.jobs for ps in job.ps]
        for host in hosts:
            samples = self.run_dir / "iftop" / f"{host}.jsonl"
            argv = [sys.executable, "-I", "-m", METER_MARKER, "--iface", f"{host}-eth0", "--out", str(samples),
                    "--interval-s", "1.0"]
            proc = self._popen(host, argv, self.run_dir / "logs" / f"iftop-{host}.log", METER_MARKER)
            self.meters[host] = (proc, samples)
        deadline = time.monotonic() + READY_TIMEOUT_S
        for host, (proc, samples) in self.meters.items():
            while not (samples.exists() and samples.stat().st_size > 0):
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise EmulationError(f"iftop meter on {host} did not start: "
                                         f"{log_tail(self.run_dir / 'logs' / f'iftop-{host}.log')}")
                time.sleep(0.02)

    def _start_background(self):
        if not self.scenario.background:
            return
        out_dir = self.run_dir / "background"
        out_dir.mkdir(exist_ok=True)
        world = self.world
        for substitute in self.substitutes.values():
            if substitute.used not in dctcp_bpf.available():
                # recorded before it exists, as all the run creates: teardown and cleanup unregister it
                self.state.add_congestion_control(substitute.used)
                dctcp_bpf.register(substitute)
                self.say(f"background: {substitute.requested} runs as {substitute.used} (BPF, registered for "
                         f"this run: the kernel has no {substitute.requested})")
        configs = background.flowgen_configs(world, world.run_timeout_s, self.start_epoch, out_dir,
                                             {name: sub.used for name, sub in self.substitutes.items()})
        for host in background.ecn_senders(world):
            # A namespace's own sysctl: it goes with the namespace at teardown.
            run_in(self.network.host(host), ["sysctl", "-q", "-w", "net.ipv4.tcp_ecn=1"],
                   "asking for ECN on background TCP")
        if self.time_dilation != 1:
            # The kernel's minimum RTO, dilated on the routes the background hosts send over (their
            # namespaces go with them at teardown); what stays undilated: testbed/dilation.py.
            rto_min_ms = dilation.tcp_rto_min_ms(self.time_dilation)
            for host in background.tcp_hosts(world):
                run_in(self.network.host(host),
                       rto_min_route_argv(f"{host}-eth0", world.topology.node(host).ip, rto_min_ms),
                       "dilating the minimum TCP RTO")
        for index, host, name, config in configs:
            path = out_dir / f"{name}.json"
            path.write_text(json.dumps(config))
            argv = [sys.executable, "-I", "-m", FLOWGEN_MARKER, str(path)]
            log = self.run_dir / "logs" / f"{name}.log"
            self.flowgens[name] = (self._popen(host, argv, log, FLOWGEN_MARKER), log, config["role"], index)
        flows = sum(len(c.get("flows", [])) for _, _, _, c in configs)
        self.say(f"background: {len(configs)} flow generators, {flows} flows planned")

    # -- straggler injections (called from the scheduler thread) ---------------------
    def _set_link_end_rate(self, node_name, link, rate_bps):
        topo = self.world.topology
        if topo.nodes[node_name].kind == "host":
            run_in(self.network.host(node_name), htb_rate_argv(f"{node_name}-eth0", rate_bps), "changing NIC rate")
        else:
            self.runtimes[node_name].set_port_shaping(topo.port(node_name, link), rate_bps,
                                                      self.scenario.switch.queue_depth_pkts)

    def _links_of(self, inj):
        """The links an injection changes, at their wall-clock rates (it comes from the world's injections)."""
        topo = self.world.topology
        if inj.kind == "rate_change":
            return [topo.host_link(inj.target[0])]
        return [l for l in topo.links if {l.a, l.b} == set(inj.target)]

    def _apply_injection(self, inj, revert=False):
        if inj.kind == "failure":
            # Marked before the kill: the monitor must not take the agent's end for the run's failure.
            self.failing.add(inj.target[0])
            os.kill(self.agents[inj.target[0]][0].pid, signal.SIGKILL)
            return
        if inj.kind == "pause":
            proc = self.agents[inj.target[0]][0]
            os.kill(proc.pid, signal.SIGCONT if revert else signal.SIGSTOP)
            return
        for link in self._links_of(inj):
            for end in (link.a, link.b):
                self._set_link_end_rate(end, link, link.rate_bps if revert else inj.rate_bps)

    def _revert_injection(self, inj):
        self._apply_injection(inj, revert=True)

    def _check_agents(self):
        """An agent or switch process that died ends the run at once, with the last lines of its own log."""
        for sw in self.scenario.topology.switches():
            death = self.network.switch(sw.name).died()
            if death:
                raise EmulationError(f"switch {sw.name} ({self.target}) died ({death})")
        for name, (proc, log, role) in self.agents.items():
            code = proc.poll()
            if name in self.failing:
                if code is not None and name not in self.fallback.failed:
                    self._fall_back(name)
                continue
            if code not in (None, 0):
                raise EmulationError(f"{role} agent {name} failed (exit {code}); last lines of {log}:\n"
                                     f"{log_tail(log)}")

    def _fall_back(self, failed: str):
        """Rina §IV-C2: the next ring generation of ``failed``'s job (testbed.emulation.failover)."""
        outcome = self.fallback.after_failure(failed)
        self.fallbacks.append({"worker": failed, **outcome})
        self.events.write("fallback", failed, **outcome)
        if "generation" in outcome:
            self.say(f"{failed} failed: job {outcome['job']} falls back to a ring of {outcome['members']} members "
                     f"(generation {outcome['generation']}), redoing iteration {outcome['redo_from_iteration']}")

    def _wait_ready(self):
        deadline = time.monotonic() + READY_TIMEOUT_S
        agents_dir = self.run_dir / "agents"
        while not all((agents_dir / f"{name}.ready").exists() for name in self.agents):
            self.interrupts.check()
            self._check_agents()
            if time.monotonic() > deadline:
                missing = [n for n in self.agents if not (agents_dir / f"{n}.ready").exists()]
                raise EmulationError(f"agents not ready after {READY_TIMEOUT_S:.0f}s: {', '.join(missing)}")
            time.sleep(0.02)

    def _host_port(self, host):
        """The switch interface facing ``host``: its tx is what the host receives, its rx what it sends."""
        topo = self.scenario.topology
        link = topo.host_link(host)
        return _port_interface(topo, topo.neighbor(host, link), link)

    def _packet_rate_bound(self, samples) -> dict:
        """bmv2's ports that its packets-per-second shaping held below their link rate (none on pyswitch,
        which shapes bytes)."""
        if self.target != "bmv2":
            return {}
        frame_bytes = ina_frame_bytes(self.scenario.switch.lanes)
        caps = {port: queue_rate_pps(link.rate_bps, frame_bytes) for port, link in self._switch_ports().items()}
        return counters.packet_rate_bound_ports(samples, caps, frame_bytes)

    def _ps_ports(self):
        return [self._host_port(ps) for job in self.scenario.jobs for ps in job.ps]

    def _sample_switch_stats(self, now_s):
        """One ``switch_stats.jsonl`` line of the programmable switches' INA counters, when due."""
        if not self.stat_series.due(now_s):
            return
        readings = {sw.name: {name: self.runtimes[sw.name].counter_read("ina_stats",
                                                                        program.STAT_INDICES[name])[0]
                              for name in counters.SAMPLED_STATS}
                    for sw in self.scenario.topology.programmable_switches()}
        self.stat_series.write(now_s, time.time(), readings)

    def _switch_processes(self) -> dict:
        """Every switch process of the run by its pid: ``{pid: (its switches' names, in topology order)}``."""
        switches_of_pid = {}
        for sw in self.scenario.topology.switches():
            proc = getattr(self.network.switch(sw.name), "proc", None)
            if proc is not None:
                switches_of_pid.setdefault(proc.pid, []).append(sw.name)
        return {pid: tuple(names) for pid, names in switches_of_pid.items()}

    def _process_ids(self) -> dict:
        """Every switch and agent process of the run: ``{"switch s1": pid, "worker w1": pid, ...}``; switches
        sharing a process (``switch.processes``) are one entry, ``"switch process of s1 and 3 more"``."""
        pids = {switch_process_phrase(names): pid for pid, names in self._switch_processes().items()}
        for name, (proc, _, role) in self.agents.items():
            pids[f"{role} {name}"] = proc.pid
        return pids

    def _collect_host_losses(self):
        for job in self.scenario.jobs:
            for host in list(job.workers) + list(job.ps):
                self.host_losses[host] = host_losses(self.network.host(host), f"{host}-eth0", run_in)

    def _progress_marker(self):
        records = self.run_dir / "records"
        return tuple(line_count(records / f"{name}.jsonl") for name in sorted(self.agents))

    def _diagnose_stall(self, watch, counters_at_progress):
        """Write ``diagnosis.json`` and return the one-line reason (testbed.emulation.stall.diagnose)."""
        running = {name: proc.pid for name, (proc, _, _) in self.agents.items() if proc.poll() is None}
        diagnosis = diagnose(self.runtimes, self.plan.slot_ranges, counters_at_progress, running,
                             list(self.agents), self.run_dir / "agents", watch, time.monotonic())
        write_text_atomic(self.run_dir / "diagnosis.json", json.dumps(diagnosis, indent=2, default=str))
        return diagnosis["reason"]

    def _monitor(self):
        scenario = self.scenario
        switch_ifaces = [intf.name for sw in self.network.net.switches for intf in sw.intfList() if intf.name != "lo"]
        world = self.world
        self.sampler = counters.CounterSampler(switch_ifaces, self.run_dir / "metrics.jsonl",
                                               world.metrics.sample_interval_s)
        self.sampler.start()
        self.stat_series = counters.SwitchStatSeries(self.run_dir / "switch_stats.jsonl",
                                                     world.metrics.sample_interval_s)
        progress = Progress(scenario, self.run_dir, self.stream, self.time_dilation)
        ps_ports = self._ps_ports()
        deadline = time.monotonic() + world.run_timeout_s
        watch = StallWatch(stall_bound_s(scenario) * self.time_dilation, time.monotonic())
        counters_at_progress, counters_read_s = {}, 0.0
        try:
            while True:
                self.interrupts.check()
                self._check_agents()
                now = time.monotonic()
                # Progress is a job's: once every worker is done (background with its own duration may
                # keep the run going), there is nothing left to stall.
                if self._workers_running() and watch.observe(self._progress_marker(), now):
                    self.stalled = self._diagnose_stall(watch, counters_at_progress)
                    raise RunStalled(self.stalled)
                if watch.last_progress_s == now and now - counters_read_s >= 1.0:
                    counters_at_progress = {n: r.counters() for n, r in self.runtimes.items()}
                    counters_read_s = now
                # Workers finish on their own (those left out of K-of-N iterations need not);
                # PSs keep answering late retransmissions until stopped; background with its
                # own duration runs to its end.
                if not self._workers_running() and not self._background_still_due():
                    break
                if time.monotonic() > deadline:
                    raise EmulationError(f"run exceeded run_timeout ({scenario.run_timeout_s:.0f}s, "
                                         f"{world.run_timeout_s:.0f}s of wall time); "
                                         f"agents still running: "
                                         f"{', '.join(n for n, (p, _, _) in self.agents.items() if p.poll() is None)}")
                rate = self.sampler.rate_bps(ps_ports)
                progress.update(rate)
                self._sample_switch_stats(time.monotonic())
                time.sleep(min(MONITOR_PERIOD_S, world.metrics.sample_interval_s))
            progress.update(self.sampler.rate_bps(ps_ports))     # the final state, iterations all done
        finally:
            progress.finish()

    def _workers_running(self) -> bool:
        """Some worker (of a ring too) whose gradient counts has not finished (those left out of K-of-N
        iterations need not)."""
        return not all(proc.poll() == 0 for name, (proc, _, role) in self.agents.items()
                       if role in ("worker", "ring", "rina") and name not in self.left_out | self.failing)

    def _background_still_due(self):
        timed = [i for i, spec in enumerate(self.scenario.background) if spec.duration_s]
        return any(proc.poll() is None for proc, _, role, index in self.flowgens.values()
                   if role.endswith("source") and index in timed)

    def _collect_switch_stats(self):
        """The switches' counters, read once (on a failed run too: they say where packets went), and each
        pyswitch process's host-delay meter."""
        for name, runtime in self.runtimes.items():
            if name not in self.switch_stats:
                self.switch_stats[name] = runtime.counters()
        if self.network is None or self.switch_host_delay:
            return
        for names in self._switch_processes().values():
            runtime = self.runtimes.get(names[0])
            if isinstance(runtime, PySwitchRuntime):
                self.switch_host_delay[switch_process_phrase(names)] = runtime.host_delay()

    def _teardown(self):
        """Stop and remove everything the run created; every step runs even if an earlier one fails.

        Interrupts are held off meanwhile (a second Ctrl-C must not leave half a network behind).
        """
        with interrupts_deferred():
            self._teardown_steps()

    def _teardown_steps(self):
        steps = [("injections", lambda: self.injections and self.injections.stop()),
                 ("cpu sampler", lambda: self.cpu and self.cpu.stop()),
                 ("switch counters", self._collect_switch_stats),
                 ("counter sampler", lambda: self.sampler and self.sampler.stop()),
                 ("agents and meters", self._stop_processes),
                 ("switch runtimes", lambda: [r.close() for r in self.runtimes.values()]),
                 ("network", lambda: self.network and stop_network(self.network.net)),
                 ("thrift guard", lambda: self.thrift_guard and self.thrift_guard.remove())]
        if self.state is not None:
            # Whatever the steps above could not stop (a crash mid-way) is removed from the record.
            steps += [("recorded processes", lambda: kill_recorded(self.state.data["processes"])),
                      ("recorded congestion controls", lambda: unregister_recorded(self.state.data)),
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

    def _stop_processes(self):
        procs = [p for p, _ in self.meters.values()] + [p for p, _, _ in self.agents.values()] + \
            [p for p, _, _, _ in self.flowgens.values()]
        for proc in procs:        # signal all first, so they stop in parallel
            if proc.poll() is None:
                proc.terminate()
        for proc in procs:
            stop_process(proc)

    # -- results --------------------------------------------------------------------------
    def _finish(self, policy, started, wall_s, error) -> RunResult:
        scenario = self.scenario
        run_dir = self.run_dir
        records = summary_mod.load_records(run_dir)
        jobs = [summary_mod.job_metrics(job, records, policy.jobs[job.name].participants,
                                        scenario.metrics.warmup_iterations, failed=self.failing,
                                        aggregation_depth=policy.jobs[job.name].aggregation_depth())
                for job in scenario.jobs]
        samples = counters.load_counter_samples(run_dir / "metrics.jsonl") if (run_dir / "metrics.jsonl").exists() \
            else []
        deltas = counters.interface_deltas(samples)
        ps_ports = self._ps_ports()
        figures, evidence = summary_mod.honest_figures(jobs, self.switch_stats, self.host_losses,
                                                       self.cpu.shares() if self.cpu else {},
                                                       self._packet_rate_bound(samples))
        host_delay = self._host_delay()
        # The rounds the planner weighed (testbed.budget), computed once per run.
        rounds = self.budget.rounds
        evidence.round_trip_delays = {r.job: (r, round_trip_host_delay_s(r, host_delay)) for r in rounds}
        # The counters were sampled in wall time; from here on they are virtual (testbed/dilation.py).
        samples = self._virtual(samples)
        distortion = assess(evidence)
        summary = {
            "scenario": scenario.name,
            "status": run_status(error),
            "error": None if error is None else (str(error) or type(error).__name__).splitlines()[0],
            "distorted": bool(distortion),
            "distortion_reasons": distortion,
            "target": self.target,
            "policy": ",".join(sorted({j.policy for j in scenario.jobs})),
            "iterations": sum(j.iterations for j in scenario.jobs),
            "wall_s": wall_s,
            "time_dilation": self.time_dilation,
            "packet_budget": self.budget.to_dict(self.time_dilation),
            "host_delay": {"by_role": host_delay, "round_trips": round_trip_summary(evidence.round_trip_delays)},
            **summary_mod.run_metrics(jobs, self.switch_stats, deltas, ps_ports,
                                      ina_frame_bytes(scenario.switch.lanes)),
            **figures,
            "jobs": jobs,
            "background": self._background_summary(),
            "stragglers": self._straggler_summary(records),
            "failures": self.fallbacks,
            "switches": self.switch_stats,
            "seed": scenario.seed,
            "scale": scenario.scale,
            "solver": {name: jp.notes.get("solver") for name, jp in policy.jobs.items()},
            "started": datetime.datetime.fromtimestamp(started).isoformat(timespec="seconds"),
            "run_id": self.run_id,
            "versions": package_versions(),
            "git_commit": git_commit(),
            "host": {"cpus": os.cpu_count(), "kernel": platform.release()},
        }
        summary_mod.write_iterations_csv(run_dir / "iterations.csv", scenario, records)
        self._write_iftop_tables()
        try:
            plots.plot_iterations(run_dir / "plots" / "iteration_time.png", scenario, records)
            if samples:
                events_path = run_dir / "events.jsonl"
                events = [json.loads(line) for line in events_path.read_text().splitlines()] \
                    if events_path.exists() else []
                plots.plot_link_rates(run_dir / "plots" / "ps_ingress_rate.png", f"{scenario.name}: PS ingress",
                                      samples, {f"to {p}": (p, "tx_bytes") for p in ps_ports}, events,
                                      t0=self.start_epoch)
                plots.plot_link_rates(run_dir / "plots" / "worker_send_rate.png",
                                      f"{scenario.name}: what each worker sends (frames)", samples,
                                      {f"{w} ({job.name})": (self._host_port(w), "rx_bytes")
                                       for job in scenario.jobs for w in job.workers}, events, t0=self.start_epoch)
            stat_path = run_dir / "switch_stats.jsonl"
            if stat_path.exists():
                plots.plot_aggregation_rates(run_dir / "plots" / "aggregation_rate.png",
                                             f"{scenario.name}: aggregation throughput",
                                             self._virtual(counters.load_counter_samples(stat_path)),
                                             [sw.name for sw in scenario.topology.programmable_switches()],
                                             4 * scenario.switch.lanes, self.start_epoch)
        except Exception as exc:  # noqa: BLE001 - a plot must not lose the run's numbers
            summary["plot_error"] = str(exc)
        summary_mod.write_summary(run_dir, summary)
        return RunResult(run_dir, summary)

    def _host_delay(self) -> dict:
        """Per role (worker, ps, ring, rina, switch), how long packets waited for their process and how late
        timed sends left, in virtual seconds (testbed/metrics/host_delay.py)."""
        processes = []
        for name, (_, _, role) in self.agents.items():
            path = host_delay_path(self.run_dir, name)
            if path.exists():
                processes.append((role, json.loads(path.read_text())))
        processes += [("switch", summary) for summary in self.switch_host_delay.values()]
        return by_role(processes, self.time_dilation)

    def _virtual(self, samples: list) -> list:
        """Samples timestamped (``t``) on the wall clock, in virtual time."""
        return dilation.virtual_samples(samples, self.start_epoch, self.time_dilation)

    def _background_summary(self):
        if not self.scenario.background or self.start_epoch is None:
            return []
        end = self.end_epoch or time.time()
        records, sink_records, windows = {}, {}, {}
        elapsed_s = (end - self.start_epoch) / self.time_dilation     # virtual, as the flow records become

        def rows_of(pattern):
            return [dilation.virtual_record(json.loads(line), self.time_dilation)
                    for path in (self.run_dir / "background").glob(pattern)
                    for line in path.read_text().splitlines() if line.strip()]

        for index, spec in enumerate(self.scenario.background):
            window = spec.duration_s or max(0.0, elapsed_s - spec.start_s)
            # Count only flows planned to start inside the window the run lasted.
            records[index] = [r for r in rows_of(f"bg{index}-source-*.jsonl") if r["start_s"] < spec.start_s + window]
            sink_records[index] = rows_of(f"bg{index}-sink-*.jsonl")
            windows[index] = window
        return background.summarise(self.scenario, records, windows, sink_records)

    def _straggler_summary(self, records):
        spec = self.scenario.stragglers
        if not (spec.compute_delays or spec.injections or spec.heterogeneous_links):
            return {}
        delays = {}
        for job in self.scenario.jobs:
            for w in job.workers:
                for r in records.get(w, []):
                    if r.get("straggler_delay_s") and self.events is not None:
                        # Records are in virtual time: t_start is the virtual clock's epoch reading.
                        self.events.write("compute_delay", w, t_s=r["t_start"] - self.start_epoch,
                                          iteration=r["iteration"],
                                          delay_s=r["straggler_delay_s"])
                values = [r.get("straggler_delay_s", 0.0) for r in records.get(w, [])]
                if values:
                    delays[w] = {"mean_s": sum(values) / len(values), "max_s": max(values)}
        topo = self.scenario.topology
        return {"compute_delay_by_worker": delays,
                "injections": [{"kind": i.kind, "target": list(i.target), "at_s": i.at_s,
                                "duration_s": i.duration_s, "rate_bps": i.rate_bps or None}
                               for i in spec.injections],
                "injection_errors": self.injections.errors if self.injections else [],
                "host_link_rates_bps": {h.name: topo.host_link(h.name).rate_bps for h in topo.hosts()}
                if spec.heterogeneous_links else {}}

    def _write_iftop_tables(self):
        topo = self.scenario.topology
        for host, (_, samples_path) in self.meters.items():
            if samples_path.exists():
                samples = dilation.virtual_pairs(load_samples(samples_path), self.start_epoch, self.time_dilation)
                if samples:
                    table = format_iftop_table(samples, f"{host}-eth0", local_ip=topo.addresses(host))
                    write_text_atomic(self.run_dir / "iftop" / f"{host}.txt", table + "\n")


def run_scenario(scenario, out_root="results", target=None, stream=sys.stderr, plan=None) -> RunResult:
    """Plan ``scenario`` on ``target`` (:func:`testbed.plan.make_plan`; or run the ``plan`` given, made
    once by the caller), validate the environment, then run it; returns the run directory and summary."""
    plan = plan or make_plan(scenario, target)
    preflight()
    return Run(plan, Path(out_root), stream).execute()
