"""The fidelity comparison: emulated against simulated, per job and for the run."""

import pytest

from testbed.fidelity import FRAGMENT_TOLERANCE, RATE_TOLERANCE, compare, format_fidelity


def summary(ps_packets, sent, rate_bps, comm_s, egress, iterations=10):
    return {"jobs": [{"job": "j", "transport": "atp", "iterations_completed": iterations,
                      "ps_ingress_fragments_per_iteration": ps_packets / iterations,
                      "fragments_sent": sent, "min_gradient_sending_rate_bps": rate_bps, "comm_time_s": comm_s}],
            "switch_egress_fragments": egress}


def simulation(overflow_modelled=True):
    return {"jobs": {"j": {"ps_ingress_fragments": 24, "sent_fragments": 192, "min_sending_rate_bps": 5e6,
                           "comm_time_s": 0.1, "overflow_modelled": overflow_modelled,
                           "ring": False}},
            "switch_egress_fragments": 72}


SIM = simulation()


def test_rows_ratios_and_bounds():
    result = compare(summary(ps_packets=250, sent=1920, rate_bps=4e6, comm_s=0.13, egress=720), SIM)
    rows = {r["metric"]: r for r in result["jobs"]["j"]}
    assert rows["ps_ingress_fragments"]["emulated"] == 25 and rows["ps_ingress_fragments"]["ratio"] == 25 / 24
    assert rows["ps_ingress_fragments"]["within"] and rows["ps_ingress_fragments"]["tolerance"] == FRAGMENT_TOLERANCE
    assert rows["ina_amount_fragments"]["emulated"] == 192 - 25 and rows["ina_amount_fragments"]["simulated"] == 168
    assert rows["min_sending_rate_bps"]["ratio"] == 0.8 and rows["min_sending_rate_bps"]["within"]
    assert rows["comm_time_s"]["tolerance"] == RATE_TOLERANCE and not rows["comm_time_s"]["within"]   # 1.3x
    assert result["run"][0]["emulated"] == 72 and result["run"][0]["within"]
    assert not result["all_within"]
    assert "comm_time_s" in format_fidelity(result) and "NO (±25%)" in format_fidelity(result)


def test_an_amount_the_simulator_puts_at_zero_is_judged_against_the_fragments_sent():
    sim = {"jobs": {"j": {"ps_ingress_fragments": 192, "sent_fragments": 192, "min_sending_rate_bps": 6e5,
                          "comm_time_s": 0.5, "overflow_modelled": True, "ring": False}},
           "switch_egress_fragments": 384}
    result = compare(summary(ps_packets=1938, sent=1920, rate_bps=6e5, comm_s=0.5, egress=3840), sim)
    amount = {r["metric"]: r for r in result["jobs"]["j"]}["ina_amount_fragments"]
    assert amount["emulated"] == pytest.approx(-1.8) and amount["simulated"] == 0 and amount["ratio"] is None
    assert amount["within"]                                       # 1.8 of 192 sent
    assert result["all_within"]


def test_fragment_counts_the_simulator_does_not_model_are_shown_not_judged():
    # testbed.sim.evaluate: overflow_modelled is false for an asynchronous transport (tests/unit/test_sim.py)
    result = compare(summary(ps_packets=600, sent=1920, rate_bps=5e6, comm_s=0.1, egress=900),
                     simulation(overflow_modelled=False))
    rows = {r["metric"]: r for r in result["jobs"]["j"] + result["run"]}
    for metric in ("ps_ingress_fragments", "ina_amount_fragments", "switch_egress_fragments"):
        assert not rows[metric]["within"] and not rows[metric]["judged"]          # 60 against 24: shown ...
    assert rows["min_sending_rate_bps"]["judged"] and rows["comm_time_s"]["judged"]
    assert result["all_within"]                                                   # ... but not judged
    assert "not judged (transport sends past the slots by design: overflow to the PS not modelled)" in format_fidelity(result)
    slow = compare(summary(ps_packets=600, sent=1920, rate_bps=5e6, comm_s=0.2, egress=900),
                   simulation(overflow_modelled=False))
    assert not slow["all_within"]                                                 # comm time 2x: judged
    fast = compare(summary(ps_packets=600, sent=1920, rate_bps=7e6, comm_s=0.1, egress=900),
                   simulation(overflow_modelled=False))
    assert not fast["all_within"]                                                 # rate 1.4x: judged too
    synchronous = compare(summary(ps_packets=600, sent=1920, rate_bps=5e6, comm_s=0.1, egress=900), SIM)
    assert not synchronous["all_within"]


def two_jobs(summary_of_j, simulation_of_j):
    """``summary_of_j`` and ``simulation_of_j`` with a second job, ``k``, a copy of ``j``."""
    return ({**summary_of_j, "jobs": summary_of_j["jobs"] + [{**summary_of_j["jobs"][0], "job": "k"}]},
            {**simulation_of_j, "jobs": {**simulation_of_j["jobs"], "k": simulation_of_j["jobs"]["j"]}})


def test_an_asynchronous_jobs_rate_beside_another_job_is_judged_from_below_only():
    asynchronous = simulation(overflow_modelled=False)
    fast = compare(*two_jobs(summary(ps_packets=600, sent=1920, rate_bps=7e6, comm_s=0.1, egress=900), asynchronous))
    rate = {r["metric"]: r for r in fast["jobs"]["j"]}["min_sending_rate_bps"]
    assert rate["judged"] and rate["within"] and rate["ratio"] == 1.4 and fast["all_within"]   # 1.4x: not judged
    assert "yes (-25%; above not judged: asynchronous windows do not split a path shared" in format_fidelity(fast)
    slow = compare(*two_jobs(summary(ps_packets=600, sent=1920, rate_bps=3.5e6, comm_s=0.1, egress=900),
                             asynchronous))
    assert not {r["metric"]: r for r in slow["jobs"]["j"]}["min_sending_rate_bps"]["within"]  # 0.7x: judged
    assert not slow["all_within"]
    synchronous = compare(*two_jobs(summary(ps_packets=240, sent=1920, rate_bps=7e6, comm_s=0.1, egress=720), SIM))
    assert not synchronous["all_within"]                                          # a synchronous job's 1.4x: judged


def test_a_ring_all_reduce_is_compared_on_what_its_workers_send():
    sim = {"jobs": {"j": {"ps_ingress_fragments": 0, "sent_fragments": 1554, "min_sending_rate_bps": 4.78e6,
                          "comm_time_s": 0.111, "overflow_modelled": True, "ring": True}},
           "switch_egress_fragments": 0}
    result = compare(summary(ps_packets=0, sent=15540, rate_bps=4.93e6, comm_s=0.104, egress=0), sim)
    rows = {r["metric"]: r for r in result["jobs"]["j"]}
    assert list(rows) == ["sent_fragments", "min_sending_rate_bps", "comm_time_s"]
    assert rows["sent_fragments"]["emulated"] == 1554 and rows["sent_fragments"]["within"]
    assert result["all_within"]
    assert not compare(summary(ps_packets=0, sent=18000, rate_bps=4.93e6, comm_s=0.104, egress=0), sim)["all_within"]
