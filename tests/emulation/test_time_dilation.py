"""Time dilation in whole runs (testbed/dilation.py, testbed/budget.py): a scenario at time dilation 4 gives the
virtual-time metrics it gives at 1, the fidelity figure holds under dilation, and the papers' testbeds at 1/1000
scale run exact and undistorted at the dilation ``auto`` picks (GOAT's 8 workers with ResNet-50 on both targets,
PA-ATP's dumbbell without background); background TCP flows and timed injections run in virtual time; switches
sharing one pyswitch process give the metrics of a process each."""

import dataclasses
import json
import textwrap
from pathlib import Path

import pytest
from support import require_bmv2
from test_quickstart import assert_clean

from testbed import sim
from testbed.budget import packet_budget
from testbed.emulation.orchestrator import run_scenario
from testbed.fidelity import compare, format_fidelity
from testbed.metrics.distortion import HOST_DELAY_COMM_SHARE
from testbed.plan import AUTO_RERUN_FACTOR
from testbed.schemes import compute_placement
from testbed.scenario import load_scenario, parse_scenario

REPO = Path(__file__).resolve().parents[2]
GOAT_FIDELITY = REPO / "scenarios" / "papers" / "goat" / "fidelity.yaml"
GOAT_1000 = REPO / "scenarios" / "papers" / "goat" / "testbed-1000.yaml"
PA_ATP_FIDELITY = REPO / "scenarios" / "papers" / "pa-atp" / "fidelity.yaml"
#: The metrics the same scenario gives at time dilation 1 and 4 (virtual time both), within what the detector lets
#: an undistorted run wait for its processes: HOST_DELAY_COMM_SHARE of its communication.
EQUIVALENT = ("iteration_time_s", "comm_time_s", "ps_ingress_bytes", "gradient_sending_rate_bps")
#: How many times a run is tried before its test fails: on two shared cores the host now and then delays a run for a
#: while (a suite run on a 2-core AMD EPYC: GOAT's testbed at 1/1000 marked at the planner's N in two attempts in a
#: row on bmv2 and on ebpf, where four runs of this file, alone or after other tests, passed, bmv2 once at its second
#: attempt), which the mark rightly reports; the planner's N, or the equivalence of two dilations, is wrong only if
#: it keeps happening.
ATTEMPTS = 3


def run(scenario, out, target="pyswitch", quiet=None):
    summary = run_scenario(scenario, out_root=out, target=target, stream=quiet).summary
    assert summary["status"] == "ok" and summary["aggregation_exact"], summary["error"]
    assert_clean()
    return summary


def apart(a: dict, b: dict) -> dict:
    """The metrics of ``EQUIVALENT`` on which two summaries differ by more than ``HOST_DELAY_COMM_SHARE``."""
    return {k: (a[k], b[k]) for k in EQUIVALENT
            if abs(a[k] - b[k]) > HOST_DELAY_COMM_SHARE * max(abs(a[k]), abs(b[k]))}


def test_dilation_four_gives_the_virtual_time_metrics_of_dilation_one(emulation, tmp_path, quiet):
    # GOAT's testbed at the dilation the planner picks for this machine (1 on two cores of the reference
    # machine; 2 on one core, where at 1 the run reads 16% slow) against four times that: the same
    # virtual-time metrics. Twelve processes sharing the cores make a run's times vary, so a pair outside
    # the bound is run again (ATTEMPTS) before it fails: in a suite on a 2-core AMD EPYC one pair read 0.232
    # and 0.208 s of communication, the next 0.246 and 0.208, neither run marked.
    scenario = load_scenario(GOAT_FIDELITY, ["policy=atp"])
    base = packet_budget(scenario, "pyswitch").auto_factor()
    simulation = sim.evaluate(scenario, compute_placement(scenario))
    misses = []
    for attempt in range(ATTEMPTS):
        plain = run(dataclasses.replace(scenario, time_dilation=base), tmp_path / f"n1-{attempt}", quiet=quiet)
        slowed = run(dataclasses.replace(scenario, time_dilation=4 * base), tmp_path / f"n4-{attempt}", quiet=quiet)
        assert (plain["time_dilation"], slowed["time_dilation"]) == (base, 4 * base)
        assert not plain["distorted"], plain["distortion_reasons"]          # else the planner chose too low
        assert not slowed["distorted"], slowed["distortion_reasons"]
        # It did run slower: four times the iterations' wall time, less the fixed start and end (about 3 s
        # here), is three times their time at the base more; two times is asked.
        assert slowed["wall_s"] - plain["wall_s"] > 2 * base * plain["iterations"] * plain["iteration_time_s"]
        fidelity = compare(slowed, simulation)
        assert fidelity["all_within"], format_fidelity(fidelity)      # the fidelity figure holds at 4 too
        if not (missed := apart(plain, slowed)):
            return
        misses.append(missed)
    raise AssertionError(f"time dilation {base:g} and {4 * base:g} differ by more than {HOST_DELAY_COMM_SHARE:.0%} "
                         f"(values at "
                         f"{base:g}, at {4 * base:g}): {misses}")


def check_auto_at_1_1000(scenario, tmp_path, target, quiet):
    """``auto`` picks the planner's N (doubled per host-bound run before the last: testbed.plan.rerun_dilation),
    and the run is exact, undistorted and within the fidelity bounds. A
    distorted run is run again (``ATTEMPTS``) before it fails: on two cores a stall of the switch process now and
    then is the host's, which the mark rightly reports (bmv2 in the full suite: 2.1% of fragments resent
    spuriously in one of five suite runs, 0-0.6% in four runs alone); the planner's N is wrong only if it keeps
    happening."""
    chosen = packet_budget(scenario, target).auto_factor()
    assert chosen > 1
    for attempt in range(ATTEMPTS):
        summary = run(scenario, tmp_path / f"attempt-{attempt}", target, quiet)
        # the planner's N, or twice it per host-bound run before it (testbed.plan.rerun_dilation)
        earlier = summary["superseded_runs"]
        assert [earlier_run["time_dilation"] for earlier_run in earlier] + [summary["time_dilation"]] == \
            [chosen * AUTO_RERUN_FACTOR ** i for i in range(len(earlier) + 1)]
        assert summary["packet_budget"]["warnings"] == []
        if not summary["distorted"]:
            break
    assert not summary["distorted"], summary["distortion_reasons"]
    fidelity = compare(summary, sim.evaluate(scenario, compute_placement(scenario)))
    assert fidelity["all_within"], format_fidelity(fidelity)
    return summary


@pytest.mark.parametrize("target", ("pyswitch", "bmv2", "ebpf"))
def test_goats_testbed_at_1_1000_runs_exact_and_undistorted_at_the_dilation_auto_picks(target, emulation, tmp_path,
                                                                                       quiet):
    if target == "bmv2":
        require_bmv2()
    scenario = load_scenario(GOAT_1000)
    summary = check_auto_at_1_1000(scenario, tmp_path, target, quiet)
    assert scenario.jobs[0].gradient_bytes > 100_000 and summary["jobs"][0]["fragments_sent"] == 6 * 8 * 403


def test_pa_atps_testbed_at_1_1000_without_background_holds_the_fidelity_bounds(emulation, tmp_path, quiet):
    # Its fidelity scenario: the testbed without background and without compute time, so both jobs
    # communicate at once, as the model has them (with compute time their iterations interleave and a job
    # takes more than its fair share of the shared paths).
    scenario = load_scenario(PA_ATP_FIDELITY, ["scale=0.001", "time_dilation=auto", "jobs.0.iterations=5",
                                               "jobs.1.iterations=5"])
    check_auto_at_1_1000(scenario, tmp_path, "pyswitch", quiet)


BACKGROUND = textwrap.dedent("""\
    version: 1
    name: dilated-background
    scale: 1
    time_dilation: 3
    run_timeout: 60s
    topology: {kind: dumbbell, hosts_left: 3, hosts_right: 3, link_rate: 10Mbps}
    jobs: [{workers: [hl1, hl2], ps: hr1, policy: atp, gradient_size: 40kB, iterations: 6, compute_time: 50ms}]
    background: [{distribution: hadoop, load: 0.3, senders: [hl3], receivers: [hr3], duration: 1s,
                  max_flow_size: 200kB}]
    stragglers:
      rate_changes: [{host: hl2, at: 0.2s, duration: 0.3s, rate: 5Mbps}]
    """)


def test_background_flows_and_injections_run_in_virtual_time(emulation, tmp_path, quiet):
    """The background's window, its flows' completion times and the injection's events are virtual: the window
    is the scenario's 1 s, the rate change starts 0.2 s and ends 0.5 s after the start signal, though the wall
    clock saw three times that (the background hosts' minimum TCP RTO is dilated per route on the way)."""
    summary = run(parse_scenario(BACKGROUND, "dilated-background.yaml"), tmp_path, quiet=quiet)
    assert summary["time_dilation"] == 3.0
    (bg,) = summary["background"]
    assert bg["window_s"] == pytest.approx(1.0)
    assert bg["completed_count"] >= 1 and 0 < bg["fct_p50_s"] < 1.0
    run_dir = next((tmp_path / "dilated-background").iterdir())
    events = [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines()]
    start, end = ([e for e in events if e["kind"] == "rate_change" and e["phase"] == phase]
                  for phase in ("start", "end"))
    assert start[0]["t_s"] == pytest.approx(0.2, abs=0.05) and end[0]["t_s"] == pytest.approx(0.5, abs=0.05)
    assert end[0]["wall"] - start[0]["wall"] == pytest.approx(0.9, abs=0.15)


def test_switches_sharing_one_process_give_the_metrics_of_a_process_each(emulation, tmp_path, quiet):
    """GOAT's testbed with its three switches in one pyswitch process (``switch.processes: 1``) and in one
    each, both at the larger of the dilations the planner picks for them on this machine (1 on two cores,
    2 on one): both exact and undistorted, the same virtual-time metrics within ``HOST_DELAY_COMM_SHARE``; the
    shared process is one CPU entry and its log holds each switch's final counters."""
    shared_scenario, apart_scenario = (load_scenario(GOAT_FIDELITY, ["policy=atp", f"switch.processes={processes}"])
                                       for processes in ("1", "per-switch"))
    factor = max(packet_budget(s, "pyswitch").auto_factor() for s in (shared_scenario, apart_scenario))
    misses = []
    for attempt in range(ATTEMPTS):
        shared = run(dataclasses.replace(shared_scenario, time_dilation=factor), tmp_path / f"one-{attempt}",
                     quiet=quiet)
        apart_runs = run(dataclasses.replace(apart_scenario, time_dilation=factor), tmp_path / f"each-{attempt}",
                         quiet=quiet)
        assert shared["packet_budget"]["switch_processes"] == [["s1", "s2", "s3"]]
        assert apart_runs["packet_budget"]["switch_processes"] == [["s1"], ["s2"], ["s3"]]
        switch_cpu = sorted(name for name in shared["cpu"]["processes"] if name.startswith("switch"))
        assert switch_cpu == ["switch process of s1 and 2 more"]
        assert sorted(name for name in apart_runs["cpu"]["processes"] if name.startswith("switch")) == [
            "switch s1", "switch s2", "switch s3"]
        assert not shared["distorted"] and not apart_runs["distorted"], (shared["distortion_reasons"],
                                                                         apart_runs["distortion_reasons"])
        log = next((tmp_path / f"one-{attempt}").glob("*/*/logs/pyswitch-s1-and-2-more.log")).read_text()
        finals = [json.loads(line)["switch"] for line in log.splitlines() if '"final_stats"' in line]
        assert finals == ["s1", "s2", "s3"]
        if not (missed := apart(apart_runs, shared)):
            return
        misses.append(missed)
    raise AssertionError(f"one process and a process per switch differ by more than {HOST_DELAY_COMM_SHARE:.0%} "
                         f"(values apart, shared): {misses}")
