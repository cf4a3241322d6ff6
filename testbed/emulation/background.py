"""Background traffic of a run: flowgen configs from the scenario, and their summary.

For each ``background`` entry the flows are planned up front
(``traffic.distributions.plan_flows``: Poisson arrivals per sender, sizes from
the named CDF, uniform destinations), so a run's background is a pure
function of the scenario and its seed. Load is relative to each sender's
link rate unless the entry names a bottleneck link, in which case the senders
together offer ``load`` of that link (each offers an equal share).
:func:`flowgen_configs` returns one sink config per receiving host and one
source config per sending host; the orchestrator writes and starts them.
"""

from testbed.traffic.distributions import FlowSizeCDF, plan_flows
from testbed.traffic.flowgen import summarise_flows


def distribution_of(spec) -> FlowSizeCDF:
    cdf = FlowSizeCDF.load(spec.distribution)
    return cdf.truncated(spec.max_flow_bytes) if spec.max_flow_bytes else cdf


def sender_rate_bps(spec, topology) -> float:
    """The link rate each sender's load is relative to."""
    if spec.bottleneck:
        link = next(l for l in topology.links if {l.a, l.b} == set(spec.bottleneck))
        return link.rate_bps / len(spec.senders)
    rates = {topology.host_link(h).rate_bps for h in spec.senders}
    return min(rates)


def flowgen_configs(scenario, duration_s: float, start_epoch_s: float, out_dir) -> list:
    """[(entry index, host, name, config dict)] for every background entry: sinks first, then sources."""
    topo = scenario.topology
    sinks, sources = [], []
    for index, spec in enumerate(scenario.background):
        window_s = spec.duration_s or duration_s
        flows = plan_flows(distribution_of(spec), spec.load, sender_rate_bps(spec, topo), window_s, spec.senders,
                           spec.receivers, seed=scenario.seed * 1000 + index)
        stop = start_epoch_s + window_s
        for host in sorted(set(spec.receivers)):
            sinks.append((index, host, f"bg{index}-sink-{host}", {
                "role": "sink", "port": spec.port, "stop_epoch_s": stop + 30.0,
                "output": str(out_dir / f"bg{index}-sink-{host}.jsonl")}))
        for host in spec.senders:
            mine = [{"dst": topo.node(f.receiver).ip, "port": spec.port, "start_s": f.start_s,
                     "size_bytes": f.size_bytes} for f in flows if f.sender == host]
            sources.append((index, host, f"bg{index}-source-{host}", {
                "role": "source", "src": host, "start_epoch_s": start_epoch_s, "stop_epoch_s": stop,
                "output": str(out_dir / f"bg{index}-source-{host}.jsonl"), "flows": mine}))
    return sinks + sources


def summarise(scenario, records_by_entry: dict, windows_s: dict) -> list:
    """Per background entry: requested load, achieved load, FCT percentiles (summarise_flows)."""
    topo = scenario.topology
    out = []
    for index, spec in enumerate(scenario.background):
        records = records_by_entry.get(index, [])
        capacity_bps = sender_rate_bps(spec, topo) * len(spec.senders)
        summary = summarise_flows(records, windows_s[index], capacity_bps) if windows_s.get(index) else {}
        out.append({"distribution": spec.distribution, "requested_load": spec.load,
                    "load_relative_to": "bottleneck " + "-".join(spec.bottleneck) if spec.bottleneck
                    else "each sender's link rate (HPCC rule)",
                    "capacity_bps": capacity_bps, "window_s": windows_s.get(index), "senders": spec.senders,
                    "receivers": spec.receivers, "max_flow_bytes": spec.max_flow_bytes or None,
                    "flow_sizes_scaled": False, **summary})
    return out
