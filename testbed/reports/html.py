"""``report.html``: one self-contained HTML page of a run or a sweep.

``inatb run``, ``inatb fidelity`` and ``inatb sweep`` write it into their directory when they end (a failed
or stalled run's too); ``inatb report DIR --html`` writes it again. The page embeds its plots (PNG as data
URIs; the SVG beside each is linked), so it can be mailed or archived on its own. Every value is shown in
the readable unit its metric's definition implies (:mod:`testbed.metrics.display`): ``40.5 ms``, not
``0.0405``; yes or no, not ``False``.

A run's page leads with its headline (status, and per job the iteration and communication time, PS ingress,
sending rate and retransmissions), then the banners (a distorted run or an inexact aggregation, with the
reasons; an earlier, host-bound run of the plan that this one ran again; the error), the plots, and the
tables: the run's and each job's metrics, the fidelity figure when ``inatb fidelity`` produced the run,
switch counters, CPU, background traffic, the iftop tables and the scenario. A sweep's page leads with what
the sweep compares: its plots (a point with a distorted run circled, as the plot says) and, when the sweep
states the paper's figures (``paper.csv``), the paper's beside ours; then the per-point means with their 95%
confidence intervals, and the whole table with distorted runs highlighted.
"""

import base64
import html
import math
from pathlib import Path

import pandas as pd

from testbed.atomic_io import write_text_atomic
from testbed.fidelity import bound as fidelity_bound, verdict as fidelity_verdict
from testbed.metrics.display import format_metric, format_value, metric_label, metric_name, metric_scale
from testbed.reports import results_kind
from testbed.reports.results import load_summary, load_table, numeric_metrics, point_means, sweep_axes
from testbed.reports.text import superseded_sentence
from testbed.sweep.table import is_missing, is_scalar, paired_interval_text

REPORT_FILE = "report.html"
#: A sweep's comparison with the paper, as :mod:`testbed.sweep.runner` writes it.
PAPER_FILE = "paper.csv"
#: Each job's figures in a run's headline, in this order.
HEADLINE_JOB_METRICS = ("iteration_time_s", "comm_time_s", "ps_ingress_bytes", "gradient_sending_rate_bps",
                        "retransmitted_packets", "retransmission_ratio")
#: The plots every run writes, in the order its page shows them (others after them, by name).
RUN_PLOT_ORDER = ("iteration_time", "ps_ingress_rate", "worker_send_rate", "aggregation_rate")

STYLE = """
body { font-family: sans-serif; margin: 1.5em 2em; max-width: 80em; color: #222; }
h1 { margin: 0 0 0.4em; font-size: 1.5em; }
table { border-collapse: collapse; margin: 0.5em 0 1.5em; font-size: 0.9em; }
th, td { border: 1px solid #ccc; padding: 0.2em 0.6em; text-align: right; }
th { background: #f0f0f0; } td:first-child, th:first-child { text-align: left; }
td.unit { text-align: left; color: #555; }
tr.distorted td { background: #fde8e8; }
#headline { font-size: 1.05em; }
#headline table { font-size: 1em; margin-bottom: 0.5em; }
.banner { padding: 0.6em 1em; margin: 0.6em 0; border-radius: 4px; }
.bad { background: #fde8e8; border: 1px solid #d33; } .good { background: #e8f6e8; border: 1px solid #3a3; }
.note { background: #fdf6e3; border: 1px solid #c90; }
figure { display: inline-block; margin: 0.5em; width: 46em; max-width: 100%; vertical-align: top; }
img { width: 100%; }
figcaption { font-size: 0.85em; color: #555; }
.wide { overflow-x: auto; }
pre { background: #f7f7f7; padding: 0.8em; overflow-x: auto; font-size: 0.85em; }
"""


def write_report(path) -> Path:
    """Write ``report.html`` into the run or sweep directory ``path``; returns its path. An emulated run's page
    shows its plots: a run that has none yet gets them drawn first (:func:`testbed.emulation.results.draw_plots`,
    from its directory)."""
    path = Path(path)
    if results_kind(path) == "run":
        from testbed.emulation.results import draw_missing_plots
        draw_missing_plots(path)
    page = render_run(path) if results_kind(path) == "run" else render_sweep(path)
    out = path / REPORT_FILE
    write_text_atomic(out, page)
    return out


def render_run(run_dir: Path) -> str:
    s = load_summary(run_dir)
    run_dir = Path(run_dir)
    title = f"{s.get('scenario', '?')} / {s.get('run_id', run_dir.name)}"
    body = [_run_headline(s, f"Run {title}"), _run_banners(s),
            _section("Plots", _figures(run_dir / "plots", RUN_PLOT_ORDER))]
    body.append(_section("Run", _metric_rows({k: v for k, v in s.items() if is_scalar(v)})))
    jobs = [j for j in s.get("jobs") or [] if isinstance(j, dict) and "job" in j]
    if jobs:
        body.append(_section("Jobs", _job_rows(jobs)))
    if s.get("fidelity"):
        body.append(_section("Emulation against the simulator (inatb fidelity)", _fidelity(s["fidelity"])))
    if s.get("switches"):
        body.append(_section("Switch counters", _transposed(
            {name: {k: v for k, v in c.items() if is_scalar(v)} for name, c in s["switches"].items()}, "counter")))
    cpu = s.get("cpu") or {}
    if cpu.get("processes"):
        rows = [{"process": name, "mean busy (cores)": d.get("mean"), "peak busy (cores)": d.get("peak"),
                 "busiest thread's peak (cores)": d.get("thread_peak")}
                for name, d in cpu["processes"].items()]
        rows.append({"process": f"machine ({cpu.get('cores', '?')} cores)",
                     "mean busy (cores)": (cpu.get("machine") or {}).get("mean"),
                     "peak busy (cores)": (cpu.get("machine") or {}).get("peak")})
        body.append(_section("CPU", _table(rows)))
    if s.get("background"):
        body.append(_section("Background traffic", _table(
            [{k: v for k, v in b.items() if is_scalar(v)} for b in s["background"]])))
    for table in sorted((run_dir / "iftop").glob("*.txt")):
        body.append(_section(f"{table.stem}-eth0 (iftop -t layout)", f"<pre>{_e(table.read_text())}</pre>"))
    scenario = run_dir / "scenario.yaml"
    if scenario.is_file():
        body.append(_section("Scenario", f"<pre>{_e(scenario.read_text())}</pre>"))
    return _page(f"Run {title}", body)


def render_sweep(sweep_dir: Path) -> str:
    sweep_dir = Path(sweep_dir)
    frame = load_table(sweep_dir)
    name = sweep_dir.name
    metrics = numeric_metrics(frame)
    means = point_means(frame, metrics)
    distorted_rows = frame["distorted"] == True  # noqa: E712
    distorted = int(distorted_rows.sum())
    statuses = ", ".join(f"{n} {s}" for s, n in frame["status"].value_counts().sort_index().items())
    banner = (f'<div class="banner bad">{distorted} distorted run(s): they measured the emulator, not the '
              f'schemes; their points are circled on the plots and highlighted below.</div>' if distorted else
              '<div class="banner good">No distorted run.</div>')
    body = [f'<section id="headline"><h1>Sweep {_e(name)}</h1>'
            f"<p>{len(frame)} runs, {len(means)} points: {_e(statuses)}.</p>{banner}</section>",
            _section("Plots", _figures(sweep_dir / "plots", metrics))]
    paper = sweep_dir / PAPER_FILE
    if paper.is_file():
        body.append(_section("Against the paper (ratios between schemes: our runs are at reduced scale)",
                             _paper_rows(pd.read_csv(paper))))
    body += [_section("Per point (mean over ok runs, ± half-width of the 95% confidence interval)",
                      _point_rows(means, frame, metrics)),
             _section("Every run (table.csv)", _every_run(frame, distorted_rows))]
    return _page(f"Sweep {name}", body)


# -- pieces ---------------------------------------------------------------------------------------
def _e(text) -> str:
    return html.escape(str(text))


def _page(title: str, body: list) -> str:
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<title>{_e(title)}</title><style>{STYLE}</style></head>\n<body>\n" + "\n".join(body)
            + "\n</body></html>\n")


def _section(heading: str, content: str) -> str:
    return f"<h2>{_e(heading)}</h2>\n{content}"


def _run_headline(s: dict, title: str) -> str:
    """The run's title, its status line and, per job, its main figures in readable units."""
    status = s.get("status", "?")
    good = status == "ok" and not s.get("distorted") and s.get("aggregation_exact") is not False
    facts = [f"on {_e(s.get('target', '?'))}"]
    if s.get("wall_s") is not None:
        facts.append(f"wall {_e(format_metric('wall_s', s['wall_s']))}")
    if (s.get("time_dilation") or 1) != 1:
        facts.append(f"time dilation {_e(format_value(s['time_dilation']))} (times and rates are virtual)")
    if s.get("seed") is not None:
        facts.append(f"seed {_e(s['seed'])}")
    exact = {True: "aggregation exact", False: "aggregation NOT exact"}.get(s.get("aggregation_exact"))
    if s.get("simulated"):
        exact = "simulated (the flow-level model)"
    status_line = (f'<div class="banner {"good" if good else "bad"}">Status <b>{_e(status)}</b> '
                   f'{", ".join(facts)}{"; " + exact if exact else ""}.</div>')
    jobs = [j for j in s.get("jobs") or [] if isinstance(j, dict) and "job" in j]
    rows = []
    for job in jobs:
        row = {"job": job["job"], "scheme": job.get("policy") or job.get("scheme") or "-"}
        if job.get("iterations") is not None:
            done = job.get("iterations_completed")
            row["iterations"] = f"{done}/{job['iterations']}" if done is not None else job["iterations"]
        row.update({metric_name(m): format_metric(m, job.get(m)) for m in HEADLINE_JOB_METRICS})
        rows.append(row)
    return (f'<section id="headline"><h1>{_e(title)}</h1>\n{status_line}\n'
            f'{_table(rows) if rows else ""}</section>')


def _run_banners(s: dict) -> str:
    out = []
    if s.get("distorted"):
        reasons = "".join(f"<li>{_e(r)}</li>" for r in s.get("distortion_reasons") or [])
        out.append(f'<div class="banner bad"><b>Distorted</b>: an emulator artifact, not a result.<ul>{reasons}'
                   f'</ul></div>')
    for earlier in s.get("superseded_runs") or []:
        sentence = superseded_sentence(earlier)
        out.append(f'<div class="banner note">{_e(sentence[0].upper() + sentence[1:])}.</div>')
    if s.get("aggregation_exact") is False:
        out.append('<div class="banner bad"><b>Aggregation not exact</b>: some result differed from the sum of '
                   'the workers\' gradients.</div>')
    if s.get("error"):
        out.append(f'<div class="banner bad"><b>Error</b>: {_e(s["error"])}</div>')
    return "\n".join(out)


def _table(rows: list, distorted=None, titles=None) -> str:
    """Rows of dicts (columns in first-seen key order), each value as :func:`format_value` shows it (a string
    as it is); ``distorted``: per row, whether to highlight it; ``titles``: a column's tooltip (its key)."""
    if not rows:
        return "<p>(none)</p>"
    columns = list(dict.fromkeys(k for r in rows for k in r))
    titles = titles or {}
    marks = list(distorted) if distorted is not None else [False] * len(rows)
    head = "".join(f'<th title="{_e(titles[c])}">{_e(c)}</th>' if c in titles else f"<th>{_e(c)}</th>"
                   for c in columns)
    cells = "".join(("<tr class=\"distorted\">" if mark else "<tr>")
                    + "".join(f'<td class="unit">{_e(r.get(c) or "")}</td>' if c == "unit" else
                              f"<td>{_e(format_value(r.get(c)))}</td>" for c in columns) + "</tr>\n"
                    for r, mark in zip(rows, marks))
    return f'<div class="wide"><table><thead><tr>{head}</tr></thead><tbody>\n{cells}</tbody></table></div>'


def _metric_rows(values: dict) -> str:
    """One row per metric: its name, its value in the readable unit, the unit."""
    rows = []
    for key, value in values.items():
        scale = metric_scale(key, value)
        rows.append({"metric": metric_name(key), "value": scale.number(value), "unit": scale.symbol})
    return _table(rows, titles={})


def _job_rows(jobs: list) -> str:
    """One row per job metric (in one readable unit for every job), one column per job."""
    names = list(dict.fromkeys(k for job in jobs for k, v in job.items() if k != "job" and is_scalar(v)))
    rows = []
    for key in names:
        scale = metric_scale(key, [job.get(key) for job in jobs])
        rows.append({"metric": metric_name(key), "unit": scale.symbol,
                     **{job["job"]: scale.number(job.get(key)) for job in jobs}})
    return _table(rows)


def _transposed(columns: dict, row_label: str) -> str:
    """``{column name: {row name: value}}`` as one row per name (a counter) and one column per entity."""
    names = list(dict.fromkeys(k for values in columns.values() for k in values))
    return _table([{row_label: n, **{col: values.get(n) for col, values in columns.items()}} for n in names])


def _fidelity(fidelity: dict) -> str:
    rows = [{"job": job, "metric": metric_name(r["metric"]), "emulated": format_metric(r["metric"], r["emulated"]),
             "simulated": format_metric(r["metric"], r["simulated"]), "ratio": r["ratio"],
             "tolerance": fidelity_bound(r), "within": fidelity_verdict(r)}
            for job, job_rows in list(fidelity["jobs"].items()) + [("(run)", fidelity.get("run", []))]
            for r in job_rows]
    verdict = "every row within its bound" if fidelity.get("all_within") else "NOT every row within its bound"
    return f"<p>{verdict}.</p>" + _table(rows)


def _point_rows(means: pd.DataFrame, frame: pd.DataFrame, metrics: list) -> str:
    """Per point its axes, runs, and per metric ``mean ± half-width`` in one readable unit per metric."""
    axes = sweep_axes(frame)
    scales = {m: metric_scale(m, frame[m].dropna()) for m in metrics}
    rows, titles = [], {}
    for _, point in means.iterrows():
        row = {axis: point[axis] for axis in axes}
        row.update(runs=point["runs"], ok=point["ok"], distorted=point["distorted"])
        for metric in metrics:
            label = metric_label(metric, frame[metric].dropna())
            titles[label] = metric
            mean, half = point[metric], point[f"{metric} ±"]
            row[label] = "-" if math.isnan(mean) else (
                scales[metric].number(mean) + (f" ± {scales[metric].number(half)}" if half else ""))
        rows.append(row)
    return _table(rows, distorted=means["distorted"] > 0, titles=titles)


def _every_run(frame: pd.DataFrame, distorted_rows) -> str:
    """table.csv, each metric column in its readable unit (its header says which, its tooltip the key)."""
    metrics = set(numeric_metrics(frame))
    labels = {c: metric_label(c, frame[c].dropna()) if c in metrics else c for c in frame.columns}
    scales = {c: metric_scale(c, frame[c].dropna()) for c in metrics}
    rows = [{labels[c]: scales[c].number(None if is_missing(v) else v) if c in scales else v
             for c, v in record.items()} for record in frame.to_dict("records")]
    return _table(rows, distorted=distorted_rows, titles={labels[c]: c for c in metrics})


def _paper_rows(paper: pd.DataFrame) -> str:
    """paper.csv: per pair of schemes the paper's figures and ratio beside our means and ratio, and whether
    the claim holds (:func:`testbed.reproduce.verdict_text`)."""
    from testbed.reproduce import verdict_text
    rows = []
    for _, r in paper.iterrows():
        metric = r["metric"]
        rows.append({"metric": metric_name(metric), "at": "" if is_missing(r["at"]) else r["at"],
                     "a / b": f"{r['a']} / {r['b']}",
                     "paper a": r["paper_a"], "paper b": r["paper_b"], "paper a/b": r["paper_ratio"],
                     "ours a": format_metric(metric, None if is_missing(r["ours_a"]) else r["ours_a"]),
                     "ours b": format_metric(metric, None if is_missing(r["ours_b"]) else r["ours_b"]),
                     "ours a/b": r["our_ratio"], "paired 95% interval": paired_interval_text(r),
                     "ours / paper": r["ours_vs_paper"], "holds": verdict_text(r),
                     "source": "" if is_missing(r.get("source")) else r["source"]})
    return ("<p>The paper's figures are in its own units; ours are means over finished runs not marked "
            "distorted.</p>" + _table(rows))


def _figures(plots_dir: Path, first=()) -> str:
    """Every PNG of ``plots_dir`` embedded, those named in ``first`` first (in that order), with a link to the
    SVG beside it when there is one."""
    pngs = sorted(plots_dir.glob("*.png")) if plots_dir.is_dir() else []
    if not pngs:
        return "<p>(no plots)</p>"
    rank = {name: i for i, name in enumerate(first)}
    pngs.sort(key=lambda p: (rank.get(p.stem, len(rank)), p.name))
    figures = []
    for p in pngs:
        svg = p.with_suffix(".svg")
        link = f' (<a href="{_e(plots_dir.name)}/{_e(svg.name)}">SVG</a>)' if svg.is_file() else ""
        figures.append(f'<figure><img alt="{_e(p.stem)}" src="data:image/png;base64,'
                       f'{base64.b64encode(p.read_bytes()).decode()}"><figcaption>{_e(p.name)}{link}</figcaption>'
                       f'</figure>')
    return "\n".join(figures)
