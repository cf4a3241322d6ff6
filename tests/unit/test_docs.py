"""The front door and the library: the README stays short and its links resolve, the documentation site
builds strictly (no broken link, no page outside the nav), and its reference pages say what the code says:
every scenario key the schema accepts and every metric a summary holds is documented."""

import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from testbed import reference, scenario as scenario_mod
from testbed.metrics.definitions import JOB_METRICS, SUMMARY_METRICS, undefined_keys
from testbed.schemes import compute_placement
from testbed.scenario_keys import SCENARIO_KEYS
from testbed.sim import evaluate
from testbed.sim.run import simulated_summary

REPO = Path(__file__).resolve().parents[2]
README_MAX_LINES = 200
MARKDOWN_LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def test_the_readme_is_a_front_door_of_at_most_200_lines_whose_every_link_resolves():
    text = (REPO / "README.md").read_text()
    assert len(text.splitlines()) <= README_MAX_LINES
    links = MARKDOWN_LINK.findall(text)
    assert links, "the README links to the documentation"
    broken = [link for link in links if "://" not in link and not (REPO / link.split("#")[0]).exists()]
    assert not broken


def test_the_documentation_builds_strictly(tmp_path):
    built = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
                           cwd=REPO, capture_output=True, text=True)
    assert built.returncode == 0, built.stderr[-3000:]
    assert (tmp_path / "site" / "reference" / "scenario" / "index.html").exists()


def test_the_reference_pages_are_what_the_code_says():
    assert reference.stale_pages(REPO / "docs" / "reference") == [], "run: python -m testbed.reference"


def _accepted_keys(monkeypatch) -> set:
    """Every key the schema accepted, as a reference path (``jobs[].window``), while it loaded each scenario the
    repository ships (the keys each section allows, whether or not the file used them)."""
    accepted = set()
    checker_keys = scenario_mod.Checker.keys

    def recording(self, mapping, path, allowed):
        section = re.sub(r"\.\d+", "[]", path)
        accepted.update(f"{section}.{key}" if section else key for key in allowed)
        return checker_keys(self, mapping, path, allowed)

    monkeypatch.setattr(scenario_mod.Checker, "keys", recording)
    for path in sorted((REPO / "scenarios").rglob("*.yaml")):
        if "scenario" not in (yaml.safe_load(path.read_text()) or {}):      # a sweep file names its scenario
            scenario_mod.load_scenario(path)
    return accepted


# Keys below these are the schemes' and transports' options (generated from their own tables), a job's
# per-worker intervals, and the simulator's per-worker start times: names the scenario chooses.
OPEN_SECTIONS = ("jobs[].policy_options.", "jobs[].transport_options.", "simulation.worker_start.")


def test_every_scenario_key_the_schema_accepts_is_in_the_reference(monkeypatch):
    documented = {key.path for key in SCENARIO_KEYS}
    assert len(documented) == len(SCENARIO_KEYS), "a key documented twice"
    accepted = _accepted_keys(monkeypatch)
    accepted |= {f"{section}.{key}" if section else key
                 for section, keys in (("", scenario_mod.TOP_KEYS), ("switch", scenario_mod.SWITCH_KEYS),
                                       ("jobs[]", scenario_mod.JOB_KEYS), ("simulation", scenario_mod.SIMULATION_KEYS),
                                       ("jobs[].training", scenario_mod.TRAINING_KEYS),
                                       ("impairments[]", scenario_mod.IMPAIRMENT_KEYS),
                                       ("metrics", scenario_mod.METRICS_KEYS),
                                       ("background[]", scenario_mod.BACKGROUND_KEYS),
                                       ("stragglers", scenario_mod.STRAGGLER_KEYS))
                 for key in keys}
    accepted |= {f"topology.{key}" for keys in scenario_mod.TOPOLOGY_KEYS.values() for key in keys}
    undocumented = sorted(k for k in accepted if k not in documented and not k.startswith(OPEN_SECTIONS))
    assert not undocumented


@pytest.mark.parametrize("name, overrides", [("quickstart.yaml", []), ("papers/rina/testbed.yaml", ["policy=rar"]),
                                             ("papers/goat/simulation-leaf-spine.yaml", [])])
def test_every_key_of_a_simulated_summary_is_defined(name, overrides):
    scenario = scenario_mod.load_scenario(REPO / "scenarios" / name, overrides)
    summary = simulated_summary(scenario, evaluate(scenario, compute_placement(scenario)))
    assert undefined_keys(summary) == []


def test_every_metric_has_a_unit_and_a_meaning():
    for key, metric in {**SUMMARY_METRICS, **JOB_METRICS}.items():
        assert metric.unit and metric.meaning, key
