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
model and core count, :func:`testbed.provenance.machine_id`); :func:`load_packet_costs` gives
the planner this machine's costs where they were measured, else the
reference, and says which (``inatb validate``, the summary's
``packet_budget``).

pyswitch switches may share a process (``switch.processes``; by default
the planner chooses, :func:`plan_switch_groups`): a packet one switch hands
another of its process finds the process awake and costs what a packet
costs a busy process, so fewer processes need less time dilation until one
process's packets no longer fit one switch's budget.
"""

import dataclasses
import datetime
import json
import math
import os
import shutil
import statistics
from dataclasses import dataclass
from pathlib import Path

import networkx as nx

from testbed.atomic_io import write_text_atomic
from testbed.cache import cache_dir
from testbed.calibration import Calibration, calibrated_curves, measure as measure_calibration

from testbed.metrics.cpu import available_cores
from testbed.metrics.rounds import job_rounds
from testbed.provenance import machine_id
from testbed.scenario import AUTO_DILATION, AUTO_PROCESSES, PER_SWITCH_PROCESSES, field_error
from testbed.stragglers import expected_slowest_delay_s

#: An ebpf switch is kernel work in the softirq of the frame's sender, no process (testbed/dataplane/ebpf): on a
#: 2-core AMD EPYC a TC-BPF aggregation at fan-in 4 absorbed 241k contributions/s end to end, about 1 us of BPF
#: each, and a sendmmsg sender through a TC redirect between namespaces delivered 180k packets/s (the ebpf
#: issue's measurements). On the reference machine (docs/reproductions/measurements.md, "Switch speed"): 348k
#: contributions/s and 281k forwarded packets/s without loss, the Python sender and the kernel's work on one
#: core (the sender the bound), so under 3 us of that core a packet. Its budget is half the EPYC's figure; a
#: packet costs the machine 4 us (250k per CPU-second) at any rate, and waits 20 us at a switch (the
#: quickstart's switch_wait: 6 us on average, 72 us at most).
EBPF_BUDGET_PPS = 120000.0
EBPF_PACKETS_PER_CPU_S = 250_000.0
EBPF_VISIT_WAIT_S = 20e-6
#: A windowed job's receiver on ebpf waits this many agent visits (:meth:`PacketBudget.visit_wait_s`) a round trip:
#: no switch process paces the frames, so its window comes from every sender at once, and it waits behind the
#: burst. Measured on GOAT's testbed at 1/1000 (`inatb run scenarios/papers/goat/testbed-1000.yaml --target ebpf
#: --set time_dilation=N`, the summary's ``host_delay``) on a 2-core AMD EPYC: the PS's wait a round trip was 0.6
#: to 3.7 ms of wall time at N = 6 (2 to 10 times the visit planned) while the run's iftop meter woke in the PS's
#: system call for each RESULT it sent and the PS merged every aggregate; without either, 0.10 to 0.14 ms at
#: N = 6, 0.20 to 0.26 at 5, 0.34 to 0.59 at 4 and 0.77 to 0.85 at 3, none marked (at 2 the round trip waited
#: 0.69 of its window, marked). At twice the visit the round trips plan N = 4.76 there, the machine budget 6.
EBPF_RECEIVER_BURST = 2.0
#: What the packets an agent sends or takes cost the kernel on ebpf beyond the agents' curves (measured with a
#: pyswitch process at the other end of each packet's link) and the switches' ``EBPF_PACKETS_PER_CPU_S``, in
#: packets per CPU-second by the agent's packet rate (``PACKET_COST_CURVES``' form): the switches' work lands
#: in the agents' system calls, with the qdiscs and veths a packet passes on every hop, its delivery to each
#: socket it reaches and the wake-up of each process there (a RESULT's copies reach every worker), dearer a
#: packet the more often a process sleeps between them. Measured on a 2-core AMD EPYC, each process's CPU per
#: packet over its curve's, less its share of the switch visits, weighed by the roles' packets
#: (`benchmarks/bench_packet_costs.py --target ebpf --few 5 --many 65`): the quickstart at 1/1000 (4 workers,
#: one switch) at time dilation 8, 11.4 us a packet at 9.3k packets/s an agent (12.4 a worker's, 7.3 the
#: PS's); GOAT's testbed at 1/1000 (8 workers, three switches; `--scenario
#: scenarios/papers/goat/testbed-1000.yaml`) 5.9 us at 2.3k (N = 8), 3.6 at 4.65k (N = 4), 1.9 at 6.2k
#: (N = 3); InArt's 54-server fat-tree (`inatb run scenarios/papers/inart/emulation.yaml --target ebpf --set
#: time_dilation=10`, the summary's cpu against the plan: 1.82 cores of processes, marked at 97% of the
#: machine) 42 us at 394. The curve keeps the dearest above 2.3k packets/s (the quickstart's). Without it the
#: planner put that fat-tree at N = 7, where the machine ran 99% busy and the run was marked; with it at
#: N = 14, where it ran 71% busy on average and unmarked, every fidelity figure within its bounds (`inatb
#: fidelity scenarios/papers/inart/emulation.yaml --target ebpf`).
EBPF_AGENT_KERNEL_CURVE = ((394.0, 23_700.0), (2_325.0, 87_700.0))
#: Packets/s per switch that keep a run link-bound (docs/reproductions/measurements.md,
#: benchmarks/bench_pyswitch.py): a pyswitch process alone takes ~34k contributions/s and forwards ~104k
#: packets/s without loss on a core of its own, but in a run it shares two cores with the agents and the
#: other switches; bmv2 (simple_switch 1.15.5, logging macros off) takes ~2.5k contributions/s and
#: forwards ~19k packets/s without loss, so its budget is its lossless aggregation rate.
TARGET_BUDGET_PPS = {"pyswitch": 20000.0, "bmv2": 2500.0, "ebpf": EBPF_BUDGET_PPS}
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
    "ebpf": ((1_000.0, EBPF_PACKETS_PER_CPU_S),),
    "worker": ((4_650.0, 36_300.0), (9_300.0, 48_600.0)),
    "ps": ((4_650.0, 33_100.0), (9_300.0, 39_600.0)),
}
#: Where the reference costs come from, as the planner reports it.
REFERENCE_COSTS = ("reference costs (measured on another machine; `sudo .venv/bin/python "
                   "benchmarks/bench_packet_costs.py --time-dilation 8,16,32,64 --calibrate` measures this one's)")
PACKET_COSTS_FORMAT_VERSION = 1
#: ``INATB_PACKET_COSTS=reference``: plan with the reference costs, neither read nor calibrate this machine's.
REFERENCE_ONLY = "reference"
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
#: Past this share of the working cores busy a packet costs more than its curve says, by ``CONTENTION_SLOPE``
#: times the excess: many processes that each wake for a few packets queue for two cores, and each wake-up
#: finds another process's work in the core's caches and the scheduler busier. Measured on InArt's 54-server
#: fat-tree (45 switches in 2 pyswitch processes, 54 agents) with LSTM (`inatb reproduce inart --only
#: emulation-sweep`, the summary's ``cpu`` per process against the plan's curves) on a 2-core AMD EPYC: ATP
#: planned at 0.755 of the working cores (N = 7) took 1.17 times the planned CPU (the switches 1.27, the
#: workers 1.08); InArt planned at 0.94 (N = 15) 1.25 and 1.35 times it (the switches 1.17-1.25, the workers
#: 1.29-1.39, the PSs 1.7-1.9), the machine 88% and 94% busy, the second marked. Below the knee the excess
#: is within the slack ``USABLE_CORE_SHARE`` leaves; past it the multiplier grows from 1 to 1.15 at 0.94
#: (the worse run's 1.35 over 1.17). Planned so (N = 16), the homogeneous InArt run took 1.28 times the CPU planned
#: without contention and kept the machine 86% busy, not marked.
CONTENTION_KNEE_SHARE = 0.75
CONTENTION_SLOPE = 0.8
#: What a packet waits, in wall seconds, each time a process takes it in or a timer of it falls due (a
#: *visit*: testbed/metrics/host_delay.py), as a line in the planned share of the working cores busy:
#: ``VISIT_WAIT_IDLE_S + VISIT_WAIT_BUSY_S x utilisation`` (at most 1). Fitted to the mean waits of runs on
#: this project's reference machine (`inatb fidelity ... --target pyswitch`, the summary's
#: ``host_delay.by_role``): GOAT's fidelity scenario under ps (utilisation 0.13) 0.15-0.20 ms a visit, under
#: atp (0.50) 0.19-0.72 ms, Rina's testbed under rar (0.95) 0.35-0.46 ms.
VISIT_WAIT_IDLE_S = 0.15e-3
VISIT_WAIT_BUSY_S = 0.3e-3
#: ... times ``(1 - VISIT_WAIT_KNEE_SHARE) / (1 - utilisation)`` past this share (utilisation at most
#: ``VISIT_WAIT_MAX_UTILISATION``): near a full machine processes queue for a core, and a visit's wait grows as a
#: queue's does rather than along the line. Measured on GOAT's testbed at 1/1000 on ebpf (`inatb run
#: scenarios/papers/goat/testbed-1000.yaml --target ebpf --set time_dilation=N`, the agents the only processes) on
#: a 2-core AMD EPYC: planned at 0.93 of the working cores (N = 5) a round trip's three agent visits waited 0.26,
#: 0.40, 0.71 and 0.66 of its 2.69 ms window (marked past 0.40: 1.8 ms a visit in wall time where the line gives
#: 0.43), at 0.66 (N = 7) 0.04 (0.23 ms a visit). Past 0.75 the queue's factor is 3.6 at 0.93.
VISIT_WAIT_KNEE_SHARE = 0.75
VISIT_WAIT_MAX_UTILISATION = 0.99
#: What a packet waits inside a bmv2 switch, in wall seconds: a simple_switch takes packets in turn, so a
#: packet's wait from its receipt to its egress queue is a single-server queue's sojourn,
#: ``service / (1 - utilisation)``. The service is ``1 / BMV2_SERVICE_PPS`` (slower by this machine's slowness),
#: the utilisation the busier of the switch's rate over ``BMV2_SERVICE_PPS`` and the machine's planned busy
#: share (bmv2's threads queue for a core like any process), at most ``BMV2_MAX_UTILISATION``. Windows come in
#: bursts, so the queue grows well before the switch's budget rate: measured on GOAT's testbed at 1/1000
#: (`inatb fidelity scenarios/papers/goat/testbed-1000.yaml --target bmv2 --set time_dilation=N`, the switch's
#: ``receive_wait`` from its ``switch_wait`` register), s1 at 83.7k packets/s at N = 1: at N = 34 11 ms a
#: visit (a round trip waited 54% of its window, marked), at 37 8.1 and 12.1 ms (33%, 50%), at 40 3.2 and
#: 3.8 ms (12%, 15%), at 44 3.5 ms twice, at 50 0.84 ms, at 70 0.77 ms, at 100 0.50 ms; the formula gives 27
#: ms at 37, 4.8 at 40, 2.5 at 44, 1.6 at 50, 0.90 at 70 and 0.68 at 100.
BMV2_SERVICE_PPS = 2300.0
BMV2_MAX_UTILISATION = 0.999
#: ... times this for a ring's step that switches sum (Rina's racks): every member sends its chunk at once, so a ToR
#: takes the step's packets from all its links together and sums its rack's shards, besides its pulls and finished
#: chunks (a ring whose switches only forward waits little there: RAR on the same testbed at N = 3, 0.18 ms a visit).
#: Measured on Rina's testbed under rina, both ToRs programmable (`inatb run scenarios/papers/rina/testbed.yaml
#: --target bmv2 --set policy=rina --set topology.programmable=all --set jobs.0.iterations=4 --set time_dilation=N`),
#: each ToR at 9.1k packets/s at N = 1: at N = 5 15.7 ms a visit (a round trip waited 42% of its ring step, marked),
#: at 7 12.4 and 7.1 ms (24%, 14%), at 8 6.1 ms (10%), at 12 1.8 ms (2%), where the queue alone gives 2.1, 1.1, 0.85
#: and 0.65 ms, and twelve times it 25, 13, 10 and 7.8 ms: N = 8 is planned there on two cores.
BMV2_RING_STEP_BURST = 12.0
#: ... and this many times it at a switch that merges other switches' partial sums (ATP with ``levels: all``
#: or 2, Rina §III-B's chain): it takes the partials of all its children at once. Measured on
#: tests/emulation/test_atp_every_level.py's chain (t1, t2 -> a1 -> c1, ``levels: all``) at N = 6: the
#: switches' waits came to 1.5 ms a round trip in virtual time, twice the 0.75 ms planned without it, the
#: excess on the two merging switches: about four times a visit's sojourn at each.
BMV2_MERGE_BURST = 4.0
#: A pyswitch process's visit wait (:meth:`PacketBudget.visit_wait_s`) times this for a ring's step that switches
#: sum, as ``BMV2_RING_STEP_BURST`` for bmv2: the ToR's process takes its rack's chunks from all its links at
#: once, and past its rate the queue grows through the step. Measured on Rina's testbed under rina, both ToRs
#: programmable (`inatb run scenarios/papers/rina/testbed.yaml --target pyswitch --set policy=rina --set
#: jobs.0.iterations=6 --set metrics.warmup_iterations=1 --set time_dilation=N`, the summary's ``host_delay``) on
#: a 2-core AMD EPYC:
#: at N = 1 a switch visit waited 3.36 ms (a round trip 50% of its 30.1 ms ring step, marked), at N = 2 0.20 ms
#: (4%), at N = 3 0.10 ms (2%); the formula gives 0.46 ms at N = 1, so seven times it: N = 2 is planned.
PYSWITCH_RING_STEP_BURST = 7.0
#: ... and a switch that merges other switches' partial sums (ATP with ``levels: all`` or 2) this many times a
#: visit's wait once a round trip, as bmv2's (``BMV2_MERGE_BURST``): it takes its children's partials at once, and
#: the switches that share its process wait behind it. Measured on Rina's fat-tree k=4 with all 20 switches
#: aggregating in 2 processes, 4 of them merging (tests/emulation/test_fidelity.py's ATP case: VGG16, the PS at
#: h16, `inatb fidelity ... --set time_dilation=N`) on a 2-core AMD EPYC: a round trip's 10 switch visits waited
#: 48 ms in all at N = 4 (19% of the communication, marked, 1.36x the model's time), 41 ms at N = 5 (12-13%,
#: 1.16-1.21x), 26 ms at N = 6 (7%, 1.03x) and 14 ms at N = 8, about 100 times the formula's visit (0.44, 0.39,
#: 0.35 and 0.31 ms) where it is highest: 10 visits and 4 x 22.5 more.
PYSWITCH_MERGE_BURST = 23.5
#: The share of a job's round the planner lets its round trips wait for processes: well inside the detector's
#: limits (testbed.metrics.distortion: a third of a ring's step, 0.4 of a window), so that a run planned inside
#: them is not marked. At a quarter, H-AR on Rina's testbed was planned at N = 1 and waited 0.43 of its 14.5 ms
#: step in a full suite.
PLANNED_ROUND_SHARE = 0.2
#: ... and of a windowed job's communication time, below the detector's HOST_DELAY_COMM_SHARE (15%). Without it
#: ATP on Rina's testbed (15 ms of communication, 7 visits a round trip) was planned at N = 1 and waited 20-22%
#: of it; the quickstart (15 ms, 5 visits), planned at 11% here, waited 7%.
PLANNED_COMM_SHARE = 0.12
#: The planned share per part a round trip's wait is weighed against (testbed.metrics.rounds.JobRound.spans).
PLANNED_SHARES = {"ring step": PLANNED_ROUND_SHARE, "window": PLANNED_ROUND_SHARE, "communication": PLANNED_COMM_SHARE}
#: How a warning says that a job's round trips would wait too long for processes.
LATENCY_BOUND = "bound by the processes' delay"


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


def contention_at(utilisation: float) -> float:
    """How much dearer a packet is than its curve says with ``utilisation`` of the working cores busy: 1 up to
    ``CONTENTION_KNEE_SHARE``, then ``CONTENTION_SLOPE`` times the excess more."""
    return 1.0 + CONTENTION_SLOPE * max(0.0, utilisation - CONTENTION_KNEE_SHARE)


def smallest_dilation(exceeds) -> float:
    """The smallest time dilation N >= 1 at which ``exceeds(N)`` (a budget exceeded at N) is false, for a budget
    whose demand falls as N grows: doubling until it fits, then bisection (to one part in a million)."""
    if not exceeds(1.0):
        return 1.0
    low, high = 1.0, 2.0
    while exceeds(high):
        low, high = high, high * 2
    while high - low > 1e-6 * high:
        middle = (low + high) / 2
        low, high = (middle, high) if exceeds(middle) else (low, middle)
    return high


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
    """This machine's packet costs: ``$INATB_PACKET_COSTS``, else ``$XDG_CACHE_HOME/inatb/packet_costs.json``
    (``~/.cache`` without it). ``INATB_PACKET_COSTS=reference`` plans with the reference costs alone
    (:func:`load_packet_costs`)."""
    if os.environ.get("INATB_PACKET_COSTS"):
        return Path(os.environ["INATB_PACKET_COSTS"])
    return cache_dir() / "packet_costs.json"


@dataclass(frozen=True)
class PacketCosts:
    """The per-packet costs the planner uses: role -> curve (``PACKET_COST_CURVES``' form), where from, and
    whether any curve was measured on this machine (else every one is the reference)."""
    curves: dict
    source: str
    measured_here: bool = False


#: The reference costs, as the planner uses them where this machine's were not measured.
REFERENCE_PACKET_COSTS = PacketCosts(PACKET_COST_CURVES, REFERENCE_COSTS)


def _read_packet_costs(path: Path) -> dict:
    """A packet-costs file (:func:`write_packet_costs`, :func:`write_calibration`): its machine, date, measured
    curves as tuples and calibration (a :class:`Calibration` or None); ValueError says what is wrong."""
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
        calibration = Calibration.from_dict(doc["calibration"]) if doc.get("calibration") else None
        if calibration is not None and (calibration.contributions_per_s <= 0 or calibration.wake_round_trip_s <= 0):
            raise ValueError("calibration: expected positive figures")
        return {"machine": str(doc["machine"]), "measured": str(doc.get("measured", "?")), "curves": curves,
                "calibration": calibration}
    except (OSError, KeyError, TypeError, AttributeError) as exc:
        raise ValueError(exc) from None


def _this_machines(path: Path):
    """``path``'s costs if they are this machine's, else None and why not (absent, unreadable, another's)."""
    if not path.exists():
        return None, None
    try:
        doc = _read_packet_costs(path)
    except ValueError as exc:
        return None, f"{path} is unreadable: {exc}"
    if doc["machine"] != machine_id():
        return None, f"{path} holds {doc['machine']}'s"
    return doc, None


def load_packet_costs(path=None, calibrate: bool = True) -> PacketCosts:
    """The costs the planner uses on this machine (:func:`packet_costs_path`): the curves measured here
    (benchmarks/bench_packet_costs.py --calibrate) for their roles, the reference scaled by this machine's
    calibration (testbed/calibration.py) for the others. A machine with neither (no file, another machine's,
    an unreadable one) is calibrated now, about four seconds, and the result kept in the file (without
    ``calibrate``: the reference, with why in ``source``). Without ``path``, ``INATB_PACKET_COSTS=reference``
    gives the reference."""
    if path is None and os.environ.get("INATB_PACKET_COSTS") == REFERENCE_ONLY:
        return REFERENCE_PACKET_COSTS
    path = Path(path) if path else packet_costs_path()
    doc, problem = _this_machines(path)
    if doc is None:
        if not calibrate:
            return PacketCosts(PACKET_COST_CURVES, REFERENCE_COSTS + (f"; {problem}" if problem else ""))
        calibration = measure_calibration()
        try:
            write_calibration(calibration, path)
        except OSError:
            pass        # unwritable cache: this command plans with it, the next calibrates again
        doc = {"curves": {}, "calibration": calibration, "measured": datetime.date.today().isoformat()}
    sources = []
    if doc["curves"]:
        sources.append(f"measured on this machine ({', '.join(sorted(doc['curves']))}; {doc['measured']})")
    base = PACKET_COST_CURVES
    if doc["calibration"] is not None:
        base = calibrated_curves(PACKET_COST_CURVES, doc["calibration"])
        sources.append(("the other roles " if doc["curves"] else "") + doc["calibration"].describe())
    elif doc["curves"]:
        sources.append("the reference for the other roles")
    return PacketCosts({**base, **doc["curves"]}, "; ".join(sources), measured_here=True)


def _write_doc(path: Path, curves: dict, calibration) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    doc = {"version": PACKET_COSTS_FORMAT_VERSION, "machine": machine_id(),
           "measured": datetime.date.today().isoformat(),
           "curves": {role: [list(point) for point in curve] for role, curve in curves.items()}}
    if calibration is not None:
        doc["calibration"] = calibration.to_dict()
    return write_text_atomic(path, json.dumps(doc, indent=2, sort_keys=True) + "\n")


def write_packet_costs(points_by_role: dict, path=None) -> Path:
    """Keep this machine's costs, role -> measured (packets per wall second, packets per CPU-second) points
    (:func:`curve_from_points`), beside the roles measured and the calibration made here before (another
    machine's or an unreadable file is replaced)."""
    path = Path(path) if path else packet_costs_path()
    old, _ = _this_machines(path)
    curves = {**(old["curves"] if old else {}),
              **{role: curve_from_points(points) for role, points in points_by_role.items()}}
    return _write_doc(path, curves, old["calibration"] if old else None)


def write_calibration(calibration, path=None) -> Path:
    """Keep this machine's calibration (testbed/calibration.py) beside the curves measured here before."""
    path = Path(path) if path else packet_costs_path()
    old, _ = _this_machines(path)
    return _write_doc(path, old["curves"] if old else {}, calibration)


def slowness(costs: PacketCosts, target: str) -> float:
    """How much dearer a packet that wakes ``target``'s switch process is under ``costs`` than on the
    reference (1 with the reference costs): the reference curve's slowest point's packets per CPU-second over
    ``costs``'."""
    return max(1.0, PACKET_COST_CURVES[target][0][1] / costs.curves[target][0][1])


def bmv2_installed() -> bool:
    """Whether bmv2 can run here: simple_switch and p4c on PATH."""
    return bool(shutil.which("simple_switch") and shutil.which("p4c"))


def resolve_target(requested: str) -> str:
    """The target a run uses: ``auto`` is bmv2 where simple_switch and p4c are on PATH, else pyswitch.
    One rule for ``inatb run`` and ``inatb validate`` (which budgets the target it resolves)."""
    return target_choice(requested)[0]


def target_choice(requested: str) -> tuple:
    """(the target a run uses, why, as a phrase). ``auto`` keeps to the P4 source where it can run it
    (bmv2), else its Python model; ebpf, the target with headroom, is chosen by name."""
    if requested != "auto":
        return requested, "as asked"
    if bmv2_installed():
        return "bmv2", "auto: simple_switch and p4c are on PATH"
    return "pyswitch", "auto: bmv2 is not installed"


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
    else ``PACKET_COST_CURVES``) at the rate it sees at N, and more past ``CONTENTION_KNEE_SHARE`` of them busy
    (:meth:`contention`).
    """
    target: str
    cores: int
    switch_pps: dict
    agent_pps: dict
    ps_names: frozenset = frozenset()
    costs: PacketCosts = REFERENCE_PACKET_COSTS
    #: The switches that share a process (:func:`switch_process_groups`); empty: each its own.
    switch_groups: tuple = ()
    #: Packets/s each switch sends to each neighbouring switch at time dilation 1, ``{(from, to): pps}``
    #: (:func:`testbed.sim.packet_rates`): those between two switches of one process wake no process.
    switch_link_pps: dict = dataclasses.field(default_factory=dict)
    #: Each job's round (testbed.metrics.rounds.JobRound): its round trips must wait for processes at most
    #: ``PLANNED_ROUND_SHARE`` of it (:meth:`latency_needs`).
    rounds: tuple = ()
    #: The cores each worker of a training job keeps busy with its real work at time dilation 1 (its
    #: measured CPU per iteration over its virtual iteration time: :func:`training_cores`); N divides it.
    training_cores: dict = dataclasses.field(default_factory=dict)

    def visit_wait_s(self, factor: float) -> float:
        """What a packet waits for a process at each visit, wall seconds, at time dilation ``factor``
        (``VISIT_WAIT_IDLE_S``, ``VISIT_WAIT_BUSY_S``; past ``VISIT_WAIT_KNEE_SHARE``, a queue's growth), slower
        by as much as this machine's measured packet costs are above the reference's."""
        utilisation = min(VISIT_WAIT_MAX_UTILISATION, self.utilisation(factor))
        queueing = max(1.0, (1 - VISIT_WAIT_KNEE_SHARE) / (1 - utilisation))
        return (VISIT_WAIT_IDLE_S + VISIT_WAIT_BUSY_S * utilisation) * queueing * self.slowness()

    def slowness(self) -> float:
        """How much dearer a switch packet is on this machine than on the reference (:func:`slowness`)."""
        return slowness(self.costs, self.target)

    def switch_visit_wait_s(self, factor: float, summed_steps: bool = False) -> float:
        """What a packet waits at each switch it crosses, wall seconds, at time dilation ``factor``: a pyswitch
        process's as any process's (:meth:`visit_wait_s`), ``PYSWITCH_RING_STEP_BURST`` times that in a ring's step
        that switches sum; a bmv2 switch's as a queue's sojourn, its service
        ``1 / BMV2_SERVICE_PPS`` and its utilisation the busier of the busiest switch's rate over that and the
        machine's planned busy share, ``BMV2_RING_STEP_BURST`` times that in a ring's step that switches sum
        (``summed_steps``; on every switch of the round trip, the ToRs that sum and the rest alike)."""
        if self.target == "ebpf":
            return EBPF_VISIT_WAIT_S
        if self.target != "bmv2":
            return self.visit_wait_s(factor) * (PYSWITCH_RING_STEP_BURST if summed_steps else 1.0)
        service_s = self.slowness() / BMV2_SERVICE_PPS
        switch_share = max(self.switch_process_pps().values(), default=0.0) / factor * service_s
        machine_share = self.utilisation(factor)
        sojourn_s = service_s / (1 - min(BMV2_MAX_UTILISATION, max(switch_share, machine_share)))
        return sojourn_s * (BMV2_RING_STEP_BURST if summed_steps else 1.0)

    def latency_needs(self) -> dict:
        """Each job (as a phrase) -> the time dilation its round trips need: the smallest N at which a round
        trip's visits (its sender's timer and the agents at both ends, :meth:`visit_wait_s`; each switch both
        ways, :meth:`switch_visit_wait_s`: testbed.metrics.rounds) wait at most ``PLANNED_ROUND_SHARE`` of its
        round in virtual time, and, for a windowed job, at most ``PLANNED_COMM_SHARE`` of its communication."""
        needs = {}
        for job_round in self.rounds:
            switch_visits = 2 * job_round.switch_hops
            limit_s, phrase = min((PLANNED_SHARES[part] * span_s,
                                   f"{PLANNED_SHARES[part]:.0%} of its {span_s * 1e3:.3g} ms {what}")
                                  for part, span_s, what in job_round.spans())

            summed = job_round.steps_summed_in_switches
            # switches that merge partial sums wait BMV2_MERGE_BURST (PYSWITCH_MERGE_BURST) times a visit once a
            # round trip
            burst = {"bmv2": BMV2_MERGE_BURST, "pyswitch": PYSWITCH_MERGE_BURST}.get(self.target, 1.0)
            merge_visits = job_round.merging_switches * (burst - 1)

            # on ebpf a windowed job's receiver takes its window's frames from every sender at once
            receiver_visits = EBPF_RECEIVER_BURST if self.target == "ebpf" and job_round.kind == "window" else 1.0

            def waits(factor):
                switch_wait_s = self.switch_visit_wait_s(factor, summed)
                return ((2 + receiver_visits) * self.visit_wait_s(factor)
                        + (switch_visits + merge_visits) * switch_wait_s) / factor > limit_s
            need = smallest_dilation(waits) if limit_s else 1.0
            visits = f"{3 + switch_visits} visits of {self.visit_wait_s(need) * 1e3:.2g} ms at {need:.3g}"
            if receiver_visits > 1:
                visits += f", the receiver's {receiver_visits:g} times that"
            if self.target == "pyswitch" and summed:
                visits += (f", the {switch_visits} at switches summing the ring's steps {PYSWITCH_RING_STEP_BURST:g} "
                           f"times that")
            if self.target == "pyswitch" and merge_visits:
                visits += (f", {job_round.merging_switches} merging partial sums {PYSWITCH_MERGE_BURST:g} times "
                           f"that once")
            if self.target == "bmv2":
                merging_note = (f" ({job_round.merging_switches} merging partial sums: {BMV2_MERGE_BURST:g} times "
                                f"the wait)" if job_round.merging_switches else "")
                visits = (f"3 visits of {self.visit_wait_s(need) * 1e3:.2g} ms and {switch_visits} of bmv2 "
                          f"switches{merging_note}, {self.switch_visit_wait_s(need, summed) * 1e3:.2g} ms, at "
                          f"{need:.3g}")
            needs[f"job {job_round.job}'s round trips ({visits}, {phrase})"] = need
        return needs

    def switch_process_pps(self) -> dict:
        """Each switch process (its switches' names, a tuple) -> the packets/s it takes in at time dilation 1:
        its switches' sum. A packet from one of its switches to another counts at both, as it costs both."""
        groups = self.switch_groups or tuple((name,) for name in self.switch_pps)
        return {group: sum(self.switch_pps.get(name, 0.0) for name in group) for group in groups}

    def handed_over_pps(self, group: tuple) -> float:
        """The packets/s at time dilation 1 that the switches of ``group`` send each other."""
        return sum(pps for (src, dst), pps in self.switch_link_pps.items() if src in group and dst in group)

    def cores_busy(self, factor: float) -> float:
        """The cores the packets keep busy at time dilation ``factor``: each packet at its process's curve at
        the process's rate, but a packet one switch hands to another of its process at the curve's fastest
        point: it finds the process awake (it sent it), as packets do when they come fast."""
        def work(pps, curve):
            return (pps / factor) / packets_per_cpu_s(curve, pps / factor)
        curves = self.costs.curves
        switch_curve = curves[self.target]
        busy = 0.0
        for group, pps in self.switch_process_pps().items():
            handed_over = self.handed_over_pps(group)
            busy += work(pps, switch_curve) * (1 - handed_over / pps) if pps else 0.0
            busy += (handed_over / factor) / switch_curve[-1][1]
        return busy + sum(work(pps, curves["ps" if name in self.ps_names else "worker"])
                          for name, pps in self.agent_pps.items()) + sum(self.training_cores.values()) / factor

    def agent_kernel_cores(self, factor: float) -> float:
        """The cores the kernel's work in the agents' system calls keeps busy at time dilation ``factor`` beyond
        :meth:`cores_busy` (ebpf only: ``EBPF_AGENT_KERNEL_CURVE`` at each agent's rate, scaled as a calibrated
        machine scales the switches' kernel work). The machine budget adds it to the contended work, the
        contention and the visits' waits being fitted against :meth:`utilisation` (the agents' curves and the
        switches' visits) without it; it was measured on busy machines, so its own contention is in it."""
        if self.target != "ebpf":
            return 0.0
        scale = PACKET_COST_CURVES["ebpf"][0][1] / self.costs.curves["ebpf"][0][1]
        return scale * sum((pps / factor) / packets_per_cpu_s(EBPF_AGENT_KERNEL_CURVE, pps / factor)
                           for pps in self.agent_pps.values())

    def processes(self) -> int:
        """The switch and agent processes of the run (an ebpf switch has none)."""
        switches = 0 if self.target == "ebpf" else len(self.switch_process_pps())
        return switches + len(self.agent_pps)

    def utilisation(self, factor: float) -> float:
        """The planned share of the working cores the packets keep busy at time dilation ``factor``
        (:meth:`cores_busy`, without contention): what visits wait by and contention grows with."""
        return self.cores_busy(factor) / self.working_cores()

    def contention(self, factor: float) -> float:
        """How much dearer a packet is than its curve says at time dilation ``factor`` (:func:`contention_at`)."""
        return contention_at(self.utilisation(factor))

    def contended_cores_busy(self, factor: float) -> float:
        """The cores the packets keep busy at time dilation ``factor`` with the contention of a busy machine
        (:meth:`cores_busy` times :meth:`contention`, the packets' work computed once): what the machine budget
        weighs."""
        utilisation = self.utilisation(factor)
        return utilisation * self.working_cores() * contention_at(utilisation)

    def working_cores(self) -> float:
        """The cores the packets' work is planned on: the usable share less every process's idling."""
        idle = self.processes() * PROCESS_IDLE_CORES
        return max(USABLE_CORE_SHARE * self.cores - idle, MIN_WORKING_CORE_SHARE * self.cores)

    def machine_needs(self) -> float:
        """The smallest time dilation (>= 1) at which the packets' work, contention included
        (:meth:`contended_cores_busy`), and the kernel's in the agents' system calls (:meth:`agent_kernel_cores`)
        fit the working cores. The work falls as N grows (the rate falls by N, a packet's cost rises less, and
        the contention with the work), so bisection finds it."""
        working = self.working_cores()
        return smallest_dilation(lambda factor: self.contended_cores_busy(factor) + self.agent_kernel_cores(factor)
                                 > working)

    def needs(self) -> dict:
        """Each budget (as a phrase) -> the time dilation it alone needs."""
        needs = {}
        process_pps = self.switch_process_pps()
        if process_pps:
            group = max(process_pps, key=process_pps.get)
            needs[f"{switch_process_phrase(group)} ({process_pps[group]:,.0f} packets/s at time dilation 1, "
                  f"{self.target} budget {TARGET_BUDGET_PPS[self.target]:,.0f}/s)"] = \
                process_pps[group] / TARGET_BUDGET_PPS[self.target]
        if self.agent_pps:
            agent = max(self.agent_pps, key=self.agent_pps.get)
            needs[f"agent {agent} ({self.agent_pps[agent]:,.0f} packets/s at time dilation 1, budget "
                  f"{AGENT_BUDGET_PPS:,.0f}/s)"] = self.agent_pps[agent] / AGENT_BUDGET_PPS
        processes = self.processes()
        training = f", {sum(self.training_cores.values()):.2f} of them training" if self.training_cores else ""
        kernel = self.agent_kernel_cores(1.0)
        kernel_phrase = f", {kernel:.1f} of them the kernel's in the agents' system calls" if kernel else ""
        needs[f"the machine ({self.cores_busy(1.0) + kernel:.1f} cores' work at time dilation 1{training}"
              f"{kernel_phrase} and {processes} processes "
              f"idling on {processes * PROCESS_IDLE_CORES:.2f}, {USABLE_CORE_SHARE:.0%} of {self.cores:g} cores "
              f"usable, dearer past {CONTENTION_KNEE_SHARE:.0%} of that busy)"] = self.machine_needs()
        needs.update(self.latency_needs())
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
        latency = self.latency_needs()
        return [f"{what} needs time dilation {need:.2f}, the run uses {factor:g}: its figures would be "
                f"{LATENCY_BOUND if what in latency else 'CPU-bound'}; set time_dilation (auto picks the smallest "
                f"that fits) or lower scale"
                for what, need in self.needs().items() if need > factor * (1 + 1e-9)]

    def to_dict(self, factor: float) -> dict:
        return {"target": self.target, "cores": self.cores, "time_dilation": factor,
                "needed_time_dilation": round(self.needed(), 2), "binding": self.binding(),
                "switch_pps": {k: round(v) for k, v in sorted(self.switch_pps.items())},
                "agent_pps": {k: round(v) for k, v in sorted(self.agent_pps.items())},
                "switch_processes": [list(group) for group in self.switch_process_pps()],
                "training_cores": {k: round(v, 4) for k, v in sorted(self.training_cores.items())},
                "packet_costs": self.costs.source, "packet_costs_measured_here": self.costs.measured_here,
                "warnings": self.warnings(factor)}


def switch_process_phrase(group: tuple) -> str:
    """How the planner names a switch process: ``switch s1``, or ``switch process of s1 and 3 more``."""
    return f"switch {group[0]}" if len(group) == 1 else f"switch process of {group[0]} and {len(group) - 1} more"


def switch_process_groups(switches, switch_link_pps: dict, processes: int) -> tuple:
    """``switches`` (names) split into ``processes`` groups that share a pyswitch process (each alone when
    ``processes`` is at least their number), as tuples of names in ``switches``' order. The switches that
    send each other the most packets go together (``switch_link_pps``, ``{(from, to): packets/s}``): halves
    of the switch graph weighted by those rates (networkx's Kernighan-Lin bisection, seeded), halved again
    until there are ``processes`` groups, ordered by their first switch."""
    switches = list(switches)
    if processes >= len(switches):
        return tuple((name,) for name in switches)
    graph = nx.Graph()
    graph.add_nodes_from(switches)
    for (src, dst), pps in switch_link_pps.items():
        if src in graph and dst in graph:
            graph.add_edge(src, dst, weight=graph.get_edge_data(src, dst, {"weight": 0.0})["weight"] + pps)

    def split(names, count):
        if count >= len(names):
            return [(name,) for name in switches if name in names]
        if count == 1:
            return [tuple(name for name in switches if name in names)]
        half_a, half_b = nx.algorithms.community.kernighan_lin_bisection(graph.subgraph(names), weight="weight",
                                                                         seed=1)
        count_a = min(len(half_a), max(1, round(count * len(half_a) / len(names))), count - 1)
        return split(half_a, count_a) + split(half_b, count - count_a)

    return tuple(sorted(split(set(switches), processes), key=lambda group: switches.index(group[0])))


def plan_switch_groups(scenario, budget: PacketBudget) -> tuple:
    """Which switches of ``scenario`` share a process (``switch.processes``): each its own under
    ``per-switch`` and on bmv2 (a simple_switch per switch: a number of processes is refused there),
    :func:`switch_process_groups` of a number, and for ``auto`` the count that needs the least time
    dilation, the fewest processes among equals. Fewer processes are cheaper per packet (a packet between
    two switches of one process wakes no other process, and a busier process finds more packets per
    wake-up: ``PACKET_COST_CURVES``), but one process has one core, so its packets must fit one switch's
    budget."""
    processes = scenario.switch.processes
    names = [node.name for node in scenario.topology.switches()]
    if budget.target != "pyswitch" and processes not in (AUTO_PROCESSES, PER_SWITCH_PROCESSES):
        raise field_error("switch.processes", f"{budget.target} runs a process per switch; only pyswitch "
                          f"switches share processes (remove the field, or run with --target pyswitch)",
                          scenario.source, scenario.lines, scenario.overridden)
    if budget.target != "pyswitch" or processes == PER_SWITCH_PROCESSES:
        return tuple((name,) for name in names)
    if processes != AUTO_PROCESSES:
        return switch_process_groups(names, budget.switch_link_pps, processes)
    best_need, best = math.inf, ()
    for count in range(1, len(names) + 1):
        groups = switch_process_groups(names, budget.switch_link_pps, count)
        need = dataclasses.replace(budget, switch_groups=groups).needed()
        if need < best_need * (1 - 1e-9):
            best_need, best = need, groups
    return best


def packet_budget(scenario, target: str, placement=None, cores: int = None) -> PacketBudget:
    """The scenario's :class:`PacketBudget` on ``target`` (``auto`` resolved as ``inatb run`` does) under
    ``placement`` (computed when not given), on ``cores`` (this machine's by default), with its switches
    grouped into processes (:func:`plan_switch_groups`)."""
    from testbed import sim
    from testbed.schemes import compute_placement
    placement = placement or compute_placement(scenario)
    rates = sim.packet_rates(scenario, placement)
    ps_names = frozenset(h for job in scenario.jobs for h in job.ps)
    agents = ps_names | {w for job in scenario.jobs for w in job.workers}
    budget = PacketBudget(resolve_target(target), cores or available_cores(),
                          {n: pps for n, pps in rates.node_pps.items() if scenario.topology.nodes[n].kind == "switch"},
                          {n: pps for n, pps in rates.node_pps.items() if n in agents}, ps_names, load_packet_costs(),
                          switch_link_pps=rates.switch_link_pps,
                          rounds=tuple(job_rounds(scenario, placement, rates.job_rates_bps)))
    budget = dataclasses.replace(budget, training_cores=training_cores(scenario, budget.rounds))
    groups = plan_switch_groups(scenario, budget)
    return dataclasses.replace(budget, switch_groups=groups)


def training_cores(scenario, rounds) -> dict:
    """Each worker of a training job -> the cores its real work keeps busy at time dilation 1: its CPU per
    iteration, measured on this machine (:func:`testbed.training.cost.iteration_cpu_s`), over the job's
    virtual iteration time (its ``compute_time`` and the communication its round gives)."""
    cores = {}
    comm_s = {job_round.job: job_round.comm_s for job_round in rounds}
    for job in scenario.jobs:
        if job.training:
            from testbed.training.cost import iteration_cpu_s     # PyTorch: only for a job that trains
            cpu_s = iteration_cpu_s(job.training, scenario.seed, len(job.workers), job.gradient_bound)
            iteration_s = job.compute_time_s + comm_s.get(job.name, 0.0)
            cores.update({worker: cpu_s / max(iteration_s, 1e-6) for worker in job.workers})
    return cores


def dilation_factor(scenario, budget: PacketBudget) -> float:
    """The N a run uses: the scenario's number, or the budget's for ``auto``."""
    if scenario.time_dilation == AUTO_DILATION:
        return budget.auto_factor()
    return float(scenario.time_dilation)


def expected_wall_s(scenario, simulation: dict, factor: float) -> float:
    """The wall time a run's iterations take at dilation ``factor``, from the simulator's communication times
    (``sim.evaluate``): per job its start plus, per iteration, compute time, the straggler delay it waits for
    and communication; the slowest job (or a background of its own duration that ends later: the run waits
    for it), times ``factor``. The delay an iteration waits for is its slowest worker's: a persistent delay's
    largest, or the expected largest of the workers' fresh draws
    (:func:`testbed.stragglers.expected_slowest_delay_s`; a scheme that leaves stragglers out waits less).
    Set-up and teardown come on top (:func:`expected_run_wall_s`)."""
    longest = 0.0
    for job in scenario.jobs:
        delay_s = 0.0
        for delay in scenario.stragglers.compute_delays:
            delayed = [w for w in job.workers if w in delay.workers]
            if not delayed:
                continue
            if delay.persistent_s:
                delay_s = max(delay_s, max(delay.persistent_s[w] for w in delayed))
            else:
                delay_s = max(delay_s, expected_slowest_delay_s(dataclasses.asdict(delay), len(delayed)))
        comm_s = simulation["jobs"][job.name].get("comm_time_s") or 0.0
        longest = max(longest, job.start_s + job.iterations * (job.compute_time_s + delay_s + comm_s))
    for background in scenario.background:
        if background.duration_s:
            longest = max(longest, background.start_s + background.duration_s)
    return longest * factor


#: What a run costs beyond its iterations, on pyswitch: the network built (a namespace, links and a process per
#: node), the agents started and stopped, the results written. From the 16 runs of GOAT's exp3-sync sweep on a
#: 2-core Xeon (docs/reproductions/goat.md; their summaries): a run's ``wall_s`` less its iterations at their
#: time dilation grew from 3.3 s with 8 nodes to 8.6 s with 20, about 0.45 s a node, and each run began about
#: 1.3 s after the previous one's ``wall_s`` ended (planning it, its directory, the sweep's table): so a fixed
#: part and a part per node. The sweep's 16 runs took 4 min; these and the simulator's iterations predict 4 min,
#: and 14 min of exp3's 16 (its straggler delays the workers wait for).
RUN_SET_UP_S = 1.5
RUN_SET_UP_PER_NODE_S = 0.45


def expected_run_wall_s(scenario, simulation: dict, factor: float) -> float:
    """The wall time of a whole run at dilation ``factor``: its iterations (:func:`expected_wall_s`) plus the
    set-up and teardown of its network (:data:`RUN_SET_UP_S`, :data:`RUN_SET_UP_PER_NODE_S` per host and
    switch)."""
    return expected_wall_s(scenario, simulation, factor) + run_set_up_s(scenario)


def run_set_up_s(scenario) -> float:
    """What a run of ``scenario`` is expected to spend building and tearing down its network."""
    return RUN_SET_UP_S + RUN_SET_UP_PER_NODE_S * len(scenario.topology.nodes)
