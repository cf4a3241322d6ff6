"""``inatb compare A B``: the metric differences between two runs, or between two sweeps point by point.

Two runs: every numeric metric either has (the run's own, and each job's as ``<job>.<metric>``), with
A, B, B - A and the relative change. Two sweeps over the same axes: per point present in both, the
mean over ok runs of each chosen metric in A and in B, and the relative change. A distorted run, or a
run that did not end ok, is named above the numbers: its figures are not results. So are summaries of
different layouts (``schema_version``): a metric of the same name may not mean the same.
"""

from dataclasses import dataclass

from testbed.errors import UsageError
from testbed.reports import results_kind
from testbed.reports.results import (is_number, load_summary, load_table, numeric_metrics, point_means, run_metrics,
                                     sweep_axes)

#: What a sweep comparison shows when no --metric is given (those both tables have).
DEFAULT_SWEEP_METRICS = ("iteration_time_s", "comm_time_s", "gradient_sending_rate_bps", "ps_ingress_bytes",
                         "communication_overhead_bytes", "retransmission_ratio")


@dataclass
class Difference:
    key: str          # the metric (runs) or "<point>: <metric>" (sweeps)
    a: float
    b: float

    @property
    def delta(self):
        return None if self.a is None or self.b is None else self.b - self.a

    @property
    def change(self):
        """(B - A) / |A|; None where A is 0 or either is missing."""
        return None if self.delta is None or not self.a else self.delta / abs(self.a)


def compare_results(path_a, path_b, metrics=()) -> tuple:
    """(notes, differences) of two run directories or two sweep directories; ``metrics`` limits the rows."""
    kind_a, kind_b = results_kind(path_a), results_kind(path_b)
    if kind_a != kind_b:
        raise UsageError(f"compare needs two runs or two sweeps: {path_a} is a {kind_a}, {path_b} a {kind_b}")
    return (_compare_runs if kind_a == "run" else _compare_sweeps)(path_a, path_b, list(metrics))


def _run_notes(label, path, summary) -> list:
    notes = []
    if summary.get("status") != "ok":
        notes.append(f"{label} ({path}) ended {summary.get('status')}: {summary.get('error') or 'see its summary'}")
    if summary.get("distorted"):
        notes.append(f"{label} ({path}) is DISTORTED (not a result): " + "; ".join(summary.get("distortion_reasons")
                                                                                   or []))
    return notes


def _compare_runs(path_a, path_b, metrics):
    sa, sb = load_summary(path_a), load_summary(path_b)
    ma, mb = run_metrics(sa), run_metrics(sb)
    keys = list(dict.fromkeys(list(ma) + list(mb)))
    if metrics:
        unknown = [m for m in metrics if not any(k == m or k.endswith("." + m) for k in keys)]
        if unknown:
            raise UsageError(f"--metric {unknown[0]}: neither run has it (runs have e.g. {', '.join(keys[:6])})")
        keys = [k for k in keys if any(k == m or k.endswith("." + m) for m in metrics)]
    notes = _run_notes("A", path_a, sa) + _run_notes("B", path_b, sb)
    if sa.get("schema_version") != sb.get("schema_version"):
        layouts = [str(s.get("schema_version", "missing")) for s in (sa, sb)]     # missing: older than it
        notes.append(f"A's and B's summary.json have different layouts (schema_version {layouts[0]} and "
                     f"{layouts[1]}): a metric of the same name may not mean the same")
    return notes, [Difference(k, ma.get(k), mb.get(k)) for k in keys]


def _compare_sweeps(path_a, path_b, metrics):
    fa, fb = load_table(path_a), load_table(path_b)
    axes = sweep_axes(fa)
    if sweep_axes(fb) != axes:
        raise UsageError(f"the sweeps have different axes: {path_a} {axes}, {path_b} {sweep_axes(fb)}")
    common = [m for m in numeric_metrics(fa) if m in set(numeric_metrics(fb))]
    if metrics:
        missing = [m for m in metrics if m not in common]
        if missing:
            raise UsageError(f"--metric {missing[0]}: not a numeric column of both tables "
                             f"(they share {', '.join(common[:8])}...)")
    else:
        metrics = [m for m in DEFAULT_SWEEP_METRICS if m in common]
    ma, mb = point_means(fa, metrics), point_means(fb, metrics)

    def label(row):
        return ", ".join(f"{a}={row[a]}" for a in axes) or "(the one point)"
    by_a = {label(r): r for r in ma.to_dict("records")}
    by_b = {label(r): r for r in mb.to_dict("records")}
    notes = [f"point {p} only in A" for p in by_a if p not in by_b] + [f"point {p} only in B" for p in by_b
                                                                        if p not in by_a]
    for side, table in (("A", by_a), ("B", by_b)):
        for point, r in table.items():
            if r["distorted"]:
                notes.append(f"{side} {point}: {r['distorted']} of {r['runs']} run(s) DISTORTED (not a result)")
            if r["ok"] < r["runs"]:
                notes.append(f"{side} {point}: {r['runs'] - r['ok']} of {r['runs']} run(s) did not end ok")
    diffs = [Difference(f"{point}: {m}", _number(by_a[point][m]), _number(by_b[point][m]))
             for point in by_a if point in by_b for m in metrics]
    return notes, diffs


def _number(value):
    """A mean, or None where no ok run had one (NaN)."""
    return value if is_number(value) else None


def format_comparison(notes, diffs, only_changed: bool = False) -> str:
    def num(v):
        return "-" if v is None else (f"{v:.6g}" if isinstance(v, float) else str(v))
    rows = [d for d in diffs if not only_changed or d.a != d.b]
    width = max([len(d.key) for d in rows] + [6])
    lines = [f"note: {n}" for n in notes]
    lines.append(f"{'metric':<{width}}  {'A':>14}  {'B':>14}  {'B - A':>14}  {'change':>8}")
    for d in rows:
        change = "-" if d.change is None else f"{100 * d.change:+.1f}%"
        lines.append(f"{d.key:<{width}}  {num(d.a):>14}  {num(d.b):>14}  {num(d.delta):>14}  {change:>8}")
    return "\n".join(lines)
