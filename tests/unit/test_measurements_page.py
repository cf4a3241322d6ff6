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
