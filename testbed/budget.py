"""The packet budget of a scenario on this machine, and the time dilation that keeps a run inside it.

At 1/1000 scale a 100 Gb/s link is 100 Mb/s, about 37k INA frames/s:
beyond what a Python or bmv2 switch moves on 2 cores, and a run whose
switches or agents cannot keep up measures the machine, not the scheme.
:func:`packet_budget` predicts each switch's and agent's packet rate while
its job communicates (the flow-level model's rates) and weighs them against
what each process moves per second in a run and what the machine's cores
move together (:class:`PacketBudget`); ``time_dilation: auto`` takes the
smallest whole N that fits (testbed/dilation.py runs the emulation N times
slower), and ``inatb validate`` prints that N, the budget that binds and the
expected wall time, and warns when an explicit N does not fit. The
prediction errs on the slow side (every worker at its job's rate at once);
what a run measured decides its ``distorted`` mark.

What a packet costs depends on the machine: the reference costs
(``PACKET_COST_CURVES``) were measured on one, and a slower one runs the
same plan busier. ``benchmarks/bench_packet_costs.py --calibrate`` measures
this machine's and keeps them (:func:`packet_costs_path`, keyed by the CPU
model and core count, :func:`machine_id`); :func:`load_packet_costs` gives
the planner this machine's costs where they were measured, else the
reference, and says which (``inatb validate``, the summary's
``packet_budget``).
"""

import datetime
import json
import math
import os
import shutil
import statistics
from dataclasses import dataclass
from pathlib import Path

from testbed.atomic_io import write_text_atomic
from testbed.cache import cache_dir

from testbed.dilation import network_scenario
from testbed.scenario import AUTO_DILATION, require_emulable

#: Packets/s per switch that keep a run link-bound (README "Switch speed, side by side",
#: benchmarks/bench_pyswitch.py): a pyswitch process alone takes ~34k contributions/s and forwards ~104k
#: packets/s without loss on a core of its own, but in a run it shares two cores with the agents and the
#: other switches; bmv2 (simple_switch 1.15.5, logging macros off) takes ~2.5k contributions/s and
#: forwards ~19k packets/s without loss, so its budget is its lossless aggregation rate.
TARGET_BUDGET_PPS = {"pyswitch": 20000.0, "bmv2": 2500.0}
#: Packets/s (sent plus received) one worker or PS agent keeps up with in a run.
AGENT_BUDGET_PPS = 20000.0
#: What a packet costs a process, as packets per CPU-second, by the packet rate the planner predicts for it
#: (packets per wall second while its job communicates, time dilation included): points (wall packets/s,
#: packets per CPU-second), log-linear between them, the nearest point's cost beyond them. A process that
#: sleeps between packets wakes for each one (a context switch and an epoll or select round); at higher
#: rates one wake-up serves several, so the slower packets come, the dearer each is, down to a floor where
#: every packet wakes its process. Measured on the quickstart at 1/1000 (`benchmarks/bench_packet_costs.py
#: --time-dilation 8,16,32,64`: CPU seconds of a 25-iteration run less a 5-iteration one, less the idling
#: charged apart below, per packet handled): the pyswitch switch 42.7k at 23.3k packets/s (N = 8), 30.3k,
#: 28.1k and 26.5k at 11.6k, 5.8k and 2.9k (N = 16, 32, 64: the floor, their median 28.1k at 11.6k);
#: workers 48.6k at 9.3k, 38.6k, 31.6k and 36.3k below (floor 36.3k at 4.65k); the PS 39.6k at 9.3k,
#: 30.8k, 33.1k and 35.2k below (floor 33.1k at 4.65k). bmv2: one point, 6.9k at 2.5k packets/s (N = 75,
#: idling not taken off), its cost at every rate. Costs are kept at the fastest point's above it (no more
#: batching is assumed than was measured).
PACKET_COST_CURVES = {
    "pyswitch": ((11_600.0, 28_100.0), (23_300.0, 42_700.0)),
    "bmv2": ((2_500.0, 6_900.0),),
    "worker": ((4_650.0, 36_300.0), (9_300.0, 48_600.0)),
    "ps": ((4_650.0, 33_100.0), (9_300.0, 39_600.0)),
}
#: Where the reference costs come from, as the planner reports it.
REFERENCE_COSTS = ("reference costs (measured on another machine; `sudo .venv/bin/python "
                   "benchmarks/bench_packet_costs.py --time-dilation 8,16,32,64 --calibrate` measures this one's)")
PACKET_COSTS_FORMAT_VERSION = 1
#: The share of the machine's cores the switches and agents may keep busy together; the rest is the kernel's
#: work outside their system calls (htb's timers, softirqs), the run's monitors, and the slack a machine
#: needs before processes queue for a core and every packet costs more. Measured on InArt's 54-server
#: fat-tree with VGG19 (`inatb run scenarios/papers/inart/emulation.yaml --target pyswitch --set
#: jobs.0.model=vgg19 --set time_dilation=N`): planned at 77% of the cores (N = 14) the machine ran 93%
#: busy (distorted: processes 1.56 cores, the rest 0.31); at 69% (N = 16) 64%, at 66% (N = 17) 58%, the
#: rest 0.03-0.04 cores, communication the same 1.30 s at all three.
USABLE_CORE_SHARE = 0.7
#: What a switch or agent process costs while no packet moves (its select timeouts, the agents' clocks), in
#: cores: InArt's 54-server fat-tree (45 pyswitch processes, 54 agents) with every agent computing and no
#: packet in flight measured 0.0028 per switch and 0.0029 per agent (`inatb run
#: scenarios/papers/inart/emulation.yaml --target pyswitch --set jobs.0.model=resnet50 --set scale=0.00001
#: --set time_dilation=1 --set jobs.0.compute_time=4s`, the summary's cpu). Negligible on GOAT's 12
#: processes; on that fat-tree 0.3 cores, without which auto's N left its VGG19 and LSTM runs CPU-bound.
PROCESS_IDLE_CORES = 0.003
#: The least of the machine the packets' work is planned on, however many processes idle.
MIN_WORKING_CORE_SHARE = 0.05


def packets_per_cpu_s(curve, wall_pps: float) -> float:
    """What one of ``PACKET_COST_CURVES`` gives a process that handles ``wall_pps`` packets per wall second:
    log-linear between the curve's points, the nearest point's cost outside them."""
    (low_pps, low_cost), (high_pps, high_cost) = curve[0], curve[-1]
    if wall_pps <= low_pps:
        return low_cost
    if wall_pps >= high_pps:
        return high_cost
    for (r0, c0), (r1, c1) in zip(curve, curve[1:]):
        if wall_pps <= r1:
            return c0 + (c1 - c0) * math.log(wall_pps / r0) / math.log(r1 / r0)
    raise AssertionError("unreachable: wall_pps is inside the curve")


def curve_from_points(points) -> tuple:
    """A curve as ``PACKET_COST_CURVES`` holds them from (packets per wall second, packets per CPU-second)
    measured at several time dilations: the fastest point and, below it, the floor: the median cost of the
    slower points, at the fastest of their rates. One point is its own curve."""
    points = sorted(((float(r), float(c)) for r, c in points), reverse=True)
    if not points:
        raise ValueError("no measured point")
    if len(points) == 1:
        return (points[0],)
    slower = points[1:]
    return ((slower[0][0], statistics.median(c for _, c in slower)), points[0])


def packet_costs_path() -> Path:
    """This machine's measured packet costs: ``$INATB_PACKET_COSTS``, else
    ``$XDG_CACHE_HOME/inatb/packet_costs.json`` (``~/.cache`` without it)."""
    if os.environ.get("INATB_PACKET_COSTS"):
        return Path(os.environ["INATB_PACKET_COSTS"])
    return cache_dir() / "packet_costs.json"


def machine_id() -> str:
    """The CPU model and core count: what packet costs measured on one machine hold for."""
    model = "unknown CPU"
    try:
        with open("/proc/cpuinfo") as cpuinfo:
            model = next((line.split(":", 1)[1].strip() for line in cpuinfo if line.startswith("model name")), model)
    except OSError:
        pass
    return f"{model} x {os.cpu_count() or 1}"


@dataclass(frozen=True)
class PacketCosts:
    """The per-packet costs the planner uses: role -> curve (``PACKET_COST_CURVES``' form), and where from."""
    curves: dict
    source: str


#: The reference costs, as the planner uses them where this machine's were not measured.
REFERENCE_PACKET_COSTS = PacketCosts(PACKET_COST_CURVES, REFERENCE_COSTS)


def _read_packet_costs(path: Path) -> dict:
    """A packet-costs file (:func:`write_packet_costs`), its curves as tuples; ValueError says what is wrong."""
    try:
        doc = json.loads(path.read_text())
        if doc.get("version") != PACKET_COSTS_FORMAT_VERSION:
            raise ValueError(f"version {doc.get('version')!r}, expected {PACKET_COSTS_FORMAT_VERSION}")
        curves = {}
        for role, curve in doc["curves"].items():
            if role not in PACKET_COST_CURVES:
                raise ValueError(f"unknown role {role!r}")
            curves[role] = tuple((float(r), float(c)) for r, c in curve)
            if not curves[role] or any(r <= 0 or c <= 0 for r, c in curves[role]) or \
                    list(curves[role]) != sorted(curves[role]):
                raise ValueError(f"{role}: expected (packets/s, packets per CPU-second) pairs, positive, by rate")
        return {"machine": str(doc["machine"]), "measured": str(doc.get("measured", "?")), "curves": curves}
    except (OSError, KeyError, TypeError, AttributeError) as exc:
        raise ValueError(exc) from None


def load_packet_costs(path=None) -> PacketCosts:
    """This machine's measured costs (:func:`packet_costs_path`) for the roles measured, the reference for
    the others; the reference alone when none were measured here (another machine's file, or an unreadable
    one, is named in ``source``)."""
    path = Path(path) if path else packet_costs_path()
    if not path.exists():
        return REFERENCE_PACKET_COSTS
    try:
        doc = _read_packet_costs(path)
    except ValueError as exc:
        return PacketCosts(PACKET_COST_CURVES, f"{REFERENCE_COSTS}; {path} is unreadable: {exc}")
    if doc["machine"] != machine_id():
        return PacketCosts(PACKET_COST_CURVES, f"{REFERENCE_COSTS}; {path} holds {doc['machine']}'s")
    return PacketCosts({**PACKET_COST_CURVES, **doc["curves"]},
                       f"measured on this machine ({', '.join(sorted(doc['curves']))}; {doc['measured']})")


def write_packet_costs(points_by_role: dict, path=None) -> Path:
    """Keep this machine's costs, role -> measured (packets per wall second, packets per CPU-second) points
    (:func:`curve_from_points`), beside the roles measured here before (another machine's or an unreadable
    file is replaced)."""
    path = Path(path) if path else packet_costs_path()
    curves = {}
    if path.exists():
        try:
            old = _read_packet_costs(path)
            curves = old["curves"] if old["machine"] == machine_id() else {}
        except ValueError:
            pass
    curves = {**curves, **{role: curve_from_points(points) for role, points in points_by_role.items()}}
    path.parent.mkdir(parents=True, exist_ok=True)
    doc = {"version": PACKET_COSTS_FORMAT_VERSION, "machine": machine_id(),
           "measured": datetime.date.today().isoformat(),
           "curves": {role: [list(point) for point in curve] for role, curve in curves.items()}}
    return write_text_atomic(path, json.dumps(doc, indent=2, sort_keys=True) + "\n")


def resolve_target(requested: str) -> str:
    """The target a run uses: ``auto`` is bmv2 where simple_switch and p4c are on PATH, else pyswitch.
    One rule for ``inatb run`` and ``inatb validate`` (which budgets the target it resolves)."""
    if requested != "auto":
        return requested
    return "bmv2" if shutil.which("simple_switch") and shutil.which("p4c") else "pyswitch"


@dataclass
class PacketBudget:
    """What a scenario asks of this machine's CPU, and the time dilation that keeps it link-bound.

    ``switch_pps`` and ``agent_pps``: packets per second each switch takes in and each worker or PS agent
    sends plus receives while its job communicates, at time dilation 1 (the fluid model's rates,
    :func:`testbed.sim.node_packet_rates`); ``ps_names``: which agents are parameter servers (the rest are
    workers). Time dilation N divides the rates by N. Three budgets bound them: the busiest switch at most
    its target's ``TARGET_BUDGET_PPS``, every agent at most ``AGENT_BUDGET_PPS``, and all of them together
    at most ``USABLE_CORE_SHARE`` of the machine's cores less ``PROCESS_IDLE_CORES`` per process (whatever
    N), each packet costing a core's share by its process's curve (``costs``: this machine's where measured,
    else ``PACKET_COST_CURVES``) at the rate it sees at N.
    """
    target: str
    cores: int
    switch_pps: dict
    agent_pps: dict
    ps_names: frozenset = frozenset()
    costs: PacketCosts = REFERENCE_PACKET_COSTS

    def cores_busy(self, factor: float) -> float:
        """The cores the packets keep busy at time dilation ``factor``."""
        def work(pps, curve):
            return (pps / factor) / packets_per_cpu_s(curve, pps / factor)
        curves = self.costs.curves
        return sum(work(pps, curves[self.target]) for pps in self.switch_pps.values()) + \
            sum(work(pps, curves["ps" if name in self.ps_names else "worker"])
                for name, pps in self.agent_pps.items())

    def working_cores(self) -> float:
        """The cores the packets' work is planned on: the usable share less every process's idling."""
        idle = (len(self.switch_pps) + len(self.agent_pps)) * PROCESS_IDLE_CORES
        return max(USABLE_CORE_SHARE * self.cores - idle, MIN_WORKING_CORE_SHARE * self.cores)

    def machine_needs(self) -> float:
        """The smallest time dilation (>= 1) at which the packets' work fits the working cores. The work
        falls as N grows (the rate falls by N, a packet's cost rises less), so bisection finds it."""
        working = self.working_cores()
        if self.cores_busy(1.0) <= working:
            return 1.0
        low, high = 1.0, 2.0
        while self.cores_busy(high) > working:
            low, high = high, high * 2
        while high - low > 1e-6 * high:
            middle = (low + high) / 2
            low, high = (middle, high) if self.cores_busy(middle) > working else (low, middle)
        return high

    def needs(self) -> dict:
        """Each budget (as a phrase) -> the time dilation it alone needs."""
        needs = {}
        if self.switch_pps:
            sw = max(self.switch_pps, key=self.switch_pps.get)
            needs[f"switch {sw} ({self.switch_pps[sw]:,.0f} packets/s at time dilation 1, {self.target} budget "
                  f"{TARGET_BUDGET_PPS[self.target]:,.0f}/s)"] = self.switch_pps[sw] / TARGET_BUDGET_PPS[self.target]
        if self.agent_pps:
            agent = max(self.agent_pps, key=self.agent_pps.get)
            needs[f"agent {agent} ({self.agent_pps[agent]:,.0f} packets/s at time dilation 1, budget "
                  f"{AGENT_BUDGET_PPS:,.0f}/s)"] = self.agent_pps[agent] / AGENT_BUDGET_PPS
        processes = len(self.switch_pps) + len(self.agent_pps)
        needs[f"the machine ({self.cores_busy(1.0):.1f} cores' work at time dilation 1 and {processes} processes "
              f"idling on {processes * PROCESS_IDLE_CORES:.2f}, {USABLE_CORE_SHARE:.0%} of {self.cores} cores "
              f"usable)"] = self.machine_needs()
        return needs

    def needed(self) -> float:
        """The smallest time dilation (>= 1) inside every budget."""
        return max([1.0, *self.needs().values()])

    def auto_factor(self) -> float:
        """``time_dilation: auto``: the smallest whole N inside every budget."""
        return float(math.ceil(self.needed() - 1e-9))

    def binding(self) -> str:
        needs = self.needs()
        return max(needs, key=needs.get)

    def warnings(self, factor: float) -> list:
        """One line per budget that time dilation ``factor`` leaves exceeded."""
        return [f"{what} needs time dilation {need:.2f}, the run uses {factor:g}: its figures would be CPU-bound; "
                f"set time_dilation (auto picks the smallest that fits) or lower scale"
                for what, need in self.needs().items() if need > factor * (1 + 1e-9)]

    def to_dict(self, factor: float) -> dict:
        return {"target": self.target, "cores": self.cores, "time_dilation": factor,
                "needed_time_dilation": round(self.needed(), 2), "binding": self.binding(),
                "switch_pps": {k: round(v) for k, v in sorted(self.switch_pps.items())},
                "agent_pps": {k: round(v) for k, v in sorted(self.agent_pps.items())},
                "packet_costs": self.costs.source, "warnings": self.warnings(factor)}


def packet_budget(scenario, target: str, policy=None, cores: int = None) -> PacketBudget:
    """The scenario's :class:`PacketBudget` on ``target`` (``auto`` resolved as ``inatb run`` does) under
    ``policy`` (computed when not given), on ``cores`` (this machine's by default)."""
    from testbed import sim
    from testbed.policy import compute_policy
    rates = sim.node_packet_rates(scenario, policy or compute_policy(scenario))
    ps_names = frozenset(h for job in scenario.jobs for h in job.ps)
    agents = ps_names | {w for job in scenario.jobs for w in job.workers}
    return PacketBudget(resolve_target(target), cores or os.cpu_count() or 1,
                        {n: pps for n, pps in rates.items() if scenario.topology.nodes[n].kind == "switch"},
                        {n: pps for n, pps in rates.items() if n in agents}, ps_names, load_packet_costs())


def dilation_factor(scenario, budget: PacketBudget) -> float:
    """The N a run uses: the scenario's number, or the budget's for ``auto``."""
    if scenario.time_dilation == AUTO_DILATION:
        return budget.auto_factor()
    return float(scenario.time_dilation)


def plan_run(scenario, target: str, policy=None) -> tuple:
    """What a run of ``scenario`` on ``target`` uses, for ``inatb run`` and ``inatb validate`` alike:
    (its policy, computed when not given; its :class:`PacketBudget`; its time dilation N). Under N > 1 the
    slowed world's links must be shapeable too (``require_emulable`` of ``dilation.network_scenario``)."""
    from testbed.policy import compute_policy
    policy = policy or compute_policy(scenario)
    budget = packet_budget(scenario, target, policy)
    factor = dilation_factor(scenario, budget)
    if factor != 1:
        require_emulable(network_scenario(scenario, factor))
    return policy, budget, factor


def expected_wall_s(scenario, simulation: dict, factor: float) -> float:
    """The wall time a run's iterations take at dilation ``factor``, from the simulator's communication times
    (``sim.evaluate``): per job its start plus, per iteration, compute time, mean straggler delay and
    communication (a persistent delay: the job's slowest worker's); the slowest job, times ``factor``. Set-up
    and teardown come on top."""
    longest = 0.0
    for job in scenario.jobs:
        delays = [d for d in scenario.stragglers.compute_delays if set(d.workers) & set(job.workers)]
        delay_s = max((max(d.persistent_s[w] for w in job.workers if w in d.persistent_s) if d.persistent_s
                       else d.value_s if d.distribution == "fixed" else d.mean_s if d.distribution == "normal"
                       else (d.low_s + d.high_s) / 2 for d in delays), default=0.0)
        comm_s = simulation["jobs"][job.name].get("comm_time_s") or 0.0
        longest = max(longest, job.start_s + job.iterations * (job.compute_time_s + delay_s + comm_s))
    return longest * factor
