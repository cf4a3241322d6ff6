"""The text report: what ``inatb run`` prints at the end, and ``inatb report DIR`` for a run or a sweep."""

from pathlib import Path

from testbed.metrics.distortion import CPU_REASON, reason_kind
from testbed.reports.results import load_summary, load_table, numeric_metrics, point_means

#: The metrics a sweep's text report shows per point (those its table has).
SWEEP_REPORT_METRICS = ("iteration_time_s", "comm_time_s", "gradient_sending_rate_bps", "ps_ingress_bytes",
                        "retransmission_ratio")


def superseded_sentence(earlier: dict) -> str:
    """What a run says of an earlier run of its plan that it superseded (an entry of ``superseded_runs``)."""
    return (f"ran again after run {earlier['run_id']} at time dilation {earlier['time_dilation']:g} was "
            f"host-bound ({'; '.join(earlier['distortion_reasons'])})")


def format_summary(s: dict) -> str:
    from testbed.agents.transport import default_transport

    def num(v, fmt):
        return "n/a" if v is None else format(v, fmt)
    dilation = s.get("time_dilation") or 1
    slowed = f" at time dilation {dilation:g} (times and rates below are virtual)" if dilation != 1 else ""
    lines = [f"scenario {s['scenario']} on {s['target']}: {s['status']}, wall {s['wall_s']:.1f}s{slowed}, "
             f"aggregation {'exact' if s['aggregation_exact'] else 'NOT exact'}"]
    for j in s["jobs"]:
        transport = j.get("transport")
        how = j["policy"] + (f", transport {transport}" if transport and transport != default_transport(j["policy"])
                             else "")
        rate_bps = j["gradient_sending_rate_bps"]
        lines.append(f"  {j['job']} ({how}): {j['iterations_completed']}/{j['iterations']} iterations, "
                     f"{num(j['iteration_time_s'], '.3f')} s/iteration, comm {num(j['comm_time_s'], '.3f')} s, "
                     f"PS ingress {j['ps_ingress_bytes'] / 1e6:.2f} MB, "
                     f"sending rate {num(rate_bps and rate_bps / 1e6, '.1f')} Mb/s, "
                     f"retransmissions {j['retransmitted_packets']} "
                     f"({num(j.get('retransmission_ratio') and 100 * j['retransmission_ratio'], '.1f')}%)")
    plan = s.get("packet_budget") or {}
    if s.get("distorted"):
        lines.append("  DISTORTED (an emulator artifact, not a result): " + "; ".join(s["distortion_reasons"]))
        if plan.get("packet_costs_measured_here") is False and \
                any(reason_kind(r) == CPU_REASON for r in s["distortion_reasons"]):
            lines.append("  the time dilation was planned with " + plan["packet_costs"])
    lines += [f"  {superseded_sentence(earlier)}" for earlier in s.get("superseded_runs") or []]
    for warning in plan.get("warnings", []):
        lines.append(f"  predicted CPU-bound (packet budget): {warning}")
    for b in s.get("background") or []:
        if "received_datagrams" in b:      # a constant-rate UDP entry
            lines.append(f"  background {b['distribution']} (UDP): requested load {b['requested_load']:g} "
                         f"(of {b['load_relative_to']}) from {b.get('start_s', 0):g} s for "
                         f"{num(b.get('window_s'), '.2f')} s, received {num(b.get('achieved_load'), '.3f')}; "
                         f"{b['received_datagrams']} of {b['sent_datagrams']} datagrams arrived")
            continue
        used = ", ".join(b.get("congestion_control_used") or []) or b.get("congestion_control") or "host default"
        lines.append(f"  background {b['distribution']} (TCP {used}): requested load {b['requested_load']:g} "
                     f"(of {b['load_relative_to']}), offered {num(b.get('offered_load'), '.3f')}, "
                     f"achieved {num(b.get('achieved_load'), '.3f')} (completed flows), "
                     f"received {num(b.get('received_load'), '.3f')}; "
                     f"{b.get('completed_count', 0)}/{b.get('flow_count', 0)} flows completed; FCT p50 "
                     f"{num(b.get('fct_p50_s'), '.4f')} s, p95 {num(b.get('fct_p95_s'), '.4f')} s, "
                     f"p99 {num(b.get('fct_p99_s'), '.4f')} s")
    stragglers = s.get("stragglers") or {}
    for worker, d in sorted(stragglers.get("compute_delay_by_worker", {}).items()):
        if d["max_s"]:
            lines.append(f"  straggler {worker}: compute delay mean {d['mean_s']:.3f} s, max {d['max_s']:.3f} s")
    for inj in stragglers.get("injections", []):
        rate = f" to {inj['rate_bps'] / 1e6:g} Mb/s" if inj.get("rate_bps") else ""
        lasting = f" for {inj['duration_s']:g} s" if inj["duration_s"] else ""
        lines.append(f"  {inj['kind']} {'-'.join(inj['target'])}{rate} at {inj['at_s']:g} s{lasting} (events.jsonl)")
    for f in s.get("failures") or []:
        if "generation" in f:
            lines.append(f"  {f['worker']} failed: job {f['job']} fell back to a ring of {f['members']} members "
                         f"(generation {f['generation']}), redoing iteration {f['redo_from_iteration']}")
        else:
            lines.append(f"  {f['worker']} failed: {f['fallback']}")
    for err in stragglers.get("injection_errors", []):
        lines.append(f"  injection error: {err}")
    if s.get("error"):
        lines.append(f"  error: {s['error']}")
    return "\n".join(lines)


def format_run_report(run_dir) -> str:
    """The summary, the fidelity figure when the run has one, and the iftop tables."""
    summary = load_summary(run_dir)
    parts = [format_summary(summary)]
    if summary.get("fidelity"):
        from testbed.fidelity import format_fidelity
        parts.append("emulation against the simulator:\n" + format_fidelity(summary["fidelity"]))
    for table in sorted((Path(run_dir) / "iftop").glob("*.txt")):
        parts.append(f"{table.stem}-eth0 (iftop -t layout):\n{table.read_text()}")
    return "\n\n".join(parts)


def format_sweep_report(sweep_dir) -> str:
    """Per point: runs, ok and distorted runs, and the mean (± 95% CI) of the main metrics."""
    frame = load_table(sweep_dir)
    metrics = [m for m in SWEEP_REPORT_METRICS if m in numeric_metrics(frame)]
    means = point_means(frame, metrics)
    for metric in metrics:
        means[metric] = [f"{m:.4g} ± {h:.2g}" if m == m else "-" for m, h in zip(means[metric], means[f"{metric} ±"])]
        del means[f"{metric} ±"]
    distorted = int(means["distorted"].sum())
    note = f"\n{distorted} distorted run(s): an emulator artifact, not a result" if distorted else ""
    return (f"sweep {Path(sweep_dir).name}: {len(frame)} runs, {len(means)} points (means over ok runs, "
            f"± the 95% confidence interval)\n{means.to_string(index=False)}{note}")
