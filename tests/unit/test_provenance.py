"""``inatb --version`` and the provenance a summary keeps (testbed/provenance.py): the testbed's version and
commit, the P4 program's hash, and bmv2's tools' versions, with and without those tools on PATH."""

import hashlib
import os
import re
import shutil
import subprocess

import pytest

import testbed
from testbed import provenance
from testbed.cli import main
from testbed.dataplane import p4build


def put_on_path(monkeypatch, directory, tools: dict):
    """Executables in ``directory``, each printing its text (a shell script body) for ``--version``, first on
    PATH."""
    directory.mkdir(exist_ok=True)
    for name, body in tools.items():
        path = directory / name
        path.write_text(f"#!/bin/sh\n{body}\n")
        path.chmod(0o755)
    monkeypatch.setenv("PATH", str(directory) + os.pathsep + os.environ["PATH"])


def without_tools(monkeypatch):
    """p4c and simple_switch not on PATH, whatever this machine has."""
    which = shutil.which
    monkeypatch.setattr(provenance.shutil, "which",
                        lambda command: None if command in provenance.DATAPLANE_TOOLS else which(command))


def version_output(capsys) -> list:
    with pytest.raises(SystemExit) as done:
        main(["--version"])
    assert done.value.code == 0
    out = capsys.readouterr()
    assert out.err == ""
    return out.out.splitlines()


def test_version_without_the_tools_says_not_installed_and_runs_neither(monkeypatch, capsys):
    without_tools(monkeypatch)
    run = subprocess.run
    ran = []
    monkeypatch.setattr(provenance.subprocess, "run", lambda argv, **kw: ran.append(argv[0]) or run(argv, **kw))
    lines = version_output(capsys)
    assert ran == ["git", "git"]                          # the commit; nothing asked of tools that are not there
    assert lines == [f"inatb {testbed.__version__}", f"git commit: {provenance.git_commit()}",
                     f"P4 program: sha256 {provenance.p4_program_sha256()}",
                     "p4c: not installed", "simple_switch: not installed"]
    assert re.fullmatch(r"git commit: ([0-9a-f]{40}(-dirty)?|unknown)", lines[1])
    assert re.fullmatch(r"P4 program: sha256 [0-9a-f]{64}", lines[2])


def test_version_with_the_tools_on_path_prints_their_first_line(monkeypatch, capsys, tmp_path):
    put_on_path(monkeypatch, tmp_path / "bin", {
        "p4c": "echo 'p4c 1.2.4.2 (SHA: 0123abc BUILD: RELEASE)'",
        "simple_switch": "echo '1.15.0-0123abcd'; echo 'a second line'"})
    lines = version_output(capsys)
    assert lines[-2:] == ["p4c: p4c 1.2.4.2 (SHA: 0123abc BUILD: RELEASE)", "simple_switch: 1.15.0-0123abcd"]
    assert lines[0] == f"inatb {testbed.__version__}"


def test_a_tool_that_hangs_fails_or_says_nothing_reads_as_unknown_and_never_fails(monkeypatch, tmp_path):
    put_on_path(monkeypatch, tmp_path / "bin", {"p4c": "sleep 10", "simple_switch": "echo 'no such option' >&2; exit 3",
                                               "quiet": "exit 0"})
    assert provenance.tool_version("p4c", timeout_s=0.2) == "unknown (p4c --version took longer than 0.2 s)"
    assert provenance.tool_version("simple_switch") == "unknown (simple_switch --version exited 3: no such option)"
    assert provenance.tool_version("quiet") == "unknown (quiet --version exited 0)"
    (tmp_path / "bin" / "broken").write_text("not a script")
    (tmp_path / "bin" / "broken").chmod(0o755)
    assert provenance.tool_version("broken").startswith("unknown (broken --version: ")
    assert provenance.tool_version("no-such-tool-of-inatb") is None


def test_version_needs_no_command(capsys, monkeypatch):
    without_tools(monkeypatch)
    assert version_output(capsys)[0] == f"inatb {testbed.__version__}"
    with pytest.raises(SystemExit) as done:
        main([])                                                    # without --version a command is required
    assert done.value.code == 2


def test_a_runs_versions_name_bmv2s_tools_only_on_bmv2(monkeypatch, tmp_path):
    put_on_path(monkeypatch, tmp_path / "bin", {"p4c": "echo 'p4c 1.2.4.2'"})
    monkeypatch.setattr(provenance.shutil, "which",
                        lambda command, which=shutil.which: None if command == "simple_switch" else which(command))
    assert provenance.run_versions("bmv2") == {**provenance.package_versions(), "p4c": "p4c 1.2.4.2",
                                               "simple_switch": None}
    for target in ("pyswitch", "ebpf"):
        assert provenance.run_versions(target) == provenance.package_versions()


def test_the_p4_programs_hash_covers_every_file_ina_p4_includes(tmp_path):
    main_source = p4build.MAIN_SOURCE.read_text()
    included = set(re.findall(r'#include\s+"([^"]+)"', main_source))
    sources = p4build.source_files()
    assert included and included | {"ina.p4"} <= {path.name for path in sources}
    digest = hashlib.sha256()
    for path in sources:
        digest.update(os.path.relpath(path, p4build.P4_DIR).encode() + b"\0" + path.read_bytes() + b"\0")
    assert provenance.p4_program_sha256() == p4build.program_sha256() == digest.hexdigest()
    # A copy hashes the same wherever it lies; a byte of an included file changed changes it.
    copy = tmp_path / "p4"
    shutil.copytree(p4build.P4_DIR, copy)
    assert p4build.program_sha256(copy) == provenance.p4_program_sha256()
    lanes = copy / p4build.LANES_INCLUDE.name
    lanes.write_text(lanes.read_text() + "\n")
    assert p4build.program_sha256(copy) != provenance.p4_program_sha256()


def test_without_the_programs_sources_its_hash_is_unknown(monkeypatch):
    monkeypatch.setattr(p4build, "source_files", lambda p4_dir=p4build.P4_DIR: [])
    assert provenance.p4_program_sha256() == "unknown"
