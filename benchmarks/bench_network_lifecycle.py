#!/usr/bin/env python3
"""What building and taking down a run's network costs: the Mininet network of a scenario's topology with its
target's switch nodes, built and stopped ``--repeat`` times, the links taken down at once (the run's device
group, as a run does: ``testbed.emulation.network.delete_links_at_once``) and one by one (Mininet's ``ip link
del`` per interface, what a run did before and does when the group cannot be used). A script, not a test.

Per way it prints the median seconds of the build (``build_network``: nodes, links, shaping, the switches'
processes started) and of the teardown (``stop_network``). No agent runs and no entry is installed: the
network alone.

Root (it builds the network); it takes the run lock as a run does.

    sudo .venv/bin/python benchmarks/bench_network_lifecycle.py --repeat 3     # InArt's k=6 fat-tree, pyswitch
    sudo .venv/bin/python benchmarks/bench_network_lifecycle.py --scenario scenarios/quickstart.yaml --target ebpf
"""

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.report import write_report  # noqa: E402
from testbed.emulation.network import build_network, mininet_log_to, stop_network  # noqa: E402
from testbed.emulation.nodes import SWITCH_TARGETS, switch_node_params  # noqa: E402
from testbed.emulation.state import RunLock, RunState  # noqa: E402
from testbed.plan import make_plan  # noqa: E402
from testbed.scenario import load_scenario  # noqa: E402

WAYS = {"at once": True, "one by one": False}


def lifecycle_s(plan, at_once: bool, log_dir: Path, run_id: str) -> tuple:
    """(build seconds, teardown seconds) of one network of ``plan``."""
    state = RunState(run_id)
    try:
        start_s = time.monotonic()
        network = build_network(plan.world.topology, SWITCH_TARGETS[plan.target],
                                switch_node_params(plan, log_dir, state), state)
        built_s = time.monotonic()
        stop_network(network.net, network.device_group if at_once else 0)
        return built_s - start_s, time.monotonic() - built_s
    finally:
        state.remove()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scenario", default=str(ROOT / "scenarios" / "papers" / "inart" / "fat-tree-k6.yaml"))
    parser.add_argument("--target", default="pyswitch", choices=sorted(SWITCH_TARGETS))
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--out", default=str(ROOT / "results" / "bench" / "bench_network_lifecycle.json"))
    args = parser.parse_args()
    plan = make_plan(load_scenario(Path(args.scenario)), args.target)
    topology = plan.world.topology
    print(f"{args.scenario}: {len(topology.switches())} switches, {len(topology.hosts())} hosts, "
          f"{len(topology.links)} links, target {plan.target}")
    lock = RunLock()
    lock.acquire("bench_network_lifecycle")
    figures = {}
    try:
        with tempfile.TemporaryDirectory() as logs, mininet_log_to(Path(logs) / "mininet.log"):
            for way, at_once in WAYS.items():
                times = [lifecycle_s(plan, at_once, Path(logs), f"bench-lifecycle-{i}") for i in range(args.repeat)]
                build_s = statistics.median(t for t, _ in times)
                teardown_s = statistics.median(t for _, t in times)
                figures[way] = {"build_s": round(build_s, 3), "teardown_s": round(teardown_s, 3)}
                print(f"  links taken down {way:10}: build {build_s:6.2f} s, teardown {teardown_s:6.2f} s "
                      f"(median of {args.repeat})")
    finally:
        lock.release()
    write_report(args.out, {"scenario": args.scenario, "target": plan.target, "switches": len(topology.switches()),
                            "hosts": len(topology.hosts()), "links": len(topology.links), "ways": figures})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
