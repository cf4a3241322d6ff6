"""Scenario validation: every error names the file, line, field path and what was expected."""

import textwrap
from pathlib import Path

import pytest

from testbed.errors import ScenarioError
from testbed.scenario import load_scenario, parse_scenario

REPO = Path(__file__).resolve().parents[2]

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
  - workers: [w1, w2]
    ps: ps
    policy: atp
"""


def parse(text, overrides=()):
    return parse_scenario(textwrap.dedent(text), "test.yaml", overrides)


def error_of(text, overrides=()):
    with pytest.raises(ScenarioError) as info:
        parse(text, overrides)
    return info.value


def test_a_link_rate_in_bytes_per_second_is_eight_times_the_same_figure_in_bits():
    def link_rate(rate):
        return parse(BASE.replace("  kind: explicit\n", f"  kind: explicit\n  link_rate: {rate}\n"))\
            .topology.links[0].rate_bps
    assert link_rate("10GBps") == 8 * link_rate("10Gbps") == 8 * 10e9 * 0.001
    assert link_rate("10GB/s") == link_rate("80Gbps") and link_rate("1.25GBps") == link_rate("10Gbps")
    err = error_of(BASE.replace("  kind: explicit\n", "  kind: explicit\n  link_rate: 10GBPS\n"))
    assert err.field == "topology.link_rate" and err.line == 6 and "unknown unit 'GBPS'" in err.message


def test_base_scenario_resolves_units_and_scale():
    s = parse(BASE)
    assert s.scale == 0.001
    assert s.topology.links[0].rate_bps == pytest.approx(100e9 * 0.001)
    job = s.jobs[0]
    assert job.workers == ["w1", "w2"] and job.ps == ["ps"]
    # ResNet-18 (the default model) scaled by 1/1000.
    assert job.gradient_bytes == pytest.approx(4 * 11_689_512 * 0.001, rel=0.01)
    assert sum(job.submodel_elements) * 4 == job.gradient_bytes


def test_unknown_key_names_line_field_and_allowed_keys():
    err = error_of(BASE.replace("scale: 0.001", "scale: 0.001\ncolour: 3"))
    assert err.field == "colour"
    assert err.line == 4
    assert "allowed here" in err.message and "topology" in err.message
    assert str(err).startswith("test.yaml:4: colour:")


@pytest.mark.parametrize("text, line, field, close", [
    (BASE.replace("scale: 0.001", "scael: 0.001"), 3, "scael", "scale"),                          # top level
    (BASE.replace("  kind: explicit", "  kind: explicit\n  link_rat: 10Gbps"), 6, "topology.link_rat", "link_rate"),
    (BASE + "    iteration: 3\n", 13, "jobs.0.iteration", "iterations"),                          # a job key
    (BASE + "    policy_options: {atp: {level: 1}}\n", 13, "jobs.0.policy_options.atp.level", "levels"),  # an option
    (BASE + "    policy_options: {atpp: {levels: 1}}\n", 13, "jobs.0.policy_options.atpp", "atp"),
    (BASE + "    transport_options: {intial_window: 4}\n", 13, "jobs.0.transport_options.intial_window",
     "initial_window"),
])
def test_an_unknown_key_close_to_an_allowed_one_says_which(text, line, field, close):
    err = error_of(text)
    assert (err.field, err.line, err.message) == (field, line, f"unknown key; did you mean {close}?")
    assert str(err) == f"test.yaml:{line}: {field}: unknown key; did you mean {close}?"


def test_a_sweep_file_given_as_a_scenario_says_which_command_runs_it():
    err = error_of("version: 1\nname: s\nscenario: base.yaml\naxes: {policy: [ps, atp]}\n")
    assert err.field == "axes" and err.line == 4 and "inatb sweep" in err.message


def test_bad_unit():
    err = error_of(BASE.replace("kind: explicit", "kind: explicit\n  link_rate: 10Gbpx"))
    assert err.field == "topology.link_rate"
    assert "unknown unit" in err.message


def test_unknown_topology_kind():
    err = error_of(BASE.replace("kind: explicit", "kind: torus"))
    assert err.field == "topology.kind"
    assert "fat-tree" in err.message and "torus" in err.message


def test_host_used_but_not_defined():
    err = error_of(BASE.replace("workers: [w1, w2]", "workers: [w1, w9]"))
    assert err.field == "jobs.0.workers.1"
    assert "w9" in err.message and "not defined" in err.message


def test_link_to_undefined_node():
    err = error_of(BASE.replace("[ps, s1]]", "[ps, s2]]"))
    assert err.field == "topology.links.2"
    assert "'s2'" in err.message


def test_aggregation_asked_of_non_programmable_switch():
    text = BASE.replace("switches: [s1]", "switches: [s1, {name: s2, programmable: false}]") \
        .replace("[ps, s1]]", "[ps, s1], [s1, s2]]") \
        .replace("policy: atp", "policy: atp\n    aggregation_switches: [s2]")
    err = error_of(text)
    assert err.field == "jobs.0.aggregation_switches.0"
    assert "not programmable" in err.message


def test_more_workers_than_the_bitmap_holds():
    hosts = [f"h{i}" for i in range(66)]
    text = f"""
    version: 1
    topology: {{kind: explicit, switches: [s1], hosts: [{', '.join(hosts)}],
               links: [{', '.join(f'[{h}, s1]' for h in hosts)}]}}
    jobs: [{{workers: [{', '.join(hosts[:65])}], ps: h65}}]
    """
    err = error_of(text)
    assert err.field == "jobs.0.workers"
    assert "at most 64" in err.message


def test_version_is_required_and_checked():
    assert error_of(BASE.replace("version: 1\n", "")).field == "version"
    assert "expected 1" in error_of(BASE.replace("version: 1", "version: 2")).message


def test_unknown_policy_lists_the_known_ones():
    err = error_of(BASE.replace("policy: atp", "policy: magic"))
    assert err.field == "jobs.0.policy" and "ps" in err.message and "atp" in err.message


def test_invalid_yaml_reports_the_line():
    err = error_of("version: 1\ntopology: [unclosed\n")
    assert err.line >= 2 and "not valid YAML" in err.message


def test_set_overrides_dotted_paths_and_policy_shortcut():
    s = parse(BASE, ["jobs.0.iterations=3", "scale=0.0001", "policy=ps"])
    assert s.jobs[0].iterations == 3
    assert s.scale == 0.0001
    assert s.jobs[0].scheme == "ps"


def test_set_override_errors():
    with pytest.raises(ScenarioError, match="key=value"):
        parse(BASE, ["scale"])
    with pytest.raises(ScenarioError, match="index 5 out of range"):
        parse(BASE, ["jobs.5=1"])


def test_set_override_is_validated_like_the_file():
    with pytest.raises(ScenarioError, match="scale"):
        parse(BASE, ["scale=2"])


@pytest.mark.parametrize("overrides, text", [
    (["scale=big"], "--set scale=big: expected a number, got 'big'"),
    (["jobs.0.iterations=x"], "--set jobs.0.iterations=x: expected an integer, got 'x'"),
    (["topology.link_rate=10Gbit"], "--set topology.link_rate=10Gbit: unknown unit 'Gbit'"),
    (["topology.link_rat=10Gbps"], "--set topology.link_rat=10Gbps: unknown key; did you mean link_rate?"),
    (["policy=nope"], "--set policy=nope: jobs.0.policy: unknown scheme 'nope'"),        # every job's, by index
    (["topology={kind: explicit, colour: red}"], "--set topology={kind: explicit, colour: red}: topology.colour: "
                                                 "unknown key; allowed here: "),          # below the path it set
    # the later of two overrides of one field is the one named, whichever path set it
    (["scale=big", "scale=bigger"], "--set scale=bigger: expected a number"),
    (["topology.link_rate=1Gbps", "topology={kind: explicit, link_rate: 1Gpbs}"],
     "--set topology={kind: explicit, link_rate: 1Gpbs}: topology.link_rate: unknown unit"),
    (["topology={kind: explicit, link_rate: 1Gpbs}", "topology.link_rate=2Gpbs"],
     "--set topology.link_rate=2Gpbs: unknown unit 'Gpbs'"),
])
def test_a_bad_set_value_is_named_by_its_argument_not_by_the_files_line(overrides, text):
    """The file has ``scale`` on line 3 and ``topology.link_rate`` on line 6; the value in error is the
    command line's, so the error names the ``--set`` argument and no line of the file."""
    err = error_of(BASE.replace("  kind: explicit\n", "  kind: explicit\n  link_rate: 10Gbps\n"), overrides)
    assert str(err).startswith(text), str(err)
    assert err.line == 0 and err.override == overrides[-1] and "test.yaml" not in str(err)


def test_an_error_in_a_field_the_set_did_not_touch_still_names_the_files_line():
    err = error_of(BASE + "    iterations: 0\n", ["jobs.0.window=8"])
    assert str(err).startswith("test.yaml:13: jobs.0.iterations: ") and err.override == ""


def test_host_serving_two_roles_is_rejected_but_a_ps_on_its_own_jobs_worker():
    err = error_of(BASE + "  - {name: b, workers: [ps, w2], ps: w1}\n")
    assert err.field == "jobs.1.workers.0" and "already serves" in err.message
    colocated = parse(BASE.replace("ps: ps", "ps: w1"))       # Rina §VI-A4's co-located PS (simulated only)
    assert colocated.jobs[0].ps == ["w1"] and "w1" in colocated.jobs[0].workers


def test_impairment_on_a_missing_link():
    err = error_of(BASE + "impairments: [{link: [w1, w2], drop: 0.01}]\n")
    assert err.field == "impairments.0.link"


def test_missing_file_is_a_scenario_error(tmp_path):
    with pytest.raises(ScenarioError, match="cannot read"):
        load_scenario(tmp_path / "nope.yaml")


def test_shipped_scenarios_and_sweeps_validate():
    from testbed.sweep import load_sweep
    for path in sorted((REPO / "scenarios").rglob("*.yaml")):
        if "axes:" in path.read_text():
            load_sweep(path)           # a sweep: every point's scenario is checked
        else:
            load_scenario(path)


def test_goat_testbed_workers_per_rack_is_checked():
    text = ("version: 1\nname: g\ntopology: {kind: goat-testbed, link_rate: 1Gbps, workers_per_rack: 2}\n"
            "jobs:\n  - {name: j, model: resnet18, workers: [w1, w2, w3, w4], ps: [ps], policy: ps}\n")
    assert len(parse(text).topology.hosts()) == 5
    message = str(error_of(text.replace("workers_per_rack: 2", "workers_per_rack: 0")))
    assert "topology.workers_per_rack" in message
    assert "w5" in str(error_of(text.replace("w4]", "w4, w5]")))


def test_a_papers_switch_memory_is_scaled_into_slots_and_caps_the_default_window():
    # GOAT §VII-B's ~20 MB of a Tofino at 1/1000: 20,000 B in slots of 64 lanes x 4 B = 78 slots.
    s = parse(BASE, ["switch.memory=20MB"])
    assert s.switch.slots == 78 and s.jobs[0].window == 78
    assert parse(BASE).switch.slots == 1024 and parse(BASE).jobs[0].window == 100
    assert error_of(BASE, ["switch.memory=20MB", "switch.slots=64"]).field == "switch.memory"
    err = error_of(BASE, ["switch.memory=100kB"])
    assert err.field == "switch.memory" and "100 B after scale is 0 slots of 256 B" in err.message
    err = error_of(BASE, ["switch.memory=20MB", "jobs.0.window=100"])
    assert err.field == "jobs.0.window" and err.message.endswith(
        "window 100 exceeds switch.slots 78 (transport_options.slot_bound: false lets ATP's window outrun them)")
    # ATP's window, a congestion window, may outrun the slots when asked to (its collisions overflow).
    s = parse(BASE, ["switch.memory=20MB", "jobs.0.window=100", "jobs.0.transport_options={slot_bound: false}"])
    assert s.jobs[0].window == 100 and s.jobs[0].transport_options == {"slot_bound": False}
    err = error_of(BASE, ["switch.memory=20MB", "jobs.0.window=100", "jobs.0.transport=switchml"])
    assert err.field == "jobs.0.window" and err.message.endswith("window 100 exceeds switch.slots 78")


def test_submodel_size_splits_the_gradient_into_pieces_across_layers():
    # ResNet-18 at 1/1000 (11,719 elements: every tensor scaled, at least one element each) in pieces of at
    # most 2 MB / 1000 = 500 elements.
    s = parse(BASE, ["jobs.0.model=resnet18", "jobs.0.submodel_size=2MB"])
    pieces = s.jobs[0].submodel_elements
    assert sum(pieces) == 11_719 and len(pieces) == 24 and max(pieces) - min(pieces) <= 1 and max(pieces) <= 500
    assert error_of(BASE, ["jobs.0.submodel_size=2MB", "jobs.0.submodels=4"]).field == "jobs.0.submodels"
    assert error_of(BASE, ["jobs.0.submodel_size=0B"]).field == "jobs.0.submodel_size"
    assert error_of(BASE, ["jobs.0.submodel_size=1B", "scale=1"]).field == "jobs.0.submodel_size"   # > 65,535
    assert error_of(BASE, ["jobs.0.submodel_size=2MB", "jobs.0.submodel_elements=[64]"]).field == \
        "jobs.0.submodel_size"


def test_even_pieces_are_the_fewest_near_equal_ones():
    from testbed.gradient_profiles import even_pieces
    assert even_pieces(10, 3) == [2, 3, 2, 3] and even_pieces(9, 3) == [3, 3, 3] and even_pieces(2, 5) == [2]


def test_a_jobs_straggler_allowance_defaults_on_and_off_leaves_its_workers_none():
    """``straggler_allowance`` (default true): the workers wait the compute-delay spread for an iteration's
    first RESULT before counting fragments as lost; false, as a deployed transport, they wait their RTO alone."""
    from testbed.controller import FIRST_RESULT_MARGIN_S, straggler_allowance_s
    delayed = ["stragglers.compute_delay=[{workers: all, distribution: uniform, low: 0s, high: 2s}]"]
    on = parse(BASE, delayed)
    assert on.jobs[0].straggler_allowance is True
    assert straggler_allowance_s(on, on.jobs[0]) == pytest.approx(2.0 + FIRST_RESULT_MARGIN_S + 4 * 0.2)
    off = parse(BASE, delayed + ["jobs.0.straggler_allowance=false"])
    assert off.jobs[0].straggler_allowance is False and straggler_allowance_s(off, off.jobs[0]) == 0.0
    assert "jobs.0.straggler_allowance" in str(error_of(BASE, ["jobs.0.straggler_allowance=sometimes"]))
