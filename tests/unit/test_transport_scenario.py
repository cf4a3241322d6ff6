"""A job's ``transport`` and ``transport_options``: defaults by policy, validation (one-line errors naming
file, line and field) and the controller's wiring into each worker's AgentConfig."""

import textwrap

import pytest

from testbed import controller
from testbed.agents.config import AgentConfig
from testbed.errors import ScenarioError
from testbed.schemes import compute_placement
from testbed.scenario import TRANSPORT_NAMES, emulation_limits, parse_scenario, require_emulable

BASE = textwrap.dedent("""\
    version: 1
    scale: 0.001
    topology: {kind: explicit, switches: [s1], hosts: [w1, w2, ps], links: [[w1, s1], [w2, s1], [ps, s1]]}
    jobs:
      - workers: [w1, w2]
        ps: ps
        policy: atp
        window: 16
        submodel_elements: [6400000]
    """)   # x scale: 6400 elements, 100 fragments of 64 lanes per worker per iteration


def parse(text, *overrides):
    return parse_scenario(text, "t.yaml", overrides)


def job_with(extra, *overrides):
    return parse(BASE + textwrap.indent(textwrap.dedent(extra), "    "), *overrides).jobs[0]


def error(extra, *overrides):
    with pytest.raises(ScenarioError) as info:
        job_with(extra, *overrides)
    return info.value


def test_the_five_transports_by_name():
    assert TRANSPORT_NAMES == ("atp", "switchml", "strawasyn", "pa-atp", "paced")
    for name in TRANSPORT_NAMES:
        assert job_with(f"transport: {name}\n").transport == name


def test_default_transport_follows_the_placement():
    assert job_with("").transport == "atp" and job_with("").transport_options == {}
    assert job_with("", "policy=switchml").transport == "switchml"
    assert job_with("", "policy=ps").transport == "atp"
    assert job_with("transport: atp\n", "policy=switchml").transport == "atp"   # given: kept


def test_set_transport_sets_every_job_as_set_policy_does():
    two_jobs = BASE.replace("jobs:\n", "jobs:\n  - {workers: [w3], ps: ps3, policy: ps, submodel_elements: [640]}\n") \
        .replace("hosts: [w1, w2, ps], links: [", "hosts: [w1, w2, ps, w3, ps3], links: [[w3, s1], [ps3, s1], ")
    scenario = parse(two_jobs, "transport=switchml")
    assert [j.transport for j in scenario.jobs] == ["switchml", "switchml"]


def test_transport_options_resolved_per_transport():
    job = job_with("""\
        transport: pa-atp
        transport_options: {initial_cwd: 16, initial_awd: 100, ecn_weight: 0.25, aecn_weight: 1, progress_aware: false}
        """)
    assert job.transport_options == {"initial_cwd": 16, "initial_awd": 100, "ecn_weight": 0.25, "aecn_weight": 1.0,
                                     "progress_aware": False}
    assert job_with("transport_options: {initial_window: 4}\n").transport_options == {"initial_window": 4}
    assert job_with("transport: strawasyn\ntransport_options: {initial_cwd: 2}\n").transport_options == \
        {"initial_cwd": 2}
    assert job_with("transport: pa-atp\n", "jobs.0.transport_options.awd_limit=false").transport_options == \
        {"awd_limit": False}
    assert job_with("transport_options:\n").transport_options == {}


@pytest.mark.parametrize("extra, field, words", [
    ("transport: tcp\n", "jobs.0.transport", "expected one of atp, switchml, strawasyn, pa-atp, paced, got 'tcp'"),
    ("transport: 3\n", "jobs.0.transport", "expected one of"),
    ("transport_options: [1]\n", "jobs.0.transport_options", "expected a mapping of atp's options"),
    ("transport_options: {magic: 1}\n", "jobs.0.transport_options.magic", "allowed here: initial_window"),
    ("transport_options: {initial_window: 17}\n", "jobs.0.transport_options.initial_window", "[1, 16], got 17"),
    ("transport_options: {initial_window: 0}\n", "jobs.0.transport_options.initial_window", "[1, 16]"),
    ("transport_options: {initial_window: 2.5}\n", "jobs.0.transport_options.initial_window", "an integer"),
    ("transport: switchml\ntransport_options: {initial_window: 4}\n", "jobs.0.transport_options.initial_window",
     "allowed here: pool, timeout"),
    ("transport: switchml\ntransport_options: {timeout: 0s}\n", "jobs.0.transport_options.timeout", "> 0"),
    ("transport: switchml\ntransport_options: {timeout: 10}\n", "jobs.0.transport_options.timeout", "unit"),
    ("transport: pa-atp\ntransport_options: {initial_window: 4}\n", "jobs.0.transport_options.initial_window",
     "unknown key; did you mean initial_cwd?"),       # ATP's initial window is PA-ATP's initial_cwd
    ("transport: pa-atp\ntransport_options: {initial_cwd: 17}\n", "jobs.0.transport_options.initial_cwd",
     "[1, 16]"),
    ("transport: pa-atp\ntransport_options: {initial_awd: 101}\n", "jobs.0.transport_options.initial_awd",
     "[1, 100]"),
    ("transport: pa-atp\ntransport_options: {ecn_weight: 0}\n", "jobs.0.transport_options.ecn_weight", "> 0"),
    ("transport: pa-atp\ntransport_options: {aecn_weight: 1.5}\n", "jobs.0.transport_options.aecn_weight", "<= 1"),
    ("transport: pa-atp\ntransport_options: {ecn_weight: .nan}\n", "jobs.0.transport_options.ecn_weight",
     "finite"),
    ("transport: pa-atp\ntransport_options: {progress_aware: yes please}\n",
     "jobs.0.transport_options.progress_aware", "true or false"),
    ("transport: pa-atp\ntransport_options: {awd_limit: false, initial_awd: 8}\n",
     "jobs.0.transport_options.initial_awd", "awd_limit: false turns off"),
    ("transport: strawasyn\ntransport_options: {progress_aware: true}\n",
     "jobs.0.transport_options.progress_aware", "allowed here: congestion_avoidance, ecn_weight, initial_cwd"),
])
def test_bad_transport_fields_are_one_line_errors_naming_file_line_and_field(extra, field, words):
    err = error(extra)
    assert err.field == field and words in err.message
    assert "\n" not in str(err) and str(err).startswith("t.yaml:") and err.line > 0


def test_the_controller_passes_transport_and_options_to_every_worker():
    scenario = parse(BASE + "    transport: pa-atp\n    transport_options: {initial_cwd: 4, awd_limit: false}\n")
    plan = controller.control_plan(scenario, compute_placement(scenario))
    workers = [a for a in plan.agents if a.role == "worker"]
    assert len(workers) == 2
    for config in workers:
        assert (config.transport, config.transport_options) == ("pa-atp", {"initial_cwd": 4, "awd_limit": False})
        again = AgentConfig.from_json(config.to_json())
        assert (again.transport, again.transport_options) == (config.transport, config.transport_options)


def switchml_options(*overrides):
    """The transport options the controller gives each worker of BASE under policy switchml."""
    scenario = parse(BASE, "policy=switchml", *overrides)
    plan = controller.control_plan(scenario, compute_placement(scenario))
    workers = [a for a in plan.agents if a.role == "worker"]
    assert {a.transport for a in workers} == {"switchml"}
    return [a.transport_options for a in workers]


def test_switchml_pool_defaults_to_twice_the_unloaded_bandwidth_delay_product():
    """w1-s1-ps serializes a frame on two links both ways: 4 frames of round trip at the link rate whatever
    the scale, so the pool is 8 (within the job's window of 16); a given pool wins, within the window."""
    assert {o["pool"] for o in switchml_options()} == {8}
    assert {o["pool"] for o in switchml_options("scale=0.0001")} == {8}
    assert {o["pool"] for o in switchml_options("jobs.0.window=5")} == {5}
    assert {o["pool"] for o in switchml_options("jobs.0.transport_options.pool=12")} == {12}
    assert "jobs.0.transport_options.pool" in str(error("transport: switchml\ntransport_options: {pool: 17}\n"))


def test_switchml_gets_its_fixed_timeout_scaled_to_the_run():
    """SwitchML's 10 ms, or twice the round trip of the worker's path with the switch queue full: at scale 0.001
    the 100 Gb/s links run at 100 Mb/s, a 336-byte frame takes 26.9 us, the path w1-s1-ps serializes it on two
    links both ways (107.5 us) and queues 128 frames at the slowest (3.44 ms): 2 x 3.548 ms < 10 ms. At 0.0001
    it is 2 x 35.48 ms. A given ``timeout`` wins."""
    def timeouts(*overrides):
        return {options["timeout_s"] for options in switchml_options(*overrides)}

    assert timeouts() == {0.010}
    (slow,) = timeouts("scale=0.0001")
    assert slow == pytest.approx(2 * (4 * 336 * 8 / 10e6 + 128 * 336 * 8 / 10e6))
    assert timeouts("jobs.0.transport_options.timeout=25ms") == {0.025}
    assert job_with("transport: switchml\ntransport_options: {timeout: 3ms}\n").transport_options == \
        {"timeout_s": 0.003}


def test_paced_sends_at_its_given_rate_scaled_or_at_the_rate_its_scheme_plans():
    """A given ``rate`` is scaled like link rates and caps the worker in the simulator too; without one the
    controller gives every worker the job's synchronous rate in the fluid model (InArt §5.3's replay)."""
    from testbed import sim
    given = parse(BASE + "    transport: paced\n    transport_options: {rate: 20Gbps}\n")
    assert given.jobs[0].transport_options == {"rate_bps": 20e6}
    placement = compute_placement(given)
    assert {a.transport_options["rate_bps"] for a in controller.control_plan(given, placement).agents if a.role == "worker"} \
        == {20e6}
    assert sim.evaluate(given, placement)["min_sending_rate_bps"] == pytest.approx(20e6)   # 100 Mb/s links: capped
    planned = parse(BASE + "    transport: paced\n")
    placement = compute_placement(planned)
    modelled = sim.evaluate(planned, placement)["min_sending_rate_bps"]
    assert controller.planned_rates_bps(planned, placement) == {planned.jobs[0].name: pytest.approx(modelled)}
    assert [a.transport_options["rate_bps"] for a in controller.control_plan(planned, placement).agents if a.role == "worker"] \
        == pytest.approx([modelled, modelled])
    assert "jobs.0.transport_options.rate" in str(error("transport: paced\ntransport_options: {rate: fast}\n"))
    assert controller.planned_rates_bps(parse(BASE), compute_placement(parse(BASE))) == {}


@pytest.mark.parametrize("name", ["pa-atp", "strawasyn"])
def test_pa_atp_transports_run_now_that_the_data_plane_sends_gacks_and_aecn(name):
    """The switch side exists (p4/ina.p4, pyswitch): nothing refuses them, and the controller opts their jobs
    in at their aggregation switch."""
    scenario = parse(BASE + f"    transport: {name}\n")
    assert emulation_limits(scenario) == []
    require_emulable(scenario)
    plan = controller.control_plan(scenario, compute_placement(scenario))
    assert [e.action for e in plan.switches["s1"].entries if e.table == "pa_job"] == ["pa_enable"]

