"""benchmarks/dilation_floor.py: the planner's budget with the agents' packets at given costs."""

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from benchmarks.dilation_floor import with_agent_costs  # noqa: E402
from testbed.budget import PacketBudget  # noqa: E402


def test_each_agent_packet_costs_what_it_is_given_and_the_kernels_work_stays():
    # Two workers at 40,000 packets/s and a PS at 80,000 on ebpf (a switch with no packets): at 10 us a worker's
    # packet and 50 us a PS's, 0.8 + 4 cores of the agents' own work at N = 1; free agents, none. The kernel's
    # work in their system calls (EBPF_AGENT_KERNEL_CURVE: 1.8 cores at N = 1) is the planner's either way, so
    # free agents still need a time dilation above 1 on two cores.
    planned = PacketBudget("ebpf", 2, {"s1": 0.0}, {"w1": 40000.0, "w2": 40000.0, "ps": 80000.0}, frozenset({"ps"}))
    cheaper = with_agent_costs(planned, 10.0, 50.0)
    free = with_agent_costs(planned, 0.0, 0.0)
    assert cheaper.cores_busy(1.0) == pytest.approx(80000 * 10e-6 + 80000 * 50e-6)
    assert cheaper.cores_busy(4.0) == pytest.approx(cheaper.cores_busy(1.0) / 4)
    assert free.cores_busy(1.0) == pytest.approx(0.0, abs=1e-6)
    assert free.agent_kernel_cores(1.0) == cheaper.agent_kernel_cores(1.0) == planned.agent_kernel_cores(1.0) > 0
    assert 1.0 < free.machine_needs() < cheaper.machine_needs()
