"""Schema added for the control plane: policy_options, submodel_elements, ps_memory, simulation."""

import textwrap

import pytest

from testbed.errors import ScenarioError
from testbed.scenario import SCHEME_NAMES, RING_SCHEMES, parse_scenario

BASE = textwrap.dedent("""\
    version: 1
    scale: 1
    topology: {kind: explicit, switches: [s1], hosts: [w1, w2, ps], links: [[w1, s1], [w2, s1], [ps, s1]]}
    jobs:
      - workers: [w1, w2]
        ps: ps
        policy: goat
    """)


def parse(text, *overrides):
    return parse_scenario(text, "t.yaml", overrides)


def error(text, *overrides):
    with pytest.raises(ScenarioError) as info:
        parse(text, *overrides)
    return info.value


def test_every_ps_policy_is_accepted():
    for name in set(SCHEME_NAMES) - set(RING_SCHEMES):       # a ring's job has no ps (tests/unit/test_ring.py)
        assert parse(BASE, f"policy={name}").jobs[0].scheme == name


def test_policy_options_are_resolved_per_scheme_with_units():
    text = BASE + "    policy_options: {goat: {roundings: 4, time_limit: 30s}, ksgd: {k: 1, intervals: {w1: 200ms}}}\n"
    job = parse(text).jobs[0]
    assert job.policy_options == {"goat": {"roundings": 4, "time_limit_s": 30.0},
                                  "ksgd": {"k": 1, "intervals_s": {"w1": 0.2}}}


def test_policy_options_set_from_the_command_line():
    job = parse(BASE, "jobs.0.policy_options.atp.levels=1", "policy=atp").jobs[0]
    assert job.policy_options == {"atp": {"levels": 1}}
    assert parse(BASE, "jobs.0.policy_options.atp.levels=all", "policy=atp").jobs[0].policy_options == \
        {"atp": {"levels": "all"}}


@pytest.mark.parametrize("options, field, words", [
    ("{magic: {}}", "jobs.0.policy_options.magic", "allowed here"),
    ("{atp: {levels: 3}}", "jobs.0.policy_options.atp.levels", "[1, 2] or all"),
    ("{atp: {levels: every}}", "jobs.0.policy_options.atp.levels", "[1, 2] or all, got 'every'"),
    ("{atp: {levels: true}}", "jobs.0.policy_options.atp.levels", "[1, 2] or all"),
    ("{atp: {admission: maybe}}", "jobs.0.policy_options.atp.admission", "fragment, flow"),
    ("{grid: {improve: 1}}", "jobs.0.policy_options.grid.improve", "true or false"),
    ("{ksgd: {intervals: {w9: 1s}}}", "jobs.0.policy_options.ksgd.intervals.w9", "allowed here"),
    ("{ps: {k: 1}}", "jobs.0.policy_options.ps", "takes no options"),
])
def test_bad_policy_options_name_the_field(options, field, words):
    err = error(BASE + f"    policy_options: {options}\n")
    assert err.field == field and words in err.message


def test_submodel_elements_give_the_partition_directly():
    job = parse(BASE + "    submodel_elements: [64, 64, 128]\n").jobs[0]
    assert job.submodel_elements == [64, 64, 128] and job.gradient_bytes == 4 * 256
    err = error(BASE + "    submodel_elements: [64]\n    submodels: 2\n")
    assert err.field == "jobs.0.submodels"
    assert error(BASE + "    submodel_elements: []\n").field == "jobs.0.submodel_elements"


def test_ps_memory_is_a_size():
    assert parse(BASE + "    ps_memory: 2KB\n").jobs[0].ps_memory_bytes == 2000
    assert parse(BASE).jobs[0].ps_memory_bytes == 0


def test_simulation_section():
    s = parse(BASE + "simulation: {worker_start: {w2: 3}, max_fragment_events: 1000}\n")
    assert s.simulation.worker_start_fragments == {"w2": 3}
    assert s.simulation.max_fragment_events == 1000
    assert parse(BASE).simulation.worker_start_fragments == {}
    assert error(BASE + "simulation: {worker_start: {ps: 3}}\n").field == "simulation.worker_start.ps"
    assert error(BASE + "simulation: {speed: 3}\n").field == "simulation.speed"
