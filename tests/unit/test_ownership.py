"""Results written through sudo belong to the user who typed it (testbed/ownership.py): what the command
created, and only that, changes owner, modes kept; without sudo nothing changes; a bad SUDO_UID is refused.
Changing owners needs root, as these tests run in CI and on the VM."""

import json
import os
import stat
from pathlib import Path

import pytest
from report_fixtures import write_run

from testbed import ownership, reproduce
from testbed.atomic_io import write_text_atomic
from testbed.cli import main
from testbed.errors import UsageError
from testbed.ownership import (InvokingUser, hand_over, handing_over, invoking_user, missing_dirs, new_tree,
                               output_into)
from testbed.sweep import load_sweep, run_sweep
from testbed.sweep.executors import LocalExecutor

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="changing a file's owner needs root")

REPO = Path(__file__).resolve().parents[2]
NOBODY = InvokingUser(65534, 65534)
SUDO_NOBODY = {"SUDO_UID": "65534", "SUDO_GID": "65534"}


def owner_and_mode(path: Path):
    st = os.lstat(path)
    return st.st_uid, st.st_gid, stat.S_IMODE(st.st_mode)


def tree_of(root: Path) -> dict:
    """Every entry under ``root`` and ``root`` itself -> (uid, gid, mode)."""
    return {str(p.relative_to(root)): owner_and_mode(p) for p in [root, *root.rglob("*")]}


def sudo_env(monkeypatch, values):
    monkeypatch.delenv("SUDO_UID", raising=False)
    monkeypatch.delenv("SUDO_GID", raising=False)
    for name, value in values.items():
        monkeypatch.setenv(name, value)


def write_run_like_dir(run_dir: Path) -> None:
    """A run directory as make_run_dir and the run leave it: 0700 directories, 0600 and 0644 files."""
    os.mkdir(run_dir, 0o700)
    (run_dir / "records").mkdir(mode=0o700)
    fd = os.open(run_dir / "records" / "ps.jsonl", os.O_WRONLY | os.O_CREAT, 0o600)
    os.close(fd)
    write_text_atomic(run_dir / "summary.json", "{}\n")                   # 0644 as written today


@pytest.mark.parametrize("environ, euid, expected", [
    ({}, 0, None),                                                         # root, not through sudo
    (SUDO_NOBODY, 1000, None),                                             # not root: nothing to hand over
    (SUDO_NOBODY, 0, NOBODY),
    ({"SUDO_UID": "0", "SUDO_GID": "0"}, 0, None),                         # sudo from root
    ({"SUDO_UID": " 1000 ", "SUDO_GID": "1000"}, 0, InvokingUser(1000, 1000)),
])
def test_the_invoking_user_is_sudos_when_running_as_root(environ, euid, expected):
    assert invoking_user(environ, euid) == expected


@pytest.mark.parametrize("environ, named", [
    ({"SUDO_UID": "nobody", "SUDO_GID": "65534"}, "SUDO_UID is 'nobody'"),
    ({"SUDO_UID": "-1", "SUDO_GID": "65534"}, "SUDO_UID is '-1'"),
    ({"SUDO_UID": "65534"}, "SUDO_GID is unset"),
    ({"SUDO_UID": "65534", "SUDO_GID": ""}, "SUDO_GID is ''"),
])
def test_a_bad_sudo_id_is_one_line_naming_it(environ, named):
    with pytest.raises(UsageError) as err:
        invoking_user(environ, 0)
    message = str(err.value)
    assert message.startswith(named) and "expected the numeric id sudo sets" in message and "\n" not in message
    assert err.value.exit_code == 2


def test_missing_dirs_are_those_mkdir_p_makes_outermost_first(tmp_path):
    assert missing_dirs(tmp_path / "a" / "b") == (tmp_path / "a", tmp_path / "a" / "b")
    assert missing_dirs(tmp_path) == ()


def test_a_new_run_directory_and_the_dirs_made_on_the_way_go_to_the_user_modes_kept(tmp_path):
    base = tmp_path / "work"
    base.mkdir(mode=0o755)
    made = missing_dirs(base / "results" / "quickstart")                   # before anything is created
    (base / "results" / "quickstart").mkdir(parents=True)
    run_dir = base / "results" / "quickstart" / "run-1"
    write_run_like_dir(run_dir)
    outside = tmp_path / "outside.txt"
    outside.write_text("root's")
    (run_dir / "link").symlink_to(outside)                                 # never followed
    modes_before = {k: mode for k, (_, _, mode) in tree_of(base / "results").items()}

    done = hand_over(new_tree(run_dir, made), NOBODY)

    after = tree_of(base / "results")
    assert {k: (uid, gid) for k, (uid, gid, _) in after.items()} == {k: (65534, 65534) for k in after}
    assert {k: mode for k, (_, _, mode) in after.items()} == modes_before
    assert owner_and_mode(run_dir)[2] == 0o700 and owner_and_mode(run_dir / "records" / "ps.jsonl")[2] == 0o600
    assert owner_and_mode(base)[:2] == (0, 0)                              # existed before: left alone
    assert owner_and_mode(outside)[:2] == (0, 0)                           # a symlink's target is not ours
    assert done.handed == len(after) and done.failures == [] and done.problem == ""


def test_in_a_directory_that_existed_only_what_the_command_created_changes_owner(tmp_path):
    sweep_dir = tmp_path / "out" / "s"
    (sweep_dir / "points" / "p1").mkdir(parents=True)
    (sweep_dir / "points" / "p1" / "run.log").write_text("old\n")
    write_text_atomic(sweep_dir / "table.csv", "old\n")
    output = output_into(sweep_dir)
    # The command: appends to a file, replaces one, creates a point and a plot.
    with open(sweep_dir / "points" / "p1" / "run.log", "a") as log:
        log.write("new\n")
    write_text_atomic(sweep_dir / "table.csv", "new\n")
    (sweep_dir / "points" / "p2").mkdir()
    (sweep_dir / "points" / "p2" / "point.json").write_text("{}")
    (sweep_dir / "plots").mkdir()

    hand_over(output, NOBODY)

    owners = {k: uid for k, (uid, _, _) in tree_of(sweep_dir).items()}
    assert owners == {".": 0, "points": 0, "points/p1": 0, "points/p1/run.log": 0,
                      "table.csv": 65534, "points/p2": 65534, "points/p2/point.json": 65534, "plots": 65534}
    assert owner_and_mode(tmp_path / "out")[0] == 0


def test_what_another_user_owns_is_never_taken(tmp_path):
    run_dir = tmp_path / "run"
    write_run_like_dir(run_dir)
    os.chown(run_dir / "summary.json", 1234, 1234)
    hand_over(new_tree(run_dir), NOBODY)
    assert owner_and_mode(run_dir / "summary.json")[:2] == (1234, 1234)
    assert owner_and_mode(run_dir / "records")[:2] == (65534, 65534)


def test_without_sudo_nothing_changes(tmp_path, monkeypatch):
    sudo_env(monkeypatch, {})
    out = tmp_path / "results"
    with handing_over(output_into(out), say=pytest.fail):
        out.mkdir()
        write_run_like_dir(out / "run")
    assert set(uid for uid, _, _ in tree_of(out).values()) == {0}


def test_a_bad_sudo_uid_is_refused_before_the_command_writes(tmp_path, monkeypatch):
    sudo_env(monkeypatch, {"SUDO_UID": "x", "SUDO_GID": "65534"})
    with pytest.raises(UsageError, match="SUDO_UID is 'x'"):
        with handing_over(output_into(tmp_path / "results"), say=pytest.fail):
            (tmp_path / "results").mkdir()
    assert not (tmp_path / "results").exists()


def test_a_chown_that_fails_loses_nothing_masks_nothing_and_says_one_line(tmp_path, monkeypatch):
    sudo_env(monkeypatch, SUDO_NOBODY)

    def refuse(path, uid, gid, follow_symlinks=True):
        raise PermissionError(1, "Operation not permitted")

    monkeypatch.setattr(ownership.os, "chown", refuse)
    said = []
    run_dir = tmp_path / "run"
    with pytest.raises(RuntimeError, match="the run failed"):
        with handing_over(new_tree(run_dir), say=said.append):
            write_run_like_dir(run_dir)
            raise RuntimeError("the run failed")
    assert (run_dir / "summary.json").read_text() == "{}\n"
    assert len(said) == 1 and "\n" not in said[0]
    assert said[0].startswith(f"cannot give {run_dir} and 3 more to uid 65534: Operation not permitted")
    assert f"sudo chown -R 65534:65534 {run_dir}" in said[0]


class InterruptedRunner:
    """Writes one point's run directory, then Ctrl-C on the second point."""

    def __init__(self):
        self.calls = 0

    def __call__(self, scenario, out_root, target, stream):
        self.calls += 1
        if self.calls == 2:
            raise KeyboardInterrupt
        run_dir = Path(out_root) / scenario.name / "run-1"
        run_dir.mkdir(parents=True)
        (run_dir / "summary.json").write_text(json.dumps({"status": "ok", "distorted": False}))


def test_an_interrupted_sweep_through_sudo_leaves_what_it_wrote_to_the_user(tmp_path, monkeypatch):
    sudo_env(monkeypatch, SUDO_NOBODY)
    sweep_path = tmp_path / "sweep.yaml"
    sweep_path.write_text(f"version: 1\nname: s\nscenario: {REPO / 'scenarios' / 'quickstart.yaml'}\n"
                          f"axes: {{policy: [ps, atp]}}\n")
    spec = load_sweep(sweep_path)
    with pytest.raises(KeyboardInterrupt):
        run_sweep(spec, tmp_path / "out", executor=LocalExecutor(InterruptedRunner()),
                  progress=open(os.devnull, "w"))
    written = tree_of(tmp_path / "out")
    assert "s/table.csv" in written and any(k.endswith("summary.json") for k in written)
    assert {k for k, (uid, gid, _) in written.items() if (uid, gid) != (65534, 65534)} == set()
    assert owner_and_mode(tmp_path)[0] == 0


def test_report_html_through_sudo_gives_the_user_its_page_only(tmp_path, monkeypatch):
    run = write_run(tmp_path / "run")
    sudo_env(monkeypatch, SUDO_NOBODY)
    assert main(["report", str(run), "--html"]) == 0
    owners = {k: uid for k, (uid, _, _) in tree_of(run).items()}
    assert owners.pop("report.html") == 65534 and set(owners.values()) == {0}


def test_reproduce_through_sudo_gives_the_user_its_experiments_and_page_even_when_one_fails(tmp_path, monkeypatch):
    """The command's wiring (no experiment runs: each writes a file in its sweep directory, then one fails)."""
    sudo_env(monkeypatch, SUDO_NOBODY)
    ran = []

    def run_experiment(experiment, out_root, target, progress, rerun_distorted):
        sweep_dir = out_root / experiment.spec.name
        sweep_dir.mkdir(parents=True, exist_ok=True)
        (sweep_dir / "reproduce.json").write_text("{}")
        ran.append(experiment.name)
        raise KeyboardInterrupt

    monkeypatch.setattr(reproduce, "run_experiment", run_experiment)
    out = tmp_path / "results"
    assert main(["reproduce", "grid", "--out", str(out), "--page-dir", str(tmp_path / "pages")]) == 130
    assert ran == ["motivation"]
    assert {uid for uid, _, _ in tree_of(out).values()} == {65534}
    assert owner_and_mode(tmp_path)[0] == 0
