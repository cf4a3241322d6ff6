"""What a parameter server holds of one fragment: a pure merge of the pieces that reach it.

A *piece* is anything carrying contributions to one fragment (a worker's raw
gradient, a switch's aggregate, a flushed partial), named by its contributor
``bitmap``. The data plane builds every aggregate of first sends only (a
retransmission joins no partial, p4/README.md "The slot logic"), each first
send in one aggregate, so any two pieces are disjoint or one contains the
other. :meth:`FragmentSum.merge` keeps the pieces it took, disjoint, and their
``total``:

- disjoint from every piece held: added (the usual case);
- within what is held: a duplicate, dropped;
- containing every held piece it touches (a fuller aggregate after a flush, or
  the aggregate a retransmission reached the PS ahead of): those pieces are
  replaced by it, their lanes taken out of the total and its lanes put in;
- cutting across a held piece: an overlap, dropped (the data plane never
  makes one; kept apart so that a run can count it).

Lanes are int64 here: a sum less a piece is exact.
"""

import numpy as np

ADDED, DUPLICATE, REPLACED, OVERLAP = "added", "duplicate", "replaced", "overlap"


class FragmentSum:
    __slots__ = ("bitmap", "total", "pieces")

    def __init__(self, lanes: int):
        self.bitmap = 0
        self.total = np.zeros(lanes, dtype=np.int64)
        self.pieces = []          # (bitmap, int64 lanes), pairwise disjoint; their union is ``bitmap``

    def merge(self, bitmap: int, lanes: np.ndarray) -> str:
        """Take the piece (``bitmap``, ``lanes``: int64, at most the fragment's lanes); say what became of it."""
        held = self.bitmap
        if not held & bitmap:
            self.total[:len(lanes)] += lanes
            self.pieces.append((bitmap, lanes))
            self.bitmap = held | bitmap
            return ADDED
        if bitmap & held == bitmap:
            return DUPLICATE
        touched = [piece for piece in self.pieces if piece[0] & bitmap]
        if any(piece_bitmap & ~bitmap for piece_bitmap, _ in touched):
            return OVERLAP
        for _, piece_lanes in touched:
            self.total[:len(piece_lanes)] -= piece_lanes
        self.total[:len(lanes)] += lanes
        self.pieces = [piece for piece in self.pieces if not piece[0] & bitmap] + [(bitmap, lanes)]
        self.bitmap = held | bitmap
        return REPLACED
