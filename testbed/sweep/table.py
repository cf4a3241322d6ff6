"""The sweep's tidy table (one row per point: axes, repetition, seed, status, every scalar summary
metric, and each job's figures as ``<job>.<metric>`` columns: :func:`row`), its plots (each metric
against the first axis, mean and 95% confidence interval over the repetitions, one line per combination
of the other axes), and its comparison with the paper's figures (:func:`paper_comparison`, with the
paired ratios behind it drawn by :func:`plot_paired_ratios`)."""

import math
from dataclasses import dataclass
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402

from testbed.atomic_io import write_text_atomic  # noqa: E402
from testbed.metrics.definitions import job_metric_name  # noqa: E402
from testbed.metrics.display import metric_label, metric_scale  # noqa: E402
from testbed.metrics.plots import finish_figure, save_figure  # noqa: E402


def is_scalar(value) -> bool:
    """A summary's value that is one cell of a table (a number, text, a bool or none), not a section."""
    return isinstance(value, (int, float, str, bool)) or value is None


def is_missing(value) -> bool:
    """A cell with no value: none, or NaN (how pandas reads an empty cell of ``table.csv``)."""
    return value is None or (isinstance(value, float) and math.isnan(value))


def row(point, summary: dict, run_dir, status: str, error: str, metrics=()) -> dict:
    """One table row: the point's axes, its status, the summary's scalar metrics, and each job's as
    ``<job>.<metric>`` (:func:`job_columns`) for the sweep's ``metrics``."""
    out = {path: value for path, value in point.values}
    out.update(repetition=point.repetition, seed=point.seed, status=status,
               distorted=bool(summary.get("distorted")) if summary else None, error=error or "",
               run_dir=str(run_dir) if run_dir else "")
    for key, value in (summary or {}).items():
        if key not in out and is_scalar(value):
            out[key] = value
    for key, value in job_columns(summary or {}, metrics).items():
        out.setdefault(key, value)
    return out


def job_columns(summary: dict, metrics=()) -> dict:
    """Each job's figures beside the run's, as ``<job>.<metric>`` columns: those ``metrics`` (a sweep's) names
    either way (``iteration_time_s`` for every job, ``job-a.iteration_time_s`` for job-a's), or, for a sweep that
    names none, every scalar one. A run of one job has its run-level figures: only the ones named per job."""
    jobs = [job for job in summary.get("jobs") or [] if isinstance(job, dict) and "job" in job]
    columns = {}
    for job in jobs:
        for key, value in job.items():
            name = job_metric_name(job["job"], key)
            wanted = name in metrics or (len(jobs) > 1 and (key in metrics or not metrics))
            if key != "job" and wanted and is_scalar(value):
                columns[name] = value
    return columns


def write_table(rows: list, path: Path) -> pd.DataFrame:
    frame = pd.DataFrame(rows)
    write_text_atomic(path, frame.to_csv(index=False))
    return frame


def t_quantile_975(degrees_of_freedom: int) -> float:
    """Student's t at 0.975 (a 95% interval's half-width in standard errors). SciPy's statistics take seconds to
    import, and every ``inatb run`` loads this module for its report, which draws no interval: imported here."""
    from scipy import stats
    return float(stats.t.ppf(0.975, degrees_of_freedom))


def mean_ci(values) -> tuple:
    """(mean, half-width of the 95% confidence interval by Student's t; 0 with fewer than 2 values)."""
    values = [float(v) for v in values if not is_missing(v)]
    if not values:
        return math.nan, math.nan
    mean = sum(values) / len(values)
    if len(values) < 2:
        return mean, 0.0
    sd = math.sqrt(sum((v - mean) ** 2 for v in values) / (len(values) - 1))
    return mean, t_quantile_975(len(values) - 1) * sd / math.sqrt(len(values))


def run_label(run, axes: list, repeated: bool) -> str:
    """A run's title in a sweep's composed plots: its axis values, its repetition and seed when the sweep
    repeats points, and DISTORTED when the run was."""
    label = ", ".join(f"{a}={run[a]}" for a in axes)
    if repeated:
        label += f", repetition {run['repetition']} (seed {run['seed']})"
    return label + (" (DISTORTED)" if run.get("distorted") is True else "")


def compose_run_plots(frame: pd.DataFrame, axes: list, names: list, path: Path, title: str) -> bool:
    """The runs' own plots side by side (a sweep's ``run_plots``): one row per run that finished ok, its
    axis values as the row's title, one column per plot name (the run's ``plots/<name>.png``, drawn now
    when the run has none); a run without that plot leaves its cell empty. False (nothing written) when no
    run has any of them."""
    from testbed.emulation.results import draw_missing_plots
    done = frame[frame["status"] == "ok"] if len(frame) else frame
    for run_dir in done["run_dir"]:
        draw_missing_plots(Path(run_dir))     # a point's run draws no plots of its own
    cells = [[Path(run_dir) / "plots" / f"{name}.png" for name in names] for run_dir in done["run_dir"]]
    if not any(p.is_file() for row_cells in cells for p in row_cells):
        return False
    fig, grid = plt.subplots(len(cells), len(names), figsize=(6 * len(names), 3.4 * len(cells)), squeeze=False)
    repeated = "repetition" in done and done["repetition"].nunique() > 1
    for (_, run), row_cells, row_axes in zip(done.iterrows(), cells, grid):
        label = run_label(run, axes, repeated)
        for cell, ax in zip(row_cells, row_axes):
            ax.axis("off")
            if cell.is_file():
                ax.imshow(plt.imread(cell))
            ax.set_title(label, fontsize=9)
    fig.suptitle(title)
    fig.tight_layout()
    save_figure(fig, path, vector=False)     # its cells are the runs' PNGs
    plt.close(fig)
    return True


def plot_accuracy_curves(frame: pd.DataFrame, axes: list, path: Path, title: str) -> bool:
    """The held-out accuracy of every training job of every run that finished ok (its ``accuracy.csv``), one
    series per run and job labelled with its axis values (a sweep over ``policy``: one per scheme), against
    virtual time and against the iterations: exact sums give the same curve over iterations at different
    times. False (nothing written) when no run trained."""
    done = frame[frame["status"] == "ok"] if len(frame) else frame
    curves = [(run, pd.read_csv(Path(run["run_dir"]) / "accuracy.csv")) for _, run in done.iterrows()
              if (Path(run["run_dir"]) / "accuracy.csv").is_file()]
    if not curves:
        return False
    repeated = "repetition" in done and done["repetition"].nunique() > 1
    fig, (over_time, over_iterations) = plt.subplots(1, 2, figsize=(11, 4))
    for run, accuracy in curves:
        for job, rows in accuracy.groupby("job", sort=False):
            label = run_label(run, axes, repeated) + (f" ({job})" if accuracy["job"].nunique() > 1 else "")
            over_time.plot(rows["time_s"], rows["accuracy"], marker="o", markersize=3, label=label)
            over_iterations.plot(rows["iteration"], rows["accuracy"], marker="o", markersize=3, label=label)
    over_time.set_xlabel("virtual time (s)")
    over_iterations.set_xlabel("iterations (updates applied)")
    for ax in (over_time, over_iterations):
        ax.set_ylabel("held-out accuracy")
        ax.grid(alpha=0.3)
    over_iterations.legend(fontsize=8)
    fig.suptitle(title)
    fig.tight_layout()
    save_figure(fig, path)
    plt.close(fig)
    return True


def plot_metric(frame: pd.DataFrame, axes: list, metric: str, path: Path, title: str) -> bool:
    """``metric`` against the first axis, in the readable unit of its definition (the axis says which:
    ``iteration time (ms)``); False (nothing written) when no run has it as a number."""
    if metric not in frame or not pd.api.types.is_numeric_dtype(frame[metric].dropna().infer_objects()):
        return False
    done = frame[frame["status"] == "ok"]
    if done[metric].dropna().empty:
        return False
    x_axis, others = axes[0], axes[1:]
    x_values = list(dict.fromkeys(frame[x_axis]))
    categorical = not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in x_values)
    scale = metric_scale(metric, done[metric].dropna())
    fig, ax = plt.subplots(figsize=(7, 4))
    groups = done.groupby(others, sort=False) if others else [((), done)]
    for key, group in groups:
        key = key if isinstance(key, tuple) else (key,)
        points = [(x, *mean_ci(group[group[x_axis] == x][metric])) for x in x_values]
        points = [(x, m / scale.per, h / scale.per) for x, m, h in points if not math.isnan(m)]
        if not points:
            continue
        xs = [str(x) if categorical else x for x, _, _ in points]
        label = ", ".join(f"{a}={v}" for a, v in zip(others, key)) or metric
        # categories (schemes) are not a continuum: markers only
        line = ax.errorbar(xs, [m for _, m, _ in points], yerr=[h for _, _, h in points], marker="o", capsize=3,
                           linestyle="none" if categorical else "-", label=label)
        # A point with a distorted run measured the emulator: drawn hollow (and said in the title).
        distorted = [(xv, m) for xv, (x, m, _) in zip(xs, points)
                     if group[(group[x_axis] == x) & (group["distorted"] == True)].shape[0]]  # noqa: E712
        if distorted:
            ax.plot([d[0] for d in distorted], [d[1] for d in distorted], linestyle="none", marker="o",
                    markersize=11, color=line[0].get_color(), markerfacecolor="white", zorder=3)
            ax.plot([d[0] for d in distorted], [d[1] for d in distorted], linestyle="none", marker="x",
                    color=line[0].get_color(), zorder=4)
            title = title if title.endswith(DISTORTED_NOTE) else title + DISTORTED_NOTE
    finish_figure(fig, ax, path, x_axis, metric_label(metric, done[metric].dropna()), title, legend=bool(others))
    return True


def counted_runs(frame: pd.DataFrame) -> pd.DataFrame:
    """The rows of a sweep's table whose figures count: runs that finished ``ok`` and were not marked
    distorted."""
    return frame[(frame["status"] == "ok") & (frame["distorted"] != True)] if len(frame) else frame  # noqa: E712


#: What pairs two runs of a sweep for a paper comparison: the seed (the same background draw and straggler
#: delays for every scheme of a repetition), else the repetition.
PAIRING_COLUMNS = ("seed", "repetition")


def pairing_column(runs_a: pd.DataFrame, runs_b: pd.DataFrame):
    """The column that pairs runs of a and b (:data:`PAIRING_COLUMNS`), or None."""
    return next((c for c in PAIRING_COLUMNS if c in runs_a and c in runs_b), None)


def paired_values(runs_a: pd.DataFrame, runs_b: pd.DataFrame, metric: str) -> pd.DataFrame:
    """``metric``'s values per pair of runs that share a seed (or, without seeds, a repetition), as columns
    ``a`` and ``b`` (``b`` never 0) indexed by that seed; no rows where a seed has several runs on one side
    (a claim whose ``at`` leaves another axis open: those runs do not pair one to one)."""
    key = pairing_column(runs_a, runs_b)
    if key is None or metric not in runs_a or metric not in runs_b or runs_a[key].duplicated().any() \
            or runs_b[key].duplicated().any():
        return pd.DataFrame({"a": [], "b": []}, dtype=float)
    pairs = runs_a[[key, metric]].merge(runs_b[[key, metric]], on=key, suffixes=("_a", "_b")).dropna()
    pairs = pairs[pairs[f"{metric}_b"] != 0].set_index(key)
    return pd.DataFrame({"a": pairs[f"{metric}_a"].astype(float), "b": pairs[f"{metric}_b"].astype(float)})


def paired_ratios(runs_a: pd.DataFrame, runs_b: pd.DataFrame, metric: str) -> pd.Series:
    """``metric``'s ratio a / b per pair of runs that share a seed (:func:`paired_values`)."""
    pairs = paired_values(runs_a, runs_b, metric)
    return pairs["a"] / pairs["b"]


def paired_interval(row):
    """(low, high) of a comparison row's paired ratios' 95% interval (:func:`paper_comparison`), or None for a
    row without one (fewer than two pairs, or a ``paper.csv`` written before rows had them)."""
    low, high = row.get("our_ratio_low"), row.get("our_ratio_high")
    if low is None or high is None or math.isnan(low) or math.isnan(high):
        return None
    return float(low), float(high)


def paired_interval_text(row, number=lambda value: f"{value:.3g}") -> str:
    """A comparison row's paired interval in words, each bound written by ``number``: ``1.14 to 1.51 (3
    seeds)``; "" without one."""
    interval = paired_interval(row)
    return f"{number(interval[0])} to {number(interval[1])} ({int(row['pairs'])} seeds)" if interval else ""


def seeds_to_decide(row, most: int = 100):
    """How many seeds (pairs of runs) a comparison row would need for its paired ratios' 95% interval to
    leave 1, were their mean and spread what its ``pairs`` show; None without an interval, or past ``most``."""
    interval = paired_interval(row)
    if interval is None:
        return None
    pairs = int(row["pairs"])
    mean, half = (interval[0] + interval[1]) / 2, (interval[1] - interval[0]) / 2
    sd = half * math.sqrt(pairs) / t_quantile_975(pairs - 1)
    for seeds in range(pairs + 1, most + 1):
        if t_quantile_975(seeds - 1) * sd / math.sqrt(seeds) < abs(mean - 1):
            return seeds
    return None


def paper_comparison(frame: pd.DataFrame, claims: list) -> pd.DataFrame:
    """Per claim (``spec.PaperClaim``) and pair (a, b) of its ``by`` values: the paper's figures and their
    ratio a / b, our means (finished, undistorted runs at the claim's ``at``) and their ratio, ``ours_vs_paper``
    (our ratio / the paper's) and ``same_order`` (both ratios on the same side of 1, neither of them 1).
    Where two or more pairs of runs share a seed (:func:`paired_ratios`), ``our_ratio_low`` and
    ``our_ratio_high`` bound the 95% interval (Student's t) of their ratios and ``pairs`` counts them: whether
    the runs' spread leaves our side of 1 decided. Ratios, since our runs are at reduced scale; a value
    without such a run gives empty cells."""
    rows = []
    for pair in claim_pairs(frame, claims):
        claim, a, b = pair.claim, pair.a, pair.b
        figures = dict(claim.values)
        ours = {value: mean_ci(runs[claim.metric])[0] if len(runs) else math.nan
                for value, runs in ((a, pair.runs_a), (b, pair.runs_b))}
        paper_ratio = figures[a] / figures[b]
        our_ratio = ours[a] / ours[b] if ours[b] and not math.isnan(ours[b]) else math.nan
        ratios = paired_ratios(pair.runs_a, pair.runs_b, claim.metric)
        mean, half = mean_ci(ratios) if len(ratios) >= 2 else (math.nan, math.nan)
        rows.append({
            "metric": claim.metric, "at": pair.at_text(), "by": claim.by,
            "a": a, "b": b, "paper_a": figures[a], "paper_b": figures[b], "paper_ratio": paper_ratio,
            "ours_a": ours[a], "ours_b": ours[b], "our_ratio": our_ratio,
            "our_ratio_low": mean - half, "our_ratio_high": mean + half, "pairs": len(ratios),
            "ours_vs_paper": our_ratio / paper_ratio if not math.isnan(our_ratio) else math.nan,
            # level (a ratio of 1) is on neither side
            "same_order": None if math.isnan(our_ratio) else (our_ratio - 1) * (paper_ratio - 1) > 0,
            "source": claim.source})
    return pd.DataFrame(rows)


@dataclass(frozen=True)
class ClaimPair:
    """One pair (a, b) of a paper claim's ``by`` values, with the sweep's counted runs of each at the
    claim's ``at``, and those of all its values (``claim_runs``)."""
    claim: object            # spec.PaperClaim
    a: str
    b: str
    runs_a: pd.DataFrame
    runs_b: pd.DataFrame
    claim_runs: pd.DataFrame

    def draw_weight(self) -> pd.Series:
        """How slow each seed's draw made the claim's values: the mean of ``metric`` over the claim's runs of
        that seed, indexed by seed (as :func:`paired_values` is). Every value of the claim weighs in, not
        only a and b, so that a's or b's own spread does not lean the plot."""
        key = pairing_column(self.runs_a, self.runs_b)
        if key is None or self.claim.metric not in self.claim_runs:
            return pd.Series(dtype=float)
        return self.claim_runs.groupby(key)[self.claim.metric].mean().astype(float)

    def at_text(self) -> str:
        """The claim's ``at`` as ``paper.csv`` writes it: ``background.0.load=0.8``, or "" for none."""
        return ", ".join(f"{k}={v}" for k, v in self.claim.at)


def claim_pairs(frame: pd.DataFrame, claims: list) -> list:
    """Every :class:`ClaimPair` of ``claims`` (spec.PaperClaim), claim by claim, pairs in the order of each
    claim's values; runs are those that count (:func:`counted_runs`), none where a run lacks the metric."""
    pairs = []
    done = counted_runs(frame)
    for claim in claims:
        selected = done
        for axis, value in claim.at:
            selected = selected[selected[axis] == value]
        runs = {value: selected[selected[claim.by] == value] if claim.metric in selected else selected.iloc[0:0]
                for value, _ in claim.values}
        names = [value for value, _ in claim.values]
        claim_runs = pd.concat(runs.values())
        pairs += [ClaimPair(claim, a, b, runs[a], runs[b], claim_runs)
                  for i, a in enumerate(names) for b in names[i + 1:]]
    return pairs


#: The file in a sweep's ``plots/`` that :func:`plot_paired_ratios` writes.
PAIRED_RATIOS_PLOT = "paired_ratios.png"
#: The most pairs the paired-ratio plot draws, one panel each (:func:`plot_paired_ratios`).
MOST_PAIR_PANELS = 20
PAIR_PANEL_COLUMNS = 5


def paired_ratio_panels(frame: pd.DataFrame, claims: list) -> list:
    """What :func:`plot_paired_ratios` draws: (:class:`ClaimPair`, a frame by seed of ``ratio`` a / b and
    ``weight``, :meth:`ClaimPair.draw_weight`) for each pair with two pairs of runs or more, at most
    :data:`MOST_PAIR_PANELS`."""
    panels = []
    for pair in claim_pairs(frame, claims):
        values = paired_values(pair.runs_a, pair.runs_b, pair.claim.metric)
        if len(values) >= 2:
            panels.append((pair, pd.DataFrame({"ratio": values["a"] / values["b"],
                                               "weight": pair.draw_weight().reindex(values.index)})))
    return panels[:MOST_PAIR_PANELS]


def plot_paired_ratios(frame: pd.DataFrame, claims: list, path: Path, title: str) -> bool:
    """The paired ratios behind each claim's interval, one panel per pair (a, b) that has two pairs of runs
    or more: a / b per seed against how slow that seed's draw made the claim's values
    (:meth:`ClaimPair.draw_weight`), with level (1) dashed and the paper's ratio dotted. Where the order of
    a and b turns with the draw, the points cross 1 as the draw gets heavier: the claim holds on some draws
    only. False (nothing written) when no pair has two pairs of runs."""
    panels = paired_ratio_panels(frame, claims)
    if not panels:
        return False
    columns = min(PAIR_PANEL_COLUMNS, len(panels))
    rows = -(-len(panels) // columns)
    fig, axes = plt.subplots(rows, columns, figsize=(3.1 * columns, 2.7 * rows + 0.5), squeeze=False)
    ats = {pair.at_text() for pair, _ in panels}
    shared_at = f" at {ats.pop()}" if len(ats) == 1 and "" not in ats else ""   # said once, in the title
    for ax, (pair, seeds) in zip(axes.flat, panels):
        figures = dict(pair.claim.values)
        scale = metric_scale(pair.claim.metric, seeds["weight"])
        ax.plot(seeds["weight"] / scale.per, seeds["ratio"], marker="o", linestyle="none", markersize=4)
        ax.axhline(1, color="grey", linestyle="--", linewidth=1)
        ax.axhline(figures[pair.a] / figures[pair.b], color="tab:red", linestyle=":", linewidth=1.2)
        at = f" at {pair.at_text()}" if pair.at_text() and not shared_at else ""
        ax.set_title(f"{pair.a} / {pair.b}{at}", fontsize=8)
        ax.set_xlabel(f"{metric_label(pair.claim.metric, seeds['weight'])}, the seed's mean", fontsize=7)
        ax.set_ylabel("ratio per seed", fontsize=7)
        ax.tick_params(labelsize=7)
        ax.grid(alpha=0.3)
    for ax in list(axes.flat)[len(panels):]:
        ax.set_visible(False)
    fig.suptitle(f"{title}{shared_at} (dashed: level; dotted: the paper's ratio)", fontsize=9)
    fig.tight_layout()
    save_figure(fig, path)
    plt.close(fig)
    return True


def format_paper_comparison(comparison: pd.DataFrame) -> str:
    """The comparison as the CLI prints it: one line per pair."""
    lines = []
    for _, r in comparison.iterrows():
        if math.isnan(r["our_ratio"]):
            ours = "ours: none (no finished, undistorted run has it)"
        else:
            side = "same side of 1" if r["same_order"] else "level" if r["our_ratio"] == 1 else "other side of 1"
            interval = paired_interval_text(r)
            paired = f", paired {interval}" if interval else ""
            ours = f"ours {r['our_ratio']:.3g} ({r['ours_vs_paper']:.2f}x the paper's, {side}{paired})"
        where = f" at {r['at']}" if r["at"] else ""
        lines.append(f"{r['metric']}{where}: {r['a']} / {r['b']}: paper {r['paper_ratio']:.3g}, {ours}")
    return "\n".join(lines)


#: Appended to a plot's title when a point on it includes a distorted run.
DISTORTED_NOTE = " (circled x: a distorted run, not a result)"
