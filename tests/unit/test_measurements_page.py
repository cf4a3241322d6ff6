"""The measurements page (benchmarks/measurements.py) is written from what its sections measured, each with
its commit, date and machine; a section not measured yet names the command that measures it."""

import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from benchmarks import measurements  # noqa: E402


def test_the_page_shows_each_measured_section_with_its_provenance_and_names_the_command_of_the_others(tmp_path):
    record = {"rows": [["pyswitch", "atp", "exact", "0.0361"]], "commit": "0123456789ab", "date": "2026-11-29",
              "machine": "Some CPU x 2", "wall_s": 41.2}
    (tmp_path / "quickstart.json").write_text(json.dumps(record))
    page = measurements.page_markdown(tmp_path)
    assert "do not edit it" in page.splitlines()[2]
    quickstart = page.split("## ")[1]
    assert "Measured at commit `0123456789ab` on 2026-11-29, Some CPU x 2 cores, in 41 s." in quickstart
    assert "| pyswitch | atp | exact | 0.0361 |" in quickstart
    assert "--only impairments`" in page.split("## ")[2] and "Not measured yet" in page.split("## ")[2]
    assert page.count("## ") == len(measurements.SECTIONS)


def test_a_section_measured_elsewhere_keeps_what_the_page_shows_until_it_is_measured_here(tmp_path, monkeypatch):
    record = {"rows": [["pyswitch", "atp", "exact", "0.0361"]], "commit": "0123456789ab", "date": "2026-11-29",
              "machine": "Some CPU x 2", "wall_s": 41.2}
    (tmp_path / "quickstart.json").write_text(json.dumps(record))
    before = measurements.page_markdown(tmp_path)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    record = {**record, "rows": [["test/unit", "12"]], "commit": "fedcba987654", "machine": "Other CPU x 8"}
    (elsewhere / "test-suite.json").write_text(json.dumps(record))
    # Measured here: the test suite; the quickstart's section stays as the page showed it; the others are not
    # measured anywhere yet.
    page = measurements.page_markdown(elsewhere, before)
    sections = {s.splitlines()[0]: s for s in page.split("\n## ")[1:]}
    assert sections["The quickstart, per scheme and target"] == before.split("\n## ")[1]
    assert "Measured at commit `fedcba987654`" in sections["The test suite's size"]
    assert "Not measured yet" in sections["Loss, duplication and reordering on every link"]
    assert page.count("## ") == len(measurements.SECTIONS)
    assert measurements.page_markdown(elsewhere, page) == page
    # A page whose last section was measured, written before a section came after it: kept, that section
    # still ends in one blank line before the new one's heading.
    *earlier, last = measurements.SECTIONS
    monkeypatch.setattr(measurements, "SECTIONS", tuple(earlier))
    (elsewhere / f"{earlier[-1].name}.json").write_text(json.dumps(record))
    older = measurements.page_markdown(elsewhere)
    monkeypatch.setattr(measurements, "SECTIONS", (*earlier, last))
    newer = measurements.page_markdown(tmp_path / "nothing", older)
    assert f"|\n\n## {last.title}\n" in newer and newer.count("## ") == len(measurements.SECTIONS)


def test_fidelity_cells_read_emulated_over_simulated_and_say_what_is_not_judged():
    summary = {"distorted": False, "distortion_reasons": [], "fidelity": {"all_within": True, "jobs": {"a": [
        {"metric": "ps_ingress_fragments", "emulated": 271.2, "simulated": 228, "ratio": 1.19, "judged": False},
        {"metric": "ina_amount_fragments", "emulated": -6.0, "simulated": 0, "ratio": None, "judged": True},
        {"metric": "comm_time_s", "emulated": 0.295, "simulated": 0.311, "ratio": 0.949, "judged": True}]}}}
    cells = measurements.fidelity_cells(summary)
    assert cells == ["271 / 228 (1.19x, not judged)", "-6 / 0", "-", "0.295 / 0.311 (0.95x)", "yes", "no"]


def test_an_unknown_section_is_refused_in_one_line(capsys):
    with pytest.raises(SystemExit):
        measurements.main(["--only", "quickstart,nope"])
    assert "unknown nope" in capsys.readouterr().err
