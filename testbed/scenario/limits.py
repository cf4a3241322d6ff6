"""What only the simulator can take: the checks of a resolved scenario that ``inatb run`` needs on top of
its validity (htb's rate range, an emulated switch's aggregator memory, the simulator's own inputs, a Rina
ring of one member), as ``FILE:LINE: field: reason`` lines (``--set KEY=VALUE: reason`` for a value given
on the command line; :func:`emulation_limits`) or the first of them raised (:func:`require_emulable`).
Pure: it reads the scenario and touches nothing."""

from testbed.scenario.checker import field_error
from testbed.scenario.model import INJECTION_SECTIONS

#: Mininet shapes host interfaces with htb through TCIntf, which accepts at most 1000 Mb/s on these
#: machines; a scaled link rate above it is valid for ``inatb simulate`` only.
HTB_MAX_RATE_BPS = 1000e6
#: ... and writes the rate in Mbit/s with six decimals: far below this it shapes nothing like the figure.
HTB_MIN_RATE_BPS = 1e3
#: Aggregator cells (slots x lanes) an emulated switch allocates: pyswitch keeps them in memory
#: and bmv2 compiles them into registers; 64x the default (1024 x 64) is the most a small VM holds.
MAX_EMULATED_AGGREGATOR_CELLS = 1 << 22
SIMULATE_ONLY = "valid for `inatb simulate` only"


def emulation_limits(scenario) -> list:
    """Why ``inatb run`` cannot emulate ``scenario`` faithfully, as ``FILE:LINE: field: reason`` lines.

    A resolved scenario is valid input for the flow-level simulator; these are
    the checks that would otherwise fail only once the network is built (htb's
    rate ceiling, switch memory) or that the emulation would silently ignore
    (the simulator's ``simulation:`` inputs, a Rina ring of one member). Empty:
    nothing stops a run.
    Pure: reads the scenario, touches nothing. ``require_emulable`` raises on
    the first.
    """
    return [str(_error(scenario, path, reason)) for path, reason in _emulation_limit_fields(scenario)]


def require_emulable(scenario) -> None:
    """Raise ScenarioError ``FILE:LINE: field: valid for `inatb simulate` only: reason`` (the first limit;
    the others are named by field) unless ``emulation_limits(scenario)`` is empty."""
    found = _emulation_limit_fields(scenario)
    if not found:
        return
    (path, reason), others = found[0], [p for p, _ in found[1:]]
    more = f" (also: {', '.join(others)})" if others else ""
    raise _error(scenario, path, f"{SIMULATE_ONLY}: {reason}{more}")


def _error(scenario, path, reason):
    """The ScenarioError of field ``path``: its ``--set`` argument, or its file and line."""
    return field_error(path, reason, scenario.source, scenario.lines, scenario.overridden)


def _emulation_limit_fields(scenario) -> list:
    """[(field path, reason)], one per offending field, in file order of the checks."""
    found = _htb_limits(scenario)
    switch = scenario.switch
    cells = switch.slots * switch.lanes
    if cells > MAX_EMULATED_AGGREGATOR_CELLS:
        found.append(("switch.slots", f"{switch.slots} slots x {switch.lanes} lanes = {cells:,} aggregator cells "
                                      f"per switch; an emulated switch holds at most "
                                      f"{MAX_EMULATED_AGGREGATOR_CELLS:,} (lower switch.slots)"))
    if scenario.simulation.worker_start_fragments:
        found.append(("simulation.worker_start", "the emulation starts every worker together; staggered starts "
                                                 "are a model input of the simulator"))
    topology = scenario.topology
    for i, job in enumerate(scenario.jobs):
        tors = {topology.neighbor(w, topology.host_link(w)) for w in job.workers}
        if job.scheme == "rina" and len(tors) == 1 and topology.nodes[next(iter(tors))].programmable:
            found.append((f"jobs.{i}.workers", f"scheme rina: every worker is under one programmable ToR "
                                               f"({next(iter(tors))}), a ring of one member; the emulated Rina "
                                               f"needs two members at least (workers under another ToR)"))
    return found


def _htb_limits(scenario) -> list:
    """Scaled rates outside [HTB_MIN_RATE_BPS, HTB_MAX_RATE_BPS]: links (the worst per field that set
    them) and timed rate changes (pauses carry no rate)."""
    def shapeable(bps):
        return HTB_MIN_RATE_BPS <= bps <= HTB_MAX_RATE_BPS

    def how_far(bps):
        return max(bps / HTB_MAX_RATE_BPS, HTB_MIN_RATE_BPS / bps)

    def reason(bps, what):
        if bps < HTB_MIN_RATE_BPS:
            return (f"{bps:.3g} b/s{what} is below what htb shapes ({HTB_MIN_RATE_BPS / 1e3:g} kb/s); "
                    f"raise scale (now {scenario.scale:g})")
        return (f"{bps / 1e6:,.0f} Mb/s{what} exceeds what htb shapes ({HTB_MAX_RATE_BPS / 1e6:.0f} Mb/s); "
                f"lower scale (now {scenario.scale:g})")

    worst = {}   # field path -> (rate_bps, " on link a-b")
    for link in scenario.topology.links:
        if not shapeable(link.rate_bps):
            path = _link_rate_field(scenario, link)
            if path not in worst or how_far(link.rate_bps) > how_far(worst[path][0]):
                worst[path] = (link.rate_bps, f" on link {link.a}-{link.b}")
    found = [(path, reason(bps, what)) for path, (bps, what) in worst.items()]
    counts = {}
    for inj in scenario.stragglers.injections:
        section = {kind: section for section, kind in INJECTION_SECTIONS.items()}[inj.kind]
        index = counts[section] = counts.get(section, -1) + 1
        if inj.kind not in ("pause", "failure") and not shapeable(inj.rate_bps):
            found.append((f"stragglers.{section}.{index}.rate", reason(inj.rate_bps, "")))
    return found


def _link_rate_field(scenario, link) -> str:
    """The field that set ``link``'s rate: its own entry, the heterogeneous range, core_rate or link_rate."""
    spec = scenario.resolved.get("topology") or {}
    kinds = {scenario.topology.nodes[link.a].kind, scenario.topology.nodes[link.b].kind}
    if scenario.stragglers.heterogeneous_links and "host" in kinds:
        return "stragglers.heterogeneous_links"
    if spec.get("kind") == "explicit":
        for i, item in enumerate(spec.get("links") or []):
            if isinstance(item, list) and len(item) == 3 and set(item[:2]) == {link.a, link.b}:
                return f"topology.links.{i}"
            if isinstance(item, dict) and "rate" in item and {item.get("a"), item.get("b")} == {link.a, link.b}:
                return f"topology.links.{i}.rate"
    if spec.get("kind") == "dumbbell" and spec.get("core_rate") is not None and kinds == {"switch"}:
        return "topology.core_rate"
    return "topology.link_rate"
