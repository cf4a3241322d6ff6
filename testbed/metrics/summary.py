"""Paper metrics from a run's records: ``summary.json`` and ``iterations.csv``.

Names follow the papers (GOAT §VII-A, InArt §5, PA-ATP §5):

- ``iteration_time_s``: mean time per training iteration (PS view: between
  consecutive completions of its global aggregation; mean over PSs);
- ``comm_time_s``: mean communication time per iteration (worker view: first
  fragment sent to last result received);
- ``gradient_sending_rate_bps``: mean over workers of bytes sent per second of
  communication (GRID's metric is the minimum: ``min_gradient_sending_rate_bps``);
- ``ps_ingress_bytes``: INA frames received by the PSs (the PS aggregation
  overhead; Ethernet + IPv4 + UDP + INA + payload);
- ``ina_amount_bytes``: raw gradient bytes absorbed in switches (sent by
  workers minus the raw bytes that reached a PS);
- ``switch_egress_fragments`` / ``communication_overhead_bytes``: INA
  packets / kernel bytes leaving switch ports (GOAT's communication
  overhead over all links);
- ``training_throughput_iter_per_s``; ``aggregation_exact``.
"""

import csv
import json
from pathlib import Path
from statistics import mean


def load_records(run_dir: Path) -> dict:
    records = {}
    for path in sorted((Path(run_dir) / "records").glob("*.jsonl")):
        rows = []
        for line in path.read_text().splitlines():
            if line.strip():
                rows.append(json.loads(line))
        records[path.stem] = rows
    return records


def job_metrics(job, records: dict, participants=()) -> dict:
    """Metrics of one job; with K-of-N participation, the workers that count define the timing."""
    ps_rows = [r for ps in job.ps for r in records.get(ps, [])]
    counted = list(participants) or list(job.workers)
    worker_rows = {w: records.get(w, []) for w in counted}
    completed = min((len(records.get(ps, [])) for ps in job.ps), default=0)
    per_ps_iteration = [mean(r["iteration_s"] for r in records.get(ps, [])) for ps in job.ps if records.get(ps)]
    comm = [r["comm_s"] for rows in worker_rows.values() for r in rows]
    worker_rates = {w: mean(r["sending_rate_bps"] for r in rows) for w, rows in worker_rows.items() if rows}
    sent_bytes = sum(r["sent_bytes"] for rows in worker_rows.values() for r in rows)
    raw_at_ps_bytes = 0
    for r in ps_rows:
        if r["ingress_pkts"]:
            raw_at_ps_bytes += r["ingress_bytes"] * r["raw_pkts"] / r["ingress_pkts"]
    iteration_s = max(per_ps_iteration) if per_ps_iteration else None
    return {
        "job": job.name, "policy": job.policy, "workers": len(job.workers), "ps": list(job.ps),
        "participants": counted,
        "discarded_packets": sum(r.get("discarded_pkts", 0) for r in ps_rows),
        "iterations": job.iterations, "iterations_completed": completed,
        "aggregation_exact": bool(ps_rows) and completed == job.iterations and all(r["exact"] for r in ps_rows),
        "mismatched_fragments": sum(r["mismatched_fragments"] for r in ps_rows),
        "iteration_time_s": iteration_s,
        "comm_time_s": mean(comm) if comm else None,
        "training_throughput_iter_per_s": (1 / iteration_s) if iteration_s else None,
        "gradient_sending_rate_bps": mean(worker_rates.values()) if worker_rates else None,
        "min_gradient_sending_rate_bps": min(worker_rates.values()) if worker_rates else None,
        "ps_ingress_bytes": sum(r["ingress_bytes"] for r in ps_rows),
        "ps_ingress_packets": sum(r["ingress_pkts"] for r in ps_rows),
        "worker_sent_bytes": sent_bytes,
        "ina_amount_bytes": max(0.0, sent_bytes - raw_at_ps_bytes),
        "retransmitted_packets": sum(r["retx_pkts"] for rows in worker_rows.values() for r in rows),
        "bypassed_packets": sum(r["bypassed_pkts"] for r in ps_rows),
        "duplicate_packets_at_ps": sum(r["duplicate_pkts"] for r in ps_rows),
    }


def write_iterations_csv(path: Path, scenario, records: dict):
    fields = ["job", "node", "role", "iteration", "iteration_s", "comm_s", "compute_s", "sent_bytes", "retx_pkts",
              "ingress_bytes", "exact"]
    with open(path, "w", newline="") as f:
        out = csv.DictWriter(f, fieldnames=fields, extrasaction="ignore")
        out.writeheader()
        for job in scenario.jobs:
            for node, role in [(w, "worker") for w in job.workers] + [(p, "ps") for p in job.ps]:
                for r in records.get(node, []):
                    out.writerow({"job": job.name, "node": node, "role": role, **r})
