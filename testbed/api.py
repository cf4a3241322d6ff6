"""The Python API: what ``inatb validate``, ``simulate`` and ``run`` do, and their results as pandas objects,
for a script or a notebook (docs/guide/python-api.md). Use it as ``from testbed import api``.

A scenario comes from a dict (:func:`scenario_from_dict`), YAML text (:func:`scenario_from_yaml`) or a file
(:func:`scenario_from_file`), each with ``--set``-style overrides, as the same typed
:class:`~testbed.scenario.Scenario` and the same one-line :class:`~testbed.errors.ScenarioError` the command
line gives. :func:`validate`, :func:`simulate` and :func:`run` call what the commands call
(:mod:`testbed.plan`, :func:`testbed.emulation.orchestrator.run_scenario`); :func:`load_run`,
:func:`load_iterations` and :func:`load_sweep` read results directories through :mod:`testbed.reports.results`.
Failures are the testbed's typed errors (:mod:`testbed.errors`), whose ``str()`` is the line ``inatb`` prints;
nothing here exits.
"""

import sys
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import yaml

from testbed.errors import ScenarioError, TestbedError
from testbed.plan import RunPlan, ScenarioPlan, describe, make_plan, plan_scenario
from testbed.reports import results
from testbed.scenario import (Scenario, compose_with_lines, load_scenario, parse_scenario, resolve_document)
from testbed.scenario.yaml_source import decode_scenario_bytes

#: How a scenario given as a dict is named in its errors (it has no file, and no lines).
DICT_SOURCE = "<dict>"
#: How a scenario given as YAML text is named in its errors, unless the caller names it.
YAML_SOURCE = "<yaml>"
#: The Python values a scenario dict may hold: what YAML's plain data reads into (a tuple reads as a list).
_PLAIN_SCALARS = (str, int, float, bool, type(None))


@dataclass(frozen=True)
class Validation:
    """What ``inatb validate`` finds: the :class:`~testbed.plan.RunPlan` a run would use, and the lines it
    prints of it (:func:`testbed.plan.describe`)."""
    plan: RunPlan
    lines: list


@dataclass(frozen=True, eq=False)
class Simulation:
    """What ``inatb simulate`` finds: the scenario's plan, the flow-level model's ``figures`` (the dict
    ``inatb simulate --json`` prints) and its per-job figures, one row per job (``jobs``)."""
    plan: ScenarioPlan
    figures: dict
    jobs: pd.DataFrame


@dataclass(frozen=True, eq=False)
class RunResults:
    """A run directory read back (or just written by :func:`run`): its ``summary.json`` and the summary's
    per-job figures, one row per job (``jobs``); :meth:`iterations` reads its ``iterations.csv``."""
    run_dir: Path
    summary: dict
    jobs: pd.DataFrame

    @property
    def status(self) -> str:
        """``ok``, or how the run ended otherwise (``failed``, ``stalled``, ``interrupted``)."""
        return self.summary.get("status", "")

    def iterations(self) -> pd.DataFrame:
        """The run's ``iterations.csv`` (:func:`load_iterations`)."""
        return load_iterations(self.run_dir)


@dataclass(frozen=True, eq=False)
class SweepResults:
    """A sweep directory read back: its ``table.csv`` (one row per run), the axes (its first columns) and its
    numeric metric columns; :meth:`point_means` averages each point's runs."""
    sweep_dir: Path
    table: pd.DataFrame
    axes: list
    metrics: list

    def point_means(self) -> pd.DataFrame:
        """One row per point: its runs, ok and distorted runs, and per metric the mean over the ok runs and
        the half-width of its 95% confidence interval (``<metric> ±``), as ``inatb report`` shows them."""
        return results.point_means(self.table, self.metrics)


def _override_items(overrides) -> tuple:
    """``overrides`` as ``--set`` items (``"KEY=VALUE"``); one string is one item."""
    return (overrides,) if isinstance(overrides, str) else tuple(overrides or ())


def scenario_from_file(path, overrides=()) -> Scenario:
    """The scenario of a YAML file, as ``inatb validate PATH --set ...`` reads it (``overrides``: ``--set``
    items such as ``"policy=ps"`` or ``"jobs.0.iterations=5"``); errors name the file and line."""
    return load_scenario(path, _override_items(overrides))


def scenario_from_yaml(text: str, overrides=(), source: str = YAML_SOURCE) -> Scenario:
    """The scenario YAML ``text`` says, checked as a file is (its size, its plain data, every field);
    errors name ``source`` and the line of the text."""
    text = decode_scenario_bytes(text.encode("utf-8"), source)
    return parse_scenario(text, source, _override_items(overrides))


def scenario_from_dict(document: dict, overrides=()) -> Scenario:
    """The scenario a dict says (as its YAML would: the same keys and values, ``"100Gbps"``, ``"20ms"``),
    checked as a file is, the dict left unchanged; errors name :data:`DICT_SOURCE` and the field (a dict has
    no lines)."""
    if not isinstance(document, dict):
        raise ScenarioError("(file)", f"expected a dict, got {type(document).__name__}", DICT_SOURCE)
    text = yaml.safe_dump(_plain(document, ""), sort_keys=False)
    try:
        text = decode_scenario_bytes(text.encode("utf-8"), DICT_SOURCE)
        doc, _ = compose_with_lines(text, DICT_SOURCE)   # the limits and plain data a file is held to
    except ScenarioError as exc:                           # its line is one of the dumped text: drop it
        raise ScenarioError(exc.field, exc.message, DICT_SOURCE) from None
    return resolve_document(doc, {}, DICT_SOURCE, _override_items(overrides))


def _plain(value, path: str):
    """``value`` as plain YAML data (a tuple as a list), or a ScenarioError naming the field that is not."""
    if isinstance(value, dict):
        for key in value:
            if not isinstance(key, _PLAIN_SCALARS):
                raise ScenarioError(path or "(file)", f"a key must be a plain name, got {type(key).__name__}",
                                    DICT_SOURCE)
        return {key: _plain(item, f"{path}.{key}" if path else str(key)) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(item, f"{path}.{i}" if path else str(i)) for i, item in enumerate(value)]
    if not isinstance(value, _PLAIN_SCALARS):
        raise ScenarioError(path or "(file)", f"expected plain data (a dict, list, str, int, float, bool or None), "
                                              f"got {type(value).__module__}.{type(value).__name__}", DICT_SOURCE)
    return value


def validate(scenario: Scenario, target: str = None) -> Validation:
    """What ``inatb validate`` does: refuse what a run would refuse before any network exists, and plan the run
    on ``target`` (the scenario's when None; a target not installed here is planned all the same). Touches
    no network and needs no root."""
    plan = make_plan(scenario, target, installed_only=False)
    return Validation(plan, describe(plan))


def simulate(scenario: Scenario) -> Simulation:
    """What ``inatb simulate`` does: the flow-level model's figures for the scenario's placement (no root)."""
    plan = plan_scenario(scenario)
    try:
        figures = plan.simulation()
    except ImportError as exc:
        raise TestbedError(f"the simulator is not available: {exc}")
    jobs = pd.DataFrame.from_dict(figures["jobs"], orient="index")
    jobs.index.name = "job"
    return Simulation(plan, figures, jobs)


def run(scenario: Scenario, out_root="results", target: str = None, stream=sys.stderr,
        report: bool = True) -> RunResults:
    """What ``inatb run`` does (root): build the network, run the scenario on ``target`` (the scenario's when
    None), write the run directory under ``out_root`` and return it read back (the last one, where an auto run
    ran again slower: testbed.emulation.orchestrator.run_scenario). Progress goes to ``stream``.
    With ``report`` the run's plots and ``report.html`` are written too (False: the numbers only, faster for
    many runs; ``inatb report DIR --html`` draws them later). A run that ends without every aggregate exact
    still returns (its ``status`` says how it ended); a run that cannot start raises the typed error the
    command line reports."""
    from testbed.emulation.orchestrator import run_scenario
    from testbed.reports.html import write_report
    result = run_scenario(scenario, out_root=out_root, target=target, stream=stream,
                          on_finished=(lambda finished: write_report(finished.run_dir)) if report else None)
    return RunResults(Path(result.run_dir), result.summary, results.job_figures(result.summary))


def load_run(run_dir) -> RunResults:
    """A run directory (``summary.json``, as ``inatb report`` reads it)."""
    summary = results.load_summary(run_dir)
    return RunResults(Path(run_dir), summary, results.job_figures(summary))


def load_iterations(run_dir) -> pd.DataFrame:
    """A run directory's ``iterations.csv``: one row per agent and iteration (job, node, role, iteration,
    iteration_s, comm_s, compute_s, sent_bytes, retx_pkts, ingress_bytes, exact)."""
    return results.load_iterations(run_dir)


def load_sweep(sweep_dir) -> SweepResults:
    """A sweep directory (``table.csv``, as ``inatb report`` reads it)."""
    table = results.load_table(sweep_dir)
    return SweepResults(Path(sweep_dir), table, results.sweep_axes(table), results.numeric_metrics(table))
