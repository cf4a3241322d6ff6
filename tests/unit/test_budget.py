"""The packet budget: validate resolves the target as run does and budgets each target by its own rate."""

from pathlib import Path

from testbed import budget
from testbed.budget import TARGET_BUDGET_PPS, budget_warnings, peak_pps_per_switch, resolve_target
from testbed.scenario import load_scenario

QUICKSTART = Path(__file__).resolve().parents[2] / "scenarios" / "quickstart.yaml"


def test_auto_resolves_to_bmv2_only_where_simple_switch_and_p4c_are_found(monkeypatch):
    found = {"simple_switch": "/x/simple_switch", "p4c": "/x/p4c"}
    monkeypatch.setattr(budget.shutil, "which", lambda name: found.get(name))
    assert resolve_target("auto") == "bmv2"
    assert resolve_target("pyswitch") == "pyswitch"
    del found["p4c"]
    assert resolve_target("auto") == "pyswitch"


def test_each_target_is_budgeted_by_its_own_measured_rate(monkeypatch):
    scenario = load_scenario(QUICKSTART)                             # 5 links of 5 Mb/s: ~9,300 frames/s at s1
    peak = max(peak_pps_per_switch(scenario).values())
    assert TARGET_BUDGET_PPS["bmv2"] < peak < TARGET_BUDGET_PPS["pyswitch"]
    assert budget_warnings(scenario, "pyswitch") == []
    (warning,) = budget_warnings(scenario, "bmv2")
    assert "beyond the bmv2 budget of 2,500/s" in warning
    monkeypatch.setattr(budget.shutil, "which", lambda name: f"/x/{name}")
    assert budget_warnings(scenario, "auto") == [warning]            # auto resolves to bmv2 here
    monkeypatch.setattr(budget.shutil, "which", lambda name: None)
    assert budget_warnings(scenario, "auto") == []
