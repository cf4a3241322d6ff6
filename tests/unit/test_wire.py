import dataclasses
import struct

import numpy as np
import pytest

from testbed.dataplane import wire
from testbed.dataplane.wire import InaHeader


def test_header_is_38_bytes_and_round_trips():
    h = InaHeader(job=7, flags=wire.FLAG_DATA | wire.FLAG_RETX, elems=64, level=2, agg_node=0x8001, fanin=4, count=3,
                  submodel=9, iteration=123456, seq=99, slot=1023, bitmap=(1 << 63) | 5, progress=42)
    data = h.pack()
    assert len(data) == wire.INA_HEADER_BYTES == 38
    assert InaHeader.unpack(data) == h
    assert h.flag_names() == ["DATA", "RETX"]


def test_short_header_is_a_wire_error():
    with pytest.raises(wire.WireError):
        InaHeader.unpack(b"\0" * 10)


@pytest.mark.parametrize("workers, bound", [(1, 1.0), (4, 1.0), (64, 1.0), (8, 100.0), (3, 0.001)])
def test_scale_bits_never_overflow_the_sum(workers, bound):
    bits = wire.choose_scale_bits(workers, bound)
    assert wire.check_sum_fits(workers, bound, bits)
    assert workers * bound * 2.0 ** (bits + 1) > 2**31 - 1 or bits == 30


def test_fixed_point_round_trip_precision():
    values = np.linspace(-1, 1, 1001)
    bits = wire.choose_scale_bits(8, 1.0)
    back = wire.from_fixed(wire.to_fixed(values, bits), bits)
    assert np.max(np.abs(back - values)) <= 2.0 ** -(bits + 1)


def test_fragment_pads_the_last_fragment_with_zeros():
    rows = wire.fragment(np.arange(1, 131, dtype=np.int32), 64)
    assert rows.shape == (3, 64)
    assert rows[2, 1] == 130 and np.all(rows[2, 2:] == 0)
    assert wire.fragments_of(130, 64) == 3


def test_frame_build_and_parse():
    h = InaHeader(job=1, seq=5, elems=4)
    frame = wire.build_ina_frame("02:00:00:00:00:02", "02:00:00:00:00:01", "10.0.0.1", "10.0.0.2", h,
                                 np.array([1, -2, 3, -4], dtype=np.int32))
    assert len(frame) == wire.PAYLOAD_OFFSET + 16
    parsed = wire.parse_frame(frame)
    assert parsed.ip_checksum_ok and parsed.ina == h
    assert parsed.lanes.tolist() == [1, -2, 3, -4]
    assert parsed.src_ip == "10.0.0.1" and parsed.dst_port == wire.INA_UDP_PORT


def test_named_field_offsets_find_the_fields_a_built_frame_carries():
    h = InaHeader(job=7, flags=wire.FLAG_DATA | wire.FLAG_RETX, elems=4, level=2, agg_node=0x8001, fanin=4, count=3,
                  submodel=9, iteration=123456, seq=99, slot=1023, bitmap=(1 << 63) | 5, progress=42)
    frame = wire.build_ina_frame("02:00:00:00:00:02", "02:00:00:00:00:01", "10.0.0.1", "10.0.0.2", h,
                                 src_port=1234, ttl=17, ecn=2)
    width = {1: "!B", 2: "!H", 4: "!I", 8: "!Q"}
    fields = [f.name for f in dataclasses.fields(InaHeader)]
    offsets = [getattr(wire, f"INA_{name.upper()}_OFFSET") for name in fields]
    assert offsets == sorted(offsets) and offsets[0] == wire.INA_OFFSET
    for name, start, end in zip(fields, offsets, offsets[1:] + [wire.PAYLOAD_OFFSET]):
        assert struct.unpack_from(width[end - start], frame, start)[0] == getattr(h, name), name
    assert frame[wire.ETH_DST_OFFSET:wire.ETH_DST_OFFSET + wire.MAC_BYTES] == bytes.fromhex("020000000002")
    assert frame[wire.ETH_SRC_OFFSET:wire.ETH_SRC_OFFSET + wire.MAC_BYTES] == bytes.fromhex("020000000001")
    assert struct.unpack_from("!H", frame, wire.ETH_TYPE_OFFSET)[0] == wire.ETH_TYPE_IPV4
    assert frame[wire.IPV4_VERSION_IHL_OFFSET] == wire.IPV4_VERSION_IHL
    assert frame[wire.IPV4_TOS_OFFSET] & 3 == 2 and frame[wire.IPV4_TTL_OFFSET] == 17
    assert struct.unpack_from("!H", frame, wire.IPV4_TOTAL_LENGTH_OFFSET)[0] == len(frame) - wire.IPV4_OFFSET
    assert frame[wire.IPV4_PROTOCOL_OFFSET] == wire.IPPROTO_UDP
    assert struct.unpack_from("!H", frame, wire.IPV4_CHECKSUM_OFFSET)[0] == wire.ipv4_checksum(
        frame[wire.IPV4_OFFSET:wire.IPV4_CHECKSUM_OFFSET] + b"\0\0" + frame[wire.IPV4_SRC_OFFSET:wire.UDP_OFFSET])
    assert frame[wire.IPV4_SRC_OFFSET:wire.IPV4_SRC_OFFSET + wire.IPV4_ADDR_BYTES] == bytes([10, 0, 0, 1])
    assert frame[wire.IPV4_DST_OFFSET:wire.IPV4_DST_OFFSET + wire.IPV4_ADDR_BYTES] == bytes([10, 0, 0, 2])
    udp = (wire.UDP_SRC_PORT_OFFSET, wire.UDP_DST_PORT_OFFSET, wire.UDP_LENGTH_OFFSET, wire.UDP_CHECKSUM_OFFSET)
    assert [struct.unpack_from("!H", frame, offset)[0] for offset in udp] == [
        1234, wire.INA_UDP_PORT, len(frame) - wire.UDP_OFFSET, 0]


def test_slot_index_spreads_a_window_over_distinct_slots():
    slots = {wire.slot_index(seq, 100, 32) for seq in range(1000, 1032)}
    assert slots == set(range(100, 132))


def test_fragment_seqs_interleave_sub_models_in_proportion():
    # Midpoints: A at 1/8, 3/8, 5/8, 7/8; B and C at 1/4, 3/4; ties go to the lower sub-model.
    assert wire.fragment_seqs([4, 2, 2]) == [[0, 3, 4, 7], [1, 5], [2, 6]]
    assert wire.fragment_seqs([3, 1]) == [[0, 1, 3], [2]]
    assert wire.fragment_seqs([5]) == [[0, 1, 2, 3, 4]]


def test_fragment_seqs_number_every_fragment_once_in_sub_model_order():
    counts = [7, 1, 30, 12]
    seqs = wire.fragment_seqs(counts)
    assert sorted(s for g in seqs for s in g) == list(range(sum(counts)))
    assert all(g == sorted(g) for g in seqs)   # each sub-model's fragments leave in order


def test_gradient_rows_follow_the_seqs_of_the_layout():
    from testbed.agents.gradients import worker_fragments
    layout = [(3 * 4, 3), (4, 1)]     # sub-model 0: 3 fragments of 4 lanes, sub-model 1: one
    rows = worker_fragments(1, 1, 0, 0, layout, 4, 1.0, 8)
    drawn = np.random.default_rng([1, 1, 0, 0])
    limit = 256
    sub0 = drawn.integers(-limit, limit + 1, size=12, dtype=np.int64).reshape(3, 4)
    sub1 = drawn.integers(-limit, limit + 1, size=4, dtype=np.int64).reshape(1, 4)
    seqs = wire.fragment_seqs([3, 1])
    assert (rows[seqs[0]] == sub0).all() and (rows[seqs[1]] == sub1).all()


@pytest.mark.parametrize("total, pool", [(8, 4), (10, 4), (3, 4), (7, 1)])
def test_shadow_slot_uses_of_a_pool_slot_alternate_copies_across_iterations(total, pool):
    """Every use of a pool slot (fragments k, k + pool, ... of iteration after iteration) takes the other copy
    than the use before it, also from the last use of one iteration to the first of the next."""
    from testbed.dataplane.wire import shadow_slot
    for k in range(min(pool, total)):
        uses = [shadow_slot(seq, it, total, 10, pool) for it in range(3) for seq in range(k, total, pool)]
        assert all(slot == 10 + 2 * k + version for slot, version in uses)
        versions = [version for _, version in uses]
        assert versions == [i % 2 for i in range(len(versions))]
