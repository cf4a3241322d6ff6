"""Plots of a run: per-iteration time, PS ingress rate, each worker's sending rate, switches' aggregation.

Every figure of the testbed is written by :func:`save_figure`: a PNG (what the HTML report embeds) and, beside
it, the same figure as SVG (a vector figure for a paper or a slide).
"""

import os
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from testbed.metrics.counters import rate_series, stat_rate_series  # noqa: E402


def plot_iterations(path, scenario, records):
    fig, ax = plt.subplots(figsize=(7, 4))
    for job in scenario.jobs:
        for ps in job.ps_agents:
            rows = records.get(ps, [])
            ax.plot([r["iteration"] for r in rows], [r["iteration_s"] * 1e3 for r in rows], marker="o",
                    label=f"{job.name} ({job.scheme}) at {ps}")
        comm, ring_iteration = {}, {}
        for w in job.workers:
            for r in records.get(w, []):
                comm.setdefault(r["iteration"], []).append(r["comm_s"] * 1e3)
                if job.is_ring:
                    ring_iteration.setdefault(r["iteration"], []).append(r["iteration_s"] * 1e3)
        if ring_iteration:
            its = sorted(ring_iteration)
            ax.plot(its, [max(ring_iteration[i]) for i in its], marker="o",
                    label=f"{job.name} ({job.scheme}): slowest worker")
        if comm:
            its = sorted(comm)
            ax.plot(its, [max(comm[i]) for i in its], linestyle="--", label=f"{job.name}: slowest worker comm")
    finish_figure(fig, ax, path, "iteration", "time (ms)", f"{scenario.name}: per-iteration time", legend=True)


def plot_accuracy(path, scenario, records, t0: float):
    """Held-out accuracy of each training job's model against virtual time since ``t0`` (the run's start), its
    target dotted."""
    from testbed.training.checks import accuracy_rows
    fig, ax = plt.subplots(figsize=(7, 4))
    for job in scenario.jobs:
        if job.training:
            rows = accuracy_rows(records.get(job.workers[0], []), t0)
            ax.plot([r["time_s"] for r in rows], [r["accuracy"] for r in rows], marker="o",
                    label=f"{job.name} ({job.scheme})")
            if job.training.target_accuracy is not None:
                ax.axhline(job.training.target_accuracy, linestyle=":", color="grey")
    finish_figure(fig, ax, path, "virtual time (s)", "held-out accuracy", f"{scenario.name}: accuracy",
                  legend=True)


def plot_link_rates(path, title, samples, ifaces: dict, events=(), t0: float = None):
    """``ifaces``: label -> (interface, counter field); ``events``: event-log records to mark (at their
    ``t_s``, seconds since the start signal); time zero is ``t0`` (epoch s; the run's start signal),
    default the first sample."""
    fig, ax = plt.subplots(figsize=(7, 4))
    if t0 is None:
        t0 = samples[0]["t"] if samples else 0.0
    for label, (ifname, field) in ifaces.items():
        series = rate_series(samples, ifname, field, t0)
        if series:
            ax.plot([t for t, _ in series], [r / 1e6 for _, r in series], label=label)
    starts = {}
    for event in events:
        if event.get("phase") == "start" and event["kind"] != "start" and event.get("duration_s") == 0:
            # an instant (a worker's failure): a line
            ax.axvline(event["t_s"], color="tab:red", linestyle="--", linewidth=1)
            ax.text(event["t_s"], ax.get_ylim()[1] * 0.95, f"{event['kind']} {'-'.join(event['target'])}",
                    fontsize=7, va="top")
        elif event.get("phase") == "start" and event["kind"] != "start":
            starts[(event["kind"], tuple(event["target"]))] = event["t_s"]
        elif event.get("phase") == "end":
            begin = starts.pop((event["kind"], tuple(event["target"])), None)
            if begin is not None:
                ax.axvspan(begin, event["t_s"], alpha=0.15, color="tab:red")
                ax.text(begin, ax.get_ylim()[1] * 0.95, f"{event['kind']} {'-'.join(event['target'])}",
                        fontsize=7, va="top")
    finish_figure(fig, ax, path, "time since the start signal (s)", "rate (Mb/s)", title, legend=bool(ifaces))


def plot_aggregation_rates(path, title, stat_samples, switches, contribution_payload_bytes: int, t0: float):
    """Each switch's aggregation throughput over time (PA-ATP §V-A: "the size of gradients aggregated by
    the switch per unit time"): its ``aggregated`` contributions per second x their payload, in Mb/s of
    gradient payload (lanes x 4 bytes; headers not counted)."""
    fig, ax = plt.subplots(figsize=(7, 4))
    for switch in switches:
        series = stat_rate_series(stat_samples, switch, "aggregated", t0)
        if series:
            ax.plot([t for t, _ in series], [8 * contribution_payload_bytes * r / 1e6 for _, r in series],
                    label=switch)
    finish_figure(fig, ax, path, "time since the start signal (s)", "gradient payload aggregated (Mb/s)", title,
                  legend=bool(switches))


#: Legend entries per column.
LEGEND_ROWS = 12


def finish_figure(fig, ax, path, xlabel: str, ylabel: str, title: str, legend: bool):
    """Labels, grid and legend as every plot of the testbed has them; written atomically, then closed."""
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.grid(alpha=0.3)
    lines = len(ax.get_legend_handles_labels()[0])     # a run too short for two samples draws no line
    if legend and lines:
        # Columns of at most LEGEND_ROWS entries: a fat-tree's 45 switches in one column outgrow the figure.
        ax.legend(fontsize=8 if lines <= LEGEND_ROWS else 6, ncol=1 + (lines - 1) // LEGEND_ROWS)
    fig.tight_layout()
    save_figure(fig, path)
    plt.close(fig)


#: The PNG's resolution: sharp on a laptop's screen at the report's width.
PNG_DPI = 150
#: The vector format written beside each PNG (``<name>.svg``), unless the figure is made of images.
VECTOR_FORMAT = "svg"


def save_figure(fig, path, vector: bool = True):
    """Write ``path`` (a PNG) and, with ``vector``, the same figure as SVG beside it (``<name>.svg``; a figure
    made of raster images gains nothing from it); each written beside its place and renamed into it, so a plot
    appears whole or not at all."""
    path = Path(path)
    formats = (("png", path),) + (((VECTOR_FORMAT, path.with_suffix(f".{VECTOR_FORMAT}")),) if vector else ())
    for fmt, out in formats:
        tmp = out.with_name(f".{out.stem}.{os.getpid()}.tmp.{fmt}")
        try:
            # no date in the SVG: the same figure is the same file
            fig.savefig(tmp, format=fmt, dpi=PNG_DPI, metadata={"Date": None} if fmt == "svg" else None)
            os.replace(tmp, out)
        finally:
            tmp.unlink(missing_ok=True)
