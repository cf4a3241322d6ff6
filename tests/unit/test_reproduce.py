"""``inatb reproduce PAPER``: a paper's experiments are its sweeps; the page puts the paper's claims beside
ours with the conditions they were measured under, lists what has not run, and a second call resumes."""

import json
import math
import shutil
import statistics
import subprocess
import sys

import pandas as pd
import pytest
from scipy import stats

from testbed import reproduce
from testbed.errors import EnvironmentMissingError, UsageError
from testbed.papers import PAPERS
from testbed.provenance import machine_id, short_commit
from testbed.sweep.table import PAIRED_RATIOS_PLOT


def _reproduce(*args):
    return subprocess.run([sys.executable, "-m", "testbed.cli", "reproduce", *args], capture_output=True, text=True,
                          timeout=120)


def test_every_paper_has_experiments_and_its_motivating_example_comes_first():
    for paper in PAPERS:
        found = reproduce.experiments(paper)
        assert found, paper
        assert len({e.name for e in found}) == len(found)
    assert [e.name for e in reproduce.experiments("grid")] == ["motivation"]
    assert reproduce.experiments("goat")[0].name == "motivation"
    with pytest.raises(UsageError, match="expected one of goat, grid"):
        reproduce.experiments("bom")


def test_grid_is_reproduced_in_seconds_and_its_page_says_what_holds_where_and_when(tmp_path):
    done = _reproduce("grid", "--out", str(tmp_path))
    assert done.returncode == 0, done.stderr
    page_path = tmp_path / "reproductions" / "grid.md"
    assert done.stdout.strip() == str(page_path)
    page = page_path.read_text()
    assert "| motivation | simulated | 3 | 3 of 3 |" in page
    conditions = json.loads((tmp_path / "grid-motivation" / "reproduce.json").read_text())
    assert f"Measured at commit `{conditions['commit']}` on {conditions['date']}, {conditions['machine']}" in page
    assert "| Geryon / GRID | 1 / 3 = 0.3333 | 1 Gb/s / 3 Gb/s = 0.3333 | 1 | yes |" in page
    (plot,) = (tmp_path / "reproductions" / "grid").glob("*.png")
    assert f"](grid/{plot.name})" in page
    # Again: every point is done, nothing runs, the conditions are those of the runs that made the figures.
    conditions_file = tmp_path / "grid-motivation" / "reproduce.json"
    before = conditions_file.stat().st_mtime_ns
    assert _reproduce("grid", "--out", str(tmp_path)).returncode == 0
    assert conditions_file.stat().st_mtime_ns == before


def test_a_sweep_resumed_at_another_commit_and_machine_names_both(tmp_path):
    """Runs of an earlier call stay in the table: the conditions name their commit and machine beside
    this call's, and the wall time adds up."""
    (motivation,) = reproduce.select(reproduce.experiments("grid"), ["motivation"])
    reproduce.run_experiment(motivation, tmp_path)
    path = tmp_path / "grid-motivation" / "reproduce.json"
    earlier = json.loads(path.read_text())
    path.write_text(json.dumps({**earlier, "commit": "0123456789ab", "machine": "Other CPU x 4"}))
    shutil.rmtree(next((tmp_path / "grid-motivation" / "points").iterdir()))
    result = reproduce.run_experiment(motivation, tmp_path)
    assert (result.ran, result.skipped) == (1, 2)
    conditions = reproduce.read_conditions(tmp_path / "grid-motivation")
    assert conditions.commit == f"0123456789ab, {short_commit()}" and conditions.date == earlier["date"]
    assert conditions.machine == f"Other CPU x 4, {machine_id()}" and conditions.wall_s > earlier["wall_s"]
    assert conditions.text() == (f"commits `0123456789ab` and `{short_commit()}` on {earlier['date']}, "
                                 f"Other CPU x 4 and {machine_id()} cores")
    assert conditions.when_text() == f"{earlier['date']}, `0123456789ab`, `{short_commit()}`"
    assert reproduce.merged(conditions.commit, "0123456789ab") == conditions.commit


def test_an_experiment_not_run_is_listed_with_the_command_that_runs_it(tmp_path):
    done = _reproduce("goat", "--only", "motivation", "--out", str(tmp_path), "--page-dir", str(tmp_path / "pages"))
    assert done.returncode == 0, done.stderr
    page = (tmp_path / "pages" / "goat.md").read_text()
    assert "| motivation | simulated | 2 | 2 of 2 |" in page
    assert "| exp3 | emulated | not run yet |" in page
    assert "Command: `inatb reproduce goat --only exp3`.\n\nNot run yet" in page
    # What the runs taught us, in words, ends the page (scenarios/papers/goat/notes.md).
    assert page.rstrip().endswith((reproduce.PAPERS_DIR / "goat" / "notes.md").read_text().strip())


def test_an_experiment_measured_elsewhere_keeps_its_section_of_the_page_already_written(tmp_path):
    pages = tmp_path / "pages"
    done = _reproduce("goat", "--only", "motivation", "--out", str(tmp_path / "first"), "--page-dir", str(pages))
    assert done.returncode == 0, done.stderr
    first = (pages / "goat.md").read_text()
    written = reproduce.read_written_page(pages / "goat.md")
    assert list(written.rows) == ["motivation"] and written.sections["motivation"].startswith("## motivation\n")
    assert "## exp1" not in written.sections["motivation"]
    # Written again from a directory without its runs (another experiment measured on another day): the
    # motivating example keeps its figures, commit, date and machine, word for word.
    reproduce.write_page("goat", reproduce.experiments("goat"), tmp_path / "elsewhere", pages)
    assert (pages / "goat.md").read_text() == first
    # Runs in the output directory rule: their section is written from them, not kept.
    conditions_path = tmp_path / "first" / "goat-motivation" / "reproduce.json"
    conditions = json.loads(conditions_path.read_text())
    conditions_path.write_text(json.dumps({**conditions, "commit": "0123456789ab"}))
    reproduce.write_page("goat", reproduce.experiments("goat"), tmp_path / "first", pages)
    assert "Measured at commit `0123456789ab`" in (pages / "goat.md").read_text()


def test_a_sweep_with_paired_seeds_says_what_its_paired_ratio_plot_shows(tmp_path):
    """GRID's claim runs once per point: no paired-ratio plot, and the claims paragraph says nothing of it.
    A sweep that has the plot gets the sentence that reads it, and the plot beside the others."""
    (motivation,) = reproduce.select(reproduce.experiments("grid"), ["motivation"])
    reproduce.run_experiment(motivation, tmp_path)
    plots = tmp_path / "grid-motivation" / "plots"
    assert not (plots / PAIRED_RATIOS_PLOT).exists()
    section, _ = reproduce.experiment_section(motivation, tmp_path, tmp_path / "pages")
    assert "### Against the paper" in section and reproduce.PAIRED_PLOT_NOTE not in section
    shutil.copyfile(next(plots.glob("*.png")), plots / PAIRED_RATIOS_PLOT)
    section, _ = reproduce.experiment_section(motivation, tmp_path, tmp_path / "pages")
    assert "on which the claim would not hold either way." + reproduce.PAIRED_PLOT_NOTE in section
    assert "![motivation: paired_ratios](grid/motivation-paired_ratios.png)" in section


def test_an_unknown_experiment_is_one_line_naming_the_known_ones(tmp_path):
    done = _reproduce("goat", "--only", "fig99", "--out", str(tmp_path))
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and "no experiment fig99" in done.stderr and "motivation" in done.stderr
    assert not list(tmp_path.iterdir())


def test_emulated_experiments_want_root_and_the_refusal_names_the_simulated_ones(monkeypatch):
    monkeypatch.setattr(reproduce.os, "geteuid", lambda: 1000)
    found = reproduce.experiments("goat")
    with pytest.raises(EnvironmentMissingError, match=r"need root; --only motivation,exp6"):
        reproduce.require_root_for(found)
    reproduce.require_root_for([e for e in found if e.spec.simulate])


@pytest.mark.parametrize("our_ratio, paper_ratio, expected", [
    (1.2, 1.0 + 0.2, "yes"), (1.5, 1.2, "yes"), (2.0, 1.2, "order only"), (0.9, 1.2, "no"), (1.0, 1.2, "no"),
    (float("nan"), 1.2, "no run counted")])
def test_a_claim_holds_on_the_papers_side_of_one_and_within_a_quarter_of_its_ratio(our_ratio, paper_ratio, expected):
    row = pd.Series({"our_ratio": our_ratio, "paper_ratio": paper_ratio, "ours_vs_paper": our_ratio / paper_ratio,
                     "same_order": None if our_ratio != our_ratio else (our_ratio - 1) * (paper_ratio - 1) > 0})
    assert reproduce.verdict(row) == expected
    ours = {"metric": "iteration_time_s", "ours_a": 2.58,
            "ours_b": 2.58 / our_ratio if our_ratio == our_ratio else float("nan")}
    shown = reproduce._ours_text(pd.Series({**row.to_dict(), **ours}))
    counted = f"2.58 s / {ours['ours_b']:.3g} s = {our_ratio:.4g}"
    assert shown == ("2.58 s / none" if expected == "no run counted" else counted)


@pytest.mark.parametrize("our_ratio, low, high, expected", [
    (1.33, 1.14, 1.51, "yes"), (1.17, 0.68, 1.66, "undecided"), (0.8, 0.7, 0.9, "no"), (2.0, 1.6, 2.4, "order only"),
    (1.33, float("nan"), float("nan"), "yes"), (1.05, 0.99, 1.12, "undecided"), (1.01, 0.97, 1.05, "level")])
def test_where_runs_share_seeds_the_paired_interval_decides_the_side_of_one(our_ratio, low, high, expected):
    row = pd.Series({"our_ratio": our_ratio, "paper_ratio": 1.49, "ours_vs_paper": our_ratio / 1.49,
                     "same_order": (our_ratio - 1) * 0.49 > 0, "our_ratio_low": low, "our_ratio_high": high,
                     "pairs": 3})
    assert reproduce.verdict(row) == expected
    shown = reproduce._claims_table(pd.DataFrame([{**row.to_dict(), "metric": "iteration_time_s", "at": "",
                                                    "a": "ATP", "b": "PA-ATP", "paper_a": 1.49, "paper_b": 1.0,
                                                    "ours_a": our_ratio, "ours_b": 1.0, "source": "Fig. 10"}]))
    assert ("; paired " in shown) == (low == low)


@pytest.mark.parametrize("paper_ratio, low, high, expected", [
    (1.49, 0.97, 1.05, "level"), (1.49, 0.97, 1.12, "undecided"), (1.49, 0.9, 1.0, "level"),
    (1.22, 0.99, 1.01, "undecided"), (0.5, 0.95, 1.03, "level"), (0.5, 0.625, 1.03, "undecided"),
    (0.5, 1.0, 1.2, "level")])
def test_a_pair_level_within_its_interval_where_no_ratio_in_it_could_make_the_claim_hold_is_decided_level(
        paper_ratio, low, high, expected):
    """The ratios that make a claim of 1.49 hold lie above 1 and in 1.49 x [0.75, 1.25] = [1.1175, 1.8625]; of
    0.5, below 1 and in [0.375, 0.625]; of 1.22, in (1, 1.525], which a pair level within 1% reaches: that
    one stays undecided."""
    mean = (low + high) / 2
    row = pd.Series({"our_ratio": mean, "paper_ratio": paper_ratio, "ours_vs_paper": mean / paper_ratio,
                     "same_order": (mean - 1) * (paper_ratio - 1) > 0, "our_ratio_low": low, "our_ratio_high": high,
                     "pairs": 8})
    assert reproduce.verdict(row) == expected
    assert reproduce.verdict_text(row).startswith(expected)


def test_an_undecided_claim_says_about_how_many_seeds_would_decide_it():
    """Paired ratios 1.1, 1.3 and 0.95 (mean 1.117, sd 0.176): at their spread the interval leaves 1 from
    12 seeds on, t(0.975, 11) x 0.176 / sqrt(12) = 0.112 < 0.117, where 11 seeds give 0.118."""
    ratios = [1.1, 1.3, 0.95]
    mean, half = sum(ratios) / 3, stats.t.ppf(0.975, 2) * statistics.stdev(ratios) / math.sqrt(3)
    row = pd.Series({"our_ratio": mean, "paper_ratio": 1.49, "ours_vs_paper": mean / 1.49, "same_order": True,
                     "our_ratio_low": mean - half, "our_ratio_high": mean + half, "pairs": 3})
    assert reproduce.verdict(row) == "undecided"
    assert reproduce.verdict_text(row) == "undecided (about 12 seeds would decide at this spread)"
    level = row.copy()
    level["our_ratio_low"], level["our_ratio_high"] = 0.85, 1.15            # a mean of exactly 1 never decides
    assert reproduce.verdict_text(level) == f"undecided (not within {reproduce.MOST_SEEDS} seeds at this spread)"
    decided = row.copy()
    decided["our_ratio_low"], decided["our_ratio_high"] = 1.14, 1.51
    assert reproduce.verdict_text(decided) == reproduce.verdict(decided) == "order only"


def test_an_experiments_description_is_its_sweeps_first_comment_paragraph_with_broken_words_joined():
    (emulated,) = reproduce.select(reproduce.experiments("rina"), ["fig11-fat-tree-emulated"])
    text = reproduce.description(emulated)
    assert text.startswith("Rina §VI-C, Fig. 11 (left), emulated: training throughput of ATP and Rina as the "
                           "fat-tree's")
    assert "on the emulated fat-tree k=4 (20 switches" in text and "- " not in text.replace(" - ", "")
    # GOAT exp1's paragraph ends in a colon that introduces the file's next lines: on the page it ends the sentence.
    (exp1,) = reproduce.select(reproduce.experiments("goat"), ["exp1"])
    assert reproduce.description(exp1).endswith("the packet budget picks).")


def test_a_points_runs_left_out_of_its_figures_are_counted_by_why():
    class Spec:
        axes = [("scheme", ["ATP", "Rina"])]
        metrics = ["comm_time_s"]
    frame = pd.DataFrame({"scheme": ["ATP", "ATP", "Rina", "Rina", "Rina"],
                          "status": ["refused", "refused", "ok", "ok", "failed"],
                          "distorted": [None, None, False, True, None],
                          "comm_time_s": [None, None, 0.05, 0.5, None]})
    lines = reproduce._figures_table(Spec, frame).splitlines()
    assert lines[2] == "| ATP | 0 of 2 (2 refused) |  |"
    assert lines[3] == "| Rina | 1 of 3 (1 failed, 1 distorted) | 50 ms |"
