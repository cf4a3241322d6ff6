"""The sections that vary the run around its jobs, resolved against the topology and the jobs: link
impairments, background traffic, stragglers (compute delays, timed rate changes, pauses, link degradations,
failures, heterogeneous host links), the metrics' sampling and the simulator's own inputs."""

import random
import re
from dataclasses import asdict

from testbed import topology
from testbed.errors import brief_repr as _brief
from testbed.scenario.model import (INJECTION_SECTIONS, BackgroundSpec, ComputeDelaySpec, ImpairmentSpec,
                                    MetricsSettings, SimulationSettings, StragglerSpec, TimedInjection)
from testbed.scenario.schema import (BACKGROUND_KEYS, DEFAULT_BACKGROUND_CONGESTION_CONTROL, DEFAULT_PCAP_MAX_SIZE,
                                     DELAY_KINDS, GOAT_DELAY_DEFAULTS, IMPAIRMENT_KEYS, MAX_FRAGMENTS_PER_ITERATION,
                                     MAX_PCAP_SIZE_BYTES, METRICS_KEYS, MIN_PCAP_SIZE_BYTES, SIMULATION_KEYS,
                                     STRAGGLER_KEYS, WORKER_PACINGS)
from testbed.stragglers import straggler_delay_s


def resolve_simulation(c, spec, jobs):
    c.keys(spec, "simulation", SIMULATION_KEYS)
    s = SimulationSettings()
    workers = {w for j in jobs for w in j.workers}
    starts = spec.get("worker_start") or {}
    c.keys(starts, "simulation.worker_start", workers)
    s.worker_start_fragments = {w: c.integer(v, f"simulation.worker_start.{w}", 0, MAX_FRAGMENTS_PER_ITERATION)
                                for w, v in starts.items()}
    s.worker_pacing = c.choice(spec.get("worker_pacing", s.worker_pacing), "simulation.worker_pacing", WORKER_PACINGS)
    s.max_fragment_events = c.integer(spec.get("max_fragment_events", s.max_fragment_events),
                                      "simulation.max_fragment_events", 0, 1 << 40)
    s.results = c.boolean(spec.get("results", True), "simulation.results")
    return s


def resolve_impairments(c, spec, topo):
    out = []
    for i, item in enumerate(spec):
        p = f"impairments.{i}"
        c.keys(item, p, IMPAIRMENT_KEYS)
        link = item.get("link", "all")
        if link == "all":
            ends = ("*", "*")
        else:
            if not (isinstance(link, list) and len(link) == 2 and all(isinstance(n, str) for n in link)):
                c.fail(f"{p}.link", "expected [a, b] naming a link, or all")
            if not any({l.a, l.b} == set(link) for l in topo.links):
                c.fail(f"{p}.link", f"no link between {link[0]!r} and {link[1]!r} in the topology")
            if all(topo.nodes[n].kind == "host" for n in link):
                c.fail(f"{p}.link", "impairments are applied by a switch; the link needs a switch end")
            ends = tuple(link)
        values = {k: c.number(item.get(k, 0.0), f"{p}.{k}", 0, 0.5) for k in ("drop", "duplicate", "reorder")}
        out.append(ImpairmentSpec(ends, **values))
    return out


def resolve_metrics(c, spec, topo):
    c.keys(spec, "metrics", METRICS_KEYS)
    m = MetricsSettings()
    m.sample_interval_s = c.duration_s(spec.get("sample_interval", "0.5s"), "metrics.sample_interval",
                                       allow_zero=False)
    hosts = {h.name for h in topo.hosts()}
    for i, h in enumerate(c.items(spec.get("iftop_interfaces"), "metrics.iftop_interfaces", "host names")):
        if not isinstance(h, str) or h not in hosts:
            c.fail(f"metrics.iftop_interfaces.{i}", f"host {_brief(h)} is not defined in the topology")
        m.iftop_interfaces.append(h)
    m.warmup_iterations = c.integer(spec.get("warmup_iterations", 0), "metrics.warmup_iterations", 0, 1_000_000)
    m.pcap_interfaces = _pcap_interfaces(c, spec.get("pcap"), topo)
    m.pcap_max_bytes = int(c.size_bytes(spec.get("pcap_max_size", DEFAULT_PCAP_MAX_SIZE), "metrics.pcap_max_size"))
    if not MIN_PCAP_SIZE_BYTES <= m.pcap_max_bytes <= MAX_PCAP_SIZE_BYTES:
        c.fail("metrics.pcap_max_size", f"expected a size from {MIN_PCAP_SIZE_BYTES / 1e3:g}kB to "
                                        f"{MAX_PCAP_SIZE_BYTES / 1e9:g}GB per file, "
                                        f"got {_brief(spec.get('pcap_max_size'))}")
    return m


def _pcap_interfaces(c, spec, topo):
    """``metrics.pcap``: host names (their own interface ``<host>-eth0``) and switch port interfaces -> the
    interface names, each once."""
    hosts = {h.name for h in topo.hosts()}
    ports = topo.switch_port_interfaces()
    out = []
    for i, name in enumerate(c.items(spec, "metrics.pcap", "host names or switch port interfaces")):
        path = f"metrics.pcap.{i}"
        if isinstance(name, str) and name in hosts:
            interface = f"{name}-eth0"
        elif isinstance(name, str) and name in ports:
            interface = name
        else:
            c.fail(path, f"expected a host of the topology or a switch port interface (<switch>-eth<port>, e.g. "
                         f"{min(ports) if ports else 's1-eth1'}), got {_brief(name)}")
        if interface in out:
            c.fail(path, f"{interface} is captured already (named twice)")
        out.append(interface)
    return out


def resolve_background(c, spec, topo, jobs):
    from testbed.traffic.distributions import CONSTANT_RATE, FlowSizeCDF, UnknownDistributionError
    hosts = {h.name for h in topo.hosts()}
    busy = {h for j in jobs for h in j.workers + j.ps}
    idle = sorted(hosts - busy)
    out = []
    for i, item in enumerate(spec):
        p = f"background.{i}"
        c.keys(item, p, BACKGROUND_KEYS)
        name = item.get("distribution", "hadoop")
        if not isinstance(name, str) or not name:
            c.fail(f"{p}.distribution", f"expected a distribution name or file path, got {_brief(name)}")
        try:
            if name != CONSTANT_RATE:
                FlowSizeCDF.load(name)
        except UnknownDistributionError as exc:
            c.fail(f"{p}.distribution", f"{exc}, or {CONSTANT_RATE} (one UDP flow at a constant rate)")
        except (OSError, ValueError) as exc:   # a path given: unreadable, not text, or not a CDF
            c.fail(f"{p}.distribution", f"cannot use {_brief(name)} as a flow-size CDF: {exc}")
        for key, verb in (("max_flow_size", "truncate"), ("flow_size_scale", "scale")):
            if name == CONSTANT_RATE and key in item:
                c.fail(f"{p}.{key}", f"a {CONSTANT_RATE} flow has no flow sizes to {verb}")
        if name == CONSTANT_RATE and "congestion_control" in item:
            c.fail(f"{p}.congestion_control",
                   f"a {CONSTANT_RATE} flow is UDP at a constant rate: no congestion control")
        congestion_control = None if name == CONSTANT_RATE else item.get("congestion_control",
                                                                          DEFAULT_BACKGROUND_CONGESTION_CONTROL)
        if name == CONSTANT_RATE and "ecn" in item:
            c.fail(f"{p}.ecn", f"a {CONSTANT_RATE} flow is UDP at a constant rate: it cannot react to ECN")
        ecn = c.boolean(item.get("ecn", False), f"{p}.ecn")
        if congestion_control is not None and not (isinstance(congestion_control, str)
                                                   and re.fullmatch(r"[a-z0-9_]{1,15}", congestion_control)):
            c.fail(f"{p}.congestion_control", f"expected a TCP congestion control's name such as cubic, reno, bbr "
                                              f"or dctcp, got {_brief(congestion_control)}")
        if "load" not in item:
            c.fail(f"{p}.load", "missing; a fraction in (0, 1] of the sender's link rate")
        load = c.number(item["load"], f"{p}.load", 0, 1, low_open=True)
        groups = {}
        for role in ("senders", "receivers"):
            names = c.names(item[role], f"{p}.{role}") if role in item else idle
            for k, h in enumerate(names):
                if h not in hosts:
                    c.fail(f"{p}.{role}.{k}", f"host {h!r} is not defined in the topology")
            groups[role] = names
        if len(set(groups["senders"]) | set(groups["receivers"])) < 2:
            c.fail(p, "background traffic needs at least two hosts (senders and receivers); "
                      "by default it uses the hosts no job uses")
        bottleneck = c.link_ends(item["bottleneck"], f"{p}.bottleneck", topo) if "bottleneck" in item else ()
        out.append(BackgroundSpec(
            name, load, groups["senders"], groups["receivers"], bottleneck,
            max_flow_bytes=(c.size_bytes(item["max_flow_size"], f"{p}.max_flow_size")
                            if "max_flow_size" in item else 0.0),
            flow_size_scale=c.number(item.get("flow_size_scale", 1.0), f"{p}.flow_size_scale", 0, 1, low_open=True),
            duration_s=c.duration_s(item["duration"], f"{p}.duration") if "duration" in item else 0.0,
            port=c.integer(item.get("port", 5001 + i), f"{p}.port", 1024, 39999),
            start_s=c.duration_s(item.get("start", "0s"), f"{p}.start"),
            congestion_control=congestion_control, ecn=ecn))
    ecn_of_sender = {}
    for i, spec in enumerate(out):
        if spec.distribution == CONSTANT_RATE:
            continue
        for host in spec.senders:
            # ECN is a sysctl of the sender's namespace: every TCP entry sending from a host shares it.
            if ecn_of_sender.setdefault(host, spec.ecn) != spec.ecn:
                c.fail(f"background.{i}.ecn", f"host {host} also sends another entry's TCP flows with ecn: "
                                              f"{str(not spec.ecn).lower()}; a host's TCP either asks for ECN or not")
    return out


def resolve_stragglers(c, spec, topo, jobs, scale, seed=1):
    c.keys(spec, "stragglers", STRAGGLER_KEYS)
    workers = {w for j in jobs for w in j.workers}
    out = StragglerSpec()
    delayed = {}      # worker -> the compute_delay entry that names it
    for i, item in enumerate(c.items(spec.get("compute_delay"), "stragglers.compute_delay", "compute delays")):
        p = f"stragglers.compute_delay.{i}"
        c.keys(item, p, {"workers", "distribution", "mean", "std", "clip", "low", "high", "value", "persistent"})
        names = sorted(workers) if item.get("workers", "all") == "all" else c.names(item["workers"], f"{p}.workers")
        for k, w in enumerate(names):
            if w not in workers:
                c.fail(f"{p}.workers.{k}", f"{w!r} is not a worker of any job")
            if w in delayed:
                # An agent draws from one distribution; a second entry would be dropped, so it is refused.
                c.fail(f"{p}.workers", f"{w} already has a compute delay (stragglers.compute_delay.{delayed[w]}); "
                                       f"expected each worker in one entry")
            delayed[w] = i
        kind = c.choice(item.get("distribution", "normal"), f"{p}.distribution", DELAY_KINDS)
        d = ComputeDelaySpec(names, kind)
        dur = lambda key, default: c.duration_s(item.get(key, default), f"{p}.{key}")  # noqa: E731
        if kind == "normal":
            d.mean_s, d.std_s = dur("mean", GOAT_DELAY_DEFAULTS["mean"]), dur("std", GOAT_DELAY_DEFAULTS["std"])
            clip = item.get("clip", GOAT_DELAY_DEFAULTS["clip"])
            if not (isinstance(clip, list) and len(clip) == 2):
                c.fail(f"{p}.clip", "expected [low, high], e.g. [0s, 1s]")
            d.low_s = c.duration_s(clip[0], f"{p}.clip.0")
            d.high_s = c.duration_s(clip[1], f"{p}.clip.1")
        elif kind == "uniform":
            d.low_s, d.high_s = dur("low", "0s"), dur("high", "1s")
        else:
            d.value_s = dur("value", "0s")
        if d.low_s > d.high_s:
            c.fail(p, f"low/clip bound {d.low_s}s exceeds the high bound {d.high_s}s")
        if c.boolean(item.get("persistent", False), f"{p}.persistent"):
            rng = random.Random(seed * 1_000_003 + 7919 * (i + 1))
            d.persistent_s = {w: straggler_delay_s(asdict(d), rng) for w in names}
        out.compute_delays.append(d)
    windows = {}
    for section, kind in INJECTION_SECTIONS.items():
        for i, item in enumerate(c.items(spec.get(section), f"stragglers.{section}", section.replace("_", " "))):
            p = f"stragglers.{section}.{i}"
            allowed = {"at", "duration"} | ({"link", "rate"} if kind == "link_degradation" else
                                            {"host", "rate"} if kind == "rate_change" else {"worker"})
            if kind == "failure":
                allowed = {"at", "worker"}
            c.keys(item, p, allowed)
            if kind == "link_degradation":
                target = c.link_ends(item.get("link"), f"{p}.link", topo)
            else:
                key = "host" if kind == "rate_change" else "worker"
                name = item.get(key)
                if not isinstance(name, str) or name not in workers:
                    c.fail(f"{p}.{key}",
                           f"{_brief(name)} is not a worker of any job (workers: {', '.join(sorted(workers))})")
                target = (name,)
            at_s = c.duration_s(item.get("at", "0s"), f"{p}.at")
            if kind == "failure":
                if any(inj.kind == "failure" and inj.target == target for inj in out.injections):
                    c.fail(f"{p}.worker", f"{target[0]} fails twice; a failed worker stays failed")
                out.injections.append(TimedInjection(kind, target, at_s, 0.0))
                continue
            if "duration" not in item:
                c.fail(f"{p}.duration", "missing; how long the change lasts, e.g. 2s")
            duration_s = c.duration_s(item["duration"], f"{p}.duration", allow_zero=False)
            rate = 0.0
            if kind != "pause":
                if "rate" not in item:
                    c.fail(f"{p}.rate", "missing; the rate during the change, e.g. 10Gbps (scaled like link rates)")
                rate = c.rate_bps(item["rate"], f"{p}.rate") * scale
            if kind != "pause":
                # One rate change at a time per interface: overlapping windows would undo each other.
                iface = frozenset(target) if kind == "link_degradation" else \
                    frozenset((target[0], topo.neighbor(target[0], topo.host_link(target[0]))))
                for other_at, other_end, other_path in windows.get(iface, []):
                    if at_s < other_end and other_at < at_s + duration_s:
                        c.fail(p, f"overlaps {other_path} on the same interface "
                                  f"({other_at:g}s-{other_end:g}s); one rate change at a time")
                windows.setdefault(iface, []).append((at_s, at_s + duration_s, p))
            out.injections.append(TimedInjection(kind, target, at_s, duration_s, rate))
    if "heterogeneous_links" in spec:
        out.heterogeneous_links = _resolve_host_link_draw(c, spec["heterogeneous_links"], scale)
    return out


def _resolve_host_link_draw(c, item, scale):
    """``stragglers.heterogeneous_links``: ``{range: [low, high]}`` (uniform, InArt §5) or ``{normal: {mean:
    1, std: 0.2}}`` (a ratio of each host's link rate, GOAT §VII-D)."""
    p = "stragglers.heterogeneous_links"
    c.keys(item, p, {"range", "normal"})
    if ("range" in item) == ("normal" in item):
        c.fail(p, "expected one of range: [low, high] (uniform, e.g. [10Mbps, 30Mbps]) or normal: {std: 0.2} "
                  "(a ratio of each host's link rate)")
    if "normal" in item:
        ratio = item["normal"]
        c.keys(ratio, f"{p}.normal", {"mean", "std"})
        return topology.HostLinkDraw("normal",
                                     mean_ratio=c.number(ratio.get("mean", 1.0), f"{p}.normal.mean", 0, 1,
                                                         low_open=True),
                                     std_ratio=c.number(ratio.get("std", 0.2), f"{p}.normal.std", 0, 10))
    bounds = item["range"]
    if not (isinstance(bounds, list) and len(bounds) == 2):
        c.fail(f"{p}.range", "expected [low, high], e.g. [10Mbps, 30Mbps] (InArt §5; scaled)")
    low, high = (c.rate_bps(b, f"{p}.range.{k}") * scale for k, b in enumerate(bounds))
    if low > high:
        c.fail(f"{p}.range", "low exceeds high")
    return topology.HostLinkDraw("uniform", low_bps=low, high_bps=high)
