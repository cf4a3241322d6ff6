"""The HTML reports in headless Chromium: each page loads without a console error and shows every
plot of its directory (a decoded image, not a broken one)."""

import pytest
from report_fixtures import write_run, write_sweep
from support import open_in_chromium, require_browser

from testbed.reports.html import write_report


@pytest.fixture
def browser():
    require_browser()


def assert_shows_every_plot(page, plots_dir):
    severe, images = open_in_chromium(page)
    assert severe == []
    assert sorted(i["alt"] for i in images) == sorted(p.stem for p in plots_dir.glob("*.png"))
    assert all(i["complete"] and i["naturalWidth"] > 0 for i in images), images


def test_a_run_report_loads_and_shows_its_plots(browser, tmp_path):
    run = write_run(tmp_path / "run", distorted=True)
    assert_shows_every_plot(write_report(run), run / "plots")


def test_a_sweep_report_loads_and_shows_its_plots(browser, tmp_path):
    sweep = write_sweep(tmp_path / "sweep", distorted_point="ps")
    assert_shows_every_plot(write_report(sweep), sweep / "plots")
