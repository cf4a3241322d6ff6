"""A sweep file: a base scenario, axes of ``--set`` values, repetitions, and the metrics to plot.

```yaml
version: 1
name: goat-exp3                 # results go to OUT/<name>/
description: GOAT Exp#3, ...    # optional: what the sweep reproduces (a reproduction page's text)
scenario: testbed.yaml          # the base scenario, relative to this file
set: ["scale=0.00005"]          # optional: overrides every point shares
axes:                           # every combination is a point
  jobs.0.iterations: [3, 5]     # a --set path and its values
  scheme:                       # or a named axis: label -> the --set strings of that value
    ATP: [policy=atp]
    PA-ATP: [policy=atp, transport=pa-atp]
repetitions: 3                  # runs per point, each with its own derived seed
metrics: [iteration_time_s, ps_ingress_bytes]   # metrics plotted (the table keeps every one), a run's or
                                                # a job's as <job>.<metric>
run_plots: [worker_send_rate]   # optional: plots of each run (its plots/<name>.png) side by side
simulate: false                 # optional: true runs every point in the flow-level simulator instead
paper:                          # optional: what the paper reports, compared as ratios between schemes
  - metric: ps_ingress_bytes
    by: scheme                  # the axis whose values the paper compares
    at: {jobs.0.iterations: 5}  # the other axes' values its figures are for
    values: {ATP: 198, PA-ATP: 44}   # the paper's figures, in its own unit
    source: "GOAT §VII-C Exp#3: the text's figures for 16 workers"
    repetitions: 8              # optional: runs at the points this claim compares (at least the sweep's)
```

A point is one combination of axis values and one repetition. Its seed is
derived from the base scenario's seed and the repetition alone
(:func:`derive_seed`): every point of repetition ``r`` shares it, so schemes
are compared on the same random draws (compute delays, background flows),
and repetitions differ. A point's id is a digest of its overrides, so a
point keeps its directory, and its result, when the sweep is run again or
grows an axis value.

With ``simulate: true`` every point is a simulated run (``testbed.sim.run``:
``inatb simulate``'s figures under the names a run's summary uses), here,
at any scale, without root: the papers' full-scale curves.

Every point's scenario is parsed and validated before anything runs: a typo
in an axis path or value is one line naming the sweep file's line of the axis
(or of the ``set`` entry), the point and the ``--set`` string, never a line
of the base scenario, and not a failure an hour into the sweep. So is a
metric the table will not have: ``metrics`` names a run's metric or a job's
as ``<job>.<metric>`` (``testbed/metrics/definitions.py``), with the closest
known name when it looks like a typo.

``inatb sweep FILE --set KEY=VALUE`` (:func:`load_sweep`'s ``overrides``)
applies to every point after the file's ``set`` (the command line wins) and
before the axes; a ``--set`` on a field an axis varies is refused, since the
axis would overwrite it at every point. The point's seed comes last, derived
from the seed those give the base scenario.

``paper`` lists what the paper reports (:class:`PaperClaim`): for one metric
(one of ``metrics``), its figures for several values of one axis at fixed
values of the others (each other axis of more than one value pinned).
Our runs are at reduced scale, so only ratios are compared: every pair of
those values, the paper's ratio against the ratio of our means
(``paper.csv``, :func:`testbed.sweep.table.paper_comparison`). A claim's
``repetitions`` runs its points (its ``by`` values at its ``at``) that many
times, the sweep's other points ``repetitions`` times: where runs spread, the
seeds go where the paper's claims need them to decide. Repetition ``r`` has
the same seed at every point, so the claim's runs still pair by seed.
"""

import hashlib
import itertools
import json
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from testbed.errors import ScenarioError, closest
from testbed.metrics.definitions import JOB_METRICS, SUMMARY_METRICS, job_metric_name, split_job_metric
from testbed.scenario import load_scenario, read_yaml_document, read_yaml_text
from testbed.scenario.overrides import overrides_overlap

SWEEP_VERSION = 1
SWEEP_KEYS = {"version", "name", "description", "scenario", "set", "axes", "repetitions", "metrics", "run_plots",
              "simulate", "paper"}
PAPER_KEYS = {"metric", "by", "at", "values", "source", "repetitions"}
#: What a sweep's ``run_plots`` may name: the plots every run writes (testbed/metrics/plots.py).
RUN_PLOTS = ("iteration_time", "ps_ingress_rate", "worker_send_rate", "aggregation_rate")
MAX_POINTS = 10_000
MAX_REPETITIONS = 1_000


@dataclass(frozen=True)
class Point:
    """One run of the sweep: axis values (``--set`` path -> value), its repetition and seed."""
    values: tuple            # ((path, value), ...) in axis order
    repetition: int
    seed: int
    overrides: tuple         # the --set strings that make its scenario, fixed ones first

    @property
    def point_id(self) -> str:
        digest = hashlib.sha256(json.dumps(self.overrides).encode()).hexdigest()[:12]
        return f"p{digest}"

    def label(self) -> str:
        return ", ".join(f"{path}={value}" for path, value in self.values) + f", repetition {self.repetition}"


@dataclass(frozen=True)
class PaperClaim:
    """A paper's figures for ``metric`` at several values of the axis ``by`` (``values``: ((axis value,
    figure), ...), in the paper's unit), the other axes at ``at`` (((axis, value), ...)), with where they
    come from (``source``)."""
    metric: str
    by: str
    values: tuple
    at: tuple = ()
    source: str = ""
    repetitions: int = 1     # runs at each point the claim compares (at least the sweep's repetitions)

    def compares(self, values: dict) -> bool:
        """Whether the point of axis values ``values`` (axis -> value) is one of the claim's."""
        return any(values.get(self.by) == value for value, _ in self.values) and \
            all(values.get(axis) == value for axis, value in self.at)


@dataclass
class SweepSpec:
    name: str
    source: str
    scenario_path: Path
    fixed: list              # --set strings of every point: the file's set, then the command line's
    axes: list               # [(path, [values])]
    repetitions: int
    metrics: list
    run_plots: list = field(default_factory=list)
    simulate: bool = False   # points run in the flow-level simulator, not emulated
    paper: list = field(default_factory=list)   # PaperClaim
    description: str = ""    # what the sweep reproduces, for its reproduction page
    base_seed: int = 0
    points: list = field(default_factory=list)
    command_line_sets: list = field(default_factory=list)   # the --set strings of the command line (in fixed)
    job_names: list = field(default_factory=list)   # the jobs of the points' scenarios, in order of appearance

    def scenario_of(self, point):
        """The scenario of ``point``: the base scenario with the point's overrides."""
        return load_scenario(self.scenario_path, point.overrides)

    def scenario_text(self) -> str:
        """The base scenario's text (what a remote node parses with a point's overrides)."""
        return read_yaml_text(self.scenario_path)

    def repetitions_at(self, values: tuple) -> int:
        """How many runs the point of axis values ``values`` (((axis, value), ...)) has: the sweep's
        repetitions, or more where a paper claim that compares it asks for more."""
        claimed = [c.repetitions for c in self.paper if c.compares(dict(values))]
        return max([self.repetitions, *claimed])

    def repetitions_text(self) -> str:
        """The repetitions as a sweep's header says them: ``3 repetitions``, or ``3 repetitions, 8 at the
        points the paper's claims compare``."""
        claimed = sorted({c.repetitions for c in self.paper if c.repetitions > self.repetitions})
        more = f", {'up to ' if len(claimed) > 1 else ''}{claimed[-1]} at the points the paper's claims " \
               f"compare" if claimed else ""
        return f"{self.repetitions} repetition{'s' if self.repetitions != 1 else ''}{more}"

    def size_text(self) -> str:
        """The sweep's points as its header counts them: ``2 x 3 x 3 repetitions`` (each axis's values, then
        :meth:`repetitions_text`)."""
        return " x ".join([*(str(len(values)) for _, values in self.axes), self.repetitions_text()])

    def sets_text(self) -> str:
        """The command line's ``--set`` values as the sweep's header adds them: ``, with --set a=1 b=2`` (empty
        without them)."""
        return f", with --set {' '.join(self.command_line_sets)}" if self.command_line_sets else ""


def derive_seed(base_seed: int, repetition: int) -> int:
    """Repetition 0 keeps the scenario's seed; others get a 31-bit seed drawn from (base, repetition)."""
    if repetition == 0:
        return base_seed
    digest = hashlib.sha256(f"{base_seed}/{repetition}".encode()).digest()
    return int.from_bytes(digest[:4], "big") & 0x7FFFFFFF


def set_string(path: str, value) -> str:
    """``path=value`` in the YAML the scenario loader reads back to ``value``."""
    text = yaml.safe_dump(value, default_flow_style=True, width=10**6).strip()
    if text.endswith("\n...") or text.endswith(" ..."):
        text = text[:-4].strip()
    return f"{path}={text}"


def load_sweep(path, overrides=()) -> SweepSpec:
    """The sweep file at ``path``, checked, with its points; ``overrides``: the command line's ``--set``
    strings, applied to every point after the file's ``set`` and before the axes (the module docstring)."""
    path = Path(path)
    doc, _, c = read_yaml_document(path)
    if doc is None:
        c.fail("(file)", "the file is empty; a sweep needs version, name, scenario and axes")
    if isinstance(doc, dict) and "topology" in doc and "axes" not in doc:
        c.fail("topology", "this is a scenario, not a sweep file (a scenario and axes): run it with inatb run, "
                           "or name it as a sweep's scenario")
    c.keys(doc, "", SWEEP_KEYS)
    for key in ("version", "name", "scenario", "axes"):
        if key not in doc:
            c.fail(key, "missing")
    if doc["version"] != SWEEP_VERSION or isinstance(doc["version"], bool):
        c.fail("version", f"expected {SWEEP_VERSION}, got {doc['version']!r}")
    name = c.file_name(doc["name"], "name")
    scenario_name = doc["scenario"]
    if not isinstance(scenario_name, str) or not scenario_name:
        c.fail("scenario", "expected the path of the base scenario, relative to this file")
    scenario_path = (path.parent / scenario_name)
    if not scenario_path.is_file():
        c.fail("scenario", f"no such file: {scenario_path}")
    fixed = doc.get("set", [])
    if not isinstance(fixed, list) or not all(isinstance(s, str) and "=" in s for s in fixed):
        c.fail("set", "expected a list of 'path=value' strings, as inatb run --set takes them")
    axes_doc = doc["axes"]
    if not isinstance(axes_doc, dict) or not axes_doc:
        c.fail("axes", "expected a mapping of --set paths to lists of values, e.g. {policy: [goat, atp]}")
    axes = []
    for axis, values in axes_doc.items():
        if not isinstance(axis, str) or not axis or "=" in axis:
            c.fail(f"axes.{axis}", "expected a --set path such as policy or jobs.0.iterations, or an axis name")
        if isinstance(values, dict) and values:
            for label, sets in values.items():
                sets = [sets] if isinstance(sets, str) else sets
                if not isinstance(sets, list) or not all(isinstance(x, str) and "=" in x for x in sets):
                    c.fail(f"axes.{axis}.{label}", "expected a list of 'path=value' strings, as --set takes them")
                values[label] = tuple(sets)
            axes.append((axis, values))
            continue
        if not isinstance(values, list) or not values:
            c.fail(f"axes.{axis}", "expected a non-empty list of values, or a mapping of labels to --set strings")
        if len({json.dumps(v, sort_keys=True) for v in values}) != len(values):
            c.fail(f"axes.{axis}", "a value appears twice")
        axes.append((axis, values))
    repetitions = c.integer(doc.get("repetitions", 1), "repetitions", 1, MAX_REPETITIONS)
    metrics = doc.get("metrics", [])
    if not isinstance(metrics, list) or not all(isinstance(m, str) and m for m in metrics):
        c.fail("metrics", "expected a list of metric names, e.g. [iteration_time_s] (a job's: job-a.iteration_time_s)")
    run_plots = doc.get("run_plots", [])
    if not isinstance(run_plots, list) or not all(isinstance(p, str) for p in run_plots):
        c.fail("run_plots", f"expected a list of a run's plot names: {', '.join(RUN_PLOTS)}")
    for i, plot in enumerate(run_plots):
        c.choice(plot, f"run_plots.{i}", RUN_PLOTS)
    combinations = 1
    for _, values in axes:
        combinations *= len(values)
    if combinations * repetitions > MAX_POINTS:
        c.fail("axes", f"{combinations * repetitions} points (axes x repetitions); at most {MAX_POINTS}")
    simulate = c.boolean(doc.get("simulate", False), "simulate")
    if simulate and run_plots:
        c.fail("run_plots", "a simulated run has no plots of its own; remove run_plots or simulate")
    description = doc.get("description", "")
    if not isinstance(description, str):
        c.fail("description", f"expected text, got {description!r:.60}")
    overrides = list(overrides)
    spec = SweepSpec(name, str(path), scenario_path, list(fixed) + overrides, axes, repetitions, list(metrics),
                     list(run_plots), simulate, description=" ".join(description.split()),
                     command_line_sets=overrides)
    _check_command_line_sets(c, overrides, axes)
    try:
        base = load_scenario(scenario_path, spec.fixed)
    except ScenarioError as exc:
        field = _override_field(spec, exc.override, ())
        if field is None:
            raise
        raise c.error(field, str(exc)) from None
    spec.base_seed = base.seed
    spec.points = list(_points(spec))
    spec.job_names = _check_points(c, spec, spec.points)
    for metric in spec.metrics:
        _check_metric(c, "metrics", metric, spec.job_names)
    spec.paper = _paper_claims(c, doc.get("paper", []), dict(axes), spec.metrics, spec.job_names, repetitions)
    if any(claim.repetitions > repetitions for claim in spec.paper):
        points = list(_points(spec))
        if len(points) > MAX_POINTS:
            c.fail("paper", f"{len(points)} points with the claims' repetitions; at most {MAX_POINTS}")
        known = {point.point_id for point in spec.points}
        _check_points(c, spec, [point for point in points if point.point_id not in known])
        spec.points = points
    return spec


def _check_points(c, spec: SweepSpec, points: list) -> list:
    """Parse and check the scenario of each of ``points`` (an error names the sweep file's field that wrote
    the bad ``--set`` string); the names of their jobs, in order of appearance."""
    job_names = {}
    for point in points:
        try:
            scenario = load_scenario(spec.scenario_path, point.overrides)
        except ScenarioError as exc:
            field = _override_field(spec, exc.override, point.values)
            if field is None:
                raise
            raise c.error(field, f"point {point.label()}: {exc}") from None
        job_names.update((job.name, None) for job in scenario.jobs)
    return list(job_names)


def _override_field(spec: SweepSpec, item: str, values: tuple):
    """The field of the sweep file that wrote the ``--set`` string ``item`` for a point of axis values
    ``values``: its axis (a named axis's label), else its entry of ``set``, else ``axes``; None for a
    command line ``--set`` (the error names it already)."""
    if item and item in spec.command_line_sets:
        return None
    for axis, value in values:
        axis_values = dict(spec.axes)[axis]
        if item in _axis_sets(axis, axis_values, value):
            return f"axes.{axis}.{value}" if isinstance(axis_values, dict) else f"axes.{axis}"
    if item in spec.fixed:
        return f"set.{spec.fixed.index(item)}"
    return "axes"


def _check_command_line_sets(c, overrides: list, axes: list) -> None:
    """Refuse a command line ``--set`` on a field an axis varies: the axis's value would overwrite it."""
    for override in overrides:
        for axis, values in axes:
            for value in values:
                for axis_set in _axis_sets(axis, values, value):
                    if overrides_overlap(override, axis_set):
                        c.fail(f"axes.{axis}", f"--set {override} writes what this axis varies per point "
                                               f"({axis_set}); drop the --set, or the axis from the sweep")


def _check_metric(c, path: str, metric: str, job_names: list) -> None:
    """``metric`` is a column the sweep's table will have as a number: a run's metric, or a job's as
    ``<job>.<metric>`` for one of ``job_names`` (testbed/metrics/definitions.py); else one line, with the
    closest known name when it looks like a typo."""
    numbers = [m for m, d in SUMMARY_METRICS.items() if d.is_number]
    job_numbers = [m for m, d in JOB_METRICS.items() if d.is_number]
    job, name = split_job_metric(metric)
    known = SUMMARY_METRICS if job is None else JOB_METRICS
    if job is not None and job not in job_names:
        guess = closest(job, job_names)
        c.fail(path, f'"{metric}": no job "{job}" in the sweep\'s scenarios (jobs: {", ".join(job_names)})'
                     + (f"; did you mean {job_metric_name(guess, name)}" if guess else ""))
    if name in (numbers if job is None else job_numbers):
        return
    if name in known:
        c.fail(path, f'"{metric}" is not one number (its unit: {known[name].unit}): no column of the table')
    if job is None and name in job_numbers:
        c.fail(path, f'"{metric}" is a job\'s metric; name it per job, e.g. '
                     f"{job_metric_name(job_names[0] if job_names else 'JOB', name)}")
    if job is None:
        guess = closest(name, numbers + [job_metric_name(j, m) for j in job_names for m in job_numbers])
    else:
        guess = closest(name, job_numbers)
        guess = guess and job_metric_name(job, guess)
    c.fail(path, f'unknown metric "{metric}"' + (f"; did you mean {guess}" if guess else
                                                 " (docs/reference/metrics.md)"))


def _paper_claims(c, items, axes: dict, metrics: list, job_names: list, repetitions: int) -> list:
    """The ``paper`` entries, each checked against the sweep's axes (``axes``: axis -> its values) and its
    ``metrics`` (any metric of its table, :func:`_check_metric`, when the sweep names none): a claim names one
    of them, and pins every other axis of more than one value (a comparison that averaged over an axis the
    paper did not would compare something else); its ``repetitions`` are at least the sweep's
    (``repetitions``)."""
    if not isinstance(items, list):
        c.fail("paper", "expected a list of {metric, by, at, values, source} entries")
    claims = []
    for i, item in enumerate(items):
        p = f"paper.{i}"
        if not isinstance(item, dict):
            c.fail(p, "expected a mapping with metric, by, values (and at, source)")
        c.keys(item, p, PAPER_KEYS)
        for key in ("metric", "by", "values"):
            if key not in item:
                c.fail(f"{p}.{key}", "missing")
        metric, by = item["metric"], item["by"]
        if not isinstance(metric, str):
            c.fail(f"{p}.metric", f"expected a metric name, got {metric!r:.60}")
        if metrics and metric not in metrics:
            c.fail(f"{p}.metric", f"expected one of the sweep's metrics ({', '.join(metrics)}), got {metric!r}")
        _check_metric(c, f"{p}.metric", metric, job_names)
        if by not in axes:
            c.fail(f"{p}.by", f"expected one of the sweep's axes ({', '.join(axes)}), got {by!r}")
        values = item["values"]
        if not isinstance(values, dict) or len(values) < 2:
            c.fail(f"{p}.values", "expected a mapping of at least two of the axis's values to the paper's figures")
        for value, figure in values.items():
            _axis_value(c, axes, by, value, f"{p}.values.{value}")
            c.number(figure, f"{p}.values.{value}", 0, None, low_open=True)
        at = item.get("at", {})
        if not isinstance(at, dict):
            c.fail(f"{p}.at", "expected a mapping of the other axes to one value each")
        for axis in at:
            if axis not in axes or axis == by:
                c.fail(f"{p}.at.{axis}", f"expected one of the other axes ({', '.join(a for a in axes if a != by)})")
        at = {axis: _axis_value(c, axes, axis, value, f"{p}.at.{axis}") for axis, value in at.items()}
        loose = [axis for axis, axis_values in axes.items() if axis not in at and axis != by and len(axis_values) > 1]
        if loose:
            c.fail(f"{p}.at", f"expected a value for each other axis of the sweep; missing {', '.join(loose)}")
        source = item.get("source", "")
        if not isinstance(source, str):
            c.fail(f"{p}.source", "expected text: where the paper states these figures")
        claim_repetitions = c.integer(item.get("repetitions", repetitions), f"{p}.repetitions", repetitions,
                                      MAX_REPETITIONS)
        figures = tuple((_axis_value(c, axes, by, k, p), float(v)) for k, v in values.items())
        claims.append(PaperClaim(metric, by, figures, tuple(at.items()), source, claim_repetitions))
    return claims


def _axis_value(c, axes: dict, axis: str, value, path: str):
    """``value`` as axis ``axis`` holds it (a named axis's labels are text: ``16`` names its label ``"16"``)."""
    for held in axes[axis]:
        if held == value or (isinstance(axes[axis], dict) and str(held) == str(value)):
            return held
    c.fail(path, f"not a value of axis {axis} ({', '.join(map(str, axes[axis]))})")


def _axis_sets(axis: str, values, value) -> tuple:
    """The --set strings of one axis value: a named axis's own strings, else ``axis=value``."""
    return values[value] if isinstance(values, dict) else (set_string(axis, value),)


def _points(spec: SweepSpec):
    for combo in itertools.product(*(list(values) for _, values in spec.axes)):
        values = tuple((axis, value) for (axis, _), value in zip(spec.axes, combo))
        sets = tuple(s for (axis, axis_values), value in zip(spec.axes, combo)
                     for s in _axis_sets(axis, axis_values, value))
        for repetition in range(spec.repetitions_at(values)):
            seed = derive_seed(spec.base_seed, repetition)
            yield Point(values, repetition, seed, tuple(spec.fixed) + sets + (f"seed={seed}",))
