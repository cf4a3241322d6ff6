"""Background traffic of a run: flowgen configs from the scenario, and their summary.

For each ``background`` entry the flows are planned up front
(``traffic.distributions.plan_flows``: Poisson arrivals per sender, sizes from
the named CDF, uniform destinations; an entry without ``duration`` is
planned over the run's run_timeout, minute by minute past the first
(``PLAN_MINUTE_S``), so a longer run_timeout only adds flows at the end), so
a run's background is a pure function of the scenario and its seed; a
``constant`` entry is one UDP flow per (sender, receiver) at a constant rate
instead. Load is relative to each
sender's link rate unless the entry names a bottleneck link, in which case
the senders together offer ``load`` of that link (each offers an equal
share).
:func:`flowgen_configs` returns one sink config per receiving host and one
source config per sending host; the orchestrator writes and starts them.
"""

from testbed.traffic.distributions import CONSTANT_DATAGRAM_BYTES, CONSTANT_RATE, FlowSizeCDF, plan_flows
from testbed.traffic.flowgen import ETHERNET_HEADER_BYTES, UDP_IP_OVERHEAD_BYTES, received_load, summarise_flows


def distribution_of(spec) -> FlowSizeCDF:
    """The entry's flow-size CDF: its sizes times ``flow_size_scale``, then capped at ``max_flow_bytes``."""
    cdf = FlowSizeCDF.load(spec.distribution).scaled(spec.flow_size_scale)
    return cdf.truncated(spec.max_flow_bytes) if spec.max_flow_bytes else cdf


def sender_rate_bps(spec, topology) -> float:
    """The link rate each sender's load is relative to: the bottleneck's, shared among the senders, or the
    senders' host link rate (the slowest's where they differ)."""
    if spec.bottleneck:
        link = next(l for l in topology.links if {l.a, l.b} == set(spec.bottleneck))
        return link.rate_bps / len(spec.senders)
    rates = {topology.host_link(h).rate_bps for h in spec.senders}
    return min(rates)


def flowgen_configs(scenario, duration_s: float, start_epoch_s: float, out_dir, congestion_controls=None) -> list:
    """[(entry index, host, name, config dict)] for every background entry: sinks first, then sources.

    An entry's flows run from its ``start_s`` for its ``duration_s`` (default ``duration_s``) after
    ``start_epoch_s``. A ``constant`` entry gets ``udp-sink`` and ``udp-source`` roles (one flow from each
    sender to each receiver, :func:`constant_rate_ip_bps`), the others TCP ``sink`` and ``source`` roles,
    both ends with the entry's congestion control (the name the run uses for it: ``congestion_controls``
    maps a scenario's name to a substitute, testbed.traffic.dctcp_bpf)."""
    congestion_controls = congestion_controls or {}
    topo = scenario.topology
    sinks, sources = [], []
    for index, spec in enumerate(scenario.background):
        window_s = spec.duration_s or duration_s
        stop = start_epoch_s + spec.start_s + window_s
        constant = spec.distribution == CONSTANT_RATE
        prefix = "udp-" if constant else ""
        congestion_control = congestion_controls.get(spec.congestion_control, spec.congestion_control)
        for host in sorted(set(spec.receivers)):
            sink = {"role": f"{prefix}sink", "port": spec.port, "stop_epoch_s": stop + 30.0,
                    "output": str(out_dir / f"bg{index}-sink-{host}.jsonl")}
            if congestion_control:
                sink["congestion_control"] = congestion_control
            sinks.append((index, host, f"bg{index}-sink-{host}", sink))
        if constant:
            mine = {}
            for host in spec.senders:
                receivers = [r for r in spec.receivers if r != host]
                mine[host] = [{"dst": topo.node(r).ip, "port": spec.port, "start_s": spec.start_s,
                               "duration_s": window_s, "rate_bps": constant_rate_ip_bps(spec, topo) / len(receivers),
                               "datagram_bytes": CONSTANT_DATAGRAM_BYTES} for r in receivers]
        else:
            flows = plan_flows(distribution_of(spec), spec.load, sender_rate_bps(spec, topo), window_s, spec.senders,
                               spec.receivers, seed=scenario.seed * 1000 + index)
            mine = {host: [{"dst": topo.node(f.receiver).ip, "port": spec.port, "start_s": spec.start_s + f.start_s,
                            "size_bytes": f.size_bytes} for f in flows if f.sender == host]
                    for host in spec.senders}
        for host in spec.senders:
            config = {"role": f"{prefix}source", "src": host, "start_epoch_s": start_epoch_s, "stop_epoch_s": stop,
                      "output": str(out_dir / f"bg{index}-source-{host}.jsonl"), "flows": mine[host]}
            if congestion_control:
                config["congestion_control"] = congestion_control
            sources.append((index, host, f"bg{index}-source-{host}", config))
    return sinks + sources


def tcp_hosts(scenario) -> list:
    """The hosts at either end of a background entry's TCP flows (every entry but ``constant`` ones)."""
    return sorted({host for spec in scenario.background if spec.distribution != CONSTANT_RATE
                   for host in list(spec.senders) + list(spec.receivers)})


def ecn_senders(scenario) -> list:
    """The hosts whose background TCP flows ask for ECN (``background[].ecn``); the scenario guarantees that no
    host sends TCP flows of an entry without it."""
    return sorted({host for spec in scenario.background if spec.ecn for host in spec.senders})


def constant_rate_ip_bps(spec, topology) -> float:
    """The IP-packet rate of a ``constant`` entry's sender (what flowgen's ``udp-source`` paces): ``load`` of
    :func:`sender_rate_bps` in Ethernet frame bits, the link shapers' unit, so each datagram counts its
    IP and UDP headers and its payload, and the frame's 14 bytes more on the wire."""
    ip_bytes = CONSTANT_DATAGRAM_BYTES + UDP_IP_OVERHEAD_BYTES
    return spec.load * sender_rate_bps(spec, topology) * ip_bytes / (ip_bytes + ETHERNET_HEADER_BYTES)


def summarise(scenario, records_by_entry: dict, windows_s: dict, sink_records_by_entry: dict = None) -> list:
    """Per background entry: requested load and what came of it. TCP entries: achieved load and FCT
    percentiles (``summarise_flows``) from the sources' records, received load (``received_load``) from
    the sinks'; ``constant`` entries: the IP bytes the sources sent and the sinks received
    (``sink_records_by_entry``), the load received in Ethernet frame bits, and the datagrams lost."""
    topo = scenario.topology
    out = []
    for index, spec in enumerate(scenario.background):
        records = records_by_entry.get(index, [])
        capacity_bps = sender_rate_bps(spec, topo) * len(spec.senders)
        window_s = windows_s.get(index)
        if spec.distribution == CONSTANT_RATE:
            summary = _constant_summary(records, (sink_records_by_entry or {}).get(index, []), window_s,
                                        capacity_bps)
        else:
            summary = {}
            if window_s:
                summary = {**summarise_flows(records, window_s, capacity_bps),
                           **received_load((sink_records_by_entry or {}).get(index, []), window_s, capacity_bps)}
            # What the flows' sockets reported using: the scenario's choice, or evidence that it did not hold.
            summary["congestion_control_used"] = sorted({r["congestion_control"] for r in records
                                                         if r.get("congestion_control")})
            summary["ecn_negotiated_flows"] = sum(bool(r.get("ecn")) for r in records)
            # Flows whose SYN was sent again: Linux asks no more for ECN then (net.ipv4.tcp_ecn_fallback).
            summary["ecn_fallback_flows"] = sum(bool(r.get("syn_retransmitted")) and not r.get("ecn")
                                                for r in records)
        out.append({"distribution": spec.distribution, "requested_load": spec.load,
                    "load_relative_to": "bottleneck " + "-".join(spec.bottleneck) if spec.bottleneck
                    else "each sender's link rate (HPCC rule)",
                    "capacity_bps": capacity_bps, "start_s": spec.start_s, "window_s": window_s,
                    "congestion_control": spec.congestion_control, "ecn": spec.ecn,
                    "senders": spec.senders, "receivers": spec.receivers,
                    "max_flow_bytes": spec.max_flow_bytes or None, "flow_size_scale": spec.flow_size_scale, **summary})
    return out


def _constant_summary(source_records, sink_records, window_s, capacity_bps) -> dict:
    sent_datagrams = sum(r["sent_datagrams"] for r in source_records)
    received = sum(r["datagrams"] for r in sink_records)
    received_bytes = sum(r["bytes"] for r in sink_records)
    frame_bits = 8 * (received_bytes + ETHERNET_HEADER_BYTES * received)
    return {"sent_datagrams": sent_datagrams, "sent_ip_bytes": sum(r["sent_bytes"] for r in source_records),
            "received_datagrams": received, "received_ip_bytes": received_bytes,
            "lost_datagrams": max(0, sent_datagrams - received),
            "achieved_load": frame_bits / window_s / capacity_bps if window_s and capacity_bps else None}
