"""The PS's merge of one fragment's pieces (testbed/agents/fragment_sum.py), branch by branch."""

import numpy as np

from testbed.agents.fragment_sum import ADDED, DUPLICATE, OVERLAP, REPLACED, FragmentSum


def lanes(*values):
    return np.array(values, dtype=np.int64)


def test_disjoint_pieces_add_up():
    f = FragmentSum(3)
    assert f.merge(0b01, lanes(1, 2, 3)) == ADDED
    assert f.merge(0b10, lanes(10, 20, 30)) == ADDED
    assert (f.bitmap, f.total.tolist()) == (0b11, [11, 22, 33])


def test_a_shorter_piece_fills_its_own_lanes():
    f = FragmentSum(4)
    assert f.merge(0b1, lanes(5, 6)) == ADDED
    assert f.total.tolist() == [5, 6, 0, 0]


def test_a_piece_within_what_is_held_is_a_duplicate_even_across_pieces():
    f = FragmentSum(2)
    f.merge(0b001, lanes(1, 1))
    f.merge(0b010, lanes(2, 2))
    assert f.merge(0b001, lanes(1, 1)) == DUPLICATE
    assert f.merge(0b011, lanes(3, 3)) == DUPLICATE
    assert (f.bitmap, f.total.tolist()) == (0b011, [3, 3])


def test_an_aggregate_replaces_the_pieces_it_contains_and_keeps_the_others():
    """A worker's resent gradient reached the PS ahead of its rack's aggregate holding its first send:
    the aggregate takes its place; the other rack's piece stays."""
    f = FragmentSum(2)
    assert f.merge(0b0001, lanes(1, -1)) == ADDED             # w0's retransmission, alone
    assert f.merge(0b1100, lanes(12, 40)) == ADDED            # the other rack
    assert f.merge(0b0011, lanes(3, 7)) == REPLACED           # w0 + w1, the rack's aggregate
    assert (f.bitmap, f.total.tolist()) == (0b1111, [15, 47])
    assert sorted(b for b, _ in f.pieces) == [0b0011, 0b1100]


def test_a_fuller_aggregate_replaces_everything_held():
    f = FragmentSum(1)
    f.merge(0b01, lanes(4))
    assert f.merge(0b111, lanes(9)) == REPLACED
    assert (f.bitmap, f.total.tolist(), len(f.pieces)) == (0b111, [9], 1)


def test_a_piece_cutting_across_a_held_one_is_an_overlap_and_changes_nothing():
    f = FragmentSum(1)
    f.merge(0b0011, lanes(3))
    assert f.merge(0b0110, lanes(6)) == OVERLAP
    assert (f.bitmap, f.total.tolist(), len(f.pieces)) == (0b0011, [3], 1)
