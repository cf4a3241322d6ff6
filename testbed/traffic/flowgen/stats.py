"""Summaries of flowgen's records over a window: offered, achieved and received load as shares of a link's
capacity, and flow completion time percentiles (what a run reports of its background traffic)."""
from __future__ import annotations

import math
from typing import Dict, Optional, Sequence

PERCENTILES = (50, 95, 99)


def _percentile(sorted_values: Sequence[float], q: float) -> float:
    """Percentile with linear interpolation between order statistics (numpy's default)."""
    position = (len(sorted_values) - 1) * q / 100.0
    lo = math.floor(position)
    hi = min(lo + 1, len(sorted_values) - 1)
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * (position - lo)


def _window_capacity_bytes(duration_s: float, link_rate_bps: float) -> float:
    """Bytes ``link_rate_bps`` carries in ``duration_s``: what every load of a window is a share of."""
    if duration_s <= 0 or link_rate_bps <= 0:
        raise ValueError(f"duration_s and link_rate_bps must be > 0, got {duration_s}, {link_rate_bps}")
    return link_rate_bps * duration_s / 8.0


def summarise_flows(records: Sequence[dict], duration_s: float, link_rate_bps: float) -> Dict[str, Optional[float]]:
    """Summary of source records over a window of ``duration_s`` on ``link_rate_bps`` of capacity.

    ``achieved_load`` = bytes of *completed* flows / (link_rate_bps * duration_s / 8)
    (a flow cut off at the deadline contributes nothing: the sender cannot know
    how much of it arrived; ``received_load`` counts it from the sinks' records);
    ``offered_load`` is the same ratio for the bytes of all flows. For records of
    several senders pass the sum of their link rates. FCT percentiles (linear
    interpolation) are over completed flows and None when no flow completed;
    ``mean_size_bytes`` is over all flows.
    """
    capacity_bytes = _window_capacity_bytes(duration_s, link_rate_bps)
    completed = [r for r in records if r["completed"]]
    offered_bytes = sum(r["size_bytes"] for r in records)
    delivered_bytes = sum(r["size_bytes"] for r in completed)
    fcts_s = sorted(r["fct_s"] for r in completed)
    summary: Dict[str, Optional[float]] = {
        "flow_count": len(records),
        "completed_count": len(completed),
        "offered_bytes": offered_bytes,
        "delivered_bytes": delivered_bytes,
        "offered_load": offered_bytes / capacity_bytes,
        "achieved_load": delivered_bytes / capacity_bytes,
        "mean_size_bytes": offered_bytes / len(records) if records else None,
    }
    for q in PERCENTILES:
        summary[f"fct_p{q}_s"] = _percentile(fcts_s, q) if fcts_s else None
    return summary


def received_load(sink_records: Sequence[dict], duration_s: float, link_rate_bps: float) -> Dict[str, float]:
    """What the sinks received over a window of ``duration_s`` on ``link_rate_bps`` of capacity.

    ``received_load`` = payload bytes of every connection the sinks recorded, completed or cut off at
    the deadline / (link_rate_bps * duration_s / 8): the share of the capacity the flows actually used.
    ``achieved_load`` (``summarise_flows``) counts completed flows only, so one Hadoop flow of
    megabytes still running at the deadline takes its every byte out of it: on PA-ATP's testbed at
    4 Mb/s a cut-off 10 MB flow is a third of the load over 60 s. Same units as ``achieved_load``
    (TCP payload bytes over link capacity).
    """
    capacity_bytes = _window_capacity_bytes(duration_s, link_rate_bps)
    received_bytes = sum(r["bytes"] for r in sink_records)
    return {"received_bytes": received_bytes, "received_load": received_bytes / capacity_bytes}
