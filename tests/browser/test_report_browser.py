"""The HTML reports in headless Chromium: each page loads without a console error, shows every plot of its
directory (a decoded image, not a broken one), and opens on its headline and its first plot (both above the
fold of a laptop's window)."""

import json

import pytest
from report_fixtures import write_run, write_sweep
from support import open_in_chromium, require_browser, tops_in_chromium

from testbed.reports.html import write_report

#: A laptop's browser window (CSS pixels).
WINDOW = (1280, 800)
#: How much of the first plot must show in that window without scrolling.
FIRST_PLOT_SHOWN_PX = 150


@pytest.fixture
def browser():
    require_browser()


def assert_shows_every_plot(page, plots_dir):
    severe, images = open_in_chromium(page)
    assert severe == []
    assert sorted(i["alt"] for i in images) == sorted(p.stem for p in plots_dir.glob("*.png"))
    assert all(i["complete"] and i["naturalWidth"] > 0 for i in images), images


def assert_opens_on_headline_and_first_plot(page):
    tops = tops_in_chromium(page, ("#headline", "figure"), WINDOW)
    assert tops["window"] <= WINDOW[1]
    assert 0 <= tops["#headline"] < tops["figure"], tops
    assert tops["figure"] + FIRST_PLOT_SHOWN_PX <= tops["window"], tops


def test_a_run_report_loads_and_shows_its_plots(browser, tmp_path):
    run = write_run(tmp_path / "run", distorted=True)
    assert_shows_every_plot(write_report(run), run / "plots")


def test_a_sweep_report_loads_and_shows_its_plots(browser, tmp_path):
    sweep = write_sweep(tmp_path / "sweep", distorted_point="ps")
    assert_shows_every_plot(write_report(sweep), sweep / "plots")


def test_a_distorted_run_of_two_jobs_opens_on_its_headline_and_first_plot(browser, tmp_path):
    run = write_run(tmp_path / "run", distorted=True)
    summary = json.loads((run / "summary.json").read_text())
    summary["jobs"].append({**summary["jobs"][0], "job": "vgg16", "policy": "ps"})
    summary["distortion_reasons"] += ["loss outside modelled queues: 3 packets at s1"]
    (run / "summary.json").write_text(json.dumps(summary))
    assert_opens_on_headline_and_first_plot(write_report(run))


def test_a_sweep_report_opens_on_its_headline_and_first_plot(browser, tmp_path):
    assert_opens_on_headline_and_first_plot(write_report(write_sweep(tmp_path / "sweep", distorted_point="ps")))
