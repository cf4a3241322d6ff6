"""PA-ATP's switch side outside the data plane: the PS's GACKs and the controller's opt-in and AECN threshold.

The data plane itself (progress registers, switch GACKs, AECN) is tested packet by packet on every target
in tests/dataplane/test_packets.py.
"""

import socket
import textwrap

import numpy as np
import pytest

from testbed import controller, paths
from testbed.agents import ps as ps_agent
from testbed.agents.common import ECN_CE, open_endpoint
from testbed.agents.config import AgentConfig, SubmodelAssignment
from testbed.agents.gradients import expected_sum, worker_fragments
from testbed.agents.transport.pa_atp import aecn_threshold_factor
from testbed.dataplane import program
from testbed.dataplane.wire import (FLAG_COLLISION, FLAG_DATA, FLAG_ECN_ECHO, FLAG_GACK, FLAG_RESULT, FLAG_RETX,
                                    INA_HEADER, INA_HEADER_BYTES, INA_UDP_PORT, InaHeader,
                                    ina_frame_bytes)
from testbed.errors import PlacementError
from testbed.schemes import compute_placement
from testbed.scenario import parse_scenario

LANES = 4
LAYOUT = [(8, 2)]                       # one sub-model of 8 elements: seqs 0 and 1
WORKERS = [(0, "127.0.0.11"), (1, "127.0.0.12")]    # loopback addresses: the PS reads a real socket
PS_IP = "127.0.0.19"


def ps_config(transport):
    return AgentConfig(role="ps", name="ps", ip=PS_IP, job="j", job_id=3, seed=11, iterations=1, lanes=LANES,
                       scale_bits=8, gradient_bound=1.0, total_workers=2,
                       submodels=[SubmodelAssignment(0, 8, 2, "ps", PS_IP)], total_fragments=2, layout=LAYOUT,
                       workers=WORKERS, ps_id=100, transport=transport, deadline_s=5.0)


def datagram(worker, seq, flags=FLAG_DATA, level=0, bitmap=None, progress=0, fanin=2, ce=False, lanes=None):
    """A gradient as ``worker`` sends it: (worker, its bytes, whether it arrives CE-marked)."""
    header = InaHeader(job=3, flags=flags, elems=LANES, level=level, agg_node=1, fanin=fanin, count=1, seq=seq,
                       slot=seq, bitmap=(1 << worker) if bitmap is None else bitmap, progress=progress)
    return worker, header.pack() + np.asarray(lanes, dtype=">i4").tobytes(), ce


def run_ps(transport, datagrams):
    """The PS's iteration over ``datagrams``, sent beforehand from the workers' addresses on loopback (CE-marked
    ones with that TOS byte); (what it sent, as (data, address), its record)."""
    server_sock = open_endpoint(PS_IP, INA_UDP_PORT, PS_IP)
    senders = []
    try:
        for _, ip in WORKERS:
            sender = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            sender.bind((ip, INA_UDP_PORT))
            senders.append(sender)
        for worker, data, ce in datagrams:
            senders[worker].setsockopt(socket.IPPROTO_IP, socket.IP_TOS, ECN_CE if ce else 0)
            senders[worker].sendto(data, (PS_IP, INA_UDP_PORT))
        sent = []
        server_sock.sendto = lambda data, addr: sent.append((bytes(data), addr))
        server = ps_agent.ParameterServer(ps_config(transport), server_sock, records=None)
        record = server.run_iteration(0, {}, 0.0)
        return sent, record
    finally:
        for sock in [server_sock, *senders]:
            sock.close()


def rows(worker):
    return worker_fragments(11, 3, worker, 0, LAYOUT, LANES, 1.0, 8)


def the_iteration():
    """Seq 0: worker 0's gradient overflowed at its switch (COLLISION, CE, the switch's S_sum 5), worker 1's
    sent straight here (progress 0); seq 1: the switch's aggregate of both (level 1), then a RETX of
    worker 1's seq 1 bypassed to the PS after the aggregate (a raw duplicate: still answered)."""
    return [datagram(0, 0, flags=FLAG_DATA | FLAG_COLLISION, progress=5, ce=True, lanes=rows(0)[0]),
            datagram(1, 0, lanes=rows(1)[0]),
            datagram(0, 1, level=1, bitmap=0b11, lanes=rows(0)[1] + rows(1)[1]),
            datagram(1, 1, flags=FLAG_DATA | FLAG_RETX, progress=6, lanes=rows(1)[1])]


def test_ps_answers_each_raw_gradient_of_a_pa_atp_job_with_a_gack():
    sent, record = run_ps("pa-atp", the_iteration())
    gacks = [(InaHeader.unpack(data), addr) for data, addr in sent if INA_HEADER.unpack_from(data)[1] & FLAG_GACK]
    assert [addr for _, addr in gacks] == [(WORKERS[0][1], INA_UDP_PORT), (WORKERS[1][1], INA_UDP_PORT), (WORKERS[1][1], INA_UDP_PORT)]
    first, second, third = (h for h, _ in gacks)
    assert first == InaHeader(job=3, flags=FLAG_GACK | FLAG_ECN_ECHO, elems=0, agg_node=100, fanin=2, count=1,
                              seq=0, slot=0, bitmap=0b01, progress=5)   # the PS took it; as it came: S_sum, N
    assert (second.flags, second.seq, second.bitmap, second.progress) == (FLAG_GACK, 0, 0b10, 0)
    assert (third.flags, third.seq, third.progress) == (FLAG_GACK, 1, 6)
    assert all(len(data) == INA_HEADER_BYTES for data, _ in sent if INA_HEADER.unpack_from(data)[1] & FLAG_GACK)
    # RESULTs (AACKs) as ever: one per fragment to every worker, exact; the RETX found seq 1 complete.
    results = [(INA_HEADER.unpack_from(data)[9], addr) for data, addr in sent
               if INA_HEADER.unpack_from(data)[1] & FLAG_RESULT]
    assert sorted(results) == [(0, (WORKERS[0][1], INA_UDP_PORT)), (0, (WORKERS[1][1], INA_UDP_PORT)), (1, (WORKERS[0][1], INA_UDP_PORT)),
                               (1, (WORKERS[1][1], INA_UDP_PORT)), (1, (WORKERS[1][1], INA_UDP_PORT))]
    assert record["exact"] and record["gacks_sent"] == 3
    total = expected_sum(11, 3, 2, 0, LAYOUT, LANES, 1.0, 8)
    payload = next(data for data, _ in sent if INA_HEADER.unpack_from(data)[1] & FLAG_RESULT)
    assert np.array_equal(np.frombuffer(payload, ">i4", offset=INA_HEADER_BYTES), total[0])


def test_a_whole_aggregate_is_answered_as_it_came_when_exact_and_a_wrong_one_is_reported(monkeypatch):
    """An aggregate of every worker that arrives at once is compared with the exact sum as the wire carries it and
    is its own RESULT (the PS's usual case on a switch that sums them all); one a lane off is merged and
    reported, and its RESULT carries what arrived, as any aggregate's does."""
    merged = []

    class CountedSum(ps_agent.FragmentSum):
        def merge(self, bitmap, lanes):
            merged.append(bitmap)
            return super().merge(bitmap, lanes)

    monkeypatch.setattr(ps_agent, "FragmentSum", CountedSum)
    total = expected_sum(11, 3, 2, 0, LAYOUT, LANES, 1.0, 8)
    wrong = total[1].copy()
    wrong[2] += 1
    sent, record = run_ps("atp", [datagram(0, 0, level=1, bitmap=0b11, lanes=total[0]),
                                  datagram(0, 1, level=1, bitmap=0b11, lanes=wrong)])
    assert record["exact"] is False and record["mismatched_fragments"] == 1
    assert merged == [0b11]                  # seq 0 needed no merge; seq 1's differing lanes did
    assert record["aggregate_pkts"] == 2 and record["ingress_pkts"] == 2 and record["duplicate_pkts"] == 0
    results = {}
    for data, addr in sent:
        header = INA_HEADER.unpack_from(data)
        assert header[1] & FLAG_RESULT
        results.setdefault(header[9], set()).add((data[INA_HEADER_BYTES:], addr))
    assert results == {0: {(total[0].astype(">i4").tobytes(), (ip, INA_UDP_PORT)) for _, ip in WORKERS},
                       1: {(wrong.astype(">i4").tobytes(), (ip, INA_UDP_PORT)) for _, ip in WORKERS}}


@pytest.mark.parametrize("transport", ["atp", "switchml"])
def test_ps_of_other_transports_sends_no_gack(transport):
    sent, record = run_ps(transport, the_iteration())
    assert not any(INA_HEADER.unpack_from(data)[1] & FLAG_GACK for data, _ in sent)
    assert record["gacks_sent"] == 0 and record["exact"]


def test_gack_header_keeps_the_gradients_fields_and_drops_its_lanes():
    data = datagram(1, 7, flags=FLAG_DATA | FLAG_RETX | FLAG_COLLISION, progress=2**32 - 1, fanin=9,
                    lanes=[1, 2, 3, 4])[1]
    header = INA_HEADER.unpack_from(data)
    gack = InaHeader.unpack(ps_agent.gack_header(header, ce=False, ps_node=0x8001))
    assert gack == InaHeader(job=3, flags=FLAG_GACK, elems=0, agg_node=0x8001, fanin=9, count=1, seq=7, slot=7,
                             bitmap=0b10, progress=2**32 - 1)           # agg_node: the PS took it
    assert InaHeader.unpack(ps_agent.gack_header(header, ce=True, ps_node=0x8001)).flags == FLAG_GACK | FLAG_ECN_ECHO


# -- the controller ----------------------------------------------------------------------------

def test_aecn_threshold_is_eq9s_bound_times_m_plus_bdp():
    """eta at Eq. 9's bound with C_A = AECN_AGGREGATION_SHARE x BDP: eta (M + BDP) = M + BDP - C_A - N."""
    share = controller.AECN_AGGREGATION_SHARE
    assert share == 0.5
    for m, bdp, n in ((100, 68.0, 1), (200, 70.0, 2), (1024, 4.0, 16), (8, 3.0, 1)):
        expected = m + bdp - share * bdp - n
        assert controller.aecn_threshold_pkts(m, bdp, n) == int(expected + 1e-9)
        assert controller.aecn_threshold_pkts(m, bdp, n) == \
            int(aecn_threshold_factor(m, bdp, share * bdp, n) * (m + bdp) + 1e-9)
    assert controller.aecn_threshold_pkts(100, 68.0, 1) == 133
    assert controller.aecn_threshold_pkts(2, 1.0, 1) == 1          # eta (M + BDP) = 1.5: marks above 1
    with pytest.raises(ValueError, match="no AECN threshold fits"):
        controller.aecn_threshold_pkts(2, 0.0, 2)


def test_rtt_and_bdp_estimates():
    frame = ina_frame_bytes(64)                                       # 336 bytes
    rate = 4e6
    frame_s = 8 * frame / rate
    # worker - s1 - s2 - ps at one rate: a frame each way on 3 links, plus 64 frames queued at the bottleneck
    assert paths.rtt_estimate_s([rate] * 3, frame, 64) == pytest.approx(6 * frame_s + 64 * frame_s)
    assert paths.bdp_pkts([rate] * 3, frame, 64) == pytest.approx(70.0)
    assert paths.bdp_pkts([rate] * 2, frame, 0) == pytest.approx(4.0)
    # a faster first link adds less than a frame time of the bottleneck, which sets the BDP's rate
    assert paths.bdp_pkts([4 * rate, rate], frame, 0) == pytest.approx(2 * 0.25 + 2)


THREE_JOBS = textwrap.dedent("""\
    version: 1
    scale: 0.001
    topology: {kind: explicit, switches: [s1, s2], hosts: [w1, w2, w3, w4, w5, w6, p1, p2, p3],
               links: [[w1, s1], [w2, s1], [w3, s1], [w4, s1], [w5, s1], [w6, s1], [s1, s2], [p1, s2], [p2, s2],
                       [p3, s2]]}
    switch: {queue_depth: 128, ecn_threshold: 64}
    jobs:
      - {name: a, workers: [w1, w2], ps: p1, policy: atp, window: 16, submodel_elements: [6400000],
         policy_options: {atp: {levels: 1}}, transport: pa-atp}
      - {name: b, workers: [w3, w4], ps: p2, policy: atp, window: 16, submodel_elements: [6400000],
         policy_options: {atp: {levels: 1}}}
      - {name: c, workers: [w5, w6], ps: p3, policy: atp, window: 16, submodel_elements: [6400000],
         policy_options: {atp: {levels: 1}}, transport: strawasyn}
    """)


def test_controller_opts_in_pa_atp_jobs_only_with_sessions_and_threshold():
    scenario = parse_scenario(THREE_JOBS, "t.yaml", ())
    placement = compute_placement(scenario)
    plan = controller.control_plan(scenario, placement)
    topo = scenario.topology
    s1 = plan.switches["s1"]
    opted = [(e.match, dict(e.params)) for e in s1.entries if e.table == "pa_job"]
    job_ids = {j.name: j.job_id for j in scenario.jobs}
    assert opted == [((job_ids["a"],), {"pa_index": 0, "aecn": 1}), ((job_ids["c"],), {"pa_index": 1, "aecn": 1})]
    ports = sorted(topo.port("s1", link) for link in topo.links_of("s1"))
    assert s1.mirror_sessions == [(program.gack_session(p), p) for p in ports]
    frame = ina_frame_bytes(scenario.switch.lanes)
    rate = topo.host_link("w1").rate_bps
    bdp = paths.bdp_pkts([rate] * 3, frame, 64)                # w - s1 - s2 - p
    # each opted-in job's own threshold, over its own slots (M) alone (N = 1)
    thresholds = sorted(w for w in s1.register_writes if w[0] == "aecn_threshold")
    assert thresholds == [("aecn_threshold", pa_index, controller.aecn_threshold_pkts(
        plan.slot_ranges[(job, "s1")][1], bdp, 1)) for pa_index, job in enumerate(("a", "c"))]
    assert [f"mirroring_add {program.gack_session(p)} {p}" for p in ports] == \
        [line for line in s1.to_cli_lines() if line.startswith("mirroring_add")]
    # s2 aggregates nothing: nothing PA-ATP there; the PSs know their job's transport
    s2 = plan.switches["s2"]
    assert not [e for e in s2.entries if e.table == "pa_job"] and not s2.mirror_sessions
    assert not [w for w in s2.register_writes if w[0] == "aecn_threshold"]
    assert {(a.job, a.transport) for a in plan.agents if a.role == "ps"} == {("a", "pa-atp"), ("b", "atp"),
                                                                              ("c", "strawasyn")}


def test_controller_refuses_more_pa_atp_jobs_than_the_switch_tracks():
    jobs = program.PA_JOBS + 1
    hosts = [f"h{k}" for k in range(2 * jobs)] + [f"p{k}" for k in range(jobs)]
    text = textwrap.dedent(f"""\
        version: 1
        scale: 0.001
        topology: {{kind: explicit, switches: [s1], hosts: [{', '.join(hosts)}],
                   links: [{', '.join(f'[{h}, s1]' for h in hosts)}]}}
        jobs:
        """) + "".join(f"  - {{name: j{k}, workers: [h{2 * k}, h{2 * k + 1}], ps: p{k}, policy: atp, window: 4, "
                       f"submodel_elements: [64000], transport: pa-atp}}\n" for k in range(jobs))
    scenario = parse_scenario(text, "t.yaml", ())
    with pytest.raises(PlacementError, match=f"tracks the progress of {program.PA_JOBS} per switch"):
        controller.control_plan(scenario, compute_placement(scenario))
