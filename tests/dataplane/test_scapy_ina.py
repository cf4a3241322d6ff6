"""The scapy INA layer agrees with the struct codec byte for byte, and dissects pcaps."""

import numpy as np
from scapy.all import IP, UDP, Ether, raw, rdpcap, wrpcap

from testbed.dataplane import wire
from testbed.dataplane.scapy_ina import INA


def _frame(**fields):
    header = wire.InaHeader(**fields)
    lanes = np.arange(header.elems, dtype=np.int32) - 3
    return wire.build_ina_frame("02:00:00:00:00:02", "02:00:00:00:00:01", "10.0.0.1", "10.0.0.2", header, lanes), lanes


def test_dissects_what_the_codec_builds():
    frame, lanes = _frame(job=5, flags=wire.FLAG_DATA | wire.FLAG_RETX, elems=6, level=2, agg_node=9, fanin=4,
                          count=3, submodel=1, iteration=77, seq=123456, slot=42, bitmap=(1 << 63) | 5, progress=9)
    ina = Ether(frame)[INA]
    assert (ina.job, ina.elems, ina.level, ina.agg_node, ina.fanin, ina.count, ina.submodel) == (5, 6, 2, 9, 4, 3, 1)
    assert (ina.iteration, ina.seq, ina.slot, ina.bitmap, ina.progress) == (77, 123456, 42, (1 << 63) | 5, 9)
    assert ina.lanes == list(lanes) and str(ina.flags) == "DATA+RETX"


def test_builds_what_the_codec_parses():
    pkt = (Ether(dst="02:00:00:00:00:02", src="02:00:00:00:00:01") / IP(src="10.0.0.1", dst="10.0.0.2") /
           UDP(sport=wire.INA_UDP_PORT, dport=wire.INA_UDP_PORT) /
           INA(job=5, flags="RESULT", count=3, seq=8, bitmap=7, lanes=[1, -1, 2**31 - 1]))
    parsed = wire.parse_frame(raw(pkt))
    assert parsed.ina.elems == 3 and parsed.ina.flags == wire.FLAG_RESULT and parsed.ina.bitmap == 7
    assert list(parsed.lanes) == [1, -1, 2**31 - 1] and parsed.ip_checksum_ok


def test_reads_pcaps(tmp_path):
    frames = [_frame(seq=s, elems=4)[0] for s in range(3)]
    path = tmp_path / "ina.pcap"
    wrpcap(str(path), [Ether(f) for f in frames])
    packets = rdpcap(str(path))
    assert [p[INA].seq for p in packets] == [0, 1, 2]
    assert all(raw(p) == f for p, f in zip(packets, frames))
