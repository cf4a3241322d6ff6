#!/usr/bin/env python3
"""What a packet costs a run's switch and agents, in packets per CPU-second: the per-packet costs the time
dilation planner adds up (``testbed/budget.py``: ``SWITCH_CORE_PPS``, ``AGENT_CORE_PPS``). A script, not a
test.

It runs the quickstart at 1/1000 (100 Mb/s links, 403 fragments per worker per iteration) twice at the
same time dilation, with ``--few`` and ``--many`` iterations, and divides the difference in each process's
CPU seconds (``summary.json``'s ``cpu``: its mean share of a core x the run's wall time) by the difference
in the packets it handled, so a run's fixed costs (start-up, the first window, the last linger) cancel:

- the switch: the packets arriving on its ports, four workers' fragments and the PS's RESULTs (5 per
  fragment of a worker);
- a worker: its fragments out and their RESULTs in (2 per fragment);
- the PS: the aggregates in and the RESULTs out (2 per fragment).

Root (it builds the network).

    sudo .venv/bin/python benchmarks/bench_packet_costs.py --target pyswitch
"""

import argparse
import io
import os
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.report import write_report  # noqa: E402
from testbed.emulation.orchestrator import run_scenario  # noqa: E402
from testbed.scenario import load_scenario  # noqa: E402

#: Packets a process handles per fragment one worker sends (the module docstring says which).
PACKETS_PER_FRAGMENT = {"switch": 5, "worker": 2, "ps": 2}


def cpu_seconds(summary: dict) -> dict:
    """Each process's CPU seconds over the run: its mean share of a core x the wall time the sampler saw."""
    return {name: share["mean"] * summary["wall_s"] for name, share in summary["cpu"]["processes"].items()}


def run(iterations: int, target: str, dilation: str, out: Path) -> dict:
    scenario = load_scenario(ROOT / "scenarios" / "quickstart.yaml",
                             ["scale=0.001", f"time_dilation={dilation}", f"jobs.0.iterations={iterations}"])
    summary = run_scenario(scenario, out_root=out, target=target, stream=io.StringIO()).summary
    if summary["status"] != "ok" or not summary["aggregation_exact"] or summary["distorted"]:
        raise SystemExit(f"the {iterations}-iteration run is not a measurement: status {summary['status']}, exact "
                         f"{summary['aggregation_exact']}, distorted {summary['distortion_reasons']}")
    return summary


def costs(few: dict, many: dict) -> dict:
    """Per process: packets it handled more in the longer run over its CPU seconds more."""
    workers = len(few["jobs"][0]["participants"])
    extra_fragments = (many["jobs"][0]["fragments_sent"] - few["jobs"][0]["fragments_sent"]) / workers
    cpu_few, cpu_many = cpu_seconds(few), cpu_seconds(many)
    out = {}
    for name in cpu_many:
        role = name.split()[0]
        extra_cpu_s = cpu_many[name] - cpu_few.get(name, 0.0)
        packets = PACKETS_PER_FRAGMENT[role] * extra_fragments
        out[name] = {"packets": packets, "cpu_s": extra_cpu_s,
                     "packets_per_cpu_s": packets / extra_cpu_s if extra_cpu_s > 0 else None}
    return out


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--target", default="pyswitch", choices=("pyswitch", "bmv2"))
    parser.add_argument("--time-dilation", default="8", help="N, or auto (a link-bound run either way)")
    parser.add_argument("--few", type=int, default=5)
    parser.add_argument("--many", type=int, default=25)
    parser.add_argument("--out", default=str(ROOT / "results" / "bench" / "bench_packet_costs.json"))
    args = parser.parse_args(argv)
    if os.geteuid() != 0:
        raise SystemExit("bench_packet_costs: needs root (it builds the network)")
    with tempfile.TemporaryDirectory(prefix="inatb-bench-") as tmp:
        few = run(args.few, args.target, args.time_dilation, Path(tmp) / "few")
        many = run(args.many, args.target, args.time_dilation, Path(tmp) / "many")
    result = costs(few, many)
    for name, cost in sorted(result.items()):
        rate = cost["packets_per_cpu_s"]
        print(f"{name:12s} {cost['packets']:>9,.0f} packets in {cost['cpu_s']:6.3f} CPU-s: "
              + (f"{rate:>9,.0f} packets per CPU-second" if rate else "no CPU time measured"))
    write_report(args.out, {"target": args.target, "time_dilation": many["time_dilation"],
                            "iterations": [args.few, args.many], "costs": result})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
