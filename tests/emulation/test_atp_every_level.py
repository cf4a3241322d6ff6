"""Emulation test: ATP with ``levels: all`` aggregates at every programmable switch on the way to its PS
(Rina §III-B's Bandwidth-Occupation Model of PS-based INA), where its two levels skip the switch in between.

Four workers under two ToRs, t1 and t2, which reach the PS through a1 and then c1. With two levels t1 and
t2 send their partial aggregates past a1 to c1, the programmable switch nearest the PS; with every level a1
merges them and c1 passes a1's aggregate on. Either way the PS gets one aggregate per fragment and every
iteration ends with the exact sum. On pyswitch and bmv2; root only.
"""

import pytest
from support import ATP_CHAIN_TOPOLOGY, require_bmv2
from test_quickstart import assert_clean

from testbed.emulation.orchestrator import run_scenario
from testbed.scenario import parse_scenario

CHAIN = """version: 1
name: atp-every-level
seed: 1
scale: 0.00005
run_timeout: 90s
""" + ATP_CHAIN_TOPOLOGY + """jobs:
  - name: j
    model: resnet18
    workers: [w1, w2, w3, w4]
    ps: [p1]
    policy: atp
    iterations: 3
    compute_time: 10ms
"""


@pytest.mark.parametrize("target", ("pyswitch", "bmv2"))
@pytest.mark.parametrize("levels", (2, "all"))
def test_atp_aggregates_at_every_programmable_switch_on_the_way_with_levels_all(levels, target, emulation,
                                                                                 tmp_path, quiet):
    if target == "bmv2":
        require_bmv2()
    # At the dilation the planner picks: a round trip passes four switches each way, whose processes' waits at
    # N = 1 came to 65% of a window once (marked by host delay).
    scenario = parse_scenario(CHAIN, "chain.yaml", [f"jobs.0.policy_options.atp.levels={levels}", "time_dilation=auto"])
    summary = run_scenario(scenario, out_root=tmp_path, target=target, stream=quiet).summary
    assert summary["status"] == "ok" and summary["aggregation_exact"] is True, summary["error"]
    assert not summary["distorted"], summary["distortion_reasons"]
    job, switches = summary["jobs"][0], summary["switches"]
    fragments = job["fragments_sent"] / (3 * 4)                    # per worker and iteration
    assert job["retransmitted_packets"] == 0
    assert job["ps_ingress_fragments_per_iteration"] == fragments  # one aggregate per fragment
    emitted = {s: switches[s].get("emitted", 0) / 3 for s in ("t1", "t2", "a1", "c1")}
    aggregated = {s: switches[s].get("aggregated", 0) / 3 for s in ("t1", "t2", "a1", "c1")}
    assert emitted["t1"] == emitted["t2"] == emitted["c1"] == fragments
    if levels == "all":
        assert aggregated == {"t1": 2 * fragments, "t2": 2 * fragments, "a1": 2 * fragments, "c1": fragments}
        assert emitted["a1"] == fragments
    else:
        assert aggregated == {"t1": 2 * fragments, "t2": 2 * fragments, "a1": 0, "c1": 2 * fragments}
        assert emitted["a1"] == 0
    assert_clean()
