#!/usr/bin/env python3
"""What a packet costs a run's switch and agents, in packets per CPU-second, against the packet rate each
process sees: the per-packet costs the time dilation planner adds up (``testbed/budget.py``:
``PACKET_COST_CURVES``). A script, not a test.

For each time dilation N it runs the quickstart at 1/1000 (100 Mb/s links, 403 fragments per worker per
iteration) twice, with ``--few`` and ``--many`` iterations, and divides the difference in each process's
CPU seconds (``summary.json``'s ``cpu``: its mean share of a core x the run's wall time), less what the
process costs idling over the extra wall time (``PROCESS_IDLE_CORES``, which the planner charges
apart), by the difference in the packets it handled, so a run's fixed costs (start-up, the first window,
the last linger) cancel:

- the switch: the packets arriving on its ports, four workers' fragments and the PS's RESULTs (5 per
  fragment of a worker);
- a worker: its fragments out and their RESULTs in (2 per fragment);
- the PS: the aggregates in and the RESULTs out (2 per fragment);
- ``unattributed``: the machine's CPU time that no switch or agent was charged with (the kernel's work
  outside their system calls, the run's monitors), per packet arriving at the switch.

On ``--target ebpf`` the switch is no process: its programs run in the kernel, in the system calls of the
agents whose packets pass it and in softirqs, so its work is in the agents' costs and ``unattributed``
(and ``--calibrate``, which keeps per-process costs for the planner, is refused there).

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
from testbed.budget import PROCESS_IDLE_CORES, write_packet_costs  # noqa: E402
from testbed.dataplane.targets import NAMES as TARGETS  # noqa: E402
from testbed.emulation.orchestrator import run_scenario  # noqa: E402
from testbed.scenario import load_scenario  # noqa: E402

#: Packets a process handles per fragment one worker sends (the module docstring says which).
PACKETS_PER_FRAGMENT = {"switch": 5, "worker": 2, "ps": 2}


def cpu_seconds(summary: dict) -> dict:
    """Each process's CPU seconds over the run: its mean share of a core x the wall time the sampler saw."""
    return {name: share["mean"] * summary["wall_s"] for name, share in summary["cpu"]["processes"].items()}


def unattributed_cpu_s(summary: dict) -> float:
    """The machine's CPU seconds that no switch or agent process was charged with (the kernel's work outside
    their system calls, such as htb's timers, and the run's own monitors)."""
    cpu = summary["cpu"]
    return cpu["machine"]["mean"] * cpu["cores"] * summary["wall_s"] - sum(cpu_seconds(summary).values())


def run(iterations: int, target: str, dilation: str, out: Path) -> dict:
    scenario = load_scenario(ROOT / "scenarios" / "quickstart.yaml",
                             ["scale=0.001", f"time_dilation={dilation}", f"jobs.0.iterations={iterations}"])
    summary = run_scenario(scenario, out_root=out, target=target, stream=io.StringIO()).summary
    if summary["status"] != "ok" or not summary["aggregation_exact"] or summary["distorted"]:
        raise SystemExit(f"the {iterations}-iteration run is not a measurement: status {summary['status']}, exact "
                         f"{summary['aggregation_exact']}, distorted {summary['distortion_reasons']}")
    return summary


def predicted_wall_pps(summary: dict) -> dict:
    """Each process's packet rate as the planner predicts it, per wall second at the run's dilation."""
    plan = summary["packet_budget"]
    return {name: pps / summary["time_dilation"]
            for name, pps in {**plan["switch_pps"], **plan["agent_pps"]}.items()}


def marginal_cost(role: str, packets: float, cpu_s: float, wall_pps: float) -> dict:
    """One process's (or the unattributed share's) marginal cost, in packets per CPU-second."""
    return {"role": role, "packets": packets, "cpu_s": cpu_s, "wall_pps": wall_pps,
            "packets_per_cpu_s": packets / cpu_s if cpu_s > 0 else None}


def costs(few: dict, many: dict) -> dict:
    """Per process: packets it handled more in the longer run over its CPU seconds more (its idling over the
    extra wall time taken off), with the wall packet rate the planner predicts for it."""
    workers = len(few["jobs"][0]["participants"])
    extra_fragments = (many["jobs"][0]["fragments_sent"] - few["jobs"][0]["fragments_sent"]) / workers
    extra_wall_s = many["wall_s"] - few["wall_s"]
    cpu_few, cpu_many = cpu_seconds(few), cpu_seconds(many)
    wall_pps = predicted_wall_pps(many)
    out = {}
    for name in cpu_many:
        role, node = name.split()
        extra_cpu_s = cpu_many[name] - cpu_few.get(name, 0.0) - PROCESS_IDLE_CORES * extra_wall_s
        out[name] = marginal_cost(role, PACKETS_PER_FRAGMENT[role] * extra_fragments, extra_cpu_s, wall_pps[node])
    out["unattributed"] = marginal_cost("unattributed", PACKETS_PER_FRAGMENT["switch"] * extra_fragments,
                                        unattributed_cpu_s(many) - unattributed_cpu_s(few), sum(wall_pps.values()))
    return out


def by_role(result: dict) -> dict:
    """role -> (predicted wall packets/s, median packets per CPU-second over its processes)."""
    roles = {}
    for cost in result.values():
        if cost["packets_per_cpu_s"]:
            roles.setdefault(cost["role"], []).append(cost)
    return {role: (statistics.median(c["wall_pps"] for c in group),
                   statistics.median(c["packets_per_cpu_s"] for c in group)) for role, group in roles.items()}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--target", default="pyswitch", choices=TARGETS)
    parser.add_argument("--time-dilation", default="8",
                        help="N, several as N,N,... , or auto (a link-bound run either way)")
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
            few = run(args.few, args.target, dilation, Path(tmp) / "few")
            many = run(args.many, args.target, dilation, Path(tmp) / "many")
        result = costs(few, many)
        print(f"time dilation {many['time_dilation']:g} ({many['wall_s'] - few['wall_s']:.1f} wall s more):")
        for name, cost in sorted(result.items()):
            rate = cost["packets_per_cpu_s"]
            print(f"  {name:12s} {cost['wall_pps']:>7,.0f} packets/s: {cost['packets']:>7,.0f} packets in "
                  f"{cost['cpu_s']:6.3f} CPU-s: " + (f"{rate:>7,.0f} packets per CPU-second" if rate
                                                     else "no CPU time measured"))
        measured.append({"time_dilation": many["time_dilation"], "extra_wall_s": many["wall_s"] - few["wall_s"],
                         "costs": result, "by_role": by_role(result)})
    print("\nper role, (packets per wall second, packets per CPU-second) by time dilation:")
    for role in sorted({role for m in measured for role in m["by_role"]}):
        points = ", ".join(f"({m['by_role'][role][0]:,.0f}, {m['by_role'][role][1]:,.0f})"
                           for m in measured if role in m["by_role"])
        print(f"  {role:7s} {points}")
    write_report(args.out, {"target": args.target, "iterations": [args.few, args.many], "runs": measured})
    if args.calibrate:
        roles = {"switch": args.target, "worker": "worker", "ps": "ps"}
        path = write_packet_costs({roles[role]: [m["by_role"][role] for m in measured if role in m["by_role"]]
                                   for role in roles})
        print(f"this machine's packet costs ({', '.join(sorted(roles.values()))}) kept in {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
