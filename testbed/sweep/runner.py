"""Run a sweep: every point once, resumable, with a progress bar, into one tidy table and its plots.

Layout under ``OUT/<sweep name>/``::

    points/<point id>/point.json          the point: axes, repetition, seed, --set strings
    points/<point id>/run.log             the run's own progress lines
    points/<point id>/<scenario>/<run>/   the run directory (summary.json, plots, ...)
    points/<point id>/refused.json        a point refused at plan time, with the reason
    table.csv                             one row per point (testbed/sweep/table.py), each job's figures beside
                                          the run's when it has several
    plots/<metric>.png, .svg              each listed metric against the first axis
    paper.csv                             the paper's ratios between schemes against ours (its ``paper``)

A point is done when its newest run ended ``ok`` or ``stalled`` (a result:
the stall is the finding), or when it was refused at plan time (the same
scenario is refused again). A run that failed or was interrupted is run
again, so Ctrl-C and a second ``inatb sweep`` resume where the first
stopped. The table is rewritten after every point, so it is whole at any
moment. Where points run is the executor's business
(:mod:`testbed.sweep.executors`: here one after another, or on a Ray
cluster one per node); either way a point's directory holds the same files.
A sweep started through sudo hands what it wrote to the user who typed it
when it ends, however it ends (:mod:`testbed.ownership`).
"""

import json
import sys
from dataclasses import dataclass, field
from pathlib import Path

from tqdm import tqdm

from testbed.atomic_io import write_text_atomic
from testbed.metrics.display import metric_name
from testbed.ownership import handing_over, output_into
from testbed.sweep.executors import LocalExecutor, run_summaries
from testbed.sweep.table import (PAIRED_RATIOS_PLOT, compose_run_plots, paper_comparison, plot_accuracy_curves,
                                 plot_metric, plot_paired_ratios, row, write_table)

DONE_STATUSES = ("ok", "stalled")


def is_done(status: str, summary, rerun_distorted: bool = False) -> bool:
    """Whether a point in ``status`` (its newest run's ``summary``) is left alone by the next sweep: its run
    ended ok or stalled, or it was refused; with ``rerun_distorted``, a distorted run is not done."""
    if status == "refused":
        return True
    return status in DONE_STATUSES and not (rerun_distorted and summary and summary.get("distorted"))


@dataclass
class SweepResult:
    sweep_dir: Path
    table_path: Path
    plots: list
    ran: int
    skipped: int
    rows: list
    unplotted: list = field(default_factory=list)   # the sweep's metrics no finished run has as a number
    paper: object = None     # the paper comparison (DataFrame, table.paper_comparison) when the sweep has one


def newest_summary(point_dir: Path):
    """(summary, run_dir) of the point's newest run (run ids sort by time), or (None, None)."""
    runs = run_summaries(point_dir)
    if not runs:
        return None, None
    path = runs[-1]
    try:
        return json.loads(path.read_text()), path.parent
    except (OSError, ValueError):
        return None, path.parent


def point_state(point_dir: Path):
    """(status, summary, run_dir, error) of a point as its directory records it."""
    refused = point_dir / "refused.json"
    if refused.is_file():
        return "refused", None, None, json.loads(refused.read_text()).get("error", "")
    summary, run_dir = newest_summary(point_dir)
    if summary is None:
        return ("missing" if run_dir is None else "unreadable"), None, run_dir, ""
    return summary.get("status", "failed"), summary, run_dir, summary.get("error") or ""


def run_sweep(spec, out_root, target=None, progress=sys.stderr, executor=None,
              rerun_distorted: bool = False) -> SweepResult:
    """Run every point of ``spec`` not done yet (:func:`is_done`) with ``executor`` (default: here, one
    after another; ``testbed.sweep.executors``). A point run again keeps its earlier runs in its directory;
    its newest run is the one the table reads."""
    sweep_dir = Path(out_root) / spec.name
    with handing_over(output_into(sweep_dir), say=lambda line: print(line, file=progress)):
        return _run_sweep(spec, sweep_dir, target, progress, executor or LocalExecutor(), rerun_distorted)


def _run_sweep(spec, sweep_dir: Path, target, progress, executor, rerun_distorted: bool) -> SweepResult:
    points_dir = sweep_dir / "points"
    points_dir.mkdir(parents=True, exist_ok=True)
    table_path = sweep_dir / "table.csv"
    rows, skipped = {}, 0
    todo = []
    for point in spec.points:
        point_dir = points_dir / point.point_id
        status, summary, run_dir, error = point_state(point_dir)
        if is_done(status, summary, rerun_distorted):
            rows[point.point_id] = row(point, summary, run_dir, status, error, spec.metrics)
            skipped += 1
        else:
            todo.append(point)
    bar = tqdm(total=len(spec.points), initial=skipped, desc=f"sweep {spec.name}", unit="point", file=progress,
               dynamic_ncols=True)
    jobs = []
    for point in todo:
        point_dir = points_dir / point.point_id
        point_dir.mkdir(parents=True, exist_ok=True)
        write_text_atomic(point_dir / "point.json", json.dumps(
            {"values": dict(point.values), "repetition": point.repetition, "seed": point.seed,
             "overrides": list(point.overrides)}, indent=1))
        jobs.append((point, point_dir))
    finished = []

    def on_done(point):
        finished.append(point)
        status, summary, run_dir, error = point_state(points_dir / point.point_id)
        rows[point.point_id] = row(point, summary, run_dir, status, error, spec.metrics)
        _write(spec, rows, table_path)
        bar.set_postfix_str(point.label(), refresh=False)
        bar.update(1)

    try:
        executor.run(spec, jobs, target, on_done)
    finally:
        bar.close()
        # A run that ended as Ctrl-C came (its summary written, the interrupt delivered after it) is in
        # its directory but never reached on_done: the table is what the directories hold.
        for point, point_dir in jobs:
            if point.point_id not in rows:
                status, summary, run_dir, error = point_state(point_dir)
                if status != "missing":
                    rows[point.point_id] = row(point, summary, run_dir, status, error, spec.metrics)
        frame = _write(spec, rows, table_path)
    plots, unplotted = [], []
    if len(frame):
        (sweep_dir / "plots").mkdir(exist_ok=True)
        for metric in spec.metrics:
            path = sweep_dir / "plots" / f"{metric}.png"
            if plot_metric(frame, [a for a, _ in spec.axes], metric, path, f"{spec.name}: {metric_name(metric)}"):
                plots.append(path)
            else:
                unplotted.append(metric)
        path = sweep_dir / "plots" / "accuracy.png"
        if plot_accuracy_curves(frame, [a for a, _ in spec.axes], path, f"{spec.name}: held-out accuracy"):
            plots.append(path)
        if spec.run_plots:
            path = sweep_dir / "plots" / "run_plots.png"
            if compose_run_plots(frame, [a for a, _ in spec.axes], spec.run_plots, path, spec.name):
                plots.append(path)
    paper = None
    if spec.paper:
        paper = paper_comparison(frame, spec.paper)
        write_text_atomic(sweep_dir / "paper.csv", paper.to_csv(index=False))
        path = sweep_dir / "plots" / PAIRED_RATIOS_PLOT
        if len(frame) and plot_paired_ratios(frame, spec.paper, path, f"{spec.name}: the claims' ratios per seed"):
            plots.append(path)
    return SweepResult(sweep_dir, table_path, plots, len(finished), skipped,
                       [rows[p.point_id] for p in spec.points if p.point_id in rows], unplotted, paper)


def _write(spec, rows, table_path):
    ordered = [rows[p.point_id] for p in spec.points if p.point_id in rows]
    return write_table(ordered, table_path)
