"""inatb doctor: every requirement reported, absences explained, optional ones do not fail the command."""

import shutil

from testbed import cli, doctor


def _fake_binary(directory, name, version_line):
    """An executable ``name`` in ``directory`` that prints ``version_line`` for ``--version``."""
    path = directory / name
    path.write_text(f"#!/bin/sh\necho '{version_line}'\n")
    path.chmod(0o755)
    return path


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


def test_versions_are_parsed_and_compared_with_the_tested_ones():
    assert (doctor.TESTED_BMV2_VERSION, doctor.TESTED_P4C_VERSION) == ("1.15.5", "1.2.5.16")
    assert doctor.version_number("1.15.5-693e69e6") == "1.15.5"
    assert doctor.version_number("p4c 1.2.5.16 (SHA: 6b7ec98e77 BUILD: Release)") == "1.2.5.16"
    assert doctor.version_number("") == ""
    assert doctor.version_note("1.15.5-693e69e6", "1.15.5") == "version 1.15.5, tested with 1.15.5"
    assert doctor.version_note("1.14.0", "1.15.5").startswith("version 1.14.0, tested with 1.15.5: another")
    assert doctor.version_note("", "1.15.5") == "version unknown, tested with 1.15.5"


def test_reports_found_and_tested_versions_of_bmv2_and_p4c(monkeypatch, tmp_path):
    fakes = {"simple_switch": _fake_binary(tmp_path, "simple_switch", "1.15.5-693e69e6"),
             "p4c": _fake_binary(tmp_path, "p4c", "p4c 1.2.4.2 (SHA: 0 BUILD: Release)")}
    monkeypatch.setattr(doctor.shutil, "which", lambda name: str(fakes[name]) if name in fakes else None)
    results = {}
    for name in ("simple_switch", "p4c"):
        label, present, detail = doctor._binary(name, name, "absent",
                                                doctor.TESTED_BMV2_VERSION if name == "simple_switch"
                                                else doctor.TESTED_P4C_VERSION)
        results[name] = (present, detail)
    assert results["simple_switch"] == (True, f"{fakes['simple_switch']} (version 1.15.5, tested with 1.15.5)")
    present, detail = results["p4c"]
    assert present and "version 1.2.4.2, tested with 1.2.5.16: another version" in detail
    assert doctor._binary("nope", "nope", "absent", "9.9") == ("nope", False, "absent; tested with 9.9")
