"""Malformed scenario input: one line on stderr, a non-zero exit, no traceback, nothing created.

Every case goes through the CLI's ``main()`` (``inatb validate``) in a fresh
working directory; a few also run as a subprocess, as a user would. What would
fail only once the network is built is refused here too, and scenarios that
only the flow-level simulator can take are named as such by ``validate`` while
``simulate`` keeps accepting them.
"""

import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from testbed import cli
from testbed.scenario import (HTB_MAX_RATE_BPS, MAX_SCENARIO_BYTES, emulation_limits, load_scenario,
                              require_emulable)
from testbed.errors import ScenarioError

REPO = Path(__file__).resolve().parents[2]
PAPERS = REPO / "scenarios" / "papers"

BASE = """\
version: 1
name: t
scale: 0.001
topology:
  kind: explicit
  switches: [s1]
  hosts: [w1, w2, ps]
  links: [[w1, s1], [w2, s1], [ps, s1]]
jobs:
  - name: j
    workers: [w1, w2]
    ps: ps
    policy: atp
"""

BILLION_LAUGHS = "lol0: &l0 [lol]\n" + "".join(
    f"lol{i}: &l{i} [{', '.join([f'*l{i - 1}'] * 9)}]\n" for i in range(1, 10)) + "version: 1\n"


def with_lines(*lines, base=BASE):
    """BASE with extra top-level lines (a later key replaces nothing: duplicates are refused)."""
    return base + "".join(line + "\n" for line in lines)


def replace(old, new, base=BASE):
    assert old in base
    return base.replace(old, new)


def job(line):
    return replace("    policy: atp\n", f"    policy: atp\n    {line}\n")


#: (id, file content (str or bytes), --set overrides, a fragment the one-line error must contain)
CASES = [
    # --- the file itself ---------------------------------------------------------------------
    ("binary", bytes(range(256)) * 8, (), "not UTF-8"),
    ("invalid-utf8", b"version: 1\nname: caf\xe9\n", (), "not UTF-8"),
    ("nul-char", "version: 1\x00\n", (), ":1: (file): not valid YAML: character #x0000"),
    ("control-char", "version: 1\nname: \x07\n", (), "not valid YAML"),
    ("deep-lists", "[" * 100_000, (), "nested deeper"),
    ("deep-lists-closed", "[" * 5000 + "]" * 5000, (), "nested deeper"),
    ("deep-mappings", "a: {" * 10_000, (), "nested deeper"),
    ("deep-block", "".join(" " * i + "a:\n" for i in range(500)), (), "nested deeper"),
    ("billion-laughs", BILLION_LAUGHS, (), "values once aliases are expanded"),
    ("many-aliases", "a: &a 1\nb: [" + ", ".join(["*a"] * 500) + "]\n", (), "aliases"),
    ("alias-inside-itself", "version: &a [*a]\n", (), "nested deeper"),
    ("too-large", "# padding\n" * (MAX_SCENARIO_BYTES // 10 + 1), (), "larger than 1024 KiB"),
    ("python-tag", with_lines("seed: !!python/object/apply:os.system [echo]"), (), "tag"),
    ("python-scalar-tag", with_lines("seed: !!python/name:os.system"), (), "tag"),
    ("local-tag", with_lines("seed: !mine 3"), (), "tag"),
    ("binary-tag", with_lines("description: !!binary aGVsbG8="), (), "tag"),
    ("complex-key", with_lines("? [a, b]\n: 1"), (), "key must be a plain name"),
    ("duplicate-key", with_lines("scale: 0.01"), (), "key given twice"),
    ("two-documents", BASE + "---\nversion: 1\n", (), "not valid YAML"),
    ("bad-yaml", "version: [1\n", (), "not valid YAML"),
    ("huge-int-literal", with_lines("seed: 1" + "0" * 5000), (), "seed: not valid YAML"),
    ("top-level-list", "- 1\n", (), "mapping at the top level"),
    ("empty", "", (), "empty"),
    ("only-comment", "# nothing\n", (), "empty"),
    ("bad-date", with_lines("description: 2020-13-45"), (), "description: not valid YAML"),
    ("section-not-mapping", with_lines("switch: [1, 2]"), (), "switch"),
    ("list-not-list", with_lines("impairments: 5"), (), "impairments"),
    # --- numbers -------------------------------------------------------------------------------
    ("scale-nan", replace("scale: 0.001", "scale: .nan"), (), "scale: expected a finite number"),
    ("scale-inf", replace("scale: 0.001", "scale: .inf"), (), "scale: expected a finite number"),
    ("scale-overflow", replace("scale: 0.001", "scale: 1.0e+400"), (), "scale: expected a finite number"),
    ("scale-zero", replace("scale: 0.001", "scale: 0"), (), "scale: expected a number > 0"),
    ("scale-negative", replace("scale: 0.001", "scale: -0.5"), (), "scale: expected a number > 0"),
    ("scale-large", replace("scale: 0.001", "scale: 1.0e+300"), (), "scale: expected a number <= 1"),
    ("scale-bool", replace("scale: 0.001", "scale: yes"), (), "scale: expected a number"),
    ("seed-negative", with_lines("seed: -1"), (), "seed"),
    ("seed-huge", with_lines("seed: 1" + "0" * 40), (), "seed: expected an integer"),
    ("version-bool", replace("version: 1", "version: true"), (), "version"),
    ("link-rate-overflow", replace("kind: explicit", "kind: explicit\n  link_rate: 1e400Gbps"), (),
     "topology.link_rate: '1e400Gbps' is not a finite rate"),
    ("link-rate-absurd", replace("kind: explicit", "kind: explicit\n  link_rate: 1e30Gbps"), (),
     "topology.link_rate: expected a rate > 0 and at most"),
    ("link-rate-zero", replace("kind: explicit", "kind: explicit\n  link_rate: 0Gbps"), (),
     "topology.link_rate: expected a rate > 0"),
    ("link-rate-negative", replace("kind: explicit", "kind: explicit\n  link_rate: -5Gbps"), (),
     "topology.link_rate"),
    ("link-rate-nan", replace("kind: explicit", "kind: explicit\n  link_rate: .nan"), (), "topology.link_rate"),
    ("link-rate-long", replace("kind: explicit", "kind: explicit\n  link_rate: " + "1" * 100_000 + "x"), (),
     "topology.link_rate"),
    ("link-rate-above-htb", replace("kind: explicit", "kind: explicit\n  link_rate: 2000Gbps"), (),
     "exceeds what htb shapes (1000 Mb/s); lower scale"),
    # 200GBps is bytes: 1.6 Tb/s, 1,600 Mb/s at scale 0.001 (200Gbps is 200 Mb/s, which htb shapes)
    ("link-rate-bytes-above-htb", replace("kind: explicit", "kind: explicit\n  link_rate: 200GBps"), (),
     "scenario.yaml:6: topology.link_rate: valid for `inatb simulate` only: 1,600 Mb/s on link w1-s1 exceeds"),
    ("set-link-rate-bytes-above-htb", BASE, ("topology.link_rate=200GB/s",),
     "error: --set topology.link_rate=200GB/s: valid for `inatb simulate` only: 1,600 Mb/s on link w1-s1 exceeds"),
    ("link-rate-neither-bits-nor-bytes", replace("kind: explicit", "kind: explicit\n  link_rate: 10GBPS"), (),
     "scenario.yaml:6: topology.link_rate: unknown unit 'GBPS' in '10GBPS'; expected one of bps"),
    ("own-link-rate-above-htb", replace("[ps, s1]]", "[ps, s1, 5Tbps]]"), (),
     "topology.links.2: valid for `inatb simulate` only"),
    ("own-link-rate-zero", replace("[ps, s1]]", "[ps, s1, 0bps]]"), (), "topology.links.2: expected a rate > 0"),
    ("core-rate-nan", """\
version: 1
scale: 0.001
topology: {kind: dumbbell, core_rate: .nan}
jobs: [{workers: [h1], ps: h3}]
""", (), "topology.core_rate"),
    ("link-rate-below-htb", replace("kind: explicit", "kind: explicit\n  link_rate: 100kbps"), (),
     "topology.link_rate: valid for `inatb simulate` only: 100 b/s on link w1-s1 is below what htb shapes (1 kb/s)"),
    ("scale-as-text", replace("scale: 0.001", "scale: 1e-3"), (), "YAML reads 1e-3 as text"),
    ("many-values", "- 0\n" * 30_000, (), "more than 20,000 values"),
    ("run-timeout-zero", with_lines("run_timeout: 0s"), (), "run_timeout: expected a duration > 0"),
    ("run-timeout-huge", with_lines("run_timeout: 1e30s"), (), "run_timeout: expected a duration > 0 and at most"),
    ("run-timeout-overflow", with_lines("run_timeout: 1e400h"), (), "run_timeout: '1e400h' is not a finite"),
    ("retransmit-timeout-zero", job("retransmit_timeout: 0s"), (),
     "jobs.0.retransmit_timeout: expected a duration > 0"),
    ("compute-time-huge", job("compute_time: 1e12s"), (), "jobs.0.compute_time"),
    ("compute-time-negative", job("compute_time: -1s"), (), "jobs.0.compute_time"),
    ("iterations-zero", job("iterations: 0"), (), "jobs.0.iterations: expected an integer in [1,"),
    ("iterations-huge", job("iterations: 1000000000000"), (), "jobs.0.iterations"),
    ("iterations-nan", job("iterations: .nan"), (), "jobs.0.iterations: expected an integer"),
    ("window-zero", job("window: 0"), (), "jobs.0.window"),
    ("window-huge", job("window: 99999999999"), (), "jobs.0.window"),
    ("slots-zero", with_lines("switch: {slots: 0}"), (), "switch.slots"),
    ("slots-huge", with_lines("switch: {slots: 99999999999}"), (), "switch.slots"),
    ("lanes-zero", with_lines("switch: {lanes: 0}"), (), "switch.lanes"),
    ("lanes-huge", with_lines("switch: {lanes: 100000}"), (), "switch.lanes"),
    ("queue-depth-negative", with_lines("switch: {queue_depth: -1}"), (), "switch.queue_depth"),
    ("aggregation-capacity-zero", with_lines("switch: {aggregation_capacity: 0Gbps}"), (),
     "switch.aggregation_capacity"),
    ("aggregation-capacity-absurd", with_lines("switch: {aggregation_capacity: 1e30Gbps}"), (),
     "switch.aggregation_capacity"),
    ("gradient-bound-nan", job("gradient_bound: .nan"), (), "jobs.0.gradient_bound: expected a finite number"),
    ("gradient-bound-inf", job("gradient_bound: .inf"), (), "jobs.0.gradient_bound: expected a finite number"),
    ("gradient-bound-zero", job("gradient_bound: 0"), (), "jobs.0.gradient_bound"),
    ("gradient-bound-huge", job("gradient_bound: 1.0e+300"), (), "jobs.0.gradient_bound: 2 workers x bound"),
    ("gradient-size-absurd", job("gradient_size: 1e15MB"), (), "jobs.0.gradient_size"),
    ("gradient-size-fragments", job("gradient_size: 10TB"), (),
     "fragments of 64 lanes per worker per iteration after scale; at most 10,000,000"),
    ("gradient-size-zero", job("gradient_size: 0B"), (), "jobs.0.gradient_size: expected a size > 0"),
    ("submodel-elements-huge", job("submodel_elements: [1" + "0" * 30 + "]"), (), "jobs.0.submodel_elements.0"),
    ("submodel-elements-fragments", job("submodel_elements: [100000000000000]"), (), "10,000,000"),
    ("submodels-huge", job("submodels: 1000000"), (), "jobs.0.submodels"),
    ("ps-memory-nan", job("ps_memory: .nan"), (), "jobs.0.ps_memory"),
    ("drop-nan", with_lines("impairments: [{link: all, drop: .nan}]"), (), "impairments.0.drop: expected a finite"),
    ("drop-large", with_lines("impairments: [{link: all, drop: 0.9}]"), (), "impairments.0.drop"),
    ("duplicate-inf", with_lines("impairments: [{link: all, duplicate: .inf}]"), (), "impairments.0.duplicate"),
    ("reorder-negative", with_lines("impairments: [{link: all, reorder: -0.1}]"), (), "impairments.0.reorder"),
    ("impairment-link-unhashable", with_lines("impairments: [{link: [[w1], s1]}]"), (), "impairments.0.link"),
    ("background-load-nan", replace("hosts: [w1, w2, ps]", "hosts: [w1, w2, ps, b1, b2]",
                                    replace("[ps, s1]]", "[ps, s1], [b1, s1], [b2, s1]]",
                                            with_lines("background: [{load: .nan}]"))), (),
     "background.0.load: expected a finite number"),
    ("background-load-zero", with_lines("background: [{load: 0}]"), (), "background.0.load"),
    ("background-distribution-missing-file", with_lines("background: [{load: 0.5, distribution: /nonexistent.txt}]"),
     (), "background.0.distribution"),
    ("background-distribution-list", with_lines("background: [{load: 0.5, distribution: [a]}]"), (),
     "background.0.distribution"),
    ("background-bottleneck-unhashable",
     with_lines("background: [{load: 0.5, senders: w1, receivers: w2, bottleneck: [[w1], s1]}]"), (),
     "background.0.bottleneck"),
    ("delay-mean-huge", with_lines("stragglers: {compute_delay: [{mean: 1e30s}]}"), (),
     "stragglers.compute_delay.0.mean"),
    ("delay-value-negative", with_lines("stragglers: {compute_delay: [{distribution: fixed, value: -1s}]}"), (),
     "stragglers.compute_delay.0.value"),
    ("delays-not-list", with_lines("stragglers: {compute_delay: 5}"), (), "stragglers.compute_delay"),
    ("delay-worker-twice", with_lines("stragglers: {compute_delay: [{mean: 1ms}, {workers: [w2], mean: 5ms}]}"), (),
     "stragglers.compute_delay.1.workers: w2 already has a compute delay (stragglers.compute_delay.0)"),
    ("rate-change-zero", with_lines("stragglers: {rate_changes: [{host: w1, rate: 0Gbps, duration: 1s}]}"), (),
     "stragglers.rate_changes.0.rate"),
    ("rate-change-duration-zero", with_lines("stragglers: {rate_changes: [{host: w1, rate: 1Gbps, duration: 0s}]}"),
     (), "stragglers.rate_changes.0.duration"),
    ("rate-change-above-htb", with_lines("stragglers: {rate_changes: [{host: w1, rate: 5Tbps, duration: 1s}]}"), (),
     "stragglers.rate_changes.0.rate: valid for `inatb simulate` only"),
    ("pause-worker-unhashable", with_lines("stragglers: {pauses: [{worker: [w1], duration: 1s}]}"), (),
     "stragglers.pauses.0.worker"),
    ("heterogeneous-nan", with_lines("stragglers: {heterogeneous_links: {range: [.nan, 1Gbps]}}"), (),
     "stragglers.heterogeneous_links.range.0"),
    ("sample-interval-zero", with_lines("metrics: {sample_interval: 0s}"), (), "metrics.sample_interval"),
    ("iftop-interfaces-int", with_lines("metrics: {iftop_interfaces: 5}"), (), "metrics.iftop_interfaces"),
    ("iftop-interfaces-unhashable", with_lines("metrics: {iftop_interfaces: [[w1]]}"), (),
     "metrics.iftop_interfaces.0"),
    ("policy-option-nan",
     replace("policy: atp", "policy: goat-async\n    policy_options: {goat-async: {loss_gap: .nan}}"),
     (), "loss_gap: expected a finite number"),
    ("policy-option-time-limit-zero",
     replace("policy: atp", "policy: goat\n    policy_options: {goat: {time_limit: 0s}}"),
     (), "time_limit"),
    ("worker-start-huge", with_lines("simulation: {worker_start: {w1: 99999999999999}}"), (),
     "simulation.worker_start.w1"),
    ("programmable-unhashable", replace("kind: explicit", "kind: explicit\n  programmable: [[s1]]"), (),
     "topology.programmable.0"),
    ("aggregation-switches-int", job("aggregation_switches: 5"), (), "jobs.0.aggregation_switches"),
    ("aggregation-switches-unhashable", job("aggregation_switches: [[s1]]"), (), "jobs.0.aggregation_switches.0"),
    ("link-end-unhashable", replace("[ps, s1]]", "[[ps], s1]]"), (), "topology.links.2"),
    ("topology-kind-unhashable", replace("kind: explicit", "kind: [explicit]"), (), "topology.kind"),
    ("policy-unhashable", replace("policy: atp", "policy: {a: 1}"), (), "jobs.0.policy"),
    ("model-not-text", replace("policy: atp", "policy: atp\n    model: [resnet18]"), (), "jobs.0.model"),
    # --- names ----------------------------------------------------------------------------------
    ("name-long", replace("name: t", "name: " + "n" * 300), (), "name: expected 1-64 letters"),
    ("name-dotdot", replace("name: t", "name: '..'"), (), "name: expected"),
    ("name-hidden", replace("name: t", "name: .t"), (), "name: expected"),
    ("name-slash", replace("name: t", "name: a/b"), (), "name: expected"),
    ("name-nul", replace("name: t", 'name: "a\\0b"'), (), "name: expected"),
    ("name-newline", replace("name: t", 'name: "a\\nb"'), (), "name: expected"),
    ("name-int", replace("name: t", "name: 5"), (), "name: expected"),
    ("job-name-traversal", replace("name: j", "name: ../../etc"), (), "jobs.0.name: expected"),
    ("host-name-non-ascii", BASE.replace("w1", "wé"), (), "topology.hosts.0: expected 1-10 ASCII letters"),
    ("host-name-long", BASE.replace("w1", "w" * 11), (), "topology.hosts.0"),
    ("host-name-digit-first", BASE.replace("w1", "1w"), (), "topology.hosts.0"),
    ("host-name-int", BASE.replace("hosts: [w1, w2, ps]", "hosts: [5, w2, ps]"), (), "topology.hosts"),
    ("switch-name-non-ascii", BASE.replace("s1", "s²"), (), "topology.switches.0"),
    ("switch-name-dict-null", replace("switches: [s1]", "switches: [{programmable: true}]"), (),
     "topology.switches.0.name"),
    ("switch-name-dash", BASE.replace("s1", "s-1"), (), "topology.switches.0"),
    # --- --set ----------------------------------------------------------------------------------
    ("set-yaml-error", BASE, ("scale=[1,2",), "error: --set scale=[1,2: not valid YAML"),
    ("set-python-tag", BASE, ("jobs.0=!!python/object/apply:os.system [echo]",),
     "error: --set jobs.0=!!python/object/apply:os.system [echo]: tag"),
    ("set-undefined-alias", BASE, ("jobs.0.iterations=*undefined",),
     "error: --set jobs.0.iterations=*undefined: not valid YAML"),
    ("set-into-scalar", BASE, ("jobs.0.workers.0.x=1",),
     "error: --set jobs.0.workers.0.x=1: jobs.0.workers.0 is a value ('w1'), not a mapping"),
    ("set-into-number", BASE, ("scale.x=1",), "error: --set scale.x=1: scale is a value"),
    ("set-index-out-of-range", BASE, ("jobs.7.x=1",), "error: --set jobs.7.x=1: jobs.7: index 7 out of range"),
    ("set-unicode-digit", BASE, ("jobs.²=1",), "index ² out of range"),
    ("set-empty-key", BASE, ("=1",), "error: --set =1: expected a dotted path"),
    ("set-empty-segment", BASE, ("jobs..x=1",), "expected a dotted path"),
    ("set-no-equals", BASE, ("scale",), "error: --set scale: expected key=value"),
    ("set-unknown-key", BASE, ("jobs.0.iterationz=3",), "error: --set jobs.0.iterationz=3: unknown key; did you mean "
                                                         "iterations?"),
    ("set-policy-shortcut", BASE, ("policy=nope",), "error: --set policy=nope: jobs.0.policy: unknown scheme 'nope'"),
    ("set-nan", BASE, ("scale=.nan",), "error: --set scale=.nan: expected a finite number"),
    ("set-deep", BASE, ("scale=" + "[" * 10_000,), "--set scale"),
    ("set-billion-laughs", BASE, ("jobs.0.x={" + BILLION_LAUGHS.replace("\n", ", ")[:-2] + "}",),
     "--set jobs.0.x"),
    ("set-name-slash", BASE, ("name=a/b",), "error: --set name=a/b: expected"),
]


def run_cli(argv, capsys):
    """``inatb ARGV`` in-process -> (exit code, stdout, stderr)."""
    code = cli.main(argv)
    out, err = capsys.readouterr()
    return code, out, err


def assert_one_line_error(code, err, fragment, command="validate"):
    assert code == 2, err
    assert "Traceback" not in err and "internal error" not in err
    assert err.endswith("\n") and err.count("\n") == 1, err
    assert err.startswith(f"inatb {command}: error: "), err
    assert fragment in err, err


@pytest.fixture
def workdir(tmp_path, monkeypatch):
    """A fresh current directory holding only the input files; the test checks nothing else appears."""
    monkeypatch.chdir(tmp_path)
    return tmp_path


def tree(root: Path) -> set:
    return {str(p.relative_to(root)) for p in root.rglob("*")}


@pytest.mark.parametrize("case_id, content, overrides, fragment", CASES, ids=[c[0] for c in CASES])
def test_malformed_input_is_one_line_and_creates_nothing(workdir, capsys, case_id, content, overrides, fragment):
    path = workdir / "scenario.yaml"
    path.write_bytes(content if isinstance(content, bytes) else content.encode())
    before = tree(workdir)
    argv = ["validate", str(path)] + [arg for item in overrides for arg in ("--set", item)]
    started = time.monotonic()
    code, out, err = run_cli(argv, capsys)
    assert time.monotonic() - started < 10, "must return promptly"
    assert_one_line_error(code, err, fragment)
    assert out == ""
    assert tree(workdir) == before


def test_error_lines_name_file_line_and_field(workdir, capsys):
    path = workdir / "s.yaml"
    path.write_text(replace("scale: 0.001", "scale: .nan"))
    code, _, err = run_cli(["validate", str(path)], capsys)
    assert code == 2
    assert re.fullmatch(rf"inatb validate: error: {re.escape(str(path))}:3: scale: expected a finite number, "
                        r"got nan\n", err), err


def test_a_missing_file_and_a_directory_are_one_line(workdir, capsys):
    for target in (workdir / "absent.yaml", workdir):
        code, _, err = run_cli(["validate", str(target)], capsys)
        assert_one_line_error(code, err, "cannot read")


def test_the_file_name_need_not_be_a_scenario_name(workdir, capsys):
    path = workdir / ".my scenario (copy).yaml"
    path.write_text(BASE.replace("name: t\n", ""))
    code, out, err = run_cli(["validate", str(path)], capsys)
    assert code == 0, err
    assert load_scenario(path).name == "my-scenario-copy-"


def test_a_scenario_at_the_htb_ceiling_is_valid(workdir, capsys):
    path = workdir / "s.yaml"
    path.write_text(replace("kind: explicit", f"kind: explicit\n  link_rate: {HTB_MAX_RATE_BPS / 1e6:g}Gbps"))
    code, out, err = run_cli(["validate", str(path)], capsys)
    assert code == 0 and err == "", err
    assert out.startswith(f"{path}: valid")


def test_simulate_refuses_malformed_input_in_one_line_too(workdir, capsys):
    path = workdir / "s.yaml"
    path.write_text("[" * 100_000)
    code, _, err = run_cli(["simulate", str(path)], capsys)
    assert_one_line_error(code, err, "nested deeper", command="simulate")
    code, _, err = run_cli(["simulate", str(PAPERS / "goat" / "motivation.yaml"), "--set", "scale=.nan"], capsys)
    assert_one_line_error(code, err, "--set scale=.nan: expected a finite number", command="simulate")


# --- valid for the simulator only ---------------------------------------------------------------

@pytest.mark.parametrize("paper, fragment", [
    ("goat", "topology.link_rate: valid for `inatb simulate` only: 100,000 Mb/s on link w1-s1 exceeds what htb "
             "shapes (1000 Mb/s); lower scale"),
    ("grid", "valid for `inatb simulate` only: 3,000 Mb/s"),
    ("inart", "valid for `inatb simulate` only: 6,000 Mb/s"),
])
def test_motivating_examples_are_valid_for_simulate_only(workdir, capsys, paper, fragment):
    path = PAPERS / paper / "motivation.yaml"
    code, out, err = run_cli(["validate", str(path)], capsys)
    assert_one_line_error(code, err, fragment)
    assert out == ""
    code, out, err = run_cli(["simulate", str(path)], capsys)
    assert code == 0, err
    assert out
    assert tree(workdir) == set()


def test_emulation_limits_lists_every_reason_with_file_line_and_field():
    scenario = load_scenario(PAPERS / "goat" / "motivation.yaml")
    reasons = emulation_limits(scenario)
    assert len(reasons) == 2
    assert re.match(r".*motivation\.yaml:\d+: topology\.link_rate: 100,000 Mb/s", reasons[0])
    assert re.match(r".*motivation\.yaml:\d+: simulation\.worker_start: the emulation starts every worker together",
                    reasons[1])
    with pytest.raises(ScenarioError, match="also: simulation.worker_start"):
        require_emulable(scenario)


def test_emulation_limits_of_a_scaled_scenario_are_empty():
    for path in (REPO / "scenarios" / "quickstart.yaml", PAPERS / "pa-atp" / "testbed.yaml"):
        scenario = load_scenario(path)
        assert emulation_limits(scenario) == []
        require_emulable(scenario)


def test_worker_start_alone_is_simulate_only(workdir, capsys):
    path = workdir / "s.yaml"
    path.write_text(with_lines("simulation: {worker_start: {w2: 3}}"))
    code, _, err = run_cli(["validate", str(path)], capsys)
    assert_one_line_error(code, err, "simulation.worker_start: valid for `inatb simulate` only")


def test_switch_memory_beyond_an_emulated_switch_is_simulate_only(workdir, capsys):
    path = workdir / "s.yaml"
    path.write_text(with_lines("switch: {slots: 1048576, lanes: 255}"))
    code, _, err = run_cli(["validate", str(path)], capsys)
    assert_one_line_error(code, err, "switch.slots: valid for `inatb simulate` only")


# --- as a user runs it -----------------------------------------------------------------------------

@pytest.mark.parametrize("content, overrides", [
    ("[" * 100_000, ()),
    (BILLION_LAUGHS, ()),
    (bytes(range(256)), ()),
    (BASE, ("jobs.0=!!python/object/apply:os.system [echo]",)),
    (BASE, ("jobs.0.workers.0.x=1",)),
], ids=["deep", "billion-laughs", "binary", "python-tag", "set-into-scalar"])
def test_the_command_line_prints_one_line_and_exits_non_zero(tmp_path, content, overrides):
    path = tmp_path / "s.yaml"
    path.write_bytes(content if isinstance(content, bytes) else content.encode())
    argv = [sys.executable, "-m", "testbed.cli", "validate", str(path)]
    argv += [arg for item in overrides for arg in ("--set", item)]
    env = dict(os.environ, PYTHONPATH=str(REPO))
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=60, cwd=tmp_path, env=env)
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr and proc.stderr.count("\n") == 1, proc.stderr
    assert proc.stdout == ""
    assert tree(tmp_path) == {"s.yaml"}


def test_pauses_and_shapeable_rate_changes_do_not_limit_emulation(workdir, capsys):
    path = workdir / "s.yaml"
    path.write_text(with_lines("stragglers: {pauses: [{worker: w1, duration: 1s}], "
                               "rate_changes: [{host: w2, rate: 10Gbps, duration: 1s}]}"))
    code, out, err = run_cli(["validate", str(path)], capsys)
    assert code == 0, err
    assert emulation_limits(load_scenario(path)) == []
