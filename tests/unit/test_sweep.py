"""inatb sweep without a network: the sweep file, its points and seeds, resuming, refusals, the table,
the confidence intervals and the plots (a fake runner stands in for the emulation; the real one runs in
tests/emulation/test_sweep.py)."""

import json
import math
import statistics
import time
from pathlib import Path

import pandas as pd
import pytest
from scipy import stats

from testbed.errors import PlacementError, ScenarioError
from testbed.sweep import derive_seed, load_sweep, run_sweep
from testbed.sweep.dry_run import preview_sweep
from testbed.sweep.executors import LocalExecutor
from testbed.sweep.spec import PaperClaim
from testbed.sweep.table import (format_paper_comparison, mean_ci, paired_ratio_panels, paper_comparison,
                                 plot_accuracy_curves, plot_paired_ratios, row as table_row, run_label)

REPO = Path(__file__).resolve().parents[2]
QUICKSTART = REPO / "scenarios" / "quickstart.yaml"


def sweep_file(tmp_path, body: str) -> Path:
    path = tmp_path / "sweep.yaml"
    path.write_text(f"version: 1\nname: s\nscenario: {QUICKSTART}\n" + body)
    return path


def test_points_are_the_product_of_the_axes_times_the_repetitions(tmp_path):
    spec = load_sweep(sweep_file(tmp_path, "axes: {policy: [ps, atp, goat], jobs.0.iterations: [2, 3]}\n"
                                           "repetitions: 2\nset: ['jobs.0.compute_time=5ms']\n"))
    assert len(spec.points) == 3 * 2 * 2
    first = spec.points[0]
    assert first.values == (("policy", "ps"), ("jobs.0.iterations", 2)) and first.repetition == 0
    assert first.overrides == ("jobs.0.compute_time=5ms", "policy=ps", "jobs.0.iterations=2", f"seed={spec.base_seed}")
    assert len({p.point_id for p in spec.points}) == len(spec.points)


def test_seeds_differ_by_repetition_and_are_shared_across_axis_values(tmp_path):
    spec = load_sweep(sweep_file(tmp_path, "axes: {policy: [ps, atp]}\nrepetitions: 3\n"))
    by_rep = {}
    for p in spec.points:
        by_rep.setdefault(p.repetition, set()).add(p.seed)
    assert all(len(seeds) == 1 for seeds in by_rep.values())            # common random numbers
    assert len({next(iter(s)) for s in by_rep.values()}) == 3            # distinct per repetition
    assert by_rep[0] == {spec.base_seed}
    assert derive_seed(7, 1) == derive_seed(7, 1) != derive_seed(7, 2)


@pytest.mark.parametrize("body, field", [
    ("", "axes"),
    ("axes: {policy: []}\n", "axes.policy"),
    ("axes: {policy: [ps, ps]}\n", "axes.policy"),
    ("axes: [policy]\n", "axes"),
    ("axes: {policy: [ps]}\nrepetitions: 0\n", "repetitions"),
    ("axes: {policy: [ps]}\nmetrics: iteration_time_s\n", "metrics"),
    ("axes: {policy: [ps]}\nset: [scale]\n", "set"),
    ("axes: {policy: [ps]}\ncolour: red\n", "colour"),
    ("axes: {policy: [ps]}\nsimulate: sometimes\n", "simulate"),
    ("axes: {policy: [ps]}\nsimulate: true\nrun_plots: [worker_send_rate]\n", "run_plots"),
    ("axes: {policy: [ps, atp]}\npaper: [{metric: comm_time_s, by: scheme, values: {ps: 1, atp: 2}}]\n", "paper.0.by"),
    ("axes: {policy: [ps, atp]}\npaper: [{metric: comm_time_s, by: policy, values: {ps: 1}}]\n", "paper.0.values"),
    ("axes: {policy: [ps, atp]}\npaper: [{metric: comm_time_s, by: policy, values: {ps: 1, goat: 2}}]\n",
     "paper.0.values.goat"),
    ("axes: {policy: [ps, atp]}\npaper: [{metric: comm_time_s, by: policy, values: {ps: 1, atp: -2}}]\n",
     "paper.0.values.atp"),
    ("axes: {policy: [ps, atp], seed: [1]}\npaper: [{metric: comm_time_s, by: policy, values: {ps: 1, atp: 2}, "
     "at: {seed: 2}}]\n", "paper.0.at.seed"),
    ("axes: {policy: [ps, atp]}\npaper: [{metric: comm_time_s, by: policy, values: {ps: 1, atp: 2}, year: 2024}]\n",
     "paper.0.year"),
    ("axes: {policy: [ps, atp]}\npaper: [{metric: comm_tme_s, by: policy, values: {ps: 1, atp: 2}}]\n",
     "paper.0.metric"),
    ("axes: {policy: [ps, atp]}\nmetrics: [iteration_time_s]\npaper: [{metric: comm_time_s, by: policy, "
     "values: {ps: 1, atp: 2}}]\n", "paper.0.metric"),
    ("axes: {policy: [ps, atp], seed: [1, 2]}\npaper: [{metric: comm_time_s, by: policy, values: {ps: 1, atp: 2}}]\n",
     "paper.0.at"),
])
def test_a_bad_sweep_file_is_one_line_naming_the_field(tmp_path, body, field):
    with pytest.raises(ScenarioError) as err:
        load_sweep(sweep_file(tmp_path, body))
    assert err.value.field == field and "\n" not in str(err.value)


def test_a_scenario_given_as_a_sweep_file_says_which_command_runs_it(tmp_path):
    path = tmp_path / "scenario.yaml"
    path.write_text("version: 1\nname: s\ntopology: {kind: explicit}\njobs: []\n")
    with pytest.raises(ScenarioError) as err:
        load_sweep(path)
    assert err.value.field == "topology" and "inatb run" in err.value.message


def test_a_bad_axis_value_is_refused_before_anything_runs_naming_the_point(tmp_path):
    with pytest.raises(ScenarioError) as err:
        load_sweep(sweep_file(tmp_path, "axes: {policy: [ps, no-such-policy]}\n"))
    assert "policy=no-such-policy" in str(err.value) and err.value.field == "axes.policy"


@pytest.mark.parametrize("body, line, field, text", [
    # a value of the sweep file is named by the sweep file's line and its --set string, never by a line of the
    # base scenario (quickstart.yaml has scale and jobs.0.iterations)
    ("set: [jobs.0.compute_time=5ms, scale=big]\naxes: {policy: [ps]}\n", 4, "set.1",
     "set.1: --set scale=big: expected a number, got 'big'"),
    ("axes:\n  policy: [ps]\n  jobs.0.iterations: [2, x]\n", 6, "axes.jobs.0.iterations",
     "axes.jobs.0.iterations: point policy=ps, jobs.0.iterations=x, repetition 0: --set jobs.0.iterations=x: "
     "expected an integer, got 'x'"),
    ("axes:\n  scheme:\n    A: [policy=ps]\n    B: [policy=atp, transport=tcp]\n", 7, "axes.scheme.B",
     "axes.scheme.B: point scheme=B, repetition 0: --set transport=tcp: jobs.0.transport: expected one of"),
    ("axes: {topology.link_rat: [10Gbps]}\n", 4, "axes.topology.link_rat",
     "--set topology.link_rat=10Gbps: unknown key; did you mean link_rate?"),
])
def test_a_bad_value_of_a_sweep_file_names_the_sweep_files_line_and_the_set_string(tmp_path, body, line, field,
                                                                                    text):
    with pytest.raises(ScenarioError) as err:
        load_sweep(sweep_file(tmp_path, body))
    assert (err.value.field, err.value.line) == (field, line)
    assert str(err.value).startswith(f"{tmp_path / 'sweep.yaml'}:{line}: ") and text in str(err.value)
    assert "quickstart.yaml" not in str(err.value)


def test_an_unknown_key_of_a_sweep_file_says_which_was_meant(tmp_path):
    with pytest.raises(ScenarioError) as err:
        load_sweep(sweep_file(tmp_path, "axes: {policy: [ps]}\nrepetition: 2\n"))
    assert (err.value.field, err.value.message) == ("repetition", "unknown key; did you mean repetitions?")


def test_a_run_interrupted_after_its_summary_is_in_the_table(tmp_path):
    """Ctrl-C as a run ends: its summary is written, then the interrupt arrives (the orchestrator defers
    it until the results are whole) and the executor never reports the point done."""
    spec = load_sweep(sweep_file(tmp_path, "axes: {policy: [ps, atp]}\n"))

    class EndsThenInterrupted(FakeRunner):
        def __call__(self, scenario, out_root, target, stream):
            super().__call__(scenario, out_root, target, stream)
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        run_sweep(spec, tmp_path / "out", executor=LocalExecutor(EndsThenInterrupted()),
                  progress=open("/dev/null", "w"))
    rows = (tmp_path / "out" / "s" / "table.csv").read_text().splitlines()
    assert len(rows) == 2 and ",ok," in rows[1]


class FakeRunner:
    """Writes a run directory with a summary, as run_scenario does; fails, refuses or distorts where told."""

    def __init__(self, refuse=(), fail=(), interrupt_after=None, distort=()):
        self.refuse, self.fail, self.interrupt_after = set(refuse), set(fail), interrupt_after
        self.distort = set(distort)
        self.calls = []

    def __call__(self, scenario, out_root, target, stream):
        scheme = scenario.jobs[0].scheme
        if self.interrupt_after is not None and len(self.calls) == self.interrupt_after:
            raise KeyboardInterrupt
        self.calls.append((scheme, scenario.seed))
        if scheme in self.refuse:
            raise PlacementError(f"{scheme}: refused here")
        run_dir = Path(out_root) / scenario.name / f"run-{time.time_ns()}"    # run ids sort by time
        run_dir.mkdir(parents=True)
        status = "failed" if scheme in self.fail else "ok"
        summary = {"status": status, "error": "boom" if status == "failed" else None,
                   "distorted": scheme in self.distort,
                   "iteration_time_s": {"ps": 2.0, "atp": 1.0, "goat": 1.0}[scheme] + scenario.seed % 7 / 100,
                   "jobs": [{"name": "nested values stay out of the table"}]}
        (run_dir / "summary.json").write_text(json.dumps(summary))
        stream.write("run\n")


def test_a_sweep_runs_each_point_once_and_resumes(tmp_path):
    spec = load_sweep(sweep_file(tmp_path, "axes: {policy: [ps, atp]}\nrepetitions: 2\n"
                                           "metrics: [iteration_time_s, comm_time_s]\n"))
    runner = FakeRunner()
    result = run_sweep(spec, tmp_path / "out", executor=LocalExecutor(runner), progress=open("/dev/null", "w"))
    assert (result.ran, result.skipped) == (4, 0) and len(runner.calls) == 4
    table = result.table_path.read_text().splitlines()
    assert table[0].startswith("policy,repetition,seed,status,distorted,error,run_dir,iteration_time_s")
    assert len(table) == 1 + 4 and "nested" not in result.table_path.read_text()
    assert [p.name for p in result.plots] == ["iteration_time_s.png"] and result.plots[0].stat().st_size > 0
    assert result.unplotted == ["comm_time_s"]                    # no run has it: said, not silently left out
    again = run_sweep(spec, tmp_path / "out", executor=LocalExecutor(runner), progress=open("/dev/null", "w"))
    assert (again.ran, again.skipped) == (0, 4) and len(runner.calls) == 4
    assert again.table_path.read_text() == result.table_path.read_text()


def test_an_interrupted_sweep_keeps_its_table_and_the_next_run_does_only_the_rest(tmp_path):
    spec = load_sweep(sweep_file(tmp_path, "axes: {policy: [ps, atp]}\nrepetitions: 2\n"))
    with pytest.raises(KeyboardInterrupt):
        run_sweep(spec, tmp_path / "out", executor=LocalExecutor(FakeRunner(interrupt_after=1)),
                  progress=open("/dev/null", "w"))
    table = (tmp_path / "out" / "s" / "table.csv").read_text().splitlines()
    assert len(table) == 1 + 1
    rest = FakeRunner()
    result = run_sweep(spec, tmp_path / "out", executor=LocalExecutor(rest), progress=open("/dev/null", "w"))
    assert (result.ran, result.skipped) == (3, 1) and len(rest.calls) == 3


def test_refused_points_are_recorded_and_not_retried_failed_ones_are(tmp_path):
    spec = load_sweep(sweep_file(tmp_path, "axes: {policy: [ps, atp, goat]}\n"))
    runner = FakeRunner(refuse={"goat"}, fail={"atp"})
    result = run_sweep(spec, tmp_path / "out", executor=LocalExecutor(runner), progress=open("/dev/null", "w"))
    status = {r["policy"]: (r["status"], r["error"]) for r in result.rows}
    assert status == {"ps": ("ok", ""), "atp": ("failed", "boom"), "goat": ("refused", "goat: refused here")}
    again = FakeRunner(refuse={"goat"})
    result = run_sweep(spec, tmp_path / "out", executor=LocalExecutor(again), progress=open("/dev/null", "w"))
    assert [c[0] for c in again.calls] == ["atp"]
    assert {r["policy"]: r["status"] for r in result.rows} == {"ps": "ok", "atp": "ok", "goat": "refused"}


def test_distorted_points_run_again_only_when_asked_and_keep_their_earlier_run(tmp_path):
    spec = load_sweep(sweep_file(tmp_path, "axes: {policy: [ps, atp]}\n"))
    out, null = tmp_path / "out", open("/dev/null", "w")
    run_sweep(spec, out, executor=LocalExecutor(FakeRunner(distort={"atp"})), progress=null)
    plain = FakeRunner()
    result = run_sweep(spec, out, executor=LocalExecutor(plain), progress=null)
    assert plain.calls == [] and {r["policy"]: r["distorted"] for r in result.rows} == {"ps": False, "atp": True}
    assert [p.status for p in preview_sweep(spec, out).points] == ["done", "done"]
    assert [p.status for p in preview_sweep(spec, out, rerun_distorted=True).points] == ["done", "planned"]
    again = FakeRunner()
    result = run_sweep(spec, out, executor=LocalExecutor(again), progress=null, rerun_distorted=True)
    assert [c[0] for c in again.calls] == ["atp"] and (result.ran, result.skipped) == (1, 1)
    assert {r["policy"]: r["distorted"] for r in result.rows} == {"ps": False, "atp": False}
    atp_dir = next(d for d in (out / "s" / "points").iterdir() if "atp" in (d / "point.json").read_text())
    assert len(list(atp_dir.rglob("summary.json"))) == 2          # the distorted run is kept beside the new one


def test_mean_and_95_percent_confidence_interval_by_hand():
    mean, half = mean_ci([1.0, 2.0, 3.0])
    assert mean == 2.0 and half == pytest.approx(4.302653 / math.sqrt(3), rel=1e-6)   # t(0.975, 2) sd 1
    assert mean_ci([5.0]) == (5.0, 0.0)
    assert all(math.isnan(v) for v in mean_ci([]))


def test_a_named_axis_sets_several_fields_per_value(tmp_path):
    spec = load_sweep(sweep_file(tmp_path, "axes:\n  scheme:\n    BytePS: [policy=ps]\n"
                                           "    SwitchML-style: [policy=atp, transport=switchml]\n"
                                           "  jobs.0.iterations: [2]\n"))
    assert [p.values for p in spec.points] == [(("scheme", "BytePS"), ("jobs.0.iterations", 2)),
                                               (("scheme", "SwitchML-style"), ("jobs.0.iterations", 2))]
    assert spec.points[1].overrides == ("policy=atp", "transport=switchml", "jobs.0.iterations=2",
                                        f"seed={spec.base_seed}")
    with pytest.raises(ScenarioError) as err:
        load_sweep(sweep_file(tmp_path, "axes: {scheme: {A: [5]}}\n"))
    assert err.value.field == "axes.scheme.A"


def test_a_point_with_a_distorted_run_is_drawn_apart(tmp_path, monkeypatch):
    import pandas as pd
    from testbed.sweep import table
    titles = []
    monkeypatch.setattr(table, "finish_figure", lambda fig, ax, path, x, y, title, legend: titles.append(title))
    frame = pd.DataFrame([{"policy": "ps", "repetition": 0, "status": "ok", "distorted": False, "t": 1.0},
                          {"policy": "atp", "repetition": 0, "status": "ok", "distorted": True, "t": 0.5}])
    assert table.plot_metric(frame, ["policy"], "t", tmp_path / "t.png", "t")
    assert titles == ["t" + table.DISTORTED_NOTE]
    titles.clear()
    assert table.plot_metric(frame.assign(distorted=False), ["policy"], "t", tmp_path / "t.png", "t")
    assert titles == ["t"]


def test_a_composed_plots_run_title_names_its_repetition_when_points_repeat():
    run = {"scheme": "PA-ATP", "repetition": 1, "seed": 624792847, "distorted": True}
    assert run_label(run, ["scheme"], repeated=False) == "scheme=PA-ATP (DISTORTED)"
    assert run_label({**run, "distorted": False}, ["scheme"], repeated=True) == \
        "scheme=PA-ATP, repetition 1 (seed 624792847)"


def test_a_simulated_sweep_puts_the_simulators_figures_in_the_table_under_the_runs_names(tmp_path):
    from testbed.cli import main
    from testbed.sim import evaluate
    from testbed.schemes import compute_placement
    from testbed.scenario import load_scenario
    path = sweep_file(tmp_path, "simulate: true\naxes: {policy: [ps, atp]}\n"
                                "metrics: [training_throughput_iter_per_s]\n")
    assert main(["sweep", str(path), "--out", str(tmp_path / "out")]) == 0
    table = (tmp_path / "out" / "s" / "table.csv").read_text().splitlines()
    header = table[0].split(",")
    rows = [dict(zip(header, line.split(","))) for line in table[1:]]
    assert [r["policy"] for r in rows] == ["ps", "atp"] and {r["status"] for r in rows} == {"ok"}
    assert {r["target"] for r in rows} == {"simulator"} and {r["distorted"] for r in rows} == {"False"}
    for row in rows:
        scenario = load_scenario(QUICKSTART, [f"policy={row['policy']}"])
        job = evaluate(scenario, compute_placement(scenario))["jobs"][scenario.jobs[0].name]
        simulated = job["comm_time_s"]
        assert float(row["comm_time_s"]) == pytest.approx(simulated)
        # Byte counts are totals over the job's iterations, as a run's summary has them.
        for key in ("ps_ingress_bytes", "ina_amount_bytes", "communication_overhead_bytes"):
            assert float(row[key]) == pytest.approx(job[key] * scenario.jobs[0].iterations)
        assert float(row["switch_egress_fragments"]) == job["switch_egress_fragments"] * scenario.jobs[0].iterations
        assert float(row["training_throughput_iter_per_s"]) == pytest.approx(
            1 / (scenario.jobs[0].compute_time_s + simulated))
    assert (tmp_path / "out" / "s" / "plots" / "training_throughput_iter_per_s.png").is_file()
    assert main(["sweep", str(path), "--out", str(tmp_path / "out"), "--executor", "ray"]) == 2   # runs here


def test_the_papers_figures_are_compared_with_ours_as_ratios_between_schemes(tmp_path):
    """Each pair of the claim's values: the paper's ratio, ours (means of finished, undistorted runs at the
    claim's ``at``), ours over the paper's, and whether both fall on the same side of 1."""
    frame = pd.DataFrame([
        {"scheme": "GOAT", "workers": 16, "status": "ok", "distorted": False, "ps_ingress_bytes": 40.0},
        {"scheme": "GOAT", "workers": 16, "status": "ok", "distorted": False, "ps_ingress_bytes": 60.0},
        {"scheme": "ATP", "workers": 16, "status": "ok", "distorted": False, "ps_ingress_bytes": 200.0},
        {"scheme": "ATP", "workers": 16, "status": "ok", "distorted": True, "ps_ingress_bytes": 1.0},
        {"scheme": "ATP", "workers": 4, "status": "ok", "distorted": False, "ps_ingress_bytes": 7.0},
        {"scheme": "Geryon", "workers": 16, "status": "failed", "distorted": None, "ps_ingress_bytes": None},
    ])
    claim = PaperClaim("ps_ingress_bytes", "scheme", (("GOAT", 44.0), ("ATP", 198.0), ("Geryon", 704.0)),
                       (("workers", 16),), "GOAT Exp#3")
    table = paper_comparison(frame, [claim])
    assert list(zip(table["a"], table["b"])) == [("GOAT", "ATP"), ("GOAT", "Geryon"), ("ATP", "Geryon")]
    first = table.iloc[0]
    assert first["paper_ratio"] == pytest.approx(44 / 198) and first["our_ratio"] == pytest.approx(50 / 200)
    assert first["ours_vs_paper"] == pytest.approx((50 / 200) / (44 / 198)) and first["same_order"] is True
    assert math.isnan(table.iloc[1]["our_ratio"]) and table.iloc[1]["same_order"] is None   # no Geryon run
    assert "ps_ingress_bytes at workers=16: GOAT / ATP: paper 0.222, ours 0.25 (1.12x the paper's, same side" \
        in format_paper_comparison(table)


def test_runs_that_share_a_seed_give_the_ratio_a_paired_interval():
    """Each scheme of a repetition draws the same background from its seed: the ratios of runs paired by
    seed bound our ratio's 95% interval, a pair whose run was distorted left out."""
    times = {"ATP": [2.25, 2.13, 3.39, 9.0], "PA-ATP": [1.67, 1.71, 2.45, 1.0]}
    frame = pd.DataFrame([{"scheme": scheme, "seed": seed, "status": "ok", "distorted": seed == 4,
                           "iteration_time_s": t}
                          for scheme, ts in times.items() for seed, t in zip((1, 2, 3, 4), ts)])
    claim = PaperClaim("iteration_time_s", "scheme", (("ATP", 1.49), ("PA-ATP", 1.0)), (), "PA-ATP Fig. 10")
    (row,) = paper_comparison(frame, [claim]).to_dict("records")
    ratios = [2.25 / 1.67, 2.13 / 1.71, 3.39 / 2.45]
    mean = sum(ratios) / 3
    half = stats.t.ppf(0.975, 2) * statistics.stdev(ratios) / math.sqrt(3)
    assert row["pairs"] == 3
    assert (row["our_ratio_low"], row["our_ratio_high"]) == (pytest.approx(mean - half), pytest.approx(mean + half))
    assert row["our_ratio"] == pytest.approx((2.25 + 2.13 + 3.39) / (1.67 + 1.71 + 2.45))   # the means' ratio
    assert f"paired {mean - half:.3g} to {mean + half:.3g} (3 seeds)" in format_paper_comparison(
        paper_comparison(frame, [claim]))
    # Two runs of one seed on a side (another axis the claim leaves open) do not pair one to one: no interval.
    open_axis = pd.concat([frame, frame.assign(model="other")])
    (row,) = paper_comparison(open_axis, [claim]).to_dict("records")
    assert row["pairs"] == 0 and math.isnan(row["our_ratio_low"])
    # Without seeds, runs pair by repetition; a single pair has no interval.
    one = frame[frame["seed"] == 1].drop(columns="seed").assign(repetition=0)
    (row,) = paper_comparison(one, [claim]).to_dict("records")
    assert row["pairs"] == 1 and math.isnan(row["our_ratio_low"])


def test_the_paired_ratios_are_drawn_per_pair_against_how_slow_the_draw_made_both(tmp_path):
    """One panel per pair of a claim's values with two seeds or more: a / b per seed against the mean of all
    the claim's values on that seed (the draw's weight); a pair with fewer seeds has no panel, a sweep
    without any no plot."""
    times = {"ATP": [2.25, 1.64, 3.39], "StrawAsyn": [1.82, 1.70, 2.84], "PA-ATP": [1.67, 1.52, 2.45]}
    frame = pd.DataFrame([{"scheme": scheme, "seed": seed, "status": "ok", "distorted": False,
                           "iteration_time_s": t}
                          for scheme, ts in times.items() for seed, t in zip((1, 2, 3), ts)])
    claim = PaperClaim("iteration_time_s", "scheme", (("ATP", 1.49), ("StrawAsyn", 1.22), ("PA-ATP", 1.0)), (),
                       "PA-ATP Fig. 10")
    panels = paired_ratio_panels(frame, [claim])
    assert [(pair.a, pair.b) for pair, _ in panels] == [("ATP", "StrawAsyn"), ("ATP", "PA-ATP"),
                                                        ("StrawAsyn", "PA-ATP")]
    _, seeds = panels[0]
    assert list(seeds.index) == [1, 2, 3]
    assert list(seeds["ratio"]) == pytest.approx([2.25 / 1.82, 1.64 / 1.70, 3.39 / 2.84])
    assert list(seeds["weight"]) == pytest.approx([(2.25 + 1.82 + 1.67) / 3, (1.64 + 1.70 + 1.52) / 3,
                                                   (3.39 + 2.84 + 2.45) / 3])
    path = tmp_path / "paired_ratios.png"
    assert plot_paired_ratios(frame, [claim], path, "fig10")
    assert path.stat().st_size > 0 and path.with_suffix(".svg").is_file()
    one_seed = frame[frame["seed"] == 1]
    assert paired_ratio_panels(one_seed, [claim]) == []
    assert not plot_paired_ratios(one_seed, [claim], tmp_path / "none.png", "fig10")
    assert not (tmp_path / "none.png").exists()


def test_a_claims_repetitions_run_the_points_it_compares_that_many_times(tmp_path):
    """A claim at iterations 3 with 3 repetitions: its two points run three times, the sweep's other points
    once, and repetition r has one seed everywhere, so the claim's runs pair by seed."""
    spec = load_sweep(sweep_file(tmp_path, "axes: {policy: [ps, atp], jobs.0.iterations: [2, 3]}\n"
                                           "paper: [{metric: iteration_time_s, by: policy, at: {jobs.0.iterations: 3},"
                                           " values: {ps: 2, atp: 1}, repetitions: 3}]\n"))
    counts = {}
    for point in spec.points:
        counts[point.values] = counts.get(point.values, 0) + 1
        assert point.seed == derive_seed(spec.base_seed, point.repetition)
    assert counts == {(("policy", "ps"), ("jobs.0.iterations", 2)): 1, (("policy", "ps"), ("jobs.0.iterations", 3)): 3,
                      (("policy", "atp"), ("jobs.0.iterations", 2)): 1, (("policy", "atp"), ("jobs.0.iterations", 3)): 3}
    assert spec.repetitions_text() == "1 repetition, 3 at the points the paper's claims compare"
    assert len({p.point_id for p in spec.points}) == 8
    with pytest.raises(ScenarioError) as err:
        load_sweep(sweep_file(tmp_path, "axes: {policy: [ps, atp]}\nrepetitions: 2\n"
                                        "paper: [{metric: iteration_time_s, by: policy, values: {ps: 2, atp: 1}, "
                                        "repetitions: 1}]\n"))
    assert err.value.field == "paper.0.repetitions" and "expected an integer in [2, 1000], got 1" in str(err.value)


def test_a_sweep_with_paper_figures_writes_paper_csv(tmp_path):
    from testbed.cli import main
    path = sweep_file(tmp_path, "simulate: true\naxes: {policy: [ps, atp]}\n"
                                "paper: [{metric: ps_ingress_fragments_per_iteration, by: policy, "
                                "values: {ps: 4, atp: 1}, source: a test}]\n")
    assert load_sweep(path).paper == [PaperClaim("ps_ingress_fragments_per_iteration", "policy",
                                                 (("ps", 4.0), ("atp", 1.0)), (), "a test")]
    assert main(["sweep", str(path), "--out", str(tmp_path / "out")]) == 0
    paper = pd.read_csv(tmp_path / "out" / "s" / "paper.csv")
    assert list(paper["a"]) == ["ps"] and paper["paper_ratio"][0] == 4.0 and paper["our_ratio"][0] > 1
    assert bool(paper["same_order"][0]) and paper["source"][0] == "a test"


def test_a_sweep_whose_reader_went_away_runs_every_point(tmp_path):
    """``inatb sweep ... 2>&1 | head``: once the reader is gone every write finds the pipe closed (here it is
    closed before the sweep starts). The sweep goes on through every point, writes its table and plots, and
    exits 0; it used to end at its first progress line with every point but the done ones left to run."""
    import os
    import subprocess
    import sys
    path = sweep_file(tmp_path, "simulate: true\naxes: {policy: [ps, atp, goat]}\n"
                                "metrics: [training_throughput_iter_per_s]\n")
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        proc = subprocess.run([sys.executable, "-m", "testbed.cli", "sweep", str(path), "--out", str(tmp_path / "out")],
                              cwd=REPO, stdout=write_end, stderr=write_end, timeout=120)
    finally:
        os.close(write_end)
    assert proc.returncode == 0
    table = pd.read_csv(tmp_path / "out" / "s" / "table.csv")
    assert list(table["policy"]) == ["ps", "atp", "goat"] and set(table["status"]) == {"ok"}
    assert (tmp_path / "out" / "s" / "plots" / "training_throughput_iter_per_s.png").is_file()


@pytest.mark.parametrize("metric, message", [
    ("iteraton_time_s", 'unknown metric "iteraton_time_s"; did you mean iteration_time_s'),
    ("throughput", 'unknown metric "throughput" (docs/reference/metrics.md)'),
    ("cpu", '"cpu" is not one number (its unit: object): no column of the table'),
    ("policy", '"policy" is not one number (its unit: text)'),
    ("ps_ingress_packets", '"ps_ingress_packets" is a job\'s metric; name it per job, e.g. resnet50.ps_ingress_packets'),
    ("resnet5.iteration_time_s", '"resnet5.iteration_time_s": no job "resnet5" in the sweep\'s scenarios (jobs: '
                                 'resnet50); did you mean resnet50.iteration_time_s'),
    ("resnet50.iteraton_time_s", 'unknown metric "resnet50.iteraton_time_s"; did you mean resnet50.iteration_time_s'),
    ("resnet50.transport", '"resnet50.transport" is not one number (its unit: text)'),
    ("resnet50.cpu", 'unknown metric "resnet50.cpu" (docs/reference/metrics.md)'),   # a run's, not a job's
])
def test_a_metric_the_table_will_not_have_is_refused_before_anything_runs(tmp_path, metric, message):
    with pytest.raises(ScenarioError) as err:
        load_sweep(sweep_file(tmp_path, f"axes: {{policy: [ps, atp]}}\nmetrics: [comm_time_s, {metric}]\n"))
    assert err.value.field == "metrics" and message in err.value.message and "\n" not in str(err.value)
    assert str(err.value).startswith(f"{tmp_path / 'sweep.yaml'}:")           # names the sweep file


def test_a_sweep_names_a_runs_metrics_and_each_jobs_as_job_dot_metric(tmp_path):
    spec = load_sweep(sweep_file(tmp_path, "axes: {policy: [ps, atp]}\n"
                                           "metrics: [iteration_time_s, resnet50.ps_ingress_packets]\n"
                                           "paper: [{metric: resnet50.ps_ingress_packets, by: policy, "
                                           "values: {ps: 4, atp: 1}}]\n"))
    assert spec.job_names == ["resnet50"] and spec.metrics == ["iteration_time_s", "resnet50.ps_ingress_packets"]
    assert spec.paper[0].metric == "resnet50.ps_ingress_packets"
    with pytest.raises(ScenarioError) as err:      # a sweep naming no metrics: a claim is checked the same way
        load_sweep(sweep_file(tmp_path, "axes: {policy: [ps, atp]}\npaper: [{metric: resnet50.comm_tme_s, "
                                        "by: policy, values: {ps: 4, atp: 1}}]\n"))
    assert err.value.field == "paper.0.metric" and "did you mean resnet50.comm_time_s" in err.value.message


def test_a_typo_in_an_axis_path_fails_before_anything_runs_with_the_closest_key(tmp_path):
    with pytest.raises(ScenarioError) as err:
        load_sweep(sweep_file(tmp_path, "axes: {jobs.0.iteratons: [2, 3]}\n"))
    assert err.value.field == "axes.jobs.0.iteratons" and "point jobs.0.iteratons=2, repetition 0" in err.value.message
    assert "--set jobs.0.iteratons=2: unknown key; did you mean iterations?" in err.value.message


def test_command_line_sets_come_after_the_files_and_before_the_axes(tmp_path):
    path = sweep_file(tmp_path, "set: ['jobs.0.iterations=2', 'jobs.0.compute_time=5ms']\n"
                                "axes: {policy: [ps, atp]}\nrepetitions: 2\n")
    plain = load_sweep(path)
    spec = load_sweep(path, ["jobs.0.iterations=4", "seed=9"])
    assert spec.fixed == ["jobs.0.iterations=2", "jobs.0.compute_time=5ms", "jobs.0.iterations=4", "seed=9"]
    assert spec.command_line_sets == ["jobs.0.iterations=4", "seed=9"] and plain.command_line_sets == []
    assert spec.base_seed == 9 and [p.seed for p in spec.points[:2]] == [9, derive_seed(9, 1)]
    scenarios = [spec.scenario_of(p) for p in spec.points]
    assert {s.jobs[0].iterations for s in scenarios} == {4}                   # the command line wins over set:
    assert {s.jobs[0].compute_time_s for s in scenarios} == {0.005}           # what it does not name stays
    assert [s.jobs[0].scheme for s in scenarios] == ["ps", "ps", "atp", "atp"]   # the axis still varies
    # Another scenario, other points: their results do not mix with the plain sweep's.
    assert not {p.point_id for p in spec.points} & {p.point_id for p in plain.points}


@pytest.mark.parametrize("axes, override", [
    ("{policy: [ps, atp]}", "policy=goat"),
    ("{policy: [ps, atp]}", "jobs.0.policy=goat"),                  # policy= is every job's policy
    ("{scheme: {A: [policy=ps], B: [policy=atp, transport=switchml]}}", "transport=atp"),
    ("{jobs.0.iterations: [2, 3]}", "jobs.0.iterations=5"),
    ("{jobs.0.iterations: [2, 3]}", "jobs.0={name: j}"),             # holds the axis's field
])
def test_a_command_line_set_on_what_an_axis_varies_is_refused(tmp_path, axes, override):
    with pytest.raises(ScenarioError) as err:
        load_sweep(sweep_file(tmp_path, f"axes: {axes}\n"), [override])
    axis = axes[1:].split(":")[0]
    assert err.value.field == f"axes.{axis}" and f"--set {override} writes what this axis varies" in err.value.message


def test_a_command_line_set_beside_the_axes_is_taken(tmp_path):
    spec = load_sweep(sweep_file(tmp_path, "axes: {policy: [ps, atp], jobs.0.iterations: [2]}\n"),
                      ["transport=atp", "jobs.0.compute_time=5ms", "scale=0.5"])
    scenario = spec.scenario_of(spec.points[1])
    assert len(spec.points) == 2 and scenario.jobs[0].transport == "atp" and scenario.jobs[0].scheme == "atp"
    assert scenario.jobs[0].compute_time_s == 0.005 and scenario.jobs[0].iterations == 2


def two_job_summary(**extra):
    from tests.report_fixtures import job_summary
    return {"status": "ok", "distorted": False, "iteration_time_s": 0.05, "comm_time_s": 0.02,
            "jobs": [job_summary("job-a", iteration_time_s=0.04, ps_ingress_bytes=100),
                     job_summary("job-b", iteration_time_s=0.06, ps_ingress_bytes=300)], **extra}


def test_each_jobs_figures_are_columns_beside_the_runs_for_the_sweeps_metrics():
    point = type("P", (), {"values": (("scheme", "ATP"),), "repetition": 0, "seed": 1})()
    out = table_row(point, two_job_summary(), "run", "ok", "", ["iteration_time_s", "job-b.ps_ingress_bytes"])
    jobs = {k: v for k, v in out.items() if k.startswith("job-")}
    assert jobs == {"job-a.iteration_time_s": 0.04, "job-b.iteration_time_s": 0.06, "job-b.ps_ingress_bytes": 300}
    assert out["iteration_time_s"] == 0.05                                    # the run's stays
    # A sweep naming no metrics: every scalar of each job (lists such as ps are no column).
    every = table_row(point, two_job_summary(), "run", "ok", "", [])
    assert every["job-a.comm_time_s"] == 0.02 and every["job-b.policy"] == "atp" and "job-a.ps" not in every
    assert "job-a.job" not in every
    # One job: its figures are the run's; a column only where the sweep names it per job.
    one = {**two_job_summary(), "jobs": two_job_summary()["jobs"][:1]}
    assert not any(k.startswith("job-") for k in table_row(point, one, "run", "ok", "", ["iteration_time_s"]))
    assert table_row(point, one, "run", "ok", "", ["job-a.ps_ingress_packets"])["job-a.ps_ingress_packets"] == 72
    assert not any(k.startswith("job-") for k in table_row(point, None, "", "refused", "why", ["iteration_time_s"]))


def test_per_job_columns_are_plotted_and_averaged_per_point_like_the_runs(tmp_path):
    from testbed.reports.results import numeric_metrics, point_means
    from testbed.sweep.table import plot_metric, write_table
    rows = []
    for scheme, scale in (("ATP", 1.0), ("PA-ATP", 0.5)):
        for rep in (0, 1):
            point = type("P", (), {"values": (("scheme", scheme),), "repetition": rep, "seed": rep})()
            summary = two_job_summary()
            for job in summary["jobs"]:
                job["iteration_time_s"] *= scale * (1 + rep / 10)
            rows.append(table_row(point, summary, tmp_path / f"{scheme}-{rep}", "ok", "", ["iteration_time_s"]))
    frame = write_table(rows, tmp_path / "table.csv")
    assert {"job-a.iteration_time_s", "job-b.iteration_time_s"} <= set(numeric_metrics(frame))
    means = point_means(frame, ["job-a.iteration_time_s", "job-b.iteration_time_s"])
    assert list(means["job-a.iteration_time_s"]) == pytest.approx([0.042, 0.021])
    assert list(means["job-b.iteration_time_s"]) == pytest.approx([0.063, 0.0315])
    assert plot_metric(frame, ["scheme"], "job-b.iteration_time_s", tmp_path / "b.png", "job-b")
    assert (tmp_path / "b.png").stat().st_size > 0


def test_a_two_job_sweeps_table_has_each_jobs_columns(tmp_path):
    """Through the runner: the table of a sweep whose runs have two jobs (a fake runner writes them)."""
    spec = load_sweep(sweep_file(tmp_path, "axes: {policy: [ps, atp]}\nmetrics: [iteration_time_s]\n"))

    def two_jobs(scenario, out_root, target, stream):
        run_dir = Path(out_root) / scenario.name / f"run-{time.time_ns()}"
        run_dir.mkdir(parents=True)
        (run_dir / "summary.json").write_text(json.dumps(two_job_summary()))

    result = run_sweep(spec, tmp_path / "out", executor=LocalExecutor(two_jobs), progress=open("/dev/null", "w"))
    table = pd.read_csv(result.table_path)
    assert list(table["job-a.iteration_time_s"]) == [0.04, 0.04] and list(table["job-b.iteration_time_s"]) == [0.06] * 2
    assert "job-a.comm_time_s" not in table


def test_a_sweep_of_training_runs_plots_one_accuracy_series_per_point_over_time_and_iterations(tmp_path):
    def run_dir(name, times):
        directory = tmp_path / name
        directory.mkdir()
        pd.DataFrame({"job": "mlp", "iteration": [0, 5, 10], "time_s": times, "accuracy": [0.1, 0.5, 0.7],
                      "loss": [2.3, 1.5, 1.0], "eval_s": 0.001}).to_csv(directory / "accuracy.csv", index=False)
        return str(directory)
    frame = pd.DataFrame({"policy": ["ps", "atp", "goat"], "status": ["ok", "ok", "failed"],
                          "run_dir": [run_dir("ps", [0, 0.4, 0.8]), run_dir("atp", [0, 0.2, 0.4]),
                                      str(tmp_path / "none")]})
    path = tmp_path / "plots" / "accuracy.png"
    path.parent.mkdir()
    assert plot_accuracy_curves(frame, ["policy"], path, "t")
    assert path.stat().st_size > 0 and path.with_suffix(".svg").is_file()
    svg = path.with_suffix(".svg").read_text()
    assert "policy=ps" in svg and "policy=atp" in svg and "policy=goat" not in svg     # ok runs, one each
    assert not plot_accuracy_curves(frame.iloc[2:], ["policy"], tmp_path / "no.png", "t")   # nothing trained
