"""Launching a run's processes in their hosts: the agents, the PS interface meters, the packet captures and
the background flow generators.

The command lines are built apart from running them (``*_argv``, pure, unit-tested); :class:`Launcher`
starts each in its host's namespace with its output in the run's ``logs/``, records its pid in the run's
state (so that teardown and ``inatb cleanup`` find it even after a crash), waits until the processes say
they are ready, and stops them all at the end. What to start comes from the plan; when to start it is the
orchestrator's (:mod:`testbed.emulation.orchestrator`).
"""

import json
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from testbed import dilation
from testbed.emulation import background
from testbed.emulation.network import rto_min_route_argv, run_in
from testbed.emulation.nodes import log_tail
from testbed.emulation.state import stop_processes
from testbed.errors import EmulationError
from testbed.metrics.pcap import PCAP_GLOBAL_HEADER, PCAP_SNAP_BYTES, interface_node
from testbed.provenance import PROJECT_ROOT
from testbed.traffic import dctcp_bpf

AGENT_MARKER = "testbed.agents.run"
METER_MARKER = "testbed.metrics.iftop"
FLOWGEN_MARKER = "testbed.traffic.flowgen"
CAPTURE_MARKER = "testbed.metrics.pcap"
#: How long the agents and meters may take to say they are ready (wall seconds) ...
READY_TIMEOUT_S = 30.0
#: ... and more for each worker of a training job, which loads PyTorch and its model first: its CPU seconds,
#: over the machine's cores (PyTorch's import measured at 1.4-1.8 s of CPU; twice that for a busy machine).
TRAINING_SET_UP_CPU_S = 3.5


def agents_ready_timeout_s(plan) -> float:
    """How long the agents of ``plan`` (:class:`testbed.plan.RunPlan`) may take to say they are ready."""
    training_workers = sum(len(job.workers) for job in plan.scenario.jobs if job.training)
    return READY_TIMEOUT_S + TRAINING_SET_UP_CPU_S * training_workers / max(1, plan.budget.cores)
#: The meters' sample interval (wall seconds).
METER_INTERVAL_S = 1.0
#: How often a readiness wait looks again (wall seconds).
READY_POLL_S = 0.02


def agent_argv(run_dir: Path, name: str) -> list:
    """The command line of agent ``name``: its config is ``agents/<name>.json`` in the run directory."""
    return [sys.executable, "-I", "-m", AGENT_MARKER, str(Path(run_dir) / "agents" / f"{name}.json")]


def meter_argv(host: str, samples_path: Path) -> list:
    """The command line of the iftop-style meter of ``host``'s interface, writing ``samples_path``."""
    return [sys.executable, "-I", "-m", METER_MARKER, "--iface", f"{host}-eth0", "--out", str(samples_path),
            "--interval-s", f"{METER_INTERVAL_S:g}"]


def capture_argv(interface: str, pcap_path: Path, max_bytes: int, snap_bytes: int = PCAP_SNAP_BYTES) -> list:
    """The command line of the packet capture of ``interface`` into ``pcap_path``, a file of at most
    ``max_bytes`` keeping ``snap_bytes`` of each frame."""
    return [sys.executable, "-I", "-m", CAPTURE_MARKER, "--iface", interface, "--out", str(pcap_path),
            "--snap-bytes", str(snap_bytes), "--max-bytes", str(max_bytes)]


def flowgen_argv(config_path: Path) -> list:
    """The command line of a background flow generator whose config is ``config_path``."""
    return [sys.executable, "-I", "-m", FLOWGEN_MARKER, str(config_path)]


@dataclass
class AgentProcess:
    proc: subprocess.Popen
    log: Path
    role: str


@dataclass
class FlowgenProcess:
    proc: subprocess.Popen
    log: Path
    role: str            # the flow generator's: ``<kind>-source`` or ``<kind>-sink``
    entry: int           # its ``background`` entry's index


class Launcher:
    """Starts and stops a run's processes in ``network``'s hosts, each recorded in ``state``
    (:class:`testbed.emulation.state.RunState`); ``say`` shows a line to the user."""

    def __init__(self, network, state, run_dir: Path, say):
        self.network = network
        self.state = state
        self.run_dir = Path(run_dir)
        self.say = say
        self.agents = {}     # name -> AgentProcess
        self.meters = {}     # host -> (Popen, samples path)
        self.captures = {}   # interface -> (Popen, pcap path)
        self.flowgens = {}   # name -> FlowgenProcess

    def popen(self, host_name: str, argv: list, log_path: Path, marker: str) -> subprocess.Popen:
        host = self.network.host(host_name)
        with open(log_path, "w") as log:
            proc = host.popen(argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                              cwd=str(PROJECT_ROOT))
        self.state.add_process(proc.pid, marker)
        return proc

    def start_meters(self, hosts) -> None:
        """An iftop-style meter on each of ``hosts``' interfaces, started once each has written a sample."""
        for host in hosts:
            samples = self.run_dir / "iftop" / f"{host}.jsonl"
            proc = self.popen(host, meter_argv(host, samples), self.run_dir / "logs" / f"iftop-{host}.log",
                              METER_MARKER)
            self.meters[host] = (proc, samples)
        self._wait_for_files("iftop meter", self.meters, 1, lambda host: f"iftop-{host}.log")

    def start_captures(self, interfaces, max_bytes: int) -> None:
        """A packet capture of each of ``interfaces`` into ``pcap/<interface>.pcap`` (at most ``max_bytes``
        each), run in the namespace of the interface's node, started once each has written its file header."""
        if not interfaces:
            return
        (self.run_dir / "pcap").mkdir(exist_ok=True)
        for interface in interfaces:
            path = self.run_dir / "pcap" / f"{interface}.pcap"
            proc = self.popen(interface_node(interface), capture_argv(interface, path, max_bytes),
                              self.run_dir / "logs" / f"pcap-{interface}.log", CAPTURE_MARKER)
            self.captures[interface] = (proc, path)
        self._wait_for_files("packet capture", self.captures, PCAP_GLOBAL_HEADER.size,
                             lambda interface: f"pcap-{interface}.log", tail_lines=1)
        self.say(f"pcap: capturing {', '.join(self.captures)} into {self.run_dir / 'pcap'} "
                 f"(at most {max_bytes / 1e6:g} MB each)")

    def _wait_for_files(self, what: str, started: dict, min_bytes: int, log_name, tail_lines: int = 15) -> None:
        """Until each process of ``started`` (name -> (Popen, the file it writes)) has written at least
        ``min_bytes`` of its file: one that exits first, or is not there by ``READY_TIMEOUT_S``, ends the run with
        the tail of its log (``logs/<log_name(name)>``)."""
        deadline = time.monotonic() + READY_TIMEOUT_S
        for name, (proc, path) in started.items():
            while not (path.exists() and path.stat().st_size >= min_bytes):
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise EmulationError(f"{what} on {name} did not start: "
                                         f"{log_tail(self.run_dir / 'logs' / log_name(name), lines=tail_lines)}")
                time.sleep(READY_POLL_S)

    def start_agents(self, agents) -> None:
        """Every agent of the plan in its host, the PSs first."""
        for agent in sorted(agents, key=lambda a: a.role != "ps"):
            log = self.run_dir / "logs" / f"{agent.name}.log"
            proc = self.popen(agent.host or agent.name, agent_argv(self.run_dir, agent.name), log, AGENT_MARKER)
            self.agents[agent.name] = AgentProcess(proc, log, agent.role)

    def wait_agents_ready(self, check, timeout_s: float = READY_TIMEOUT_S) -> None:
        """Until every agent has written ``agents/<name>.ready``, at most ``timeout_s``
        (:func:`agents_ready_timeout_s`); ``check()`` runs at each look (it raises when an agent died or the user
        interrupted)."""
        deadline = time.monotonic() + timeout_s
        agents_dir = self.run_dir / "agents"
        while not all((agents_dir / f"{name}.ready").exists() for name in self.agents):
            check()
            if time.monotonic() > deadline:
                missing = [n for n in self.agents if not (agents_dir / f"{n}.ready").exists()]
                raise EmulationError(f"agents not ready after {timeout_s:.0f}s: {', '.join(missing)}")
            time.sleep(READY_POLL_S)

    def start_background(self, world, start_epoch: float, substitutes: dict, time_dilation: float) -> None:
        """The background flow generators of ``world`` (the scenario at wall-clock rates), their flows
        planned from ``start_epoch``; ``substitutes``: the congestion controls the run provides as BPF."""
        if not world.background:
            return
        out_dir = self.run_dir / "background"
        out_dir.mkdir(exist_ok=True)
        for substitute in substitutes.values():
            if substitute.used not in dctcp_bpf.available():
                # recorded before it exists, as all the run creates: teardown and cleanup unregister it
                self.state.add_congestion_control(substitute.used)
                dctcp_bpf.register(substitute)
                self.say(f"background: {substitute.requested} runs as {substitute.used} (BPF, registered for "
                         f"this run: the kernel has no {substitute.requested})")
        configs = background.flowgen_configs(world, world.run_timeout_s, start_epoch, out_dir,
                                             {name: sub.used for name, sub in substitutes.items()})
        for host in background.ecn_senders(world):
            # A namespace's own sysctl: it goes with the namespace at teardown.
            run_in(self.network.host(host), ["sysctl", "-q", "-w", "net.ipv4.tcp_ecn=1"],
                   "asking for ECN on background TCP")
        if time_dilation != 1:
            # The kernel's minimum RTO, dilated on the routes the background hosts send over (their
            # namespaces go with them at teardown); what stays undilated: testbed/dilation.py.
            rto_min_ms = dilation.tcp_rto_min_ms(time_dilation)
            for host in background.tcp_hosts(world):
                run_in(self.network.host(host),
                       rto_min_route_argv(f"{host}-eth0", world.topology.node(host).ip, rto_min_ms),
                       "dilating the minimum TCP RTO")
        for index, host, name, config in configs:
            path = out_dir / f"{name}.json"
            path.write_text(json.dumps(config))
            log = self.run_dir / "logs" / f"{name}.log"
            self.flowgens[name] = FlowgenProcess(self.popen(host, flowgen_argv(path), log, FLOWGEN_MARKER), log,
                                                 config["role"], index)
        flows = sum(len(c.get("flows", [])) for _, _, _, c in configs)
        self.say(f"background: {len(configs)} flow generators, {flows} flows planned")

    def background_still_due(self, timed_entries) -> bool:
        """Some source of a background entry in ``timed_entries`` (those with their own duration) runs."""
        return any(f.proc.poll() is None for f in self.flowgens.values()
                   if f.role.endswith("source") and f.entry in timed_entries)

    def running_agents(self) -> list:
        return [name for name, agent in self.agents.items() if agent.proc.poll() is None]

    def stop_all(self) -> None:
        """Stop every process started, all signalled first so that they stop in parallel."""
        stop_processes([p for p, _ in self.meters.values()] + [a.proc for a in self.agents.values()] +
                       [f.proc for f in self.flowgens.values()] + [p for p, _ in self.captures.values()])
