"""The path model the controller and the simulator share: what a scenario's routes imply.

The controller installs routes and configures transports from these; the
flow-level simulator models the same network with them, so the two agree by
construction: the multicast tree a PS's RESULTs take (:func:`result_multicast_tree`),
a path's round trip and bandwidth-delay product (:func:`rtt_estimate_s`, :func:`bdp_pkts`),
the transport options derived from the network (:func:`transport_options_of`) and the
rate a transport's window allows (:func:`window_rate_cap_bps`). Pure functions of the
scenario, its routes (:class:`testbed.topology.DefaultRoutes`) and the placement's choices.
"""

from testbed.agents.transport.paced import PacedTransport
from testbed.agents.transport.switchml import SwitchMLTransport, default_pool_frames, default_timeout_s
from testbed.dataplane.wire import ina_frame_bytes
from testbed.schemes.common import link_pairs


def multicast_tree(topo, routes, ps: str, workers) -> dict:
    """The default-route tree from ``ps`` to ``workers``: ``{switch: sorted children}`` (switches or hosts). A
    worker on the PS's own host (a co-located PS) is not in it: its RESULTs are there already."""
    children = {}
    for w in workers:
        if w == ps:
            continue
        node = topo.neighbor(ps, topo.host_link(ps))
        while node != w:
            nxt = routes.next_hop(node, w)
            children.setdefault(node, set()).add(nxt)
            node = nxt
    return {sw: sorted(c) for sw, c in children.items()}


def result_multicast_tree(topo, routes, job, jp, ps):
    """The tree the switches multicast ``ps``'s RESULTs of ``job`` on, or None where the PS sends them
    to every worker by unicast (a scheme without INA, or a tree with a switch that is not programmable
    unless ``topology.result_multicast`` is ``all``). One rule for the controller and the simulator."""
    if not jp.aggregating_switches():
        return None
    tree = multicast_tree(topo, routes, ps, job.workers)
    replicating = topo.result_multicast == "all" or all(topo.node(sw).programmable for sw in tree)
    return tree if replicating else None


def rtt_estimate_s(path_rates_bps, frame_bytes: int, ecn_threshold_pkts: int) -> float:
    """The round trip the controller assumes on a path whose links run at ``path_rates_bps``: a full frame's
    serialization on every link, both ways (the data there, the RESULT back; the emulated links add no
    propagation delay), plus ``ecn_threshold_pkts`` frames queued at the slowest link, the standing queue
    ECN-driven senders keep at a loaded bottleneck (DCTCP's operating point)."""
    frame_bits = 8.0 * frame_bytes
    serialization_s = sum(2 * frame_bits / rate for rate in path_rates_bps)
    return serialization_s + ecn_threshold_pkts * frame_bits / min(path_rates_bps)


def link_rates_along(rates: dict, path) -> list:
    """The rates of the links along ``path`` (nodes), from ``Topology.capacity_bps()``'s ``rates``."""
    return [rates[hop] for hop in link_pairs(path)]


def bdp_pkts(path_rates_bps, frame_bytes: int, ecn_threshold_pkts: int) -> float:
    """The bandwidth-delay product of a path in full frames: its slowest link's rate x :func:`rtt_estimate_s`."""
    return min(path_rates_bps) * rtt_estimate_s(path_rates_bps, frame_bytes, ecn_threshold_pkts) / (8.0 * frame_bytes)


def paced_rate(job, planned_rate_bps) -> dict:
    """The job's transport options, with ``paced``'s planned rate where the scenario gave none."""
    options = dict(job.transport_options)
    if job.transport == PacedTransport.name and "rate_bps" not in options:
        options["rate_bps"] = planned_rate_bps
    return options


def transport_options_of(scenario, routes, job, worker, planned_rate_bps: float = None) -> dict:
    """``worker``'s transport options: the job's, plus what the controller derives from the network where
    the scenario left it out -- SwitchML's ``timeout_s`` (``transport.switchml.default_timeout_s``: the
    round trip of the worker's longest path to a PS of its job with the switch queues full) and ``pool``
    (``default_pool_frames``: that path's unloaded bandwidth-delay product); ``paced``'s ``rate_bps``, the
    job's ``planned_rate_bps`` (:func:`planned_rates_bps`)."""
    options = paced_rate(job, planned_rate_bps)
    if job.transport == SwitchMLTransport.name:
        frame_bytes = ina_frame_bytes(scenario.switch.lanes)
        paths = rates_to_ps(scenario, routes, job, worker)
        if "timeout_s" not in options:
            options["timeout_s"] = default_timeout_s(
                max(rtt_estimate_s(path, frame_bytes, scenario.switch.queue_depth_pkts) for path in paths))
        if "pool" not in options:
            options["pool"] = min(job.window, default_pool_frames(max(bdp_pkts(path, frame_bytes, 0)
                                                                      for path in paths)))
    return options


def window_rate_cap_bps(scenario, routes, job, worker):
    """The rate ``worker``'s transport allows, in frame bits per second, or None when it sets none:
    SwitchML's pool (:func:`transport_options_of`) sent once per unloaded round trip of the worker's
    longest path to a PS of its job; ``paced``'s own ``rate`` (its planned rate is the model's, no cap). A
    congestion-controlled window grows until a link is full."""
    if job.transport == PacedTransport.name:
        return job.transport_options.get("rate_bps")
    if job.transport != SwitchMLTransport.name:
        return None
    frame_bytes = ina_frame_bytes(scenario.switch.lanes)
    round_trip_s = max(rtt_estimate_s(path, frame_bytes, 0) for path in rates_to_ps(scenario, routes, job, worker))
    return transport_options_of(scenario, routes, job, worker)["pool"] * 8.0 * frame_bytes / round_trip_s


def rates_to_ps(scenario, routes, job, worker) -> list:
    """Per PS of ``job``, the link rates along ``worker``'s default path to it."""
    rates = scenario.topology.capacity_bps()
    return [link_rates_along(rates, routes.path(worker, ps)) for ps in job.ps]
