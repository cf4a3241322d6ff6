#!/usr/bin/env python3
"""What sharing pyswitch processes saves: the switch processes' CPU time per iteration of a many-switch run, with
a process per switch and with the switches grouped (``switch.processes``). A script, not a test.

For each setting of ``switch.processes`` it runs the scenario (by default InArt's k = 6 fat-tree, 45 switches,
at 1/1000) at one time dilation N, twice, with ``--few`` and ``--many`` iterations, and divides the
difference in the switch processes' CPU seconds (``summary.json``'s ``cpu``: mean share of a core x the run's
wall time) by the difference in iterations, so start-up and the last linger cancel; with ``--repeat`` pairs,
the median of each figure. Beside it: the switch
egress frames per CPU-second of the switch processes (frames every switch sent, ``switch_egress_fragments``,
over the same CPU time), the agents' CPU time per iteration, and the machine's mean busy share in the longer
run. Every run must be exact and undistorted, or it is not a measurement.

Root (it builds the network).

    sudo .venv/bin/python benchmarks/bench_switch_processes.py --time-dilation 43 --processes per-switch,auto,4
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
from testbed.emulation.orchestrator import run_scenario  # noqa: E402
from testbed.scenario import load_scenario  # noqa: E402

DEFAULT_SCENARIO = ROOT / "scenarios" / "papers" / "inart" / "fat-tree-k6.yaml"


def run(path: Path, settings: list, iterations: int, out: Path) -> dict:
    scenario = load_scenario(path, settings + [f"jobs.0.iterations={iterations}"])
    summary = run_scenario(scenario, out_root=out, target="pyswitch", stream=io.StringIO()).summary
    if summary["status"] != "ok" or not summary["aggregation_exact"] or summary["distorted"]:
        raise SystemExit(f"the {iterations}-iteration run is not a measurement: status {summary['status']}, exact "
                         f"{summary['aggregation_exact']}, distorted {summary['distortion_reasons']}")
    return summary


def cpu_s(summary: dict, switches: bool) -> float:
    """The CPU seconds of the switch processes (or of the agents) over the run."""
    return sum(share["mean"] * summary["wall_s"] for name, share in summary["cpu"]["processes"].items()
               if name.startswith("switch") == switches)


def measure(few: dict, many: dict) -> dict:
    iterations = many["iterations"] - few["iterations"]
    switch_cpu_s = cpu_s(many, True) - cpu_s(few, True)
    frames = many["switch_egress_fragments"] - few["switch_egress_fragments"]
    return {"switch_processes": len(many["packet_budget"]["switch_processes"]),
            "switch_cpu_s_per_iteration": switch_cpu_s / iterations,
            "agent_cpu_s_per_iteration": (cpu_s(many, False) - cpu_s(few, False)) / iterations,
            "switch_egress_frames_per_switch_cpu_s": frames / switch_cpu_s if switch_cpu_s > 0 else None,
            "wall_s_per_iteration": (many["wall_s"] - few["wall_s"]) / iterations,
            "machine_busy_mean": many["cpu"]["machine"]["mean"]}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scenario", default=str(DEFAULT_SCENARIO))
    parser.add_argument("--scale", default="0.001")
    parser.add_argument("--time-dilation", default="43", help="one N for every setting (a whole number)")
    parser.add_argument("--processes", default="per-switch,auto", help="switch.processes settings, comma-separated")
    parser.add_argument("--few", type=int, default=3)
    parser.add_argument("--many", type=int, default=9)
    parser.add_argument("--repeat", type=int, default=2, help="pairs of runs per setting (the median is kept)")
    parser.add_argument("--out", default=str(ROOT / "results" / "bench" / "bench_switch_processes.json"))
    args = parser.parse_args(argv)
    if os.geteuid() != 0:
        raise SystemExit("bench_switch_processes: needs root (it builds the network)")
    results = {}
    for processes in args.processes.split(","):
        settings = [f"scale={args.scale}", f"time_dilation={args.time_dilation}", f"switch.processes={processes}"]
        pairs = []
        for repeat in range(args.repeat):
            with tempfile.TemporaryDirectory(prefix="inatb-bench-") as tmp:
                few = run(Path(args.scenario), settings, args.few, Path(tmp) / "few")
                many = run(Path(args.scenario), settings, args.many, Path(tmp) / "many")
            pairs.append(measure(few, many))
            print(f"  switch.processes {processes}, pair {repeat + 1}: wall {few['wall_s']:.1f} s and "
                  f"{many['wall_s']:.1f} s, switches {pairs[-1]['switch_cpu_s_per_iteration']:.2f} CPU-s per "
                  f"iteration", flush=True)
        results[processes] = r = {key: statistics.median(pair[key] for pair in pairs) for key in pairs[0]}
        r["pairs"] = pairs
        print(f"switch.processes {processes} ({r['switch_processes']:g} processes): switches "
              f"{r['switch_cpu_s_per_iteration']:.2f} CPU-s per iteration "
              f"({r['switch_egress_frames_per_switch_cpu_s']:,.0f} egress frames per CPU-second), agents "
              f"{r['agent_cpu_s_per_iteration']:.2f}, {r['wall_s_per_iteration']:.2f} wall s per iteration, "
              f"machine {r['machine_busy_mean']:.0%} busy")
    first, *others = results
    for name in others:
        print(f"{name} against {first}: switch CPU time x "
              f"{results[name]['switch_cpu_s_per_iteration'] / results[first]['switch_cpu_s_per_iteration']:.2f}")
    write_report(args.out, {"scenario": args.scenario, "scale": args.scale, "time_dilation": args.time_dilation,
                            "iterations": [args.few, args.many], "settings": results})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
