"""A sweep file: a base scenario, axes of ``--set`` values, repetitions, and the metrics to plot.

```yaml
version: 1
name: goat-exp3                 # results go to OUT/<name>/
scenario: testbed.yaml          # the base scenario, relative to this file
set: ["scale=0.00005"]          # optional: overrides every point shares
axes:                           # every combination is a point
  jobs.0.iterations: [3, 5]     # a --set path and its values
  scheme:                       # or a named axis: label -> the --set strings of that value
    ATP: [policy=atp]
    PA-ATP: [policy=atp, transport=pa-atp]
repetitions: 3                  # runs per point, each with its own derived seed
metrics: [iteration_time_s, ps_ingress_bytes]   # summary metrics plotted (the table keeps every one)
run_plots: [worker_send_rate]   # optional: plots of each run (its plots/<name>.png) side by side
simulate: false                 # optional: true runs every point in the flow-level simulator instead
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
in an axis value is one line naming the sweep file and the point, not a
failure an hour into the sweep.
"""

import hashlib
import itertools
import json
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from testbed.errors import ScenarioError
from testbed.scenario import load_scenario, read_yaml_document, read_yaml_text

SWEEP_VERSION = 1
SWEEP_KEYS = {"version", "name", "scenario", "set", "axes", "repetitions", "metrics", "run_plots", "simulate"}
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


@dataclass
class SweepSpec:
    name: str
    source: str
    scenario_path: Path
    fixed: list              # --set strings of every point
    axes: list               # [(path, [values])]
    repetitions: int
    metrics: list
    run_plots: list = field(default_factory=list)
    simulate: bool = False   # points run in the flow-level simulator, not emulated
    base_seed: int = 0
    points: list = field(default_factory=list)

    def scenario_of(self, point):
        """The scenario of ``point``: the base scenario with the point's overrides."""
        return load_scenario(self.scenario_path, point.overrides)

    def scenario_text(self) -> str:
        """The base scenario's text (what a remote node parses with a point's overrides)."""
        return read_yaml_text(self.scenario_path)


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


def load_sweep(path) -> SweepSpec:
    path = Path(path)
    doc, _, c = read_yaml_document(path)
    if doc is None:
        c.fail("(file)", "the file is empty; a sweep needs version, name, scenario and axes")
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
        c.fail("metrics", "expected a list of summary metric names, e.g. [iteration_time_s]")
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
    spec = SweepSpec(name, str(path), scenario_path, list(fixed), axes, repetitions, list(metrics), list(run_plots),
                     simulate)
    base = load_scenario(scenario_path, spec.fixed)
    spec.base_seed = base.seed
    spec.points = list(_points(spec))
    for point in spec.points:
        try:
            load_scenario(scenario_path, point.overrides)
        except ScenarioError as exc:
            raise ScenarioError("axes", f"point {point.label()}: {exc}", spec.source) from None
    return spec


def _axis_sets(axis: str, values, value) -> tuple:
    """The --set strings of one axis value: a named axis's own strings, else ``axis=value``."""
    return values[value] if isinstance(values, dict) else (set_string(axis, value),)


def _points(spec: SweepSpec):
    for combo in itertools.product(*(list(values) for _, values in spec.axes)):
        values = tuple((axis, value) for (axis, _), value in zip(spec.axes, combo))
        sets = tuple(s for (axis, axis_values), value in zip(spec.axes, combo)
                     for s in _axis_sets(axis, axis_values, value))
        for repetition in range(spec.repetitions):
            seed = derive_seed(spec.base_seed, repetition)
            yield Point(values, repetition, seed, tuple(spec.fixed) + sets + (f"seed={seed}",))
