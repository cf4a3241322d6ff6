"""Results directories for the report tests: a run directory and a sweep directory written as the
testbed writes them (summary.json and plots; table.csv and plots by testbed.sweep.table)."""

import json
from types import SimpleNamespace

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from testbed.sweep.table import plot_metric, row, write_table  # noqa: E402


def job_summary(name="resnet50", scheme="atp", iteration_time_s=0.04, ps_ingress_bytes=241920):
    return {"job": name, "policy": scheme, "transport": "atp", "workers": 4, "ps": ["ps"],
            "iterations": 3, "iterations_completed": 3, "aggregation_exact": True,
            "iteration_time_s": iteration_time_s, "comm_time_s": iteration_time_s / 2,
            "gradient_sending_rate_bps": 5e6, "min_gradient_sending_rate_bps": 4.9e6,
            "ps_ingress_bytes": ps_ingress_bytes, "ps_ingress_packets": 72, "fragments_sent": 288,
            "retransmitted_packets": 0, "retransmission_ratio": 0.0, "transport_events": {"timeouts": 0}}


def write_run(run_dir, *, distorted=False, iteration_time_s=0.04, fidelity=None, scenario_text="name: <q&a>\n"):
    """A run directory: summary.json, a plot, an iftop table and scenario.yaml."""
    (run_dir / "plots").mkdir(parents=True)
    (run_dir / "iftop").mkdir()
    summary = {"scenario": "quickstart", "run_id": run_dir.name, "status": "ok", "error": None,
               "distorted": distorted,
               "distortion_reasons": ["machine CPU busy 1.97 of 2 cores"] if distorted else [],
               "target": "pyswitch", "policy": "atp", "iterations": 3, "wall_s": 4.0, "aggregation_exact": True,
               "ps_ingress_bytes": 241920, "iteration_time_s": iteration_time_s, "seed": 7,
               "jobs": [job_summary(iteration_time_s=iteration_time_s)],
               "switches": {"s1": {"aggregated": 288, "emitted": 72, "port_ina_tx": {"5": 72}}},
               "cpu": {"processes": {"switch s1": {"mean": 0.1, "peak": 0.12}}, "machine": {"mean": 0.3, "peak": 0.3},
                       "cores": 2},
               "background": [], "stragglers": {}}
    if fidelity:
        summary["fidelity"] = fidelity
    (run_dir / "summary.json").write_text(json.dumps(summary))
    fig, ax = plt.subplots()
    ax.plot([1, 2, 3], [40, 41, 39])
    fig.savefig(run_dir / "plots" / "iteration_time.png")
    plt.close(fig)
    (run_dir / "iftop" / "ps.txt").write_text("Listening on ps-eth0\n<total>\n")
    (run_dir / "scenario.yaml").write_text(scenario_text)
    return run_dir


def write_sweep(sweep_dir, *, scale=1.0, distorted_point=None):
    """A sweep over policy (ps, atp) x 2 repetitions: table.csv and one plot per metric."""
    rows = []
    for scheme, ingress in (("ps", 960000), ("atp", 240000)):
        for rep in (0, 1):
            point = SimpleNamespace(values=(("policy", scheme),), repetition=rep, seed=100 + rep)
            summary = {"status": "ok", "distorted": scheme == distorted_point, "aggregation_exact": True,
                       "iteration_time_s": scale * (0.04 + 0.001 * rep) * (2 if scheme == "ps" else 1),
                       "ps_ingress_bytes": ingress, "retransmission_ratio": 0.0}
            rows.append(row(point, summary, sweep_dir / "points" / f"{scheme}-{rep}", "ok", ""))
    sweep_dir.mkdir(parents=True, exist_ok=True)
    frame = write_table(rows, sweep_dir / "table.csv")
    (sweep_dir / "plots").mkdir()
    for metric in ("iteration_time_s", "ps_ingress_bytes"):
        plot_metric(frame, ["policy"], metric, sweep_dir / "plots" / f"{metric}.png", metric)
    return sweep_dir
