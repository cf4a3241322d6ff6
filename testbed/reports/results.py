"""Reading results directories into plain data: a run's summary, its per-job figures, its iterations and its
numeric metrics, a sweep's table and its per-point means."""

import json
import math
from pathlib import Path

import pandas as pd

from testbed.errors import UsageError
from testbed.metrics.definitions import job_metric_name
from testbed.sweep.table import mean_ci

#: The sweep table's first non-axis column (:func:`testbed.sweep.table.row` puts the axes first).
FIRST_NON_AXIS_COLUMN = "repetition"
#: The table's columns that describe a run rather than measure it (an all-empty ``error`` reads as numbers).
RUN_COLUMNS = ("repetition", "seed", "status", "distorted", "error", "run_dir", "schema_version")


def load_summary(run_dir) -> dict:
    path = Path(run_dir) / "summary.json"
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise UsageError(f"{path}: unreadable ({exc})")


def load_iterations(run_dir) -> pd.DataFrame:
    """A run's ``iterations.csv``: one row per agent and iteration
    (:func:`testbed.metrics.summary.write_iterations_csv` says its columns)."""
    path = Path(run_dir) / "iterations.csv"
    try:
        return pd.read_csv(path)
    except (OSError, ValueError) as exc:
        raise UsageError(f"{path}: unreadable ({exc})")


def job_figures(summary: dict) -> pd.DataFrame:
    """A summary's per-job figures: one row per job, indexed by its name, one column per key of its entry."""
    jobs = summary.get("jobs", [])
    if not jobs:
        return pd.DataFrame(index=pd.Index([], name="job"))
    return pd.DataFrame(jobs).set_index("job")


def load_table(sweep_dir) -> pd.DataFrame:
    path = Path(sweep_dir) / "table.csv"
    try:
        frame = pd.read_csv(path)
    except (OSError, ValueError) as exc:
        raise UsageError(f"{path}: unreadable ({exc})")
    if FIRST_NON_AXIS_COLUMN not in frame or "status" not in frame:
        raise UsageError(f"{path}: not a sweep table (no '{FIRST_NON_AXIS_COLUMN}' or 'status' column)")
    return frame


def sweep_axes(frame: pd.DataFrame) -> list:
    columns = list(frame.columns)
    return columns[:columns.index(FIRST_NON_AXIS_COLUMN)]


def is_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and not (
        isinstance(value, float) and math.isnan(value))


def run_metrics(summary: dict) -> dict:
    """Every numeric scalar of a run: the run's own under their names, each job's as ``<job>.<metric>``."""
    out = {k: v for k, v in summary.items() if is_number(v) and k not in RUN_COLUMNS}
    for job in summary.get("jobs", []):
        for key, value in job.items():
            if is_number(value):
                out[job_metric_name(job["job"], key)] = value
    return out


def numeric_metrics(frame: pd.DataFrame) -> list:
    """The table's numeric metric columns (not axes, nor :data:`RUN_COLUMNS`)."""
    skip = set(sweep_axes(frame)) | set(RUN_COLUMNS)
    return [c for c in frame.columns if c not in skip and pd.api.types.is_numeric_dtype(frame[c])
            and not pd.api.types.is_bool_dtype(frame[c])]


def point_means(frame: pd.DataFrame, metrics: list) -> pd.DataFrame:
    """One row per point (combination of axis values): runs, ok runs, distorted runs, and per metric the
    mean over the ok runs and the half-width of its 95% confidence interval (``<metric> ±``)."""
    axes = sweep_axes(frame)
    rows = []
    for key, group in (frame.groupby(axes, sort=False, dropna=False) if axes else [((), frame)]):
        key = key if isinstance(key, tuple) else (key,)
        ok = group[group["status"] == "ok"]
        row = dict(zip(axes, key))
        row.update(runs=len(group), ok=len(ok), distorted=int((group["distorted"] == True).sum()))  # noqa: E712
        for metric in metrics:
            mean, half = mean_ci(ok[metric]) if metric in ok else (math.nan, math.nan)
            row[metric], row[f"{metric} ±"] = mean, half
        rows.append(row)
    return pd.DataFrame(rows)
