"""Packet captures on every target: the quickstart with ``metrics.pcap: [ps, s1-eth1]`` writes one pcap file per
interface, which scapy's INA layer dissects into the job's fragments, each file within its cap, and the
machine is clean after."""

from pathlib import Path

import pytest
from scapy.all import IP, rdpcap
from support import require_bmv2
from test_quickstart import QUICKSTART, assert_clean

from testbed.dataplane import wire
from testbed.dataplane.scapy_ina import INA
from testbed.emulation.orchestrator import run_scenario
from testbed.scenario import load_scenario

ITERATIONS = 5
CAP_BYTES = 2_000_000
#: A cap the capture of the worker's port reaches within the run (~40 INA frames of ~340 bytes an iteration).
SMALL_CAP_BYTES = 20_000


def ina_packets(path: Path, job_id: int):
    return [p for p in rdpcap(str(path)) if INA in p and p[INA].job == job_id]


@pytest.mark.parametrize("target", ("pyswitch", "bmv2", "ebpf"))
def test_captures_hold_the_jobs_fragments_within_their_cap(target, emulation, tmp_path, quiet):
    if target == "bmv2":
        require_bmv2()
    scenario = load_scenario(QUICKSTART, [f"jobs.0.iterations={ITERATIONS}", "metrics.pcap=[ps, s1-eth1]",
                                          f"metrics.pcap_max_size={CAP_BYTES}B"])
    result = run_scenario(scenario, out_root=tmp_path, target=target, stream=quiet)
    assert result.summary["status"] == "ok" and result.summary["aggregation_exact"] is True
    job_id = scenario.jobs[0].job_id
    w1_ip, ps_ip = scenario.topology.node("w1").ip, scenario.topology.node("ps").ip
    pcap_dir = result.run_dir / "pcap"
    assert sorted(p.name for p in pcap_dir.iterdir()) == ["ps-eth0.pcap", "s1-eth1.pcap"]
    for path in pcap_dir.iterdir():
        assert path.stat().st_size <= CAP_BYTES, path

    w1_port = ina_packets(pcap_dir / "s1-eth1.pcap", job_id)          # s1's port facing w1 (the first link)
    sent = [p for p in w1_port if p[IP].src == w1_ip and p[INA].flags & wire.FLAG_DATA]
    results = [p for p in w1_port if p[IP].src != w1_ip and p[INA].flags & wire.FLAG_RESULT]   # toward w1
    assert sent and results, [p.summary() for p in w1_port[:10]]
    assert len({p[INA].seq for p in sent}) > 1                       # the gradient's fragments, by sequence number
    assert {p[INA].iteration for p in sent} >= set(range(1, ITERATIONS)), sorted({p[INA].iteration for p in sent})
    assert all(len(p[INA].lanes) == p[INA].elems > 0 for p in sent)  # whole fragments: the snap length keeps them

    at_ps = ina_packets(pcap_dir / "ps-eth0.pcap", job_id)
    assert any(p[IP].dst == ps_ip for p in at_ps) and any(p[IP].src == ps_ip for p in at_ps)
    assert_clean()


def test_a_capture_stops_at_its_cap_and_the_run_goes_on(emulation, tmp_path, quiet):
    scenario = load_scenario(QUICKSTART, [f"jobs.0.iterations={ITERATIONS}", "metrics.pcap=[s1-eth1]",
                                          f"metrics.pcap_max_size={SMALL_CAP_BYTES}B"])
    result = run_scenario(scenario, out_root=tmp_path, target="pyswitch", stream=quiet)
    assert result.summary["status"] == "ok" and result.summary["aggregation_exact"] is True
    path = result.run_dir / "pcap" / "s1-eth1.pcap"
    assert SMALL_CAP_BYTES - wire.ina_frame_bytes(wire.MAX_LANES) - 16 < path.stat().st_size <= SMALL_CAP_BYTES
    assert ina_packets(path, scenario.jobs[0].job_id)
    assert "stopped at its cap" in (result.run_dir / "logs" / "pcap-s1-eth1.log").read_text()
    assert_clean()
