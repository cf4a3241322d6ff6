"""Time dilation (testbed/dilation.py): the network's world runs N times slower, the agents keep virtual values on
a clock N times slower, and what the orchestrator measures in wall time comes back in virtual time."""

import io
import json
import textwrap

import pytest

from testbed import controller, dilation
from testbed.agents import common
from testbed.agents.common import AgentClock
from testbed.emulation.events import EventLog
from testbed.emulation.network import rto_min_route_argv
from testbed.emulation.progress import Progress
from testbed.errors import ScenarioError
from testbed.schemes import compute_placement
from testbed.scenario import AUTO_DILATION, parse_scenario

SCENARIO = textwrap.dedent("""\
    version: 1
    scale: 1
    run_timeout: 30s
    topology: {kind: dumbbell, hosts_left: 3, hosts_right: 3, link_rate: 20Mbps}
    switch: {aggregation_capacity: 8Mbps}
    jobs: [{workers: [hl1, hl2], ps: hr1, policy: atp, gradient_size: 100kB, compute_time: 20ms, start: 1s}]
    metrics: {sample_interval: 0.5s}
    background: [{distribution: hadoop, load: 0.5, senders: [hl3], receivers: [hr3], start: 2s, duration: 4s}]
    stragglers:
      compute_delay: [{workers: [hl1], distribution: fixed, value: 30ms}]
      rate_changes: [{host: hl2, at: 1s, duration: 2s, rate: 5Mbps}]
    """)


def scenario(overrides=()):
    return parse_scenario(SCENARIO, "t.yaml", list(overrides))


def test_time_dilation_is_a_number_of_at_least_one_or_auto():
    assert scenario().time_dilation == 1.0
    assert scenario(["time_dilation=4"]).time_dilation == 4.0
    assert scenario(["time_dilation=auto"]).time_dilation == AUTO_DILATION
    for bad, expected in (("0.5", "a number >= 1"), ("2000", "<= 1000"), ("fast", "a number in [1, 1000] or auto"),
                          ("true", "a number")):
        with pytest.raises(ScenarioError) as info:
            scenario([f"time_dilation={bad}"])
        assert info.value.field == "time_dilation" and expected in info.value.message


def test_the_networks_world_runs_n_times_slower_and_the_scenario_is_untouched():
    virtual = scenario()
    world = dilation.network_scenario(virtual, 4)
    assert [link.rate_bps for link in world.topology.links] == [link.rate_bps / 4 for link in virtual.topology.links]
    assert world.switch.aggregation_capacity_bps == 2e6
    (bg,) = world.background
    assert (bg.start_s, bg.duration_s, bg.load) == (8.0, 16.0, 0.5)   # arrivals follow the slowed link rates
    (inj,) = world.stragglers.injections
    assert (inj.at_s, inj.duration_s, inj.rate_bps) == (4.0, 8.0, 1.25e6)
    assert (world.run_timeout_s, world.metrics.sample_interval_s) == (120.0, 2.0)
    # What the agents run on stays virtual: their clock slows instead.
    assert (world.jobs[0].compute_time_s, world.jobs[0].start_s) == (0.02, 1.0)
    assert world.stragglers.compute_delays[0].value_s == 0.03
    assert virtual.topology.links[0].rate_bps == 20e6 and virtual.run_timeout_s == 30.0
    assert dilation.network_scenario(virtual, 1) is virtual


def test_the_switches_shape_n_times_slower_and_the_agents_get_n_with_virtual_times():
    virtual = scenario()
    plan = controller.control_plan(virtual, compute_placement(virtual), time_dilation=4)
    rates = {s.rate_bps for config in plan.switches.values() for s in config.port_shaping}
    assert rates == {5e6}
    (meter,) = {m for config in plan.switches.values() for m in config.meter_rates}
    assert meter[2] == pytest.approx(2e6 / (virtual.switch.lanes * 32))
    worker = next(a for a in plan.agents if a.name == "hl1")
    assert (worker.time_dilation, worker.compute_time_s, worker.start_s, worker.link_rate_bps) == (4, 0.02, 1.0, 20e6)
    assert (worker.deadline_s, worker.ready_timeout_s) == (30.0, 120.0)


def test_wall_clock_records_and_samples_come_back_in_virtual_time():
    record = {"start_s": 8.0, "fct_s": 0.4, "rate_bps": 1e6, "size_bytes": 1460, "completed": True, "src": "h1"}
    assert dilation.virtual_record(record, 4) == {"start_s": 2.0, "fct_s": 0.1, "rate_bps": 4e6, "size_bytes": 1460,
                                                  "completed": True, "src": "h1"}
    assert dilation.virtual_record(record, 1) is record
    samples = [{"t": 100.0, "ifaces": {"a": [1, 2]}}, {"t": 104.0, "ifaces": {"a": [5, 6]}}]
    assert [s["t"] for s in dilation.virtual_samples(samples, 100.0, 4)] == [100.0, 101.0]
    assert dilation.virtual_samples(samples, 100.0, 4)[1]["ifaces"] == {"a": [5, 6]}
    assert dilation.virtual_epoch_s(112.0, 100.0, 4) == 103.0
    assert (dilation.tcp_rto_min_ms(1), dilation.tcp_rto_min_ms(7.5), dilation.tcp_rto_min_ms(1e6)) == \
        (200, 1500, dilation.MAX_ROUTE_RTO_MIN_MS)


class FakeTime:
    def __init__(self):
        self.mono, self.epoch, self.slept = 50.0, 1000.0, []

    def monotonic(self):
        return self.mono

    def time(self):
        return self.epoch

    def sleep(self, s):
        self.slept.append(s)
        self.mono += s
        self.epoch += s


def test_an_agents_clock_reads_and_waits_virtual_seconds(monkeypatch):
    fake = FakeTime()
    monkeypatch.setattr(common, "time", fake)
    clock = AgentClock(4, start_epoch_s=1000.0)
    assert clock.now_s() == 12.5
    assert clock.wall_s(0.25) == 1.0 and clock.wall_s(-1) == 0.0
    clock.sleep(0.5)                                  # half a virtual second: two wall seconds
    assert fake.slept == [2.0] and clock.now_s() == 13.0
    assert clock.epoch_s() == 1000.5                  # the start plus 0.5 virtual seconds
    assert clock.until_s(1.5) == 1.0
    clock.sleep(-1)
    assert fake.slept == [2.0]
    assert AgentClock().now_s() == 50 + 2.0


def test_events_carry_virtual_times_since_the_start(monkeypatch, tmp_path):
    log = EventLog(tmp_path / "events.jsonl", t0=1000.0, time_dilation=4)
    monkeypatch.setattr("testbed.emulation.events.time.time", lambda: 1008.0)
    log.write("rate_change", ["hl2"], phase="start")
    log.write("compute_delay", "hl1", t_s=0.5, iteration=3)
    first, second = [json.loads(line) for line in (tmp_path / "events.jsonl").read_text().splitlines()]
    assert (first["t_s"], first["wall"]) == (2.0, 1008.0)
    assert (second["t_s"], second["wall"], second["iteration"]) == (0.5, 1002.0, 3)


def test_the_progress_line_shows_wall_and_virtual_time_and_the_virtual_rate(tmp_path):
    (tmp_path / "records").mkdir()
    stream = io.StringIO()
    progress = Progress(scenario(), tmp_path, stream, time_dilation=4)
    progress.update(1e6)
    line = stream.getvalue()
    assert "s wall = " in line and "s virtual]" in line and "PS ingress 4.0 Mb/s" in line


def test_the_background_hosts_connected_route_gets_the_dilated_minimum_rto():
    assert rto_min_route_argv("hl3-eth0", "10.0.0.3", dilation.tcp_rto_min_ms(4)) == [
        "ip", "route", "replace", "10.0.0.0/8", "dev", "hl3-eth0", "proto", "kernel", "scope", "link",
        "src", "10.0.0.3", "rto_min", "800ms"]
