"""Whole runs of the quickstart on Mininet (root; these run in CI): on pyswitch, on ebpf, and on bmv2 for ps,
atp and goat where simple_switch and p4c are installed (CI installs them)."""

import json
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from support import require_bmv2, sigint_at_its_default

from testbed.dataplane.bmv2 import thrift_port_in_use
from testbed.dataplane.ebpf.switch import PIN_ROOT
from testbed.emulation.bmv2_node import thrift_ports
from testbed.emulation.orchestrator import run_scenario
from testbed.emulation.state import RunLock
from testbed.metrics.definitions import undefined_keys
from testbed.scenario import load_scenario

REPO = Path(__file__).resolve().parents[2]
QUICKSTART = REPO / "scenarios" / "quickstart.yaml"
MARKERS = ("testbed.dataplane.pyswitch", "testbed.agents.run", "testbed.metrics.iftop", "testbed.metrics.pcap",
           "mininet:")


def leftovers():
    links = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True).stdout
    interfaces = re.findall(r"^\d+: (s\d+-eth\d+|w\d+-eth\d+|ps-eth\d+)", links, re.M)
    procs = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True).stdout.splitlines()
    processes = [p for p in procs if any(m in p for m in MARKERS)]
    return interfaces, processes


def assert_clean():
    interfaces, processes = leftovers()
    assert not interfaces, f"interfaces left behind: {interfaces}"
    assert not processes, f"processes left behind: {processes}"


def inatb(*args, **kwargs):
    return subprocess.run([sys.executable, "-m", "testbed.cli", *args], cwd=REPO, capture_output=True, text=True,
                          timeout=300, **kwargs)


def tmp_sockets() -> set:
    """The sockets bmv2 leaves in /tmp by default (``/tmp/bmv2-<device id>-notifications.ipc``)."""
    return set(Path("/tmp").glob("bmv2-*-notifications.ipc"))


def check_quickstart_command(tmp_path, target, scheme):
    sockets_before = tmp_sockets()
    proc = inatb("run", str(QUICKSTART), "--out", str(tmp_path), "--target", target, "--set", "jobs.0.iterations=10",
                 "--set", f"policy={scheme}")
    assert proc.returncode == 0, proc.stderr
    assert tmp_sockets() <= sockets_before, "a switch left its notifications socket in /tmp"
    assert "aggregation exact" in proc.stderr
    run_dir = Path(proc.stdout.strip().splitlines()[-1])
    assert run_dir.parent.parent == tmp_path
    for name in ("scenario.yaml", "placement.json", "entries/s1.txt", "metrics.jsonl", "iterations.csv",
                 "summary.json", "plots/iteration_time.png", "plots/ps_ingress_rate.png", "logs/s1.log",
                 "logs/ps.log", "iftop/ps.txt"):
        assert (run_dir / name).exists(), name
    summary = json.loads((run_dir / "summary.json").read_text())
    for key in ("scenario", "target", "policy", "iterations", "aggregation_exact", "ps_ingress_bytes", "wall_s",
                "iteration_time_s", "comm_time_s", "seed", "versions", "git_commit", "distorted",
                "retransmission_ratio", "cpu"):
        assert key in summary, key
    assert summary["target"] == target and summary["status"] == "ok"
    assert summary["aggregation_exact"] is True
    assert summary["jobs"][0]["iterations_completed"] == 10
    assert "iteration 10/10" in proc.stderr
    planned = inatb("validate", str(QUICKSTART), "--target", target, "--set", "jobs.0.iterations=10",
                    "--set", f"policy={scheme}")
    assert planned.returncode == 0, planned.stderr
    plan_lines = planned.stdout.splitlines()[1:]           # after "<file>: valid": the plan, as the run printed it
    assert plan_lines and all(line in proc.stderr.splitlines() for line in plan_lines), (plan_lines, proc.stderr)
    assert "Total send and receive rate" in (run_dir / "iftop" / "ps.txt").read_text()
    assert_clean()
    return summary


def test_quickstart_runs_end_to_end_exactly_and_cleans_up(emulation, tmp_path):
    summary = check_quickstart_command(tmp_path, "pyswitch", "atp")
    assert undefined_keys(summary) == []                        # the metric reference documents every key
    assert summary["switches"]["s1"]["emitted"] > 0
    assert summary["switches"]["s1"]["result_released"] > 0     # ATP: the PS's RESULT frees the slot


def test_a_reader_that_goes_away_silences_the_display_not_the_run(emulation, tmp_path):
    """``inatb run ... 2>&1 | head -2``: once head has its lines and exits, the run's writes find the pipe
    closed. The run goes on to the end, exact, and exits 0 (it used to end "failed: Broken pipe")."""
    proc = subprocess.Popen([sys.executable, "-m", "testbed.cli", "run", str(QUICKSTART), "--out", str(tmp_path),
                             "--target", "pyswitch", "--set", "jobs.0.iterations=10"], cwd=REPO,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    proc.stdout.readline()                   # "building ...": the run is under way
    proc.stdout.close()                      # the reader goes away
    assert proc.wait(timeout=300) == 0
    (summary_path,) = tmp_path.glob("quickstart/*/summary.json")
    summary = json.loads(summary_path.read_text())
    assert (summary["status"], summary["error"], summary["aggregation_exact"]) == ("ok", None, True)
    assert summary["jobs"][0]["iterations_completed"] == 10
    assert_clean()


@pytest.mark.parametrize("scheme", ("ps", "atp", "goat"))
def test_quickstart_on_bmv2(scheme, emulation, tmp_path):
    """The quickstart on simple_switch running p4/ina.p4: exact, and nothing left (no simple_switch, no
    Thrift port in use, no firewall table)."""
    require_bmv2()
    summary = check_quickstart_command(tmp_path, "bmv2", scheme)
    assert summary["switches"]["s1"]["forwarded"] > 0
    assert not subprocess.run(["pgrep", "-f", "simple_switch"], capture_output=True).stdout
    assert not any(thrift_port_in_use(port) for port in thrift_ports(load_scenario(QUICKSTART).topology))
    tables = subprocess.run(["nft", "list", "tables"], capture_output=True, text=True).stdout
    assert "inatb_guard" not in tables


def test_quickstart_on_ebpf(emulation, tmp_path):
    """The quickstart on ina.bpf.c in the kernel: exact, and nothing left (no pinned program or map, no
    qdisc: the interfaces are gone). The packet suite runs every case of the program on it; the runs here
    (impairments and SwitchML below, PA-ATP's, Rina's and GOAT's testbeds beside) its integration."""
    summary = check_quickstart_command(tmp_path, "ebpf", "atp")
    assert summary["switches"]["s1"]["forwarded"] > 0
    assert not PIN_ROOT.exists() or not any(PIN_ROOT.iterdir())


@pytest.mark.parametrize("target", ("pyswitch", "bmv2"))
def test_atp_ps_ingress_is_at_most_30_percent_of_ps(target, emulation, tmp_path, quiet):
    if target == "bmv2":
        require_bmv2()
    ingress = {}
    for scheme in ("ps", "atp"):
        scenario = load_scenario(QUICKSTART, [f"policy={scheme}", "jobs.0.iterations=5"])
        result = run_scenario(scenario, out_root=tmp_path, target=target, stream=quiet)
        assert result.summary["aggregation_exact"], scheme
        ingress[scheme] = result.summary["ps_ingress_bytes"]
    assert ingress["atp"] <= 0.30 * ingress["ps"], ingress
    assert_clean()


@pytest.mark.parametrize("target", ("pyswitch", "bmv2", "ebpf"))
def test_sum_stays_exact_at_one_percent_loss(target, emulation, tmp_path, quiet):
    """1% loss, duplication and reordering on every link, applied by the P4 program's Egress on bmv2 and
    by pyswitch's model of it: the sums stay exact, and each target reports what its impairments did."""
    if target == "bmv2":
        require_bmv2()
    scenario = load_scenario(QUICKSTART, ["jobs.0.iterations=10",
                                          "impairments=[{link: all, drop: 0.01, duplicate: 0.01, reorder: 0.01}]"])
    result = run_scenario(scenario, out_root=tmp_path, target=target, stream=quiet)
    summary = result.summary
    impairment = summary["switches"]["s1"]["impairment"]
    assert len(impairment) == len(load_scenario(QUICKSTART).topology.links), impairment   # every s1 port
    dropped = sum(port["dropped"] for port in impairment.values())
    assert dropped > 0, "the impairment dropped nothing; the test would prove nothing"
    assert summary["impairment_drops"]["s1"] and sum(summary["impairment_drops"]["s1"].values()) == dropped
    assert summary["jobs"][0]["retransmitted_packets"] > 0
    assert summary["aggregation_exact"] is True
    assert_clean()


@pytest.mark.parametrize("target", ("pyswitch", "bmv2", "ebpf"))
def test_switchml_answers_retransmissions_from_its_shadow_copies_under_loss(target, emulation, tmp_path, quiet):
    """SwitchML at 2% loss on every link: RESULTs lost after the switch are answered by the switch from the
    shadow copy (those lost before it send the aggregate to the PS again), and every sum stays exact."""
    if target == "bmv2":
        require_bmv2()
    # 20 iterations: about 480 RESULT frames leave s1 toward workers, so P(none lost) = 0.98^480 < 1e-4.
    scenario = load_scenario(QUICKSTART, ["policy=switchml", "jobs.0.iterations=20",
                                          "impairments=[{link: all, drop: 0.02}]"])
    summary = run_scenario(scenario, out_root=tmp_path, target=target, stream=quiet).summary
    s1 = summary["switches"]["s1"]
    assert summary["jobs"][0]["retransmitted_packets"] > 0
    assert s1["shadow_answered"] > 0 and s1["stale_reclaimed"] > 0, s1
    assert summary["status"] == "ok" and summary["aggregation_exact"] is True
    assert_clean()


def interrupt_a_run(tmp_path, gaps_s):
    """Start a long quickstart run, wait until it iterates, then send SIGINT after each gap in turn."""
    proc = subprocess.Popen([sys.executable, "-m", "testbed.cli", "run", str(QUICKSTART), "--out", str(tmp_path),
                             "--target", "pyswitch", "--set", "jobs.0.iterations=100000", "--set", "run_timeout=300s"],
                            cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=sigint_at_its_default)
    try:
        deadline = time.monotonic() + 60
        while not any(p.stat().st_size for p in tmp_path.glob("quickstart/*/records/ps.jsonl")):
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "the run never started iterating"
            time.sleep(0.1)
        for gap_s in gaps_s:
            time.sleep(gap_s)
            if proc.poll() is None:
                proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    return proc.returncode, err


def test_ctrl_c_stops_the_run_and_leaves_the_machine_clean(emulation, tmp_path):
    code, err = interrupt_a_run(tmp_path, [0.0])
    assert code == 130, err
    assert "interrupted" in err and "Traceback" not in err
    summary = json.loads(next(tmp_path.glob("quickstart/*/summary.json")).read_text())
    assert summary["status"] == "interrupted" and summary["jobs"][0]["iterations_completed"] > 0
    assert_clean()


def test_ctrl_c_pressed_again_during_teardown_and_writing_loses_nothing(emulation, tmp_path):
    """Ctrl-C twice, 0.3 s apart and then again, as an impatient user would: the teardown and the result
    files are held until done, so summary.json and the plots are whole and say what happened."""
    code, err = interrupt_a_run(tmp_path, [0.0, 0.3, 0.3, 0.3])
    assert code == 130, err
    assert "Traceback" not in err
    (run_dir,) = tmp_path.glob("quickstart/*")
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["status"] == "interrupted" and summary["jobs"][0]["iterations_completed"] > 0
    for name in ("iterations.csv", "plots/iteration_time.png", "plots/ps_ingress_rate.png"):
        assert (run_dir / name).stat().st_size > 0, name
    assert not list(run_dir.rglob(".*.tmp*")), "a half-written file was left behind"
    assert_clean()


def test_second_run_is_refused_while_one_runs(emulation, tmp_path):
    lock = RunLock()
    lock.acquire("scenario held-by-test")
    try:
        proc = inatb("run", str(QUICKSTART), "--out", str(tmp_path), "--target", "pyswitch")
    finally:
        lock.release()
    assert proc.returncode == 6
    assert "another run is in progress" in proc.stderr and "held-by-test" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1
    assert not list(tmp_path.iterdir())


def test_invalid_scenario_fails_in_one_line_without_touching_the_network(emulation, tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text(QUICKSTART.read_text().replace("kind: explicit", "kind: torus"))
    proc = inatb("run", str(bad), "--out", str(tmp_path / "out"))
    assert proc.returncode == 2
    assert proc.stderr.count("\n") == 1 and "topology.kind" in proc.stderr and str(bad) in proc.stderr
    assert not (tmp_path / "out").exists()
    assert_clean()
