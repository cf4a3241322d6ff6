#!/usr/bin/env python3
"""What a packet costs a run's switch and agents, in packets per CPU-second, against the packet rate each
process sees: the per-packet costs the time dilation planner adds up (``testbed/budget.py``:
``PACKET_COST_CURVES``). A script, not a test.

For each time dilation N it runs a scenario (``--scenario``: the quickstart at 1/1000 by default, 100 Mb/s
links, 403 fragments per worker per iteration) twice, with ``--few`` and ``--many`` iterations, and divides
the difference in each process's CPU seconds (``summary.json``'s ``cpu``: its mean share of a core x the
run's wall time), less what the process costs idling over the extra wall time (``PROCESS_IDLE_CORES``,
which the planner charges apart), by the difference in the packets it handled, so a run's fixed costs
(start-up, the first window, the last linger) cancel. The scenario must have one job whose every fragment
a switch aggregates (the PS takes one aggregate a fragment), as the quickstart and GOAT's testbed at 1/1000
do, and one switch unless the target is ebpf; the packets a process handles per fragment are then:

- the switch: the packets arriving on its ports, four workers' fragments and the PS's RESULTs (5 per
  fragment of a worker);
- a worker: its fragments out and their RESULTs in (2 per fragment);
- the PS: the aggregates in and the RESULTs out (2 per fragment);
- ``unattributed``: the machine's CPU time that no switch or agent was charged with (the kernel's work
  outside their system calls, the run's monitors), per packet arriving at the switch (on ebpf, whose
  switches are no processes, per packet an agent sends or takes).

On ``--target ebpf`` the switch is no process: its programs run in the kernel, in the system calls of the
agents whose packets pass it and in softirqs, so its work is in the agents' costs and ``unattributed``
(and ``--calibrate``, which keeps per-process costs for the planner, is refused there).

Each process's cost is split into its own code and the kernel's work (its system time: the system calls,
and the network the kernel emulates in them, the qdiscs, veths, sockets and, on ebpf, the switches' programs
a packet passes); ``unattributed`` is not split (the kernel's work outside them and the run's monitors, whose
code is not the kernel's). The kernel's part bounds what any agent could reach, however cheap its own code:
``kernel_floor_dilation`` is the time dilation at which the kernel's work in the processes alone would fill
the share of the cores the planner counts usable (``USABLE_CORE_SHARE``): the cores it kept busy while the
job communicated, times N. It is taken at the rate measured (at higher rates a process wakes less often per
packet) and leaves out the kernel's work outside the processes, so it is an estimate, not a bound.

Each cost is paired with the process's packet rate as the planner predicts it (the summary's
``packet_budget``, packets per second at time dilation 1, divided by N: packets per wall second while its
job communicates), the rate the planner looks the cost up by. The slower packets come, the more a packet
costs: a process that sleeps between packets wakes for each one (a context switch and an epoll or select
round), where at higher rates one wake-up serves several.

``--calibrate`` keeps the switch's, the workers' and the PS's costs as this machine's
(``testbed.budget.write_packet_costs``: per role the fastest point and the floor of the slower ones), which
the planner then uses here instead of the reference (``inatb validate`` says which it uses).

Root (it builds the network).

    sudo .venv/bin/python benchmarks/bench_packet_costs.py --target pyswitch --time-dilation 8,16,32,64 --calibrate
    sudo .venv/bin/python benchmarks/bench_packet_costs.py --target ebpf --time-dilation 8 \
        --scenario scenarios/papers/goat/testbed-1000.yaml
"""

import argparse
import io
import os
import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.report import write_report  # noqa: E402
from testbed.budget import PROCESS_IDLE_CORES, USABLE_CORE_SHARE, write_packet_costs  # noqa: E402
from testbed.dataplane.targets import NAMES as TARGETS  # noqa: E402
from testbed.emulation.orchestrator import run_scenario  # noqa: E402
from testbed.scenario import load_scenario  # noqa: E402

#: Packets a process handles per fragment one worker sends (the module docstring says which).
PACKETS_PER_FRAGMENT = {"switch": 5, "worker": 2, "ps": 2}


QUICKSTART = ROOT / "scenarios" / "quickstart.yaml"


def cpu_seconds(summary: dict, kind: str = "mean") -> dict:
    """Each process's CPU seconds over the run (``kind`` "system_mean": those in the kernel): its mean share of
    a core x the wall time the sampler saw."""
    return {name: share[kind] * summary["wall_s"] for name, share in summary["cpu"]["processes"].items()}


def unattributed_cpu_s(summary: dict) -> float:
    """The machine's CPU seconds that no switch or agent process was charged with (the kernel's work outside
    their system calls, such as htb's timers, and the run's own monitors)."""
    cpu = summary["cpu"]
    return cpu["machine"]["mean"] * cpu["cores"] * summary["wall_s"] - sum(cpu_seconds(summary).values())


def run(scenario_path: Path, iterations: int, target: str, dilation: str, out: Path) -> dict:
    scenario = load_scenario(scenario_path, ["scale=0.001", f"time_dilation={dilation}",
                                             f"jobs.0.iterations={iterations}"])
    if len(scenario.jobs) != 1:
        raise SystemExit(f"bench_packet_costs: {scenario_path}: {len(scenario.jobs)} jobs; expected one")
    summary = run_scenario(scenario, out_root=out, target=target, stream=io.StringIO()).summary
    if summary["status"] != "ok" or not summary["aggregation_exact"] or summary["distorted"]:
        raise SystemExit(f"the {iterations}-iteration run is not a measurement: status {summary['status']}, exact "
                         f"{summary['aggregation_exact']}, distorted {summary['distortion_reasons']}")
    if target != "ebpf" and len(summary["switches"]) != 1:
        raise SystemExit(f"bench_packet_costs: {scenario_path}: {len(summary['switches'])} switches; a switch "
                         f"process's packets per fragment are counted for one (any number on ebpf)")
    job = summary["jobs"][0]
    if abs(job["ps_ingress_packets"] * job["workers"] / job["fragments_sent"] - 1) > 0.05:
        raise SystemExit(f"bench_packet_costs: {scenario_path}: the PS took {job['ps_ingress_packets']:,} packets "
                         f"for {job['fragments_sent'] / job['workers']:,.0f} fragments a worker sent; the counts "
                         f"per fragment assume one aggregate a fragment (a switch aggregates them all)")
    return summary


def predicted_wall_pps(summary: dict) -> dict:
    """Each process's packet rate as the planner predicts it, per wall second at the run's dilation."""
    plan = summary["packet_budget"]
    return {name: pps / summary["time_dilation"]
            for name, pps in {**plan["switch_pps"], **plan["agent_pps"]}.items()}


def marginal_cost(role: str, packets: float, cpu_s: float, wall_pps: float, kernel_cpu_s) -> dict:
    """One process's (or the unattributed share's) marginal cost, in packets per CPU-second, and the part of
    its CPU seconds in the kernel (None where not known: the unattributed share's)."""
    known = kernel_cpu_s is not None and cpu_s > 0
    return {"role": role, "packets": packets, "cpu_s": cpu_s, "wall_pps": wall_pps,
            "packets_per_cpu_s": packets / cpu_s if cpu_s > 0 else None, "kernel_cpu_s": kernel_cpu_s,
            "kernel_share": min(1.0, kernel_cpu_s / cpu_s) if known else None}


def costs(few: dict, many: dict) -> dict:
    """Per process: packets it handled more in the longer run over its CPU seconds more (its idling over the
    extra wall time taken off), with the wall packet rate the planner predicts for it."""
    workers = len(few["jobs"][0]["participants"])
    extra_fragments = (many["jobs"][0]["fragments_sent"] - few["jobs"][0]["fragments_sent"]) / workers
    extra_wall_s = many["wall_s"] - few["wall_s"]
    cpu_few, cpu_many = cpu_seconds(few), cpu_seconds(many)
    kernel_few, kernel_many = cpu_seconds(few, "system_mean"), cpu_seconds(many, "system_mean")
    wall_pps = predicted_wall_pps(many)
    idle_s = PROCESS_IDLE_CORES * extra_wall_s      # a process's idling (its timeouts are system calls): off both
    out = {}
    for name in cpu_many:
        role, node = name.split()
        extra_cpu_s = cpu_many[name] - cpu_few.get(name, 0.0) - idle_s
        out[name] = marginal_cost(role, PACKETS_PER_FRAGMENT[role] * extra_fragments, extra_cpu_s, wall_pps[node],
                                  max(0.0, kernel_many[name] - kernel_few.get(name, 0.0) - idle_s))
    unattributed_s = unattributed_cpu_s(many) - unattributed_cpu_s(few)
    if many["target"] == "ebpf":      # no switch process: per packet an agent sends or takes
        packets = sum(cost["packets"] for cost in out.values())
        pps = sum(pps for name, pps in wall_pps.items() if name in many["packet_budget"]["agent_pps"])
    else:
        packets, pps = PACKETS_PER_FRAGMENT["switch"] * extra_fragments, sum(wall_pps.values())
    out["unattributed"] = marginal_cost("unattributed", packets, unattributed_s, pps, None)
    return out


def communication_wall_s(summary: dict) -> float:
    """The wall seconds the run's job communicated: its iterations' mean communication time (virtual) x its
    iterations x the time dilation."""
    job = summary["jobs"][0]
    return (job["comm_time_s"] or 0.0) * job["iterations_completed"] * summary["time_dilation"]


def kernel_floor_dilation(result: dict, few: dict, many: dict):
    """The time dilation at which the kernel's part of the processes' costs in ``result`` (:func:`costs` of
    runs ``few`` and ``many``) alone fills the usable share of the machine's cores: the kernel's cores while the
    longer run's extra iterations communicated, times the run's time dilation (what they would be at 1), over
    the usable cores; None where the runs communicated equally long."""
    kernel_s = sum(cost["kernel_cpu_s"] for cost in result.values() if cost["kernel_cpu_s"] is not None)
    communicated_s = communication_wall_s(many) - communication_wall_s(few)
    if communicated_s <= 0:
        return None
    return kernel_s / communicated_s * many["time_dilation"] / (USABLE_CORE_SHARE * many["cpu"]["cores"])


def by_role(result: dict) -> dict:
    """role -> (predicted wall packets/s, median packets per CPU-second over its processes)."""
    roles = {}
    for cost in result.values():
        if cost["packets_per_cpu_s"]:
            roles.setdefault(cost["role"], []).append(cost)
    return {role: (statistics.median(c["wall_pps"] for c in group),
                   statistics.median(c["packets_per_cpu_s"] for c in group)) for role, group in roles.items()}


def kernel_share_by_role(result: dict) -> dict:
    """role -> the median share of its processes' CPU seconds in the kernel."""
    roles = {}
    for cost in result.values():
        if cost["kernel_share"] is not None:
            roles.setdefault(cost["role"], []).append(cost["kernel_share"])
    return {role: statistics.median(shares) for role, shares in roles.items()}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--target", default="pyswitch", choices=TARGETS)
    parser.add_argument("--time-dilation", default="8",
                        help="N, several as N,N,... , or auto (a link-bound run either way)")
    parser.add_argument("--scenario", default=str(QUICKSTART),
                        help="one job whose every fragment a switch aggregates, run at scale 0.001 (default: the "
                             "quickstart)")
    parser.add_argument("--few", type=int, default=5)
    parser.add_argument("--many", type=int, default=25)
    parser.add_argument("--out", default=str(ROOT / "results" / "bench" / "bench_packet_costs.json"))
    parser.add_argument("--calibrate", action="store_true",
                        help="keep the switch's, workers' and PS's costs as this machine's, for the planner")
    args = parser.parse_args(argv)
    if args.calibrate and args.target == "ebpf":
        parser.error("--calibrate measures a switch process and agents that carry none of its work: "
                     "use --target pyswitch or bmv2 (on ebpf the agents' costs include the kernel switch's)")
    if os.geteuid() != 0:
        raise SystemExit("bench_packet_costs: needs root (it builds the network)")
    measured = []
    for dilation in args.time_dilation.split(","):
        with tempfile.TemporaryDirectory(prefix="inatb-bench-") as tmp:
            few = run(Path(args.scenario), args.few, args.target, dilation, Path(tmp) / "few")
            many = run(Path(args.scenario), args.many, args.target, dilation, Path(tmp) / "many")
        result = costs(few, many)
        floor = kernel_floor_dilation(result, few, many)
        print(f"time dilation {many['time_dilation']:g} ({many['wall_s'] - few['wall_s']:.1f} wall s more):")
        for name, cost in sorted(result.items()):
            rate, kernel = cost["packets_per_cpu_s"], cost["kernel_share"]
            figure = "no CPU time measured" if not rate else f"{rate:>7,.0f} packets per CPU-second" + (
                f", {kernel:.0%} in the kernel" if kernel is not None else "")
            print(f"  {name:12s} {cost['wall_pps']:>7,.0f} packets/s: {cost['packets']:>7,.0f} packets in "
                  f"{cost['cpu_s']:6.3f} CPU-s: {figure}")
        if floor is not None:
            print(f"  the kernel's work in the processes alone would fill the usable cores at time dilation "
                  f"{floor:.2f}")
        measured.append({"time_dilation": many["time_dilation"], "extra_wall_s": many["wall_s"] - few["wall_s"],
                         "costs": result, "by_role": by_role(result),
                         "kernel_share_by_role": kernel_share_by_role(result), "kernel_floor_dilation": floor})
    print("\nper role, (packets per wall second, packets per CPU-second) by time dilation:")
    for role in sorted({role for m in measured for role in m["by_role"]}):
        points = ", ".join(f"({m['by_role'][role][0]:,.0f}, {m['by_role'][role][1]:,.0f})"
                           for m in measured if role in m["by_role"])
        print(f"  {role:7s} {points}")
    scenario = Path(args.scenario).resolve()
    write_report(args.out, {"target": args.target, "iterations": [args.few, args.many], "runs": measured,
                            "scenario": (scenario.relative_to(ROOT) if scenario.is_relative_to(ROOT)
                                         else scenario).as_posix()})
    if args.calibrate:
        roles = {"switch": args.target, "worker": "worker", "ps": "ps"}
        path = write_packet_costs({roles[role]: [m["by_role"][role] for m in measured if role in m["by_role"]]
                                   for role in roles})
        print(f"this machine's packet costs ({', '.join(sorted(roles.values()))}) kept in {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
