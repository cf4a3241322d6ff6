"""Paper metrics from a run's records: ``summary.json`` and ``iterations.csv``.

What each key means, with its unit, is defined once in :mod:`testbed.metrics.definitions` (names follow
the papers: GOAT §VII-A, InArt §5, PA-ATP §5); this module computes them from the agents' records, the
switches' counters and the kernel's.
"""

import csv
import datetime
import io
import json
import secrets
from pathlib import Path
from statistics import mean

from testbed.atomic_io import write_text_atomic
from testbed.metrics.distortion import Evidence
from testbed.training import checks as training_checks


def load_records(run_dir: Path) -> dict:
    """Each agent's records, one per iteration: an iteration recorded twice (redone by a new ring generation
    after a worker's error, testbed.agents.ring_generation) keeps its later record."""
    records = {}
    for path in sorted((Path(run_dir) / "records").glob("*.jsonl")):
        rows = {}
        for line in path.read_text().splitlines():
            if line.strip():
                row = json.loads(line)
                rows.pop(row["iteration"], None)
                rows[row["iteration"]] = row
        records[path.stem] = list(rows.values())
    return records


def job_metrics(job, records: dict, participants=(), warmup_iterations: int = 0, failed=(),
                aggregation_depth: int = 1) -> dict:
    """Metrics of one job; with K-of-N participation, the workers that count define the timing. Workers that
    ``failed`` (``stragglers.failures``) neither complete the job nor time it; what they sent counts.
    ``aggregation_depth``: the most aggregation nodes a gradient passes (:meth:`JobPlacement.aggregation_depth`).

    Times, rates and the per-iteration PS ingress leave out the first ``warmup_iterations`` iterations
    (``metrics.warmup_iterations``; all of them when no later iteration completed); totals of packets and
    bytes cover every iteration.
    """
    ps_rows = [r for ps in job.ps_agents for r in records.get(ps, [])]
    # Completion, iteration time and exactness: the PSs' records, or a ring's workers' (JobSpec.completion_agents).
    done_by = [agent for agent in job.completion_agents if agent not in failed]
    done_rows = [r for agent in done_by for r in records.get(agent, [])]
    counted = [w for w in list(participants) or list(job.workers) if w not in failed]
    timed = lambda rows: [r for r in rows if r["iteration"] >= warmup_iterations]  # noqa: E731
    worker_rows = {w: timed(records.get(w, [])) for w in counted}
    completed = min((len(records.get(agent, [])) for agent in done_by), default=0)
    per_agent_iteration = [mean(r["iteration_s"] for r in timed(records.get(agent, []))) for agent in done_by
                           if timed(records.get(agent, []))]
    comm = [r["comm_s"] for rows in worker_rows.values() for r in rows]
    worker_rates = {w: mean(r["sending_rate_bps"] for r in rows) for w, rows in worker_rows.items() if rows}
    sent_bytes = sum(r["sent_bytes"] for w in counted for r in records.get(w, []))
    all_worker_rows = [r for w in job.workers for r in records.get(w, [])]
    fragments_sent = sum(r["fragments"] for r in all_worker_rows)
    gradient_frame_bytes = sum(r["fragments"] * r["sent_bytes"] / r["sent_pkts"] for r in all_worker_rows
                               if r["sent_pkts"])
    ps_ingress_bytes = sum(r["ingress_bytes"] for r in ps_rows)
    retransmitted = sum(r["retx_pkts"] for r in all_worker_rows)
    events = {k: sum(r.get(k, 0) for r in all_worker_rows)
              for k in ("timeouts", "fast_retransmits", "ecn_echoes", "window_cuts", "releases",
                        "retx_before_first_result")}
    iteration_s = max(per_agent_iteration) if per_agent_iteration else None
    first = warmup_iterations if completed > warmup_iterations else 0
    steady_ps_pkts = sum(r["ingress_pkts"] for r in ps_rows if first <= r["iteration"] < completed)
    return {
        "job": job.name, "policy": job.scheme, "transport": job.transport, "workers": len(job.workers),
        "ps": list(job.ps),
        "participants": counted,
        "failed_workers": [w for w in job.workers if w in failed],
        "discarded_packets": sum(r.get("discarded_pkts", 0) for r in ps_rows),
        "iterations": job.iterations, "iterations_completed": completed,
        "aggregation_exact": bool(done_rows) and completed == job.iterations and (
            all(r["exact"] for r in done_rows) if job.training is None
            else training_aggregates_exact(job, records, counted, done_by)),
        "mismatched_fragments": sum(r["mismatched_fragments"] for r in done_rows),
        "iteration_time_s": iteration_s,
        "comm_time_s": mean(comm) if comm else None,
        **iteration_rates(iteration_s, len(counted)),
        "gradient_sending_rate_bps": mean(worker_rates.values()) if worker_rates else None,
        "min_gradient_sending_rate_bps": min(worker_rates.values()) if worker_rates else None,
        "ps_ingress_bytes": ps_ingress_bytes,
        "ps_ingress_packets": sum(r["ingress_pkts"] for r in ps_rows),
        "ps_ingress_fragments_per_iteration": steady_ps_pkts / (completed - first) if completed else None,
        "worker_sent_bytes": sent_bytes,
        "gradient_frame_bytes": gradient_frame_bytes,
        "ina_amount_bytes": 0.0 if job.is_ring else max(0.0, gradient_frame_bytes - ps_ingress_bytes),
        "fragments_sent": fragments_sent,
        "retransmitted_packets": retransmitted,
        "retransmission_ratio": retransmitted / fragments_sent if fragments_sent else None,
        "spurious_retransmissions_at_ps": sum(r.get("spurious_retx_pkts", 0) for r in ps_rows),
        "bypassed_packets": sum(r["bypassed_pkts"] for r in ps_rows),
        "duplicate_packets_at_ps": sum(r["duplicate_pkts"] for r in ps_rows),
        "ce_marked_packets_at_ps": sum(r.get("ce_marked_pkts", 0) for r in ps_rows),
        "transport_events": events,
        # A job whose workers do not know its stragglers (straggler_allowance false) resends on purpose while
        # it waits for them: those resends are the scheme's, not the emulator's (honest_figures).
        "straggler_wait_retransmissions": 0 if job.straggler_allowance else events["retx_before_first_result"],
        "aggregation_depth": aggregation_depth,
        **({} if job.training is None else training_metrics(job, records)),
    }


def training_aggregates_exact(job, records: dict, counted, ps_agents) -> bool:
    """A training job's PSs' aggregates, checked against the sums of its counted workers' checksums
    (testbed.training.checks: the PS cannot recompute real gradients)."""
    by_index = {job.workers.index(w): records.get(w, []) for w in job.workers}
    counted_indices = [job.workers.index(w) for w in counted]
    verdicts = [training_checks.aggregates_exact(records.get(ps, []), by_index, counted_indices)
                for ps in ps_agents]
    return all(v and all(v.values()) for v in verdicts)


def training_metrics(job, records: dict) -> dict:
    """A training job's own figures (definitions: JOB_METRICS, from ``models_identical`` to
    ``compute_overrun_s``) from its workers' records; the evaluator is its first worker."""
    worker_rows = {w: records.get(w, []) for w in job.workers}
    evaluator_rows = worker_rows[job.workers[0]]
    start = evaluator_rows[0]["t_start"] if evaluator_rows else 0.0
    curve = training_checks.accuracy_rows(evaluator_rows, start)
    target = job.training.target_accuracy
    diverged = training_checks.diverged_iterations(worker_rows)
    rows = [r for rs in worker_rows.values() for r in rs]
    return {"models_identical": not diverged, "diverged_iterations": diverged,
            "final_accuracy": curve[-1]["accuracy"] if curve else None,
            "final_loss": curve[-1]["loss"] if curve else None, "target_accuracy": target,
            "time_to_accuracy_s": None if target is None else training_checks.time_to_accuracy_s(curve, target),
            "clipped_values": sum(r.get("clipped", 0) for r in rows),
            "compute_overrun_s": max((r.get("compute_overrun_s", 0.0) for r in rows), default=0.0)}


def mean_of_known(values):
    """The mean of the values that are not None; None when none is known."""
    values = [v for v in values if v is not None]
    return sum(values) / len(values) if values else None


def iteration_rates(iteration_s, counted_workers: int) -> dict:
    """A job's ``training_throughput_iter_per_s`` and ``counted_gradients_per_s`` from its iteration time
    (None when it has none, or none that is positive and finite)."""
    known = iteration_s is not None and 0 < iteration_s < float("inf")
    return {"training_throughput_iter_per_s": 1 / iteration_s if known else None,
            "counted_gradients_per_s": counted_workers / iteration_s if known else None}


def jobs_headline(jobs: list) -> dict:
    """The run-level figures of a run's jobs, emulated or simulated: ``iteration_time_s``, ``comm_time_s`` and
    ``training_throughput_iter_per_s`` their means, ``counted_gradients_per_s``, ``ps_ingress_bytes`` and
    ``ina_amount_bytes`` their sums."""
    return {
        "iteration_time_s": mean_of_known([j["iteration_time_s"] for j in jobs]),
        "comm_time_s": mean_of_known([j["comm_time_s"] for j in jobs]),
        "training_throughput_iter_per_s": mean_of_known([j["training_throughput_iter_per_s"] for j in jobs]),
        "counted_gradients_per_s": sum(j["counted_gradients_per_s"] or 0.0 for j in jobs) or None,
        "ps_ingress_bytes": sum(j["ps_ingress_bytes"] for j in jobs),
        "ina_amount_bytes": sum(j["ina_amount_bytes"] for j in jobs),
    }


#: The version of ``summary.json``'s layout, its first key: raised when a key is removed or renamed or its
#: meaning or unit changes, so a reader can refuse a summary it does not know; a new key leaves it.
SUMMARY_SCHEMA_VERSION = 1


def run_summary(scenario, target: str, jobs: list, status: str = "ok", error=None, distortion_reasons=(),
                run_level: dict = None, **sections) -> dict:
    """The one producer of ``summary.json``, for an emulated run (testbed.emulation.results) and a simulated
    one (testbed.sim.run) alike: its layout's version (``schema_version``), what ran (``scenario``,
    ``target``, ``policy``, ``iterations``, ``seed``, ``scale``), how it ended (``status``, ``error``,
    ``distorted`` and its reasons), the run-level figures (:func:`jobs_headline`, then ``run_level``'s), the
    per-job summaries and the producer's ``sections``."""
    return {
        "schema_version": SUMMARY_SCHEMA_VERSION,
        "scenario": scenario.name,
        "status": status,
        "error": error,
        "distorted": bool(distortion_reasons),
        "distortion_reasons": list(distortion_reasons),
        "target": target,
        "policy": ",".join(sorted({j.scheme for j in scenario.jobs})),
        "iterations": sum(j.iterations for j in scenario.jobs),
        **jobs_headline(jobs),
        **(run_level or {}),
        "jobs": jobs,
        "seed": scenario.seed,
        "scale": scenario.scale,
        **sections,
    }


def run_metrics(jobs: list, switch_stats: dict, deltas: dict, ps_ports: list, frame_bytes: int) -> dict:
    """An emulated run's figures beyond :func:`jobs_headline`, from its jobs' (``job_metrics``), the switches'
    counters and the kernel counters of the switch ports (``counters.interface_deltas``; a switch port's tx
    is its neighbour's rx):

    - ``aggregation_exact``: every job exact;
    - ``ps_ingress_link_bytes``: kernel bytes into the PSs' links (everything, not only INA frames);
    - ``gradient_sending_rate_bps``: the mean over jobs;
    - ``switch_egress_fragments``: gradient packets (not RESULTs) leaving switch ports (GOAT Fig. 2);
    - ``communication_overhead_bytes``: those packets in frame bytes (``frame_bytes`` each: every INA
      frame of a run is full-size), GOAT §IV's objective: gradients sent over the links, RESULTs not;
    - ``switch_tx_link_bytes``: kernel bytes leaving switch ports, every frame (RESULTs, background).
    """
    egress_fragments = sum(sum(int(v) for v in st.get("port_ina_tx", {}).values()) for st in switch_stats.values())
    return {
        "aggregation_exact": bool(jobs) and all(j["aggregation_exact"] for j in jobs),
        "ps_ingress_link_bytes": sum(deltas.get(p, {}).get("tx_bytes", 0) for p in ps_ports),
        "gradient_sending_rate_bps": mean_of_known([j["gradient_sending_rate_bps"] for j in jobs]),
        "switch_egress_fragments": egress_fragments,
        "communication_overhead_bytes": egress_fragments * frame_bytes,
        "switch_tx_link_bytes": sum(d["tx_bytes"] for d in deltas.values()),
    }


def honest_figures(jobs: list, switch_stats: dict, host_losses: dict, cpu: dict, packet_rate_bound: dict = None):
    """The run-level fidelity figures of ``summary.json`` and the evidence the distorted mark weighs.

    - ``retransmission_ratio``: worker retransmissions / original fragments, all jobs;
    - ``spurious_retransmissions``: retransmissions of a contribution its aggregation node already
      held: RETX duplicates at switches (``partial_flushed``, or ``retx_held`` where a switch holds its
      partials) plus at PSs (counted at every node such a retransmission reaches, so an upper bound),
      less the transports' deliberate releases
      (``transport_events.releases``: PA-ATP retransmits a fragment a switch holds to release its
      partial aggregate to the PS, §III-B 1; each is one such duplicate where it arrives) and the
      resends of jobs without a straggler allowance sent before their iteration's first RESULT
      (``straggler_wait_retransmissions``: a fast worker's timer firing while the job waits for a
      straggler to start, what a deployed transport does; each is at most one such duplicate at each
      of the job's ``aggregation_depth`` nodes: ATP's ToR re-emits its complete aggregate, still a
      retransmission, and the switch above flushes its partial);
    - ``queue_drops``: per switch and port, tail drops of the egress queues (pyswitch; bmv2 does not count them);
    - ``impairment_drops``: per switch and port, packets the link impairment dropped (both targets count them);
    - ``unmodelled_losses``: per place, packets lost outside modelled queues and impairments;
    - ``cpu``: per process mean and peak share of a core, and the machine's;
    - ``packet_rate_bound_ports``: bmv2 ports held below their link rate by their packets-per-second
      shaper (``packet_rate_bound``, :func:`testbed.metrics.counters.packet_rate_bound_ports`).
    """
    packet_rate_bound = dict(packet_rate_bound or {})
    fragments = sum(j["fragments_sent"] for j in jobs)
    retransmitted = sum(j["retransmitted_packets"] for j in jobs)
    duplicates = sum(j["spurious_retransmissions_at_ps"] for j in jobs) + \
        sum(int(st.get("partial_flushed", 0)) + int(st.get("retx_held", 0)) for st in switch_stats.values())
    spurious = max(0, duplicates - sum(j["transport_events"].get("releases", 0)
                                       + j.get("straggler_wait_retransmissions", 0) * j.get("aggregation_depth", 1)
                                       for j in jobs))
    unmodelled = {}
    for name, st in switch_stats.items():
        if st.get("socket_dropped"):
            unmodelled[f"switch {name} port sockets"] = int(st["socket_dropped"])
    for host, losses in host_losses.items():
        for where, packets in losses.items():
            if packets:
                unmodelled[f"host {host} ({where})"] = packets
    figures = {
        "fragments_sent": fragments,
        "retransmitted_packets": retransmitted,
        "retransmission_ratio": retransmitted / fragments if fragments else None,
        "spurious_retransmissions": spurious,
        "spurious_retransmission_ratio": spurious / fragments if fragments else None,
        "queue_drops": {n: {p: c for p, c in st.get("queue_dropped", {}).items() if c}
                        for n, st in switch_stats.items() if "queue_dropped" in st},
        "impairment_drops": {n: {p: v["dropped"] for p, v in st.get("impairment", {}).items() if v.get("dropped")}
                             for n, st in switch_stats.items() if st.get("impairment")},
        "unmodelled_losses": unmodelled,
        "packet_rate_bound_ports": packet_rate_bound,
        "cpu": cpu,
    }
    evidence = Evidence(fragments_sent=fragments, retransmissions=retransmitted, spurious_retransmissions=spurious,
                        cpu=cpu or {}, unmodelled_losses=unmodelled, packet_rate_bound=packet_rate_bound)
    return figures, evidence


def new_run_id() -> str:
    """A run directory's name: its start time, then four hex digits (run ids sort by time)."""
    return datetime.datetime.now().strftime("%Y%m%d-%H%M%S-") + secrets.token_hex(2)


def write_summary(run_dir: Path, summary: dict) -> Path:
    """``summary.json`` of a run, written whole or not at all."""
    return write_text_atomic(Path(run_dir) / "summary.json", json.dumps(summary, indent=2, default=str) + "\n")


def write_iterations_csv(path: Path, scenario, records: dict):
    """One row per agent and iteration; with a training job, each worker's parameter hash (every worker's must
    be the same at an iteration) and training loss too."""
    fields = ["job", "node", "role", "iteration", "iteration_s", "comm_s", "compute_s", "sent_bytes", "retx_pkts",
              "ingress_bytes", "exact"]
    if any(job.training for job in scenario.jobs):
        fields += ["param_hash", "train_loss"]
    text = io.StringIO()
    out = csv.DictWriter(text, fieldnames=fields, extrasaction="ignore")
    out.writeheader()
    for job in scenario.jobs:
        for node, role in [(w, "worker") for w in job.workers] + [(p, "ps") for p in job.ps_agents]:
            for r in records.get(node, []):
                out.writerow({"job": job.name, "node": node, "role": role, **r})
    write_text_atomic(path, text.getvalue())


ACCURACY_FIELDS = ["job", "iteration", "time_s", "accuracy", "loss", "eval_s"]


def write_accuracy_csv(path: Path, scenario, records: dict, start_epoch_s: float) -> bool:
    """``accuracy.csv`` of a run with training jobs: each evaluation of a training job's model on its held-out
    set (its first worker evaluates), with the virtual time since the run's start; False (nothing written)
    without a training job."""
    jobs = [job for job in scenario.jobs if job.training]
    if not jobs:
        return False
    text = io.StringIO()
    out = csv.DictWriter(text, fieldnames=ACCURACY_FIELDS)
    out.writeheader()
    for job in jobs:
        for row in training_checks.accuracy_rows(records.get(job.workers[0], []), start_epoch_s):
            out.writerow({"job": job.name, **row})
    write_text_atomic(path, text.getvalue())
    return True
