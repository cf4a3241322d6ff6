"""Packet-budget estimate of a scenario (DESIGN.md "Scale and the packet budget").

At 1/1000 scale a 100 Gb/s link is 100 Mb/s, about 37k INA frames/s:
beyond what a Python or bmv2 switch moves on 2 cores. The estimate: every
switch port toward a link carries at most that link's rate in INA frames;
a switch's peak is what its ingress ports can deliver, capped by the rate
the workers and PSs can inject. When it exceeds the target's measured budget
the run would measure the machine, not the scheme, so ``inatb validate``
warns.
"""

import shutil

from testbed.dataplane.wire import ina_frame_bytes

#: Packets/s per switch that keep a run link-bound (README "Switch speed, side by side",
#: benchmarks/bench_pyswitch.py): a pyswitch process alone takes ~34k contributions/s and forwards ~104k
#: packets/s without loss on a core of its own, but in a run it shares two cores with the agents and the
#: other switches; bmv2 (simple_switch 1.15.5, logging macros off) takes ~2.5k contributions/s and
#: forwards ~19k packets/s without loss, so its budget is its lossless aggregation rate.
TARGET_BUDGET_PPS = {"pyswitch": 20000.0, "bmv2": 2500.0}


def resolve_target(requested: str) -> str:
    """The target a run uses: ``auto`` is bmv2 where simple_switch and p4c are on PATH, else pyswitch.
    One rule for ``inatb run`` and ``inatb validate`` (which budgets the target it resolves)."""
    if requested != "auto":
        return requested
    return "bmv2" if shutil.which("simple_switch") and shutil.which("p4c") else "pyswitch"


def peak_pps_per_switch(scenario) -> dict:
    topo = scenario.topology
    frame_bits = 8 * ina_frame_bytes(scenario.switch.lanes)
    active = {h for job in scenario.jobs for h in job.workers + job.ps}
    injected_pps = sum(topo.host_link(h).rate_bps for h in active) / frame_bits
    peaks = {}
    for sw in topo.switches():
        ingress = 0.0
        for link in topo.links_of(sw.name):
            other = topo.neighbor(sw.name, link)
            if topo.nodes[other].kind == "host" and other not in active:
                continue
            ingress += link.rate_bps / frame_bits
        peaks[sw.name] = min(ingress, injected_pps)
    return peaks


def budget_warnings(scenario, target: str) -> list:
    target = resolve_target(target)
    budget = TARGET_BUDGET_PPS[target]
    warnings = []
    for sw, pps in sorted(peak_pps_per_switch(scenario).items()):
        if pps > budget:
            warnings.append(f"switch {sw} may see up to {pps:,.0f} packets/s, beyond the {target} budget of "
                            f"{budget:,.0f}/s: results would be CPU-bound; lower scale (now {scenario.scale:g})")
    return warnings
