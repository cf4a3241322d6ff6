"""Schemes asked to serve what they cannot: one-line PlacementError naming the scheme and what is missing;
infeasible problems: InfeasibleError, quickly."""

import textwrap
import time

import pytest

from testbed.errors import InfeasibleError, PlacementError
from testbed.schemes import compute_placement
from testbed.scenario import parse_scenario

BASE = textwrap.dedent("""\
    version: 1
    scale: 1
    topology:
      kind: explicit
      link_rate: 10Gbps
      switches: [s1, s2]
      hosts: [w1, w2, w3, p1, p2]
      links: [[w1, s1], [w2, s1], [w3, s2], [p1, s2], [p2, s2], [s1, s2]]
    jobs:
      - name: j
        workers: [w1, w2, w3]
        ps: [p1, p2]
        policy: ps
        submodel_elements: [640, 640, 640, 640]
    """)
INA_SCHEMES = ("atp", "esa", "switchml", "goat", "goat-async", "grid", "inart", "inart-equal")
ALL_SCHEMES = INA_SCHEMES + ("ps", "geryon", "lbmm", "ksgd")


def placement_error(text, scheme, *overrides):
    scenario = parse_scenario(text, "t.yaml", [f"policy={scheme}", *overrides])
    with pytest.raises(PlacementError) as info:
        compute_placement(scenario)
    message = str(info.value)
    assert "\n" not in message
    return message


@pytest.mark.parametrize("scheme", INA_SCHEMES)
def test_ina_schemes_need_a_programmable_switch(scheme):
    text = BASE.replace("switches: [s1, s2]", "switches: [s1, s2]\n  programmable: none")
    message = placement_error(text, scheme)
    assert message.startswith(f"{scheme}: job j") and "no programmable switch" in message


@pytest.mark.parametrize("scheme", ALL_SCHEMES)
def test_schemes_name_the_worker_without_a_path_to_its_ps(scheme):
    text = BASE.replace("[p2, s2], [s1, s2]]", "[p2, s2]]")        # the racks are not connected
    message = placement_error(text, scheme)
    assert message.startswith(f"{scheme}: ")
    assert ("no path from worker w1 to PS" in message) or ("single rack" in message)


@pytest.mark.parametrize("scheme", ("lbmm", "inart", "inart-equal"))
def test_multi_ps_schemes_refuse_a_single_ps(scheme):
    text = BASE.replace("ps: [p1, p2]", "ps: p1")
    message = placement_error(text, scheme)
    assert message.startswith(f"{scheme}: job j has one parameter server (p1)")


def test_goat_model_larger_than_all_memory_is_infeasible_quickly():
    # 4 sub-models of 10 fragments; 2 switches x 8 slots + a PS that holds 8 fragments.
    text = BASE.replace("submodel_elements: [640, 640, 640, 640]",
                        "submodel_elements: [640, 640, 640, 640]\n    ps_memory: 2048B") \
        .replace("jobs:", "switch: {slots: 8}\njobs:").replace("ps: [p1, p2]", "ps: p1") \
        .replace("    policy: ps\n", "    policy: ps\n    window: 4\n")
    scenario = parse_scenario(text, "t.yaml", ["policy=goat"])
    start = time.perf_counter()
    with pytest.raises(InfeasibleError) as info:
        compute_placement(scenario)
    assert time.perf_counter() - start < 2.0
    assert "\n" not in str(info.value) and str(info.value).startswith("goat: job j")
    assert "exceeds the memory" in str(info.value) or "fits neither" in str(info.value)


def test_goat_async_refuses_intervals_that_miss_a_worker():
    text = BASE.replace("ps: [p1, p2]", "ps: p1") + \
        "    policy_options: {goat-async: {intervals: {w1: 1s, w2: 2s}}}\n"
    message = placement_error(text, "goat-async")
    assert "no entry for worker w3" in message


def test_ksgd_k_larger_than_the_workers_is_an_error():
    text = BASE + "    policy_options: {ksgd: {k: 5}}\n"
    assert "k = 5 exceeds its 3 workers" in placement_error(text, "ksgd")
