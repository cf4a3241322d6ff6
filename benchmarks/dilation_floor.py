#!/usr/bin/env python3
"""The time dilation the planner would pick were the agents cheaper (a derivation, not a test).

    .venv/bin/python benchmarks/dilation_floor.py scenarios/papers/goat/testbed-1000.yaml --target ebpf \
        --worker-us 44,10,5,0 --ps-us 82,48,0

For each pair of per-packet costs (microseconds of CPU a worker and a PS spend on a packet they send or
receive, system calls included; 0: free) it replaces the agents' packet-cost curves of this machine's
:class:`testbed.budget.PacketBudget` with flat ones at those costs and prints the time dilation the
machine's budget and all budgets together would then need. Everything else stays as the planner has it:
the switches' work on the target, the kernel's work in the agents' system calls beyond their own CPU
(``EBPF_AGENT_KERNEL_CURVE`` on ebpf), the processes' idling, the usable share of the cores, the
contention and the latency budget. It answers what an agent rewritten for speed could buy on this machine
before anybody writes it: the N left when the agents' own cost falls to a given floor.
"""

import argparse
import dataclasses
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from testbed.budget import packet_budget  # noqa: E402
from testbed.scenario import load_scenario  # noqa: E402

#: Packets per CPU-second that stand for a free agent (no packet costs it anything).
FREE_PACKETS_PER_CPU_S = 1e12


def microseconds(text: str) -> list:
    return [float(value) for value in text.split(",")]


def flat_curve(cost_us: float) -> tuple:
    """A packet-cost curve (``testbed.budget.PACKET_COST_CURVES``' form) of ``cost_us`` at every rate."""
    return ((1.0, 1e6 / cost_us if cost_us > 0 else FREE_PACKETS_PER_CPU_S),)


def with_agent_costs(budget, worker_us: float, ps_us: float):
    """``budget`` (a :class:`testbed.budget.PacketBudget`) with every worker's packet at ``worker_us`` and every
    PS's at ``ps_us``, whatever their rates."""
    curves = dict(budget.costs.curves, worker=flat_curve(worker_us), ps=flat_curve(ps_us))
    return dataclasses.replace(budget, costs=dataclasses.replace(budget.costs, curves=curves))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("scenario")
    parser.add_argument("--target", default="ebpf")
    parser.add_argument("--worker-us", type=microseconds, default=[0.0])
    parser.add_argument("--ps-us", type=microseconds, default=[0.0])
    args = parser.parse_args()
    budget = packet_budget(load_scenario(args.scenario), args.target)
    print(f"{args.scenario} on {budget.target}, {budget.cores:g} cores; as planned: time dilation "
          f"{budget.needed():.2f} ({budget.binding()})")
    print(f"{'worker us':>9} {'ps us':>6} {'machine N':>9} {'needed N':>8}  binding")
    for worker_us in args.worker_us:
        for ps_us in args.ps_us:
            cheaper = with_agent_costs(budget, worker_us, ps_us)
            print(f"{worker_us:9g} {ps_us:6g} {cheaper.machine_needs():9.2f} {cheaper.needed():8.2f}  "
                  f"{cheaper.binding()[:60]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
