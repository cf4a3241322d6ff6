"""Packet-budget estimate of a scenario (DESIGN.md "Scale and the packet budget").

At 1/1000 scale a 100 Gb/s link is 100 Mb/s, about 37k INA frames/s:
beyond what a Python or bmv2 switch moves on 2 cores. The estimate: every
switch port toward a link carries at most that link's rate in INA frames;
a switch's peak is what its ingress ports can deliver, capped by the rate
the workers and PSs can inject. When it exceeds the target's measured budget
the run would measure the machine, not the scheme, so ``inatb validate``
warns.
"""

from testbed.dataplane.wire import ina_frame_bytes

#: Packets/s per switch that keep a run link-bound (README "Measured figures"): pyswitch alone
#: aggregates ~76k fragments/s on a core of its own, but in a run it shares two cores with the
#: agents; bmv2's Release build aggregates ~7k fragments/s (REFERENCE: measured on a 64-lane program).
TARGET_BUDGET_PPS = {"pyswitch": 20000.0, "bmv2": 7000.0}


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
    budget = TARGET_BUDGET_PPS.get(target, TARGET_BUDGET_PPS["pyswitch"])
    warnings = []
    for sw, pps in sorted(peak_pps_per_switch(scenario).items()):
        if pps > budget:
            warnings.append(f"switch {sw} may see up to {pps:,.0f} packets/s, beyond the {target} budget of "
                            f"{budget:,.0f}/s: results would be CPU-bound; lower scale (now {scenario.scale:g})")
    return warnings
