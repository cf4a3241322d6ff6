"""inatb doctor: every requirement reported, absences explained, optional ones do not fail the command."""

import shutil

from testbed import cli, doctor


def test_reports_every_requirement_and_what_absence_costs(monkeypatch, capsys):
    real_which = shutil.which
    monkeypatch.setattr(doctor.shutil, "which",
                        lambda name: None if name in ("simple_switch", "p4c", "iftop") else real_which(name))
    results = {name: (present, detail) for name, present, detail in doctor.checks()}
    for name in ("root", "mininet (mnexec)", "mininet python module", "tc", "ethtool", "iftop",
                 "bmv2 simple_switch", "p4c", "bmv2 thrift bindings"):
        assert name in results, name
    assert results["bmv2 simple_switch"] == (False, results["bmv2 simple_switch"][1])
    assert "pyswitch" in results["bmv2 simple_switch"][1] and "p4lang-bmv2" in results["bmv2 simple_switch"][1]
    assert "p4lang-p4c" in results["p4c"][1]
    assert "p4/ina.p4 compiles" not in results          # only tried when p4c exists
    assert {"bmv2 simple_switch", "p4c", "iftop"} <= doctor.OPTIONAL_CHECKS
    required_ok = all(present for name, (present, _) in results.items() if name not in doctor.OPTIONAL_CHECKS)
    assert cli.main(["doctor"]) == (0 if required_ok else 1)
    out = capsys.readouterr().out
    assert "MISSING  bmv2 simple_switch" in out and "MISSING  p4c" in out
