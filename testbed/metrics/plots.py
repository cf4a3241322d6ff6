"""PNG plots of a run: per-iteration time, PS ingress rate, switch egress rates."""

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from testbed.metrics.counters import rate_series  # noqa: E402


def plot_iterations(path, scenario, records):
    fig, ax = plt.subplots(figsize=(7, 4))
    for job in scenario.jobs:
        for ps in job.ps:
            rows = records.get(ps, [])
            ax.plot([r["iteration"] for r in rows], [r["iteration_s"] * 1e3 for r in rows], marker="o",
                    label=f"{job.name} ({job.policy}) at {ps}")
        comm = {}
        for w in job.workers:
            for r in records.get(w, []):
                comm.setdefault(r["iteration"], []).append(r["comm_s"] * 1e3)
        if comm:
            its = sorted(comm)
            ax.plot(its, [max(comm[i]) for i in its], linestyle="--", label=f"{job.name}: slowest worker comm")
    ax.set_xlabel("iteration")
    ax.set_ylabel("time (ms)")
    ax.set_title(f"{scenario.name}: per-iteration time")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot_link_rates(path, title, samples, ifaces: dict):
    """``ifaces``: label -> (interface, counter field)."""
    fig, ax = plt.subplots(figsize=(7, 4))
    for label, (ifname, field) in ifaces.items():
        series = rate_series(samples, ifname, field)
        if series:
            ax.plot([t for t, _ in series], [r / 1e6 for _, r in series], label=label)
    ax.set_xlabel("time (s)")
    ax.set_ylabel("rate (Mb/s)")
    ax.set_title(title)
    ax.grid(alpha=0.3)
    if ifaces:
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
