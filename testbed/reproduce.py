"""``inatb reproduce PAPER``: run every experiment of a paper and write the paper's page.

A paper's experiments are the sweep files under ``scenarios/papers/<paper>/``
(a YAML file that names a ``scenario``); an experiment's name is its sweep's
``name`` without the paper's prefix (``goat-motivation`` is ``motivation``).
Each runs as ``inatb sweep`` runs it, into ``OUT/<sweep name>/``, so a
reproduction resumes where it stopped and shares its runs with ``inatb
sweep``. After the points it ran, an experiment's directory keeps the
conditions they ran under (``reproduce.json``: commit, date, machine, wall
time).

The page (:func:`page_markdown`) puts, per experiment, the paper's claims
beside ours (``paper.csv``: ratios between schemes, since our runs are at
reduced scale), our figures (mean and 95% interval over repetitions, from
finished runs not marked distorted), the sweep's plots, and the conditions.
An experiment whose runs are not in ``OUT`` keeps its section from the page
already written there (its figures keep the commit, date and machine that
measured them), so experiments measured apart, in other output directories or
on other days, share one page; one never run is listed with the command that
runs it. The paper's ``notes.md``, what its runs taught us in words, ends the
page. The page and its plots go to ``PAGE_DIR/<paper>.md`` and
``PAGE_DIR/<paper>/``; the committed pages under ``docs/reproductions/`` are
this output.
"""

import datetime
import json
import math
import os
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from testbed.atomic_io import write_text_atomic
from testbed.errors import EnvironmentMissingError, UsageError
from testbed.markdown import table
from testbed.metrics.display import metric_scale
from testbed.papers import PAPERS, PAPERS_DIR
from testbed.provenance import machine_id, short_commit
from testbed.sweep import load_sweep, run_sweep
from testbed.sweep.executors import executor_for
from testbed.sweep.table import (PAIRED_RATIOS_PLOT, counted_runs, is_missing, mean_ci, paired_interval,
                                 paired_interval_text, seeds_to_decide)
from testbed.units import format_wall_time

CONDITIONS_FILE = "reproduce.json"
#: Between the values of a :class:`Conditions` field that names several.
LIST_SEPARATOR = ", "
#: What a paper's runs taught us, in words (no figures: those come from the runs), kept beside its sweeps and
#: shown at the end of its page.
NOTES_FILE = "notes.md"
#: A claim holds when our ratio is on the paper's side of 1 and within this share of the paper's ratio.
RATIO_TOLERANCE = 0.25
#: The most seeds an "undecided" claim's estimate names (:func:`verdict_text`).
MOST_SEEDS = 100


@dataclass(frozen=True)
class Experiment:
    """One sweep file of a paper."""
    paper: str
    name: str            # the sweep's name without "<paper>-"
    sweep_path: Path
    spec: object         # its testbed.sweep.spec.SweepSpec


@dataclass(frozen=True)
class Conditions:
    """What an experiment's runs ran under (``reproduce.json``). A sweep resumed at another commit, on another
    day or machine names each, in order, separated by ", " (:func:`merged`)."""
    commit: str
    date: str
    machine: str
    wall_s: float

    def text(self) -> str:
        """``commit `a` on 2026-11-30, AMD EPYC x 2 cores``, or with "commits" and "and" where runs of the
        sweep ran under several."""
        commits = self.commit.split(LIST_SEPARATOR)
        return (f"commit{'s' if len(commits) > 1 else ''} {' and '.join(f'`{c}`' for c in commits)} on "
                f"{' and '.join(self.date.split(LIST_SEPARATOR))}, "
                f"{' and '.join(self.machine.split(LIST_SEPARATOR))} cores")

    def when_text(self) -> str:
        """The page index's short form: ``2026-11-30, `a```, or ``2026-11-29 and 2026-11-30, `a`, `b```."""
        return (f"{' and '.join(self.date.split(LIST_SEPARATOR))}, "
                f"{', '.join(f'`{c}`' for c in self.commit.split(LIST_SEPARATOR))}")

    def to_dict(self) -> dict:
        return {"commit": self.commit, "date": self.date, "machine": self.machine, "wall_s": self.wall_s}


def experiments(paper: str, papers_dir: Path = PAPERS_DIR) -> list:
    """Every :class:`Experiment` of ``paper``: its motivating example first, then by file name."""
    if paper not in PAPERS:
        raise UsageError(f"unknown paper {paper!r}; expected one of {', '.join(PAPERS)}")
    found = []
    for path in sorted((papers_dir / paper).glob("*.yaml")):
        if not _is_sweep(path):
            continue
        spec = load_sweep(path)
        name = spec.name[len(paper) + 1:] if spec.name.startswith(f"{paper}-") else spec.name
        found.append(Experiment(paper, name, path, spec))
    return sorted(found, key=lambda e: e.name != "motivation")


def _is_sweep(path: Path) -> bool:
    return any(line.startswith("scenario:") for line in path.read_text().splitlines())


def select(found: list, only) -> list:
    """The experiments named in ``only`` (all when empty); an unknown name is a usage error naming the known."""
    if not only:
        return found
    names = {e.name for e in found}
    unknown = [name for name in only if name not in names]
    if unknown:
        raise UsageError(f"no experiment {', '.join(unknown)} in this paper; expected one of "
                         f"{', '.join(sorted(names))}")
    return [e for e in found if e.name in only]


def run_experiment(experiment: Experiment, out_root: Path, target=None, progress=None, rerun_distorted=False):
    """Run the points of ``experiment`` not done yet (with ``rerun_distorted``, those whose newest run is
    distorted too); keep the conditions when any ran. Returns its :class:`testbed.sweep.runner.SweepResult`."""
    spec = experiment.spec
    started = time.monotonic()
    commit, date = short_commit(), datetime.date.today().isoformat()     # what the runs run, as they start
    result = run_sweep(spec, out_root, target=target, progress=progress, executor=executor_for(spec),
                       rerun_distorted=rerun_distorted)
    if result.ran:
        previous = read_conditions(result.sweep_dir) if result.skipped else None
        conditions = Conditions(commit, date, machine_id(), time.monotonic() - started)
        if previous is not None:    # runs of an earlier call stay in the table: their conditions too
            conditions = Conditions(merged(previous.commit, commit), merged(previous.date, date),
                                    merged(previous.machine, conditions.machine), previous.wall_s + conditions.wall_s)
        write_text_atomic(result.sweep_dir / CONDITIONS_FILE, json.dumps(conditions.to_dict(), indent=1) + "\n")
    return result


def merged(earlier: str, now: str) -> str:
    """``earlier`` (one value or several, :class:`Conditions`) with ``now`` added unless it is one of them."""
    values = earlier.split(LIST_SEPARATOR)
    return earlier if now in values else LIST_SEPARATOR.join([*values, now])


def read_conditions(sweep_dir: Path):
    """The :class:`Conditions` kept in ``sweep_dir``, or None."""
    path = Path(sweep_dir) / CONDITIONS_FILE
    if not path.exists():
        return None
    doc = json.loads(path.read_text())
    return Conditions(doc["commit"], doc["date"], doc["machine"], float(doc["wall_s"]))


def require_root_for(selected: list):
    """Emulated experiments build networks: refuse them up front without root, naming the simulated ones."""
    emulated = [e.name for e in selected if not e.spec.simulate]
    if emulated and os.geteuid() != 0:
        simulated = [e.name for e in selected if e.spec.simulate]
        hint = f"; --only {','.join(simulated)} runs the simulated ones" if simulated else ""
        raise EnvironmentMissingError(f"emulated experiments ({', '.join(emulated)}) need root{hint}")


# -- the page ----------------------------------------------------------------------------------------------

def description(experiment: Experiment) -> str:
    """The sweep's ``description``, else its file's first comment paragraph (a word broken at a line's
    hyphen, "fat-" then "tree", joined again; a colon that introduces the file's next lines becomes a full
    stop, since the page goes on with other things)."""
    if experiment.spec.description:
        return experiment.spec.description
    joined = ""
    for line in experiment.sweep_path.read_text().splitlines():
        if not line.startswith("#"):
            break
        text = line[1:].strip()
        if not text:
            break
        hyphen_broken = joined[-2:-1].isalpha() and joined.endswith("-")
        joined += text if hyphen_broken or not joined else " " + text
    return joined[:-1] + "." if joined.endswith(":") else joined


def _number(value) -> str:
    if is_missing(value):
        return ""
    return f"{value:.4g}"


def _figure(values, metric: str) -> str:
    """Mean ± half the 95% interval of ``values`` of ``metric``, both in the scale that suits the mean."""
    mean, half = mean_ci(values)
    if math.isnan(mean):
        return ""
    scale = metric_scale(metric, mean)
    return scale.text(mean) + (f" ± {scale.text(half)}" if half else "")


def could_hold(low: float, high: float, paper_ratio: float) -> bool:
    """Whether a ratio of ours between ``low`` and ``high`` could make a claim of ``paper_ratio`` hold: on the
    paper's side of 1 and within ``RATIO_TOLERANCE`` of its ratio."""
    lowest, highest = paper_ratio * (1 - RATIO_TOLERANCE), paper_ratio * (1 + RATIO_TOLERANCE)
    on_its_side = high > 1 if paper_ratio > 1 else low < 1
    return on_its_side and low <= highest and high >= lowest


def verdict(row) -> str:
    """Whether a paper comparison row (``paper.csv``) holds: "yes", "order only", "no", "undecided", "level" or
    "no run counted" (no finished run that was not marked distorted has one of its pair). Where the row has the
    95% interval of its paired ratios (runs that share a seed), the interval decides the side of 1: one wholly
    on the other side is "no"; one that holds 1 is "undecided" (more repetitions would decide), unless none of
    its ratios could make the claim hold (:func:`could_hold`): then more repetitions could only decide its
    side, where the claim would be "no" or "order only", and the pair is "level"."""
    if row["our_ratio"] is None or math.isnan(row["our_ratio"]):
        return "no run counted"
    interval = paired_interval(row)
    if interval is not None:
        low, high = interval
        if low <= 1 <= high:
            return "undecided" if could_hold(low, high, row["paper_ratio"]) else "level"
        same_side = (low - 1) * (row["paper_ratio"] - 1) > 0
    else:
        same_side = bool(row["same_order"])
    if not same_side:
        return "no"
    return "yes" if abs(row["ours_vs_paper"] - 1) <= RATIO_TOLERANCE else "order only"


def verdict_text(row) -> str:
    """:func:`verdict` in words for a table: an "undecided" row says about how many seeds would decide it at
    the spread its runs show (:func:`testbed.sweep.table.seeds_to_decide`)."""
    holds = verdict(row)
    if holds != "undecided":
        return holds
    seeds = seeds_to_decide(row, MOST_SEEDS)
    return f"undecided (about {seeds} seeds would decide at this spread)" if seeds else \
        f"undecided (not within {MOST_SEEDS} seeds at this spread)"


def _figures_table(spec, frame: pd.DataFrame) -> str:
    axes = [axis for axis, _ in spec.axes]
    metrics = [m for m in spec.metrics if m in frame]
    rows = []
    for keys, group in frame.groupby(axes, sort=False, dropna=False):
        keys = keys if isinstance(keys, tuple) else (keys,)
        kept = counted_runs(group)
        statuses = group["status"].value_counts(sort=False)
        left_out = [f"{n} {status}" for status, n in statuses.items() if status != "ok"]
        distorted = int(((group["status"] == "ok") & (group["distorted"] == True)).sum())  # noqa: E712
        left_out += [f"{distorted} distorted"] if distorted else []
        runs = f"{len(kept)} of {len(group)}" + (f" ({', '.join(left_out)})" if left_out else "")
        rows.append([*keys, runs, *(_figure(kept[m], m) for m in metrics)])
    return table([*axes, "runs counted", *(f"`{m}`" for m in metrics)], rows)


def _paired_text(row) -> str:
    """The paired ratios' interval as the claims table shows it: ``; paired 1.14 to 1.51 (3 seeds)``."""
    interval = paired_interval_text(row, _number)
    return f"; paired {interval}" if interval else ""


def _ours_text(row) -> str:
    """Our side of a claim: ``2.58 s / 2.43 s = 1.064``, or ``2.58 s / none`` where a scheme has no run counted;
    both values in one scale, the one that suits the larger."""
    values = [row["ours_a"], row["ours_b"]]
    scale = metric_scale(row["metric"], [v for v in values if not is_missing(v)])
    ours = " / ".join("none" if is_missing(v) else scale.text(v) for v in values)
    ratio = _number(row["our_ratio"])
    return ours + (f" = {ratio}" if ratio else "") + _paired_text(row)


def _claims_table(paper_frame: pd.DataFrame) -> str:
    rows = []
    for _, r in paper_frame.iterrows():
        at = f" at {r['at']}" if isinstance(r["at"], str) and r["at"] else ""
        rows.append([f"{r['source']}{at}", f"`{r['metric']}`", f"{r['a']} / {r['b']}",
                     f"{_number(r['paper_a'])} / {_number(r['paper_b'])} = {_number(r['paper_ratio'])}",
                     _ours_text(r), _number(r["ours_vs_paper"]), verdict_text(r)])
    return table(("claim", "metric", "pair", "the paper", "ours", "ours / paper", "holds"), rows)


#: What the claims paragraph says of the sweep's plot of each claim pair's ratio per seed
#: (:func:`testbed.sweep.table.plot_paired_ratios`), where the sweep has one.
PAIRED_PLOT_NOTE = (" The plot `paired_ratios` below draws each pair's ratio per seed against how slow that seed's "
                    "draw made the claim's schemes: where the points cross 1 as the draw gets heavier, the order "
                    "turns with the draw and the claim holds on some draws only.")


def experiment_section(experiment: Experiment, out_root: Path, page_dir: Path, written=None) -> tuple:
    """(The page's markdown for ``experiment``, its summary row for the page's index); its sweep's plots are
    copied to ``page_dir/<paper>/``, where the markdown shows them. Where its runs are not in ``out_root``,
    its section and row in ``written`` (a :class:`WrittenPage`) are kept, if it has them."""
    spec = experiment.spec
    sweep_dir = Path(out_root) / spec.name
    kind = "simulated" if spec.simulate else "emulated"
    command = f"`inatb reproduce {experiment.paper} --only {experiment.name}`"
    lines = [f"## {experiment.name}", "", description(experiment), "",
             f"Sweep `{experiment.sweep_path.relative_to(experiment.sweep_path.parents[3])}`: {kind}, "
             f"{len(spec.points)} runs ({spec.repetitions_text()}). Command: {command}."]
    table_path = sweep_dir / "table.csv"
    conditions = read_conditions(sweep_dir)
    if not table_path.exists() or conditions is None:
        if written is not None and experiment.name in written.sections:    # a section only where its row is
            return written.sections[experiment.name], written.rows[experiment.name]
        lines += ["", "Not run yet: the command above runs it."]
        return "\n".join(lines), (experiment.name, kind, NOT_RUN, "", "")
    frame = pd.read_csv(table_path)
    targets = ", ".join(sorted({str(t) for t in frame.get("target", pd.Series(dtype=str)).dropna()})) or "-"
    dilation = frame["time_dilation"].dropna() if "time_dilation" in frame else pd.Series(dtype=float)
    dilation_text = (f", time dilation {_number(dilation.min())}" +
                     (f" to {_number(dilation.max())}" if dilation.max() != dilation.min() else "")) \
        if len(dilation) else ""
    scales = ", ".join(sorted({_number(s) for s in frame["scale"].dropna()})) if "scale" in frame else "-"
    lines += ["", f"Measured at {conditions.text()}, "
                  f"target {targets}, scale {scales}{dilation_text}; {format_wall_time(conditions.wall_s)} "
                  f"of wall time."]
    holds = ""
    paper_path = sweep_dir / "paper.csv"
    if spec.paper and paper_path.exists():
        paper_frame = pd.read_csv(paper_path)
        verdicts = [verdict(r) for _, r in paper_frame.iterrows()]
        holds = f"{verdicts.count('yes')} of {len(verdicts)}"
        lines += ["", "### Against the paper", "",
                  f"Ratios between schemes (our runs are at reduced scale): a claim holds when our ratio is on the "
                  f"paper's side of 1 and within {RATIO_TOLERANCE:.0%} of its ratio (\"order only\": on its side, "
                  f"not within). Where runs of the pair share seeds (the same background draw and stragglers), "
                  f"the 95% interval of their paired ratios must lie on that side too: one that holds 1 is "
                  f"\"undecided\", with about how many seeds would decide it at the spread its runs show, or "
                  f"\"level\" where no ratio in it is within {RATIO_TOLERANCE:.0%} of the paper's on its side: more "
                  f"seeds could then decide only the side, on which the claim would not hold either way."
                  + (PAIRED_PLOT_NOTE if (sweep_dir / "plots" / PAIRED_RATIOS_PLOT).exists() else ""), "",
                  _claims_table(paper_frame)]
    lines += ["", "### Our figures", "",
              "Means over the finished runs not marked distorted, ± the 95% interval (Student's t) where a point "
              "has more than one.", "", _figures_table(spec, frame)]
    plots = sorted((sweep_dir / "plots").glob("*.png")) if (sweep_dir / "plots").exists() else []
    if plots:
        assets = page_dir / experiment.paper
        assets.mkdir(parents=True, exist_ok=True)
        lines += [""]
        for plot in plots:
            name = f"{experiment.name}-{plot.name}"
            shutil.copyfile(plot, assets / name)
            lines += [f"![{experiment.name}: {plot.stem}]({experiment.paper}/{name})", ""]
    return "\n".join(lines).rstrip(), (experiment.name, kind, f"{len(frame)}", holds or "-",
                                       conditions.when_text())


@dataclass(frozen=True)
class WrittenPage:
    """What a page written before holds per experiment: its measured sections (markdown, by experiment name)
    and their rows of the page's index."""
    sections: dict
    rows: dict


INDEX_HEAD = ("experiment", "kind", "runs", "claims that hold", "measured")
NOT_RUN = "not run yet"


def read_written_page(path: Path) -> WrittenPage:
    """The measured experiments of the page at ``path`` (none if there is no page): the rows of its index
    table that are not "not run yet", and the sections those rows name (from a ``## name`` heading to the
    next)."""
    path = Path(path)
    if not path.exists():
        return WrittenPage({}, {})
    text = path.read_text()
    header = "| " + " | ".join(INDEX_HEAD) + " |"
    rows = {}
    if header in text:
        for line in text.split(header, 1)[1].strip().splitlines()[1:]:    # the separator first
            if not line.startswith("|"):
                break
            cells = tuple(c.strip() for c in line.strip().strip("|").split("|"))
            if len(cells) == len(INDEX_HEAD) and cells[2] != NOT_RUN:
                rows[cells[0]] = cells
    sections = {}
    for chunk in text.split("\n## ")[1:]:
        name = chunk.split("\n", 1)[0].strip()
        if name in rows:
            sections[name] = "## " + chunk.rstrip()
    return WrittenPage(sections, rows)


def page_markdown(paper: str, found: list, out_root: Path, page_dir: Path) -> str:
    sections, index = [], []
    written = read_written_page(Path(page_dir) / f"{paper}.md")
    for experiment in found:
        section, row = experiment_section(experiment, out_root, page_dir, written)
        sections.append(section)
        index.append(row)
    head = [f"# {PAPERS[paper]}", "",
            f"<!-- Written by `inatb reproduce {paper}`: run it again to refresh the page; do not edit it. -->", "",
            f"Every experiment of {PAPERS[paper]} the testbed reproduces, with the paper's claims beside ours. "
            f"Each figure below comes from the runs of its experiment, measured at the commit, on the date and "
            f"machine its section names; `inatb reproduce {paper}` runs them all (resuming where it stopped) and "
            f"writes this page.", "",
            table(INDEX_HEAD, index)]
    notes_path = PAPERS_DIR / paper / NOTES_FILE
    if notes_path.exists():
        sections.append("## What we learned\n\n" + notes_path.read_text().strip())
    return "\n".join(head) + "\n\n" + "\n\n".join(sections) + "\n"


def write_page(paper: str, found: list, out_root: Path, page_dir: Path) -> Path:
    page_dir = Path(page_dir)
    page_dir.mkdir(parents=True, exist_ok=True)
    path = page_dir / f"{paper}.md"
    write_text_atomic(path, page_markdown(paper, found, out_root, page_dir))
    return path
