"""``inatb report DIR --html``: one self-contained HTML page of a run or a sweep.

The page embeds its plots (PNG as data URIs), so ``report.html`` can be mailed or archived on its own.
A run's page: status (a distorted run or an inexact aggregation in a banner, with the reasons), the
run's and each job's metrics, the fidelity figure when ``inatb fidelity`` produced the run, switch
counters, CPU, background traffic, every plot, the iftop tables and the scenario. A sweep's page:
the per-point means with their 95% confidence intervals, every plot (a point with a distorted run
circled, as the plot says), and the whole table with distorted runs highlighted.
"""

import base64
import html
from pathlib import Path

from testbed.atomic_io import write_text_atomic
from testbed.fidelity import verdict as fidelity_verdict
from testbed.reports import results_kind
from testbed.reports.results import is_number, load_summary, load_table, numeric_metrics, point_means

REPORT_FILE = "report.html"

STYLE = """
body { font-family: sans-serif; margin: 2em; max-width: 80em; color: #222; }
table { border-collapse: collapse; margin: 0.5em 0 1.5em; font-size: 0.9em; }
th, td { border: 1px solid #ccc; padding: 0.2em 0.6em; text-align: right; }
th { background: #f0f0f0; } td:first-child, th:first-child { text-align: left; }
tr.distorted td { background: #fde8e8; }
.banner { padding: 0.6em 1em; margin: 1em 0; border-radius: 4px; }
.bad { background: #fde8e8; border: 1px solid #d33; } .good { background: #e8f6e8; border: 1px solid #3a3; }
figure { display: inline-block; margin: 0.5em; } img { max-width: 100%; }
.wide { overflow-x: auto; }
pre { background: #f7f7f7; padding: 0.8em; overflow-x: auto; font-size: 0.85em; }
"""


def write_report(path) -> Path:
    """Write ``report.html`` into the run or sweep directory ``path``; returns its path."""
    path = Path(path)
    page = render_run(path) if results_kind(path) == "run" else render_sweep(path)
    out = path / REPORT_FILE
    write_text_atomic(out, page)
    return out


def render_run(run_dir: Path) -> str:
    s = load_summary(run_dir)
    title = f"{s.get('scenario', '?')} / {s.get('run_id', Path(run_dir).name)}"
    body = [f"<h1>Run {_e(title)}</h1>", _run_banners(s)]
    body.append(_section("Run", _table([{"metric": k, "value": v} for k, v in s.items() if _scalar(v)])))
    jobs = s.get("jobs") or []
    if jobs:
        body.append(_section("Jobs", _transposed({j["job"]: {k: v for k, v in j.items() if _scalar(v)}
                                                  for j in jobs}, "metric")))
    if s.get("fidelity"):
        body.append(_section("Emulation against the simulator (inatb fidelity)", _fidelity(s["fidelity"])))
    if s.get("switches"):
        body.append(_section("Switch counters", _transposed(
            {name: {k: v for k, v in c.items() if _scalar(v)} for name, c in s["switches"].items()}, "counter")))
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
            [{k: v for k, v in b.items() if _scalar(v)} for b in s["background"]])))
    body.append(_section("Plots", _figures(Path(run_dir) / "plots")))
    for table in sorted((Path(run_dir) / "iftop").glob("*.txt")):
        body.append(_section(f"{table.stem}-eth0 (iftop -t layout)", f"<pre>{_e(table.read_text())}</pre>"))
    scenario = Path(run_dir) / "scenario.yaml"
    if scenario.is_file():
        body.append(_section("Scenario", f"<pre>{_e(scenario.read_text())}</pre>"))
    return _page(f"Run {title}", body)


def render_sweep(sweep_dir: Path) -> str:
    frame = load_table(sweep_dir)
    name = Path(sweep_dir).name
    metrics = numeric_metrics(frame)
    means = point_means(frame, metrics)
    distorted_rows = frame["distorted"] == True  # noqa: E712
    distorted = int(distorted_rows.sum())
    statuses = ", ".join(f"{n} {s}" for s, n in frame["status"].value_counts().sort_index().items())
    banner = (f'<div class="banner bad">{distorted} distorted run(s): they measured the emulator, not the '
              f'schemes; their points are circled on the plots and highlighted below.</div>' if distorted else
              '<div class="banner good">No distorted run.</div>')
    body = [f"<h1>Sweep {_e(name)}</h1>", f"<p>{len(frame)} runs, {len(means)} points: {_e(statuses)}.</p>",
            banner,
            _section("Per point (mean over ok runs, ± half-width of the 95% confidence interval)",
                     _table(means.to_dict("records"), distorted=means["distorted"] > 0)),
            _section("Plots", _figures(Path(sweep_dir) / "plots")),
            _section("Every run (table.csv)", _table(frame.to_dict("records"), distorted=distorted_rows))]
    return _page(f"Sweep {name}", body)


# -- pieces ---------------------------------------------------------------------------------------
def _e(text) -> str:
    return html.escape(str(text))


def _scalar(value) -> bool:
    return value is None or isinstance(value, (str, int, float, bool))


def _fmt(value) -> str:
    if value is None or (isinstance(value, float) and value != value):
        return "-"
    if is_number(value) and isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


def _page(title: str, body: list) -> str:
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<title>{_e(title)}</title><style>{STYLE}</style></head>\n<body>\n" + "\n".join(body)
            + "\n</body></html>\n")


def _section(heading: str, content: str) -> str:
    return f"<h2>{_e(heading)}</h2>\n{content}"


def _run_banners(s: dict) -> str:
    out = []
    if s.get("distorted"):
        reasons = "".join(f"<li>{_e(r)}</li>" for r in s.get("distortion_reasons") or [])
        out.append(f'<div class="banner bad"><b>Distorted</b>: an emulator artifact, not a result.<ul>{reasons}'
                   f'</ul></div>')
    if s.get("aggregation_exact") is False:
        out.append('<div class="banner bad"><b>Aggregation not exact</b>: some result differed from the sum of '
                   'the workers\' gradients.</div>')
    if s.get("error"):
        out.append(f'<div class="banner bad"><b>Error</b>: {_e(s["error"])}</div>')
    status = s.get("status", "?")
    cls = "good" if status == "ok" and not out else "bad"
    out.insert(0, f'<div class="banner {cls}">Status <b>{_e(status)}</b> on {_e(s.get("target", "?"))}, '
                  f'wall {_fmt(s.get("wall_s"))} s, seed {_e(s.get("seed"))}.</div>')
    return "\n".join(out)


def _table(rows: list, distorted=None) -> str:
    """Rows of dicts (columns in first-seen key order); ``distorted``: per row, whether to highlight it."""
    if not rows:
        return "<p>(none)</p>"
    columns = list(dict.fromkeys(k for r in rows for k in r))
    marks = list(distorted) if distorted is not None else [False] * len(rows)
    head = "".join(f"<th>{_e(c)}</th>" for c in columns)
    cells = "".join(("<tr class=\"distorted\">" if mark else "<tr>")
                    + "".join(f"<td>{_e(_fmt(r.get(c)))}</td>" for c in columns) + "</tr>\n"
                    for r, mark in zip(rows, marks))
    return f'<div class="wide"><table><thead><tr>{head}</tr></thead><tbody>\n{cells}</tbody></table></div>'


def _transposed(columns: dict, row_label: str) -> str:
    """``{column name: {row name: value}}`` as one row per name (a metric) and one column per entity."""
    names = list(dict.fromkeys(k for values in columns.values() for k in values))
    return _table([{row_label: n, **{col: values.get(n) for col, values in columns.items()}} for n in names])


def _fidelity(fidelity: dict) -> str:
    rows = [{"job": job, "metric": r["metric"], "emulated": r["emulated"], "simulated": r["simulated"],
             "ratio": r["ratio"], "tolerance": f"±{r['tolerance']:.0%}",
             "within": fidelity_verdict(r)}
            for job, job_rows in list(fidelity["jobs"].items()) + [("(run)", fidelity.get("run", []))]
            for r in job_rows]
    verdict = "every row within its bound" if fidelity.get("all_within") else "NOT every row within its bound"
    return f"<p>{verdict}.</p>" + _table(rows)


def _figures(plots_dir: Path) -> str:
    pngs = sorted(plots_dir.glob("*.png")) if plots_dir.is_dir() else []
    if not pngs:
        return "<p>(no plots)</p>"
    return "\n".join(
        f'<figure><img alt="{_e(p.stem)}" src="data:image/png;base64,{base64.b64encode(p.read_bytes()).decode()}">'
        f"<figcaption>{_e(p.name)}</figcaption></figure>" for p in pngs)

