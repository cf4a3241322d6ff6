"""Background traffic: flow-size CDFs, the HPCC arrival rule, flow plans, and flowgen over loopback."""
import collections
import dataclasses
import heapq
import json
import math
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from testbed.dataplane.pyswitch.ingress import ecmp_member
from testbed.dataplane.wire import build_frame
from testbed.emulation.background import flowgen_configs, summarise as summarise_background
from testbed.sweep.spec import load_sweep
from testbed.traffic.distributions import (
    FlowSizeCDF,
    UnknownDistributionError,
    arrival_rate_per_s,
    plan_flows,
    poisson_arrivals,
)
from testbed.traffic.flowgen import (MAX_BURST_DATAGRAMS, _StopFlag, _UdpSource, congestion_control_error, load_config,
                                     SOURCE_PORTS, received_load, source_port, summarise_flows)

REPO_ROOT = Path(__file__).resolve().parents[2]
SHIPPED = ("hadoop", "cache_follower", "web_search", "data_mining")


def test_shipped_distributions_are_available():
    assert set(SHIPPED) <= set(FlowSizeCDF.available())
    for name in SHIPPED:
        cdf = FlowSizeCDF.load(name)
        assert cdf.name == name and cdf.provenance
        assert cdf.points[-1][1] == 1.0


@pytest.mark.parametrize("name", FlowSizeCDF.available())
def test_sample_mean_matches_analytic_mean(name):
    cdf = FlowSizeCDF.load(name)
    n = 10_000_000 if name == "data_mining" else 4_000_000  # data mining's 1 GB tail needs more draws
    sizes = cdf.sample(np.random.default_rng(7), n)
    assert sizes.dtype == np.int64 and sizes.min() >= 1 and sizes.max() <= cdf.points[-1][0]
    standard_error = sizes.std() / np.sqrt(n) / cdf.mean_bytes()
    assert standard_error < 0.005
    assert abs(sizes.mean() / cdf.mean_bytes() - 1) < 0.02


def test_hpcc_hadoop_mean_is_the_trapezoid_of_its_table():
    # The HPCC file quotes 120421 B for its linear-interpolation reading.
    assert FlowSizeCDF.load("hadoop").mean_bytes() == pytest.approx(120421, abs=1)


def test_readme_table_quotes_the_computed_means():
    rows = [line.split("|") for line in (REPO_ROOT / "traffic" / "README.md").read_text().splitlines()
            if line.startswith("| `")]
    quoted = {row[1].strip().strip("`"): int(row[-2]) for row in rows}
    assert set(quoted) == set(FlowSizeCDF.available())
    for name, mean_bytes in quoted.items():
        assert mean_bytes == round(FlowSizeCDF.load(name).mean_bytes())


def test_inverse_cdf_interpolates_linearly_and_first_point_is_an_atom():
    cdf = FlowSizeCDF("toy", ((100.0, 0.5), (300.0, 1.0)))
    assert cdf.inverse(np.array([0.0, 0.49, 0.5, 0.75, 1.0])).tolist() == [100, 100, 100, 200, 300]
    assert cdf.mean_bytes() == pytest.approx(0.5 * 100 + 0.5 * 200)


def test_truncated_caps_sizes():
    cdf = FlowSizeCDF.load("hadoop").truncated(100_000)
    assert cdf.points[-2:] == ((100_000.0, pytest.approx(0.885)), (100_000.0, 1.0))
    sizes = cdf.sample(np.random.default_rng(3), 1_000_000)
    assert sizes.max() == 100_000
    assert abs(sizes.mean() / cdf.mean_bytes() - 1) < 0.01


def test_scaled_multiplies_every_size_and_the_mean_and_keeps_the_fractions():
    hadoop = FlowSizeCDF.load("hadoop")
    tenth = hadoop.scaled(0.1)
    assert [f for _, f in tenth.points] == [f for _, f in hadoop.points]
    assert tenth.points[-1] == (pytest.approx(1_000_000.0), 1.0)        # Hadoop's largest flow, 10 MB
    assert tenth.mean_bytes() == pytest.approx(hadoop.mean_bytes() / 10)
    assert tenth.name == "hadoop_x0.1" and "multiplied by 0.1" in tenth.provenance
    # the same uniform draws give a tenth of each size (rounded, at least 1 byte)
    tiny, whole = tenth.sample(np.random.default_rng(5), 1000), hadoop.sample(np.random.default_rng(5), 1000)
    assert np.all(np.abs(tiny - np.maximum(np.rint(whole / 10), 1)) <= 1)
    assert hadoop.scaled(1) is hadoop
    with pytest.raises(ValueError, match="factor"):
        hadoop.scaled(0)


def test_unknown_distribution_lists_available_names():
    with pytest.raises(UnknownDistributionError) as info:
        FlowSizeCDF.load("hadop")
    assert isinstance(info.value, ValueError)
    for name in SHIPPED:
        assert name in str(info.value)


def test_malformed_file_names_file_and_line(tmp_path):
    bad = tmp_path / "bad.txt"
    bad.write_text("# provenance\n0 0\n100 0.7\n50 0.8\n200 1\n")
    with pytest.raises(ValueError, match=r"bad\.txt:4"):
        FlowSizeCDF.load(bad)
    bad.write_text("# provenance\n0 0\n100 seventy\n")
    with pytest.raises(ValueError, match=r"bad\.txt:3"):
        FlowSizeCDF.load(bad)
    bad.write_text("0 0\n100 0.9\n")
    with pytest.raises(ValueError, match=r"bad\.txt:2.*must be 1"):
        FlowSizeCDF.load(bad)


def test_arrival_rate_rule_and_load_validation():
    # HPCC: lambda = load * link_bps / (8 * mean_bytes)
    assert arrival_rate_per_s(0.5, 100e6, 125_000) == pytest.approx(50.0)
    for load in (0.0, -0.1, 1.01):
        with pytest.raises(ValueError, match="load"):
            arrival_rate_per_s(load, 100e6, 125_000)


def test_poisson_arrivals_rate_within_statistical_bounds():
    rate_per_s, duration_s = 200.0, 500.0
    starts_s = poisson_arrivals(np.random.default_rng(11), rate_per_s, duration_s)
    expected = rate_per_s * duration_s
    assert abs(len(starts_s) - expected) < 4 * np.sqrt(expected)  # 4 sigma of the Poisson count
    assert np.all(np.diff(starts_s) >= 0) and starts_s[0] >= 0 and starts_s[-1] < duration_s
    gaps_s = np.diff(starts_s)
    assert abs(gaps_s.mean() * rate_per_s - 1) < 4 / np.sqrt(len(gaps_s))  # exponential gaps, mean 1/rate
    assert len(poisson_arrivals(np.random.default_rng(0), 0.0, 10.0)) == 0


def test_plan_flows_is_deterministic_and_never_self_addressed():
    cdf = FlowSizeCDF.load("hadoop")
    hosts = [f"h{i}" for i in range(1, 5)]
    args = dict(cdf=cdf, load=0.5, link_rate_bps=100e6, duration_s=20.0, senders=hosts, receivers=hosts)
    plan = plan_flows(seed=42, **args)
    assert plan == plan_flows(seed=42, **args)
    assert plan != plan_flows(seed=43, **args)
    assert all(flow.sender != flow.receiver for flow in plan)
    assert {flow.receiver for flow in plan} == set(hosts)
    assert [flow.start_s for flow in plan] == sorted(flow.start_s for flow in plan)
    expected = len(hosts) * arrival_rate_per_s(0.5, 100e6, cdf.mean_bytes()) * 20.0
    assert abs(len(plan) - expected) < 4 * np.sqrt(expected)
    with pytest.raises(ValueError, match="no receiver"):
        plan_flows(cdf, 0.5, 100e6, 1.0, ["h1"], ["h1"], seed=1)


def test_a_longer_window_adds_flows_at_its_end_and_changes_none_before():
    """Past its first minute a window's flows are drawn minute by minute: the plan of 300 s (an untimed
    background's run_timeout) starts with the plan of 60 s and of 130 s, flow for flow; within the first
    minute a shorter window is drawn as a whole, so its draws differ."""
    cdf = FlowSizeCDF.load("hadoop")
    args = dict(cdf=cdf, load=0.8, link_rate_bps=4e6, senders=["h7", "h8"], receivers=["h3"], seed=1000)
    long = plan_flows(duration_s=300.0, **args)
    assert long[-1].start_s > 240.0
    for window_s in (60.0, 130.0):
        assert [flow for flow in long if flow.start_s < window_s] == plan_flows(duration_s=window_s, **args)
    assert [flow for flow in long if flow.start_s < 20.0] != plan_flows(duration_s=20.0, **args)
    sizes = [[flow.size_bytes for flow in long if minute * 60.0 <= flow.start_s < (minute + 1) * 60.0]
             for minute in (0, 1)]
    assert sizes[1] and sizes[1][:len(sizes[0])] != sizes[0][:len(sizes[1])]   # each minute its own stream


def _offered_load_over(scenario, seconds: float) -> float:
    """The load ``scenario``'s first background offers its link over the run's first ``seconds``: the
    ``offered_load`` a run's summary gives (``background.summarise``) were the flows its plan starts by then
    (flowgen's configs, as a run writes them) its sources' records."""
    started = [{**flow, "completed": False}
               for _, _, name, config in flowgen_configs(scenario, scenario.run_timeout_s, 0.0, Path("."))
               if name.startswith("bg0-source") for flow in config["flows"] if flow["start_s"] < seconds]
    return summarise_background(scenario, {0: started}, {0: seconds})[0]["offered_load"]


def test_capped_flows_make_pa_atp_fig10s_load_the_load_it_asks_for():
    """What fig10.yaml's header says of the plans: over a run's first 40 s, its load 0.8 with the flows as
    drawn offers from under half the link to over one and a half times it on its eight seeds, and with
    every flow capped at 100 kB, as the sweep runs them, the same seeds offer 0.7 to 0.9 of it."""
    spec = load_sweep(REPO_ROOT / "scenarios" / "papers" / "pa-atp" / "fig10.yaml")
    atp_at_0_8 = sorted((point for point in spec.points if dict(point.values)["scheme"] == "ATP"
                         and dict(point.values)["background.0.load"] == 0.8), key=lambda point: point.repetition)
    capped, uncapped = [], []
    for point in atp_at_0_8:
        scenario = spec.scenario_of(point)
        capped.append(_offered_load_over(scenario, 40.0))
        as_drawn = [dataclasses.replace(background, max_flow_bytes=0.0) for background in scenario.background]
        uncapped.append(_offered_load_over(dataclasses.replace(scenario, background=as_drawn), 40.0))
    assert len(uncapped) == len(capped) == 8
    assert min(uncapped) < 0.5 and max(uncapped) > 1.5
    assert 0.7 <= min(capped) and max(capped) <= 0.9


def test_summarise_flows_on_hand_made_records():
    records = [
        {"src": "h1", "dst": "10.0.0.2", "size_bytes": 1000, "start_s": 0.0, "fct_s": 0.1, "completed": True},
        {"src": "h1", "dst": "10.0.0.2", "size_bytes": 3000, "start_s": 0.2, "fct_s": 0.2, "completed": True},
        {"src": "h1", "dst": "10.0.0.3", "size_bytes": 6000, "start_s": 0.4, "fct_s": 0.3, "completed": True},
        {"src": "h1", "dst": "10.0.0.3", "size_bytes": 10000, "start_s": 0.9, "fct_s": None, "completed": False},
    ]
    summary = summarise_flows(records, duration_s=1.0, link_rate_bps=80_000)  # capacity 10 000 bytes
    assert summary["flow_count"] == 4 and summary["completed_count"] == 3
    assert summary["delivered_bytes"] == 10_000 and summary["offered_bytes"] == 20_000
    assert summary["achieved_load"] == pytest.approx(1.0)
    assert summary["offered_load"] == pytest.approx(2.0)
    assert summary["mean_size_bytes"] == pytest.approx(5000)
    assert summary["fct_p50_s"] == pytest.approx(0.2)
    assert summary["fct_p95_s"] == pytest.approx(np.percentile([0.1, 0.2, 0.3], 95))
    assert summary["fct_p99_s"] == pytest.approx(np.percentile([0.1, 0.2, 0.3], 99))
    assert summarise_flows([], 1.0, 1e6)["fct_p50_s"] is None


def test_received_load_counts_the_bytes_of_flows_cut_off_at_the_deadline():
    # Two completed connections and one still running at the deadline: achieved_load (completed flows,
    # from the sources) leaves the running one's 7 000 bytes out; received_load (the sinks) does not.
    sink_records = [{"peer": "10.0.0.1:1", "bytes": 1000, "completed": True},
                    {"peer": "10.0.0.1:2", "bytes": 2000, "completed": True},
                    {"peer": "10.0.0.2:3", "bytes": 7000, "completed": False}]
    out = received_load(sink_records, duration_s=2.0, link_rate_bps=40_000)   # capacity 10 000 bytes
    assert out == {"received_bytes": 10_000, "received_load": pytest.approx(1.0)}
    assert received_load([], 1.0, 1e6)["received_load"] == 0
    with pytest.raises(ValueError):
        received_load(sink_records, 0.0, 1e6)


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _spawn(config, path):
    path.write_text(json.dumps(config))
    env = dict(os.environ, PYTHONPATH=str(REPO_ROOT))
    return subprocess.Popen([sys.executable, "-m", "testbed.traffic.flowgen", str(path)], cwd=REPO_ROOT, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _stop(procs):
    for proc in procs:
        if proc.poll() is None:
            proc.kill()
        proc.wait(timeout=5)
        proc.stdout.close()
        proc.stderr.close()


def _wait(proc, timeout_s):
    """Bounded polling until ``proc`` exits; returns its exit code (None on timeout)."""
    deadline = time.monotonic() + timeout_s
    while proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    return proc.poll()


def test_source_ports_are_distinct_below_the_ephemeral_range_and_spread_over_ecmp_members():
    ports = [source_port(i) for i in range(SOURCE_PORTS)]
    assert len(set(ports)) == SOURCE_PORTS and min(ports) == 10000 and max(ports) == 32767
    assert source_port(SOURCE_PORTS + 5) == source_port(5) and ports[:3] != [10000, 10001, 10002]
    # 300 flows of one sender to one sink over four paths, hashed as route_ecmp hashes: each path gets its share
    def tcp_frame(src_port):
        frame = bytearray(build_frame("02:00:00:00:00:01", "02:00:00:00:00:02", "10.0.0.7", "10.0.0.11", b"",
                                      src_port=src_port, dst_port=5001))
        frame[23] = socket.IPPROTO_TCP
        return frame

    members = collections.Counter(ecmp_member(tcp_frame(source_port(i)), 4) for i in range(300))
    assert sorted(members) == [0, 1, 2, 3] and min(members.values()) > 50, members


def test_flowgen_over_loopback(tmp_path):
    port = _free_port()
    now_s = time.time()
    sizes_bytes = [1, 100, 1460, 5000, 65536, 300_000, 1_000_000, 2_000_000, 17, 4096] * 2
    flows = [{"dst": "127.0.0.1", "port": port, "start_s": 0.1 * i, "size_bytes": size}
             for i, size in enumerate(sizes_bytes)]
    source_out, sink_out = tmp_path / "flows.jsonl", tmp_path / "sink.jsonl"
    source_config = {"role": "source", "src": "h1", "start_epoch_s": now_s + 0.3, "stop_epoch_s": now_s + 20,
                     "output": str(source_out), "flows": flows, "congestion_control": "reno"}
    sink_config = {"role": "sink", "listen_ip": "127.0.0.1", "port": port, "stop_epoch_s": now_s + 30,
                   "output": str(sink_out), "congestion_control": "reno"}
    procs = []
    try:
        # The source starts first on purpose: it must retry until the sink listens.
        procs.append(_spawn(source_config, tmp_path / "source.json"))
        procs.append(_spawn(sink_config, tmp_path / "sink.json"))
        source, sink = procs
        assert _wait(source, 25) == 0, source.stderr.read()
        sink.send_signal(signal.SIGTERM)
        assert _wait(sink, 5) == 0, sink.stderr.read()
        records = [json.loads(line) for line in source_out.read_text().splitlines()]
        assert sorted(r["size_bytes"] for r in records) == sorted(sizes_bytes)
        assert all(r["completed"] and r["fct_s"] > 0 and r["src"] == "h1" for r in records)
        assert {r["congestion_control"] for r in records} == {"reno"}       # as the sockets reported it
        assert not any(r["syn_retransmitted"] for r in records)            # no SYN lost over loopback
        sink_records = [json.loads(line) for line in sink_out.read_text().splitlines()]
        assert sorted(r["bytes"] for r in sink_records if r["completed"]) == sorted(sizes_bytes)
        assert {r["congestion_control"] for r in sink_records} == {"reno"}  # accepted with the listener's
        # flow i left from source_port(i): ECMP per flow hashes the plan's ports, not ones the kernel picked
        assert sorted(int(r["peer"].rpartition(":")[2]) for r in sink_records) == \
            sorted(source_port(i) for i in range(len(flows)))
        source_stdout = source.stdout.read()
        assert "20 flows" in source_stdout and "20/20 flows completed" in source_stdout
    finally:
        _stop(procs)


def test_a_flow_whose_seeded_port_already_connects_to_its_sink_leaves_from_a_port_the_kernel_picks(tmp_path):
    """After a source's ports wrap, flow i's port may still hold an earlier connection to the same sink (open, or
    in TIME_WAIT): the four-tuple is taken and connect fails with EADDRNOTAVAIL however often it is retried. The
    flow then leaves from a port the kernel picks and completes; the test holds the four-tuple open itself."""
    port = _free_port()
    now_s = time.time()
    source_out, sink_out = tmp_path / "flows.jsonl", tmp_path / "sink.jsonl"
    sink_config = {"role": "sink", "listen_ip": "127.0.0.1", "port": port, "stop_epoch_s": now_s + 30,
                   "output": str(sink_out)}
    source_config = {"role": "source", "src": "h1", "start_epoch_s": now_s, "stop_epoch_s": now_s + 10,
                     "output": str(source_out),
                     "flows": [{"dst": "127.0.0.1", "port": port, "start_s": 0.0, "size_bytes": 5000}]}
    procs = []
    holder = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        procs.append(_spawn(sink_config, tmp_path / "sink.json"))
        sink = procs[0]
        assert "listening" in sink.stdout.readline()
        holder.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        holder.bind(("127.0.0.1", source_port(0)))
        holder.connect(("127.0.0.1", port))
        procs.append(_spawn(source_config, tmp_path / "source.json"))
        source = procs[1]
        assert _wait(source, 9) == 0, source.stderr.read()
        assert [(r["completed"], r["size_bytes"]) for r in map(json.loads, source_out.read_text().splitlines())] \
            == [(True, 5000)]
        sink.send_signal(signal.SIGTERM)
        assert _wait(sink, 5) == 0, sink.stderr.read()
        completed = [r for r in map(json.loads, sink_out.read_text().splitlines()) if r["completed"]]
        assert [r["bytes"] for r in completed] == [5000]
        assert int(completed[0]["peer"].rpartition(":")[2]) != source_port(0)
    finally:
        holder.close()
        _stop(procs)


def test_flowgen_records_unreachable_flows_at_sigterm(tmp_path):
    port = _free_port()  # nothing listens: the source keeps retrying
    now_s = time.time()
    out = tmp_path / "flows.jsonl"
    config = {"role": "source", "start_epoch_s": now_s, "stop_epoch_s": now_s + 60, "output": str(out),
              "flows": [{"dst": "127.0.0.1", "port": port, "start_s": 0.0, "size_bytes": 10},
                        {"dst": "127.0.0.1", "port": port, "start_s": 50.0, "size_bytes": 20}]}
    procs = []
    try:
        procs.append(_spawn(config, tmp_path / "source.json"))
        source = procs[0]
        assert "flowgen source" in source.stdout.readline()  # signal handlers are installed by now
        source.send_signal(signal.SIGTERM)
        assert _wait(source, 5) == 0
        records = [json.loads(line) for line in out.read_text().splitlines()]
        assert [(r["size_bytes"], r["completed"], r["fct_s"]) for r in records] == \
            [(10, False, None), (20, False, None)]
    finally:
        _stop(procs)


def test_flowgen_rejects_a_bad_config(tmp_path):
    config = {"role": "source", "start_epoch_s": 0, "stop_epoch_s": 1, "output": str(tmp_path / "o"),
              "flows": [{"dst": "not-an-ip", "port": 1, "start_s": 0, "size_bytes": 1}]}
    proc = _spawn(config, tmp_path / "bad.json")
    try:
        assert _wait(proc, 10) == 2
        assert "flows[0]" in proc.stderr.read()
    finally:
        _stop([proc])


def test_flowgen_refuses_a_congestion_control_the_kernel_lacks(tmp_path):
    config = {"role": "source", "start_epoch_s": 0, "stop_epoch_s": 1, "output": str(tmp_path / "o"),
              "congestion_control": "nosuchcc", "flows": []}
    proc = _spawn(config, tmp_path / "bad.json")
    try:
        assert _wait(proc, 10) == 2
        message = proc.stderr.read()
        assert "congestion_control: this kernel has no TCP congestion control 'nosuchcc'" in message
        assert "available: " in message and "reno" in message and len(message.strip().splitlines()) == 1
    finally:
        _stop([proc])
    assert congestion_control_error("reno") is None and "nosuchcc" in congestion_control_error("nosuchcc")


# --- constant-rate UDP flows -------------------------------------------------------------------------------

def _free_udp_port():
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _udp_source_config(out, flows, start_epoch_s=1000.0, stop_epoch_s=1010.0):
    return {"role": "udp-source", "src": "h7", "start_epoch_s": start_epoch_s, "stop_epoch_s": stop_epoch_s,
            "output": str(out), "flows": flows}


def _udp_flow(**overrides):
    flow = {"dst": "127.0.0.1", "port": 5101, "start_s": 0.0, "duration_s": 1.0, "rate_bps": 1e6,
            "datagram_bytes": 500}
    flow.update(overrides)
    return {k: v for k, v in flow.items() if v is not None}  # None: leave the field out


def _read_jsonl(path):
    return [json.loads(line) for line in path.read_text().splitlines()]


UDP_SINK_CONFIG = {"role": "udp-sink", "port": 5101, "listen_ip": "0.0.0.0", "stop_epoch_s": 1010.0, "output": "y"}


@pytest.mark.parametrize("role, field", [("udp-source", f)
                                         for f in ("start_epoch_s", "stop_epoch_s", "output", "flows")]
                         + [("udp-sink", "port"), ("udp-sink", "output")])
def test_udp_config_lacking_a_required_field_names_it(tmp_path, role, field):
    config = _udp_source_config("x", [_udp_flow()]) if role == "udp-source" else dict(UDP_SINK_CONFIG)
    del config[field]
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(config))
    with pytest.raises(ValueError, match=rf"bad\.json: {role} config lacks {field}"):
        load_config(str(path))


@pytest.mark.parametrize("field, value", [
    ("dst", None), ("dst", "h9"), ("port", None), ("port", 0), ("port", 70000), ("port", "5101"),
    ("start_s", None), ("start_s", -0.1), ("duration_s", None), ("duration_s", 0), ("rate_bps", None),
    ("rate_bps", 0), ("rate_bps", -1e6), ("rate_bps", "fast"), ("datagram_bytes", 11), ("datagram_bytes", 1473),
    ("datagram_bytes", 500.5), ("datagram_bytes", True),
])
def test_udp_source_config_names_the_bad_flow_field(tmp_path, field, value):
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(_udp_source_config("x", [_udp_flow(), _udp_flow(**{field: value})])))
    with pytest.raises(ValueError, match=rf"bad\.json: flows\[1\]\.{field} must be"):
        load_config(str(path))


@pytest.mark.parametrize("config, field", [
    ({**UDP_SINK_CONFIG, "port": 0}, "port"), ({**UDP_SINK_CONFIG, "listen_ip": "any"}, "listen_ip"),
    ({**UDP_SINK_CONFIG, "stop_epoch_s": "soon"}, "stop_epoch_s"), ({**UDP_SINK_CONFIG, "output": ""}, "output"),
    (_udp_source_config("x", {"dst": "127.0.0.1"}), "flows"), (_udp_source_config("", []), "output"),
    (_udp_source_config("x", [], start_epoch_s="now"), "start_epoch_s"),
])
def test_udp_config_names_a_bad_top_level_field(tmp_path, config, field):
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(config))
    with pytest.raises(ValueError, match=rf"bad\.json: {field} must be"):
        load_config(str(path))


def test_udp_configs_that_are_valid_load(tmp_path):
    path = tmp_path / "ok.json"
    path.write_text(json.dumps(_udp_source_config("x", [_udp_flow(datagram_bytes=None), _udp_flow(datagram_bytes=12),
                                                        _udp_flow(datagram_bytes=1472, rate_bps=1)])))
    assert len(load_config(str(path))["flows"]) == 3
    path.write_text(json.dumps({"role": "udp-sink", "port": 5101, "output": "y"}))
    assert load_config(str(path))["port"] == 5101


def test_udp_flowgen_rejects_a_bad_config_with_exit_2(tmp_path):
    proc = _spawn(_udp_source_config(tmp_path / "o", [_udp_flow(rate_bps=0)]), tmp_path / "bad.json")
    try:
        assert _wait(proc, 10) == 2
        stderr = proc.stderr.read()
        assert len(stderr.splitlines()) == 1 and "bad.json" in stderr and "flows[0].rate_bps" in stderr
    finally:
        _stop([proc])


def test_udp_catch_up_after_a_late_wake_is_bounded():
    # The flow began 1 s ago at one 100-byte IP packet per ms: 1000 departures are overdue.
    now_s = time.time()
    flow = _udp_flow(port=_free_udp_port(), duration_s=10.0, rate_bps=800_000, datagram_bytes=72)
    wake_a, wake_b = socket.socketpair()
    source = _UdpSource(_udp_source_config("x", [flow], now_s - 1.0, now_s + 10), _StopFlag(), wake_a)
    try:
        due_mono_s, index = heapq.heappop(source.timers)  # as run() does
        now_mono_s = time.monotonic()
        source._serve(index, now_mono_s)
        state = source.flows[0]
        assert state.sent_datagrams == MAX_BURST_DATAGRAMS and state.send_drops == 0  # not the 1000 overdue
        assert state.max_lag_s == pytest.approx(now_mono_s - due_mono_s) and state.max_lag_s > 0.9
        next_mono_s, index = heapq.heappop(source.timers)
        assert now_mono_s < next_mono_s <= now_mono_s + 0.001 + 1e-9  # the backlog is forgiven: one interval on
        source._serve(index, next_mono_s + 0.0025)  # departures due at +0, +1 and +2 ms
        assert state.sent_datagrams == MAX_BURST_DATAGRAMS + 3 and state.max_lag_s > 0.9
    finally:
        source._close(source.flows[0])
        wake_a.close()
        wake_b.close()


def test_udp_flowgen_over_loopback(tmp_path):
    port = _free_udp_port()
    rate_bps, duration_s, datagram_bytes = 2e6, 1.0, 500
    sink_out, source_out = tmp_path / "sink.jsonl", tmp_path / "udp.jsonl"
    procs = []
    try:
        now_s = time.time()
        procs.append(_spawn({"role": "udp-sink", "listen_ip": "127.0.0.1", "port": port, "stop_epoch_s": now_s + 10,
                             "output": str(sink_out)}, tmp_path / "sink.json"))
        sink = procs[0]
        assert "flowgen udp-sink: listening" in sink.stdout.readline()  # bound by now
        start_epoch_s = time.time() + 1.0      # time for the source to start on a loaded machine
        flows = [_udp_flow(port=port, duration_s=duration_s, rate_bps=rate_bps, datagram_bytes=datagram_bytes)]
        procs.append(_spawn(_udp_source_config(source_out, flows, start_epoch_s, start_epoch_s + 5),
                            tmp_path / "source.json"))
        source = procs[1]
        assert _wait(source, 4) == 0, source.stderr.read()
        assert time.time() >= start_epoch_s + 0.99  # paced over the whole second, not sent in a burst
        sink.send_signal(signal.SIGTERM)
        assert _wait(sink, 5) == 0, sink.stderr.read()
        (record,) = _read_jsonl(source_out)
        ip_bytes = datagram_bytes + 28
        assert record["completed"] is True and record["src"] == "h7" and record["flow"] == 0
        assert record["send_drops"] == 0 and record["sent_bytes"] == record["sent_datagrams"] * ip_bytes
        assert abs(record["sent_bytes"] / (rate_bps * duration_s / 8) - 1) < 0.1
        assert record["sent_datagrams"] <= math.ceil(duration_s * rate_bps / (8 * ip_bytes))
        assert 0 <= record["max_start_lag_s"] < 0.5
        (received,) = _read_jsonl(sink_out)
        assert received["peer"] == "127.0.0.1" and received["flow"] == 0
        assert received["datagrams"] > 0.9 * record["sent_datagrams"]
        assert received["bytes"] == received["datagrams"] * ip_bytes
        assert 0 <= received["lost"] <= record["sent_datagrams"] - received["datagrams"]
        source_lines = source.stdout.read().splitlines()
        assert len(source_lines) == 2 and "1/1 flows completed" in source_lines[1]
        sink_lines = sink.stdout.read().splitlines()
        assert len(sink_lines) == 1 and f"{received['datagrams']} datagrams" in sink_lines[0]
    finally:
        _stop(procs)


def test_udp_source_stopped_by_sigterm_records_what_it_sent(tmp_path):
    out = tmp_path / "udp.jsonl"
    port = _free_udp_port()  # nothing listens: unconnected UDP sends do not care
    start_epoch_s = time.time() + 1.0      # time for the source to start on a loaded machine
    # 125-byte IP packets at 1 Mb/s: one per ms; flow 0 ends after 201 of them, flow 1 would run 30 s.
    flows = [_udp_flow(port=port, duration_s=0.2005, rate_bps=1e6, datagram_bytes=97),
             _udp_flow(port=port, duration_s=30.0, rate_bps=1e6, datagram_bytes=97)]
    procs = []
    try:
        procs.append(_spawn(_udp_source_config(out, flows, start_epoch_s, start_epoch_s + 60), tmp_path / "src.json"))
        source = procs[0]
        assert "flowgen udp-source h7" in source.stdout.readline()  # signal handlers are installed by now
        while time.time() < start_epoch_s + 0.5:  # let flow 0 end and flow 1 run a while
            time.sleep(0.05)
        source.send_signal(signal.SIGTERM)
        assert _wait(source, 5) == 0, source.stderr.read()
        first, second = _read_jsonl(out)
        assert first["completed"] is True and 0.9 * 201 <= first["sent_datagrams"] <= 201
        assert second["completed"] is False and 0 < second["sent_datagrams"] < 30_000
        assert second["sent_bytes"] == second["sent_datagrams"] * 125
        assert "stopped (signal)" in source.stdout.read()
    finally:
        _stop(procs)


def test_udp_source_deadline_cuts_a_flow(tmp_path):
    out = tmp_path / "udp.jsonl"
    # The common start leaves the source's Python time to start on a loaded machine (0.1 s did not, once,
    # beside a running test suite: the deadline passed before its first datagram).
    start_epoch_s = time.time() + 1.5
    flows = [_udp_flow(port=_free_udp_port(), duration_s=10.0, rate_bps=1e6),
             _udp_flow(port=_free_udp_port(), start_s=20.0, duration_s=1.0)]  # never starts
    procs = []
    try:
        procs.append(_spawn(_udp_source_config(out, flows, start_epoch_s, start_epoch_s + 0.4), tmp_path / "src.json"))
        source = procs[0]
        assert _wait(source, 5) == 0, source.stderr.read()
        running, unstarted = _read_jsonl(out)
        assert running["completed"] is False and running["sent_datagrams"] > 0
        assert unstarted["completed"] is False and unstarted["sent_datagrams"] == 0
        assert unstarted["max_start_lag_s"] is None
        assert "stopped (deadline)" in source.stdout.read()
    finally:
        _stop(procs)
