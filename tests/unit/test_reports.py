"""Reports of results directories: which kind a directory is, the HTML page's content, the text report
of a sweep, and inatb compare's differences (runs and sweeps)."""

import json
import re

import pytest
from report_fixtures import write_run, write_sweep

from testbed.cli import main
from testbed.errors import UsageError
from testbed.reports import results_kind
from testbed.reports.compare import compare_results, format_comparison
from testbed.reports.html import render_run, render_sweep, write_report
from testbed.reports.results import numeric_metrics, load_table, point_means
from testbed.reports.text import format_summary, format_sweep_report

FIDELITY = {"jobs": {"resnet50": [
    {"metric": "comm_time_s", "emulated": 0.02, "simulated": 0.01, "ratio": 2.0, "tolerance": 0.25,
     "within": False}]}, "run": [], "all_within": False}


def test_a_directory_is_a_run_a_sweep_or_refused(tmp_path):
    assert results_kind(write_run(tmp_path / "r")) == "run"
    assert results_kind(write_sweep(tmp_path / "s")) == "sweep"
    with pytest.raises(UsageError, match="neither a run directory"):
        results_kind(tmp_path)
    with pytest.raises(UsageError, match="no such directory"):
        results_kind(tmp_path / "absent")


def test_the_run_page_escapes_embeds_every_plot_and_says_distorted(tmp_path):
    page = render_run(write_run(tmp_path / "r", distorted=True, fidelity=FIDELITY))
    assert "name: &lt;q&amp;a&gt;" in page and "<q&a>" not in page
    assert "<b>Distorted</b>" in page and "machine CPU busy 1.97 of 2 cores" in page
    assert re.findall(r'<img alt="([^"]+)" src="data:image/png;base64,', page) == ["iteration_time"]
    assert "NOT every row within its bound" in page and "<td>NO</td>" in page
    assert "Listening on ps-eth0" in page
    clean = render_run(write_run(tmp_path / "c"))
    assert "Distorted" not in clean and "Emulation against the simulator" not in clean
    assert '<div class="banner good">Status <b>ok</b>' in clean


def test_the_sweep_page_highlights_distorted_runs_and_their_point(tmp_path):
    sweep = write_sweep(tmp_path / "s", distorted_point="ps")
    page = render_sweep(sweep)
    # the ps point in the per-point table, and its two runs in the full table
    assert page.count('<tr class="distorted">') == 3
    assert "2 distorted run(s)" in page
    assert sorted(re.findall(r'<img alt="([^"]+)"', page)) == ["iteration_time_s", "ps_ingress_bytes"]
    assert write_report(sweep) == sweep / "report.html" and (sweep / "report.html").read_text() == page


def test_point_means_average_ok_runs_and_skip_run_columns(tmp_path):
    frame = load_table(write_sweep(tmp_path / "s"))
    assert numeric_metrics(frame) == ["iteration_time_s", "ps_ingress_bytes", "retransmission_ratio"]
    means = point_means(frame, ["iteration_time_s"]).set_index("policy")
    assert means.loc["atp", "iteration_time_s"] == pytest.approx(0.0405)
    assert means.loc["ps", "iteration_time_s"] == pytest.approx(0.081)
    assert means.loc["atp", "runs"] == 2 and means.loc["atp", "ok"] == 2
    # two values 0.040, 0.041: t(0.975, 1) x sd / sqrt(2) = 12.706 x 0.000707 / 1.414
    assert means.loc["atp", "iteration_time_s ±"] == pytest.approx(12.706 * 0.0005, rel=1e-3)


def test_the_text_report_of_a_sweep_gives_means_per_point(tmp_path):
    text = format_sweep_report(write_sweep(tmp_path / "s", distorted_point="atp"))
    assert "4 runs, 2 points" in text and "0.0405 ±" in text and "2 distorted run(s)" in text


def test_compare_two_runs(tmp_path):
    a = write_run(tmp_path / "a")
    b = write_run(tmp_path / "b", iteration_time_s=0.05, distorted=True)
    notes, diffs = compare_results(a, b, ["iteration_time_s"])
    assert [d.key for d in diffs] == ["iteration_time_s", "resnet50.iteration_time_s"]
    assert diffs[0].delta == pytest.approx(0.01) and diffs[0].change == pytest.approx(0.25)
    assert any("DISTORTED" in n and str(b) in n for n in notes)
    text = format_comparison(notes, diffs)
    assert "+25.0%" in text and text.startswith("note: B")
    _, every = compare_results(a, b)
    assert {"wall_s", "resnet50.fragments_sent"} <= {d.key for d in every}
    unchanged = format_comparison([], every, only_changed=True)
    assert "iteration_time_s" in unchanged and "wall_s" not in unchanged
    with pytest.raises(UsageError, match="--metric nonsense: neither run has it"):
        compare_results(a, b, ["nonsense"])


def test_compare_names_summaries_of_different_layouts_and_does_not_diff_the_layouts_version(tmp_path):
    import json
    a, b = write_run(tmp_path / "a"), write_run(tmp_path / "b")
    for run, version in ((a, 1), (b, 2)):
        summary = json.loads((run / "summary.json").read_text())
        (run / "summary.json").write_text(json.dumps({"schema_version": version, **summary}))
    notes, diffs = compare_results(a, b)
    assert notes == ["A's and B's summary.json have different layouts (schema_version 1 and 2): a metric of the "
                     "same name may not mean the same"]
    assert "schema_version" not in {d.key for d in diffs} and "iteration_time_s" in {d.key for d in diffs}
    (b / "summary.json").write_text((a / "summary.json").read_text())
    assert compare_results(a, b)[0] == []
    (a / "summary.json").write_text(json.dumps({k: v for k, v in json.loads((a / "summary.json").read_text()).items()
                                                if k != "schema_version"}))
    assert "(schema_version missing and 1)" in compare_results(a, b)[0][0]


def test_compare_two_sweeps_point_by_point(tmp_path):
    a, b = write_sweep(tmp_path / "a"), write_sweep(tmp_path / "b", scale=1.1)
    notes, diffs = compare_results(a, b, ["iteration_time_s"])
    assert notes == []
    assert {d.key: round(d.change, 6) for d in diffs} == {"policy=ps: iteration_time_s": 0.1,
                                                          "policy=atp: iteration_time_s": 0.1}
    _, default = compare_results(a, b)
    assert {d.key.split(": ")[1] for d in default} == {"iteration_time_s", "ps_ingress_bytes",
                                                       "retransmission_ratio"}
    with pytest.raises(UsageError, match="two runs or two sweeps"):
        compare_results(a, write_run(tmp_path / "r"))


def test_the_commands_answer_bad_directories_in_one_line(tmp_path, capsys):
    assert main(["report", str(tmp_path)]) == 2
    assert main(["compare", str(tmp_path), str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 2 and all("neither a run directory" in line for line in err)
    run = write_run(tmp_path / "r")
    assert main(["report", str(run), "--html"]) == 0
    assert capsys.readouterr().out.strip() == str(run / "report.html")


def test_the_text_summary_of_a_run_with_a_constant_rate_udp_flow(tmp_path):
    summary = json.loads((write_run(tmp_path / "run") / "summary.json").read_text())
    summary["background"] = [{"distribution": "constant", "requested_load": 0.8,
                               "load_relative_to": "each sender's link rate (HPCC rule)", "start_s": 0.0,
                               "window_s": 1.84, "sent_datagrams": 1200, "received_datagrams": 1150,
                               "achieved_load": 0.767}]
    text = format_summary(summary)
    assert ("background constant (UDP): requested load 0.8 (of each sender's link rate (HPCC rule)) from 0 s for "
            "1.84 s, received 0.767; 1150 of 1200 datagrams arrived") in text


def test_the_text_summary_of_a_tcp_background_gives_its_load_by_completed_flows_and_received(tmp_path):
    summary = json.loads((write_run(tmp_path / "run") / "summary.json").read_text())
    summary["background"] = [{"distribution": "hadoop", "requested_load": 0.8, "load_relative_to": "bottleneck hr3-s2",
                               "congestion_control": "cubic", "congestion_control_used": ["cubic"],
                               "offered_load": 0.812, "achieved_load": 0.222, "received_load": 0.589,
                               "completed_count": 200, "flow_count": 205, "fct_p50_s": 0.12, "fct_p95_s": 0.6,
                               "fct_p99_s": 2.5}]
    text = format_summary(summary)
    assert ("background hadoop (TCP cubic): requested load 0.8 (of bottleneck hr3-s2), offered 0.812, achieved "
            "0.222 (completed flows), received 0.589; 200/205 flows completed") in text


def test_a_plot_of_many_lines_keeps_its_legend_inside_the_figure(tmp_path):
    # A fat-tree's 45 switches (InArt §5.3) as one legend column outgrew the figure: tight_layout warned and
    # gave up. In columns of at most LEGEND_ROWS entries it fits.
    import warnings

    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from testbed.metrics.plots import finish_figure
    fig, ax = plt.subplots(figsize=(7, 4))
    for i in range(50):
        ax.plot([0, 1], [i, i], label=f"h{i}")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        finish_figure(fig, ax, tmp_path / "many.png", "time (s)", "rate (Mb/s)", "many lines", legend=True)
    assert (tmp_path / "many.png").stat().st_size > 0


def test_a_cpu_distorted_run_planned_with_the_reference_costs_says_how_to_measure_this_machines(tmp_path):
    from testbed.budget import REFERENCE_COSTS
    summary = json.loads((write_run(tmp_path / "run") / "summary.json").read_text())
    reference = {"packet_costs": REFERENCE_COSTS, "packet_costs_measured_here": False, "warnings": []}
    summary.update(distorted=True, distortion_reasons=["CPU: the machine was 96% busy on average over 2 cores"],
                   packet_budget=dict(reference))
    assert f"  the time dilation was planned with {REFERENCE_COSTS}" in format_summary(summary)
    summary["packet_budget"].update(packet_costs="measured on this machine (ps, pyswitch, worker; 2026-11-24)",
                                    packet_costs_measured_here=True)
    assert "planned with" not in format_summary(summary)
    summary.update(distortion_reasons=["loss outside modelled queues: 3 packets at s1"],
                   packet_budget=dict(reference))
    assert "planned with" not in format_summary(summary)


# -- the page's order and its units ------------------------------------------------------------------------

def test_the_run_page_opens_on_its_headline_then_the_banner_the_plots_and_the_tables(tmp_path):
    page = render_run(write_run(tmp_path / "r", distorted=True))
    order = [page.index(mark) for mark in ('<section id="headline">', "<b>Distorted</b>", "<h2>Plots</h2>",
                                           "<h2>Run</h2>", "<h2>Jobs</h2>", "<h2>Switch counters</h2>")]
    assert order == sorted(order)
    headline = page[page.index('<section id="headline">'):page.index("</section>")]
    assert "Status <b>ok</b> on pyswitch, wall 4 s, seed 7" in headline
    # per job, the main figures in readable units (job_summary: 0.04 s, 0.02 s, 241920 B, 5e6 b/s, 0, 0.0)
    assert ("<td>resnet50</td><td>atp</td><td>3/3</td><td>40 ms</td><td>20 ms</td><td>242 kB</td><td>5 Mb/s</td>"
            "<td>0 packets</td><td>0%</td>") in headline
    for header in ("iteration time", "comm time", "PS ingress", "gradient sending rate", "retransmitted packets"):
        assert f"<th>{header}</th>" in headline


def test_the_run_pages_tables_give_a_unit_column_and_readable_values(tmp_path):
    page = render_run(write_run(tmp_path / "r"))
    outside_the_plots = page.split("<h2>Plots</h2>")[0] + page.split("<h2>Run</h2>")[1]    # base64 aside
    assert not re.search(r"\de[+-]\d", outside_the_plots)
    assert "<td>False</td>" not in page and "<td>True</td>" not in page
    assert '<th>metric</th><th>value</th><th>unit</th>' in page
    assert '<tr><td>iteration time</td><td>40</td><td class="unit">ms</td></tr>' in page
    assert '<tr><td>distorted</td><td>no</td><td class="unit"></td></tr>' in page
    assert '<tr><td>gradient sending rate</td><td class="unit">Mb/s</td><td>5</td></tr>' in page
    assert '<tr><td>min gradient sending rate</td><td class="unit">Mb/s</td><td>4.9</td></tr>' in page


def test_a_failed_runs_page_says_so_first(tmp_path):
    run = write_run(tmp_path / "r")
    summary = json.loads((run / "summary.json").read_text())
    summary.update(status="stalled", aggregation_exact=False, error="no progress for 30 s: s1 holds 12 slots")
    summary["jobs"][0].update(iterations_completed=1, gradient_sending_rate_bps=None)
    (run / "summary.json").write_text(json.dumps(summary))
    page = render_run(run)
    assert '<div class="banner bad">Status <b>stalled</b> on pyswitch' in page
    assert "aggregation NOT exact" in page and "<b>Error</b>: no progress for 30 s" in page
    assert "<td>1/3</td>" in page and "<td>-</td>" in page


def test_the_sweep_page_leads_with_its_plots_and_the_paper_beside_ours(tmp_path):
    from testbed.sweep.spec import PaperClaim
    from testbed.sweep.table import paper_comparison
    sweep = write_sweep(tmp_path / "s")
    claim = PaperClaim("iteration_time_s", "policy", (("ps", 2.0), ("atp", 1.0)), source="Fig. 1")
    (sweep / "paper.csv").write_text(paper_comparison(load_table(sweep), [claim]).to_csv(index=False))
    page = render_sweep(sweep)
    order = [page.index(mark) for mark in ('<section id="headline">', "<h2>Plots</h2>", "<h2>Against the paper",
                                           "<h2>Per point", "<h2>Every run")]
    assert order == sorted(order)
    # the paper's figures beside our means (ms), its ratio beside ours (and the interval of the ratios of
    # runs paired by seed), and the verdict
    assert ("<td>iteration time</td><td></td><td>ps / atp</td><td>2</td><td>1</td><td>2</td><td>81 ms</td>"
            "<td>40.5 ms</td><td>2</td><td>2 to 2 (2 seeds)</td><td>1</td><td>yes</td><td>Fig. 1</td>") in page
    # per point: mean ± half-width in one unit per metric, named in the header (its key in the tooltip)
    assert '<th title="iteration_time_s">iteration time (ms)</th>' in page
    assert "<td>atp</td><td>2</td><td>2</td><td>0</td><td>40.5 ± 6.35</td><td>240</td><td>0</td>" in page
    assert not re.search(r"<td>[-\d.]+e[+-]\d+</td>", page) and "<td>False</td>" not in page


def test_a_sweep_plot_names_its_metric_in_words_with_the_unit_and_is_also_written_as_svg(tmp_path, monkeypatch):
    from testbed.sweep import table
    frame = load_table(write_sweep(tmp_path / "s"))
    labels = []
    finish = table.finish_figure
    monkeypatch.setattr(table, "finish_figure", lambda fig, ax, path, xlabel, ylabel, *a, **k: (
        labels.append((xlabel, ylabel)), finish(fig, ax, path, xlabel, ylabel, *a, **k)))
    assert table.plot_metric(frame, ["policy"], "iteration_time_s", tmp_path / "t.png", "t")
    assert table.plot_metric(frame, ["policy"], "ps_ingress_bytes", tmp_path / "b.png", "b")
    assert labels == [("policy", "iteration time (ms)"), ("policy", "PS ingress (kB)")]
    assert (tmp_path / "t.svg").read_text().lstrip().startswith("<?xml")
    assert sorted(p.name for p in tmp_path.iterdir() if p.is_file()) == ["b.png", "b.svg", "t.png", "t.svg"]


# -- run, fidelity and sweep write report.html themselves ----------------------------------------------------

@pytest.fixture
def run_standing_in(monkeypatch, tmp_path):
    """``inatb run`` without a network: run_scenario writes ``write_run``'s directory with ``update`` applied to
    its summary, hands it to ``on_finished``, then returns it or raises ``raises``."""
    from testbed.emulation import orchestrator
    from testbed.emulation.orchestrator import RunResult
    made = {"update": {}, "raises": None}

    def run_scenario(scenario, out_root="results", target=None, stream=None, plan=None, on_finished=None):
        run_dir = write_run(tmp_path / "out" / f"run{len(list((tmp_path / 'out').glob('run*')))}"
                            if (tmp_path / "out").exists() else tmp_path / "out" / "run0")
        summary = {**json.loads((run_dir / "summary.json").read_text()), **made["update"]}
        (run_dir / "summary.json").write_text(json.dumps(summary))
        on_finished(RunResult(run_dir, summary))
        if made["raises"]:
            raise made["raises"]
        return RunResult(run_dir, summary)

    monkeypatch.setattr(orchestrator, "run_scenario", run_scenario)
    return made


QUICKSTART = str(__import__("pathlib").Path(__file__).resolve().parents[2] / "scenarios" / "quickstart.yaml")


def test_inatb_run_writes_report_html_when_it_ends(run_standing_in, tmp_path, capsys):
    assert main(["run", QUICKSTART, "--target", "pyswitch", "--out", str(tmp_path / "out")]) == 0
    out = capsys.readouterr()
    assert out.out.strip() == str(tmp_path / "out" / "run0")          # stdout: the run directory, as always
    assert f"report {tmp_path / 'out' / 'run0' / 'report.html'}" in out.err
    assert '<section id="headline">' in (tmp_path / "out" / "run0" / "report.html").read_text()


def test_a_stalled_runs_report_is_written_and_says_so_and_the_exit_status_is_the_runs(run_standing_in, tmp_path,
                                                                                       capsys):
    from testbed.errors import RunStalled
    run_standing_in.update(update={"status": "stalled", "aggregation_exact": False, "error": "no progress"},
                           raises=RunStalled("no progress"))
    assert main(["run", QUICKSTART, "--target", "pyswitch", "--out", str(tmp_path / "out")]) == RunStalled.exit_code
    assert "Status <b>stalled</b>" in (tmp_path / "out" / "run0" / "report.html").read_text()
    assert "inatb run: error: no progress" in capsys.readouterr().err


def test_a_report_that_cannot_be_written_is_one_line_and_leaves_the_runs_result(run_standing_in, tmp_path,
                                                                              monkeypatch, capsys):
    def broken(path):
        raise ValueError("a bug of the page\nsecond line")
    monkeypatch.setattr("testbed.reports.html.write_report", broken)
    assert main(["run", QUICKSTART, "--target", "pyswitch", "--out", str(tmp_path / "out")]) == 0
    run_standing_in.update(update={"aggregation_exact": False})
    assert main(["run", QUICKSTART, "--target", "pyswitch", "--out", str(tmp_path / "out")]) == 8
    err = [line for line in capsys.readouterr().err.splitlines() if "report.html" in line]
    assert err == [f"inatb run: report.html not written in {tmp_path / 'out' / f'run{i}'}: ValueError: a bug of "
                   f"the page second line" for i in (0, 1)]


def test_a_simulated_sweep_writes_report_html(tmp_path, capsys):
    sweep = tmp_path / "sweep.yaml"
    sweep.write_text(f"version: 1\nname: s\nscenario: {QUICKSTART}\nsimulate: true\naxes: {{policy: [ps, atp]}}\n"
                     f"metrics: [iteration_time_s]\n")
    assert main(["sweep", str(sweep), "--out", str(tmp_path / "out")]) == 0
    page = (tmp_path / "out" / "s" / "report.html").read_text()
    assert f"report {tmp_path / 'out' / 's' / 'report.html'}" in capsys.readouterr().err
    assert '<img alt="iteration_time_s"' in page and "iteration time (" in page
    assert (tmp_path / "out" / "s" / "plots" / "iteration_time_s.svg").is_file()


def test_a_run_that_superseded_a_host_bound_one_says_so_under_its_summary_and_on_its_page(tmp_path):
    summary = json.loads((write_run(tmp_path / "run") / "summary.json").read_text())
    assert "ran again" not in format_summary(summary) and "banner note" not in render_run(tmp_path / "run")
    summary["superseded_runs"] = [{"run_id": "r1", "time_dilation": 2.0,
                                   "distortion_reasons": ["host delay: a round trip of job J waited 3 ms"]}]
    assert ("  ran again after run r1 at time dilation 2 was host-bound (host delay: a round trip of job J waited 3 ms)"
            in format_summary(summary))
    (tmp_path / "run" / "summary.json").write_text(json.dumps(summary))
    assert ('<div class="banner note">Ran again after run r1 at time dilation 2 was host-bound (host delay: a round '
            'trip of job J waited 3 ms).</div>' in render_run(tmp_path / "run"))
