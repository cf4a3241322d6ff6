"""Datagrams in batches (testbed/agents/datagrams.py): one recvmmsg, headers, stamps and ECN bits as numpy
columns, the same values the one-at-a-time path reads. On loopback sockets: no root, no network."""

import socket
import struct
import time

import numpy as np

from testbed.agents.common import ECN_CE, Endpoint, open_endpoint
from testbed.agents.datagrams import BATCH_DATAGRAMS, CONTROL_BYTES, ReceiveBatch, parse_control
from testbed.dataplane.wire import INA_HEADER, INA_HEADER_BYTES, INA_HEADER_DTYPE
from testbed.metrics.host_delay import SO_TIMESTAMPNS


def frame(seq: int, lanes=(1, -2, 3)) -> bytes:
    header = INA_HEADER.pack(3, 0x0001, len(lanes), 1, 7, 2, 1, 5, 9, seq, seq % 16, (1 << 40) + seq, 77)
    return header + np.array(lanes, dtype=">i4").tobytes()


def pair(port: int):
    receiver = open_endpoint("127.0.0.1", port, "127.0.0.1")
    sender = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sender.bind(("127.0.0.1", 0))
    return receiver, sender


def test_the_header_record_is_the_struct_byte_for_byte():
    assert INA_HEADER_DTYPE.itemsize == INA_HEADER_BYTES
    data = frame(12345)[:INA_HEADER_BYTES]
    assert np.frombuffer(data, dtype=INA_HEADER_DTYPE).tolist() == [INA_HEADER.unpack(data)]


def test_a_batch_takes_what_waits_and_reads_headers_lanes_stamps_ce_and_senders():
    receiver, sender = pair(47001)
    try:
        before_s = time.time()
        for seq in range(5):
            sender.sendto(frame(seq), ("127.0.0.1", 47001))
        sender.setsockopt(socket.IPPROTO_IP, socket.IP_TOS, ECN_CE)
        sender.sendto(frame(5), ("127.0.0.1", 47001))
        sender.sendto(b"\x00" * 10, ("127.0.0.1", 47001))        # a runt: metered, not handed over
        time.sleep(0.05)
        batch = ReceiveBatch(receiver)
        handed = list(batch.drain())
        assert batch.count == 7 and [i for i, _ in handed] == list(range(6))
        assert [header for _, header in handed] == [INA_HEADER.unpack(frame(seq)[:INA_HEADER_BYTES])
                                                    for seq in range(6)]
        assert batch.lanes(2, 3).tolist() == [1, -2, 3]
        assert batch.lane_bytes(2, 3) == np.array([1, -2, 3], dtype=">i4").tobytes() == frame(2)[INA_HEADER_BYTES:]
        assert [batch.length(i) for i in range(7)] == [len(frame(0))] * 6 + [10]
        assert [batch.ce(i) for i in range(7)] == [False] * 5 + [True, True]     # the runt left CE-marked too
        assert batch.sender(0) == sender.getsockname()
        # Every datagram stamped and read in the kernel's layout: the stamp first, then the TOS byte.
        assert batch.parsed_apart == 0
        wait = receiver.host_delay.summary()["receive_wait"]
        assert wait["count"] == 7 and 0 <= wait["max_s"] <= time.time() - before_s
        assert list(batch.drain()) == [] and batch.count == 0
    finally:
        receiver.close()
        sender.close()


def test_more_than_a_batch_comes_in_batches_in_order():
    receiver, sender = pair(47002)
    try:
        for seq in range(BATCH_DATAGRAMS + 10):
            sender.sendto(frame(seq), ("127.0.0.1", 47002))
        time.sleep(0.05)
        batch = ReceiveBatch(receiver)
        assert [header[9] for _, header in batch.drain()] == list(range(BATCH_DATAGRAMS + 10))
        assert batch.count == 10                                 # the second batch, short of full, ended it
    finally:
        receiver.close()
        sender.close()


def test_a_datagram_without_the_usual_ancillary_layout_is_parsed_on_its_own():
    # No kernel stamp asked for: only the TOS byte comes, and the columns read no stamp.
    receiver = Endpoint()
    receiver.setsockopt(socket.IPPROTO_IP, socket.IP_RECVTOS, 1)
    receiver.bind(("127.0.0.1", 47003))
    sender = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        sender.setsockopt(socket.IPPROTO_IP, socket.IP_TOS, ECN_CE)
        sender.sendto(frame(1), ("127.0.0.1", 47003))
        time.sleep(0.05)
        batch = ReceiveBatch(receiver)
        assert [header[9] for _, header in batch.drain()] == [1]
        assert batch.parsed_apart == 1 and batch.ce(0)
        assert receiver.host_delay.summary()["receive_wait"]["count"] == 0      # unstamped: not counted
    finally:
        receiver.close()
        sender.close()


def test_ancillary_data_is_parsed_whatever_its_order():
    header = struct.Struct("@Nii")
    stamp = header.pack(header.size + 16, socket.SOL_SOCKET, SO_TIMESTAMPNS) + struct.pack("@qq", 12, 500_000_000)
    tos = header.pack(header.size + 1, socket.IPPROTO_IP, socket.IP_TOS) + bytes([ECN_CE])
    tos += b"\x00" * (socket.CMSG_SPACE(1) - len(tos))
    assert len(stamp + tos) == CONTROL_BYTES
    assert parse_control(stamp + tos) == (12.5, ECN_CE)
    assert parse_control(tos + stamp) == (12.5, ECN_CE)
    assert parse_control(b"") == (0.0, 0)
