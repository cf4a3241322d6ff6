"""A float gradient as the int32 fragments the switches add, and an aggregate of them back as floats.

Switches and the PS add integers, exactly; a worker turns its float gradient into integers with a scale
every worker of the job shares, so the integer sum is the sum of the floats times that scale. This follows
SwitchML's conversion (Sapio et al., "Scaling Distributed Machine Learning with In-Network Aggregation",
NSDI 2021, its handling of floating-point gradients: a scaling factor shared by the workers, chosen from a
bound on the values so that the sum of the n workers' integers cannot overflow 32 bits), which ATP adopts
(Lao et al., NSDI 2021). The rule here:

- **one scale per parameter tensor**, a power of two ``2^bits``, with ``bits`` the largest integer such
  that ``n (bound 2^bits + 1/2) <= 2^31 - 1`` (:func:`scale_bits_for`): a value clipped to ``[-bound,
  bound]`` and rounded to the nearest integer is then at most ``(2^31 - 1)/n - 1/2`` in magnitude, so the
  sum of the n workers' integers fits in int32 however the switches group it;
- **the bound of a tensor** is what every worker knows before it sends, without a round trip: the job's
  ``gradient_bound`` at the first iteration, then ``headroom`` times the largest magnitude of that tensor
  in the previous iteration's aggregated mean gradient (every worker applied the same aggregate, so every
  worker computes the same bound), never above ``gradient_bound`` and never below it times
  ``2^-MAX_BOUND_SHRINK_BITS`` (:func:`next_bounds`; "delayed scaling", as mixed-precision training does
  it from the previous step's maximum);
- **overflow is avoided by clipping**: a value beyond its tensor's bound is clipped to it and counted
  (``clipped``); a NaN or infinite value becomes 0 and counts too.

Error bound (pinned by a unit test): with no clipping, each worker's integer is within 1/2 of its float
times ``2^bits``, so the dequantized sum of n workers differs from the float sum by at most
``n / 2^(bits + 1)`` per element.

The layout is the wire's: the flat gradient (the tensors one after the other) is cut into the job's
sub-models in order, each sub-model into fragments of ``lanes`` (zero-padded), and the fragments are
indexed by seq as ``wire.fragment_seqs`` interleaves them (the synthetic gradients' layout,
``testbed.agents.gradients``).
"""

import math
from dataclasses import dataclass

import numpy as np

from testbed.agents.gradients import layout_row_of_seq
from testbed.dataplane.wire import fragments_of

INT32_MAX = 2**31 - 1
#: The most a tensor's bound shrinks below the job's ``gradient_bound`` (so a tensor whose gradient vanished
#: for an iteration does not clip the next one to nothing).
MAX_BOUND_SHRINK_BITS = 16
#: Each tensor's bound is this many times the largest magnitude of its previous aggregated mean gradient:
#: room for one worker's gradient to exceed the mean of all.
DEFAULT_HEADROOM = 8.0


def scale_bits_for(bound: float, workers: int) -> int:
    """The largest ``bits`` with ``workers * (bound * 2^bits + 1/2) <= 2^31 - 1``."""
    if workers < 1 or not bound > 0:
        raise ValueError("workers must be >= 1 and the bound > 0")
    room = INT32_MAX / workers - 0.5
    if room <= 0:
        raise ValueError(f"{workers} workers leave no room in int32")
    bits = math.floor(math.log2(room / bound))
    while workers * (bound * 2.0**bits + 0.5) > INT32_MAX:      # log2's rounding at an exact power
        bits -= 1
    return bits


@dataclass(frozen=True)
class FragmentLayout:
    """Where each element of a flat gradient goes in the wire's [fragments, lanes] rows, indexed by seq."""
    submodel_elements: tuple
    lanes: int

    @property
    def elements(self) -> int:
        return sum(self.submodel_elements)

    @property
    def fragments(self) -> int:
        return sum(fragments_of(n, self.lanes) for n in self.submodel_elements)

    def element_of_lane(self) -> np.ndarray:
        """For each lane of the rows (by seq, flattened), the flat gradient's element it holds, -1 for padding."""
        counts = [fragments_of(n, self.lanes) for n in self.submodel_elements]
        layout = np.full((sum(counts), self.lanes), -1, dtype=np.int64)     # sub-model by sub-model
        row, first = 0, 0
        for n, fragments in zip(self.submodel_elements, counts):
            layout[row:row + fragments].ravel()[:n] = np.arange(first, first + n)
            row, first = row + fragments, first + n
        return layout[layout_row_of_seq(counts)].ravel()

    def to_rows(self, flat: np.ndarray, element_of_lane=None) -> np.ndarray:
        """int32 [fragments, lanes], row = seq, of the flat int32 gradient ``flat``."""
        index = self.element_of_lane() if element_of_lane is None else element_of_lane
        out = np.zeros(len(index), dtype=np.int32)
        held = index >= 0
        out[held] = flat[index[held]]
        return out.reshape(-1, self.lanes)

    def from_rows(self, rows: np.ndarray, element_of_lane=None) -> np.ndarray:
        """The flat gradient (``rows``' dtype) of [fragments, lanes] rows indexed by seq."""
        index = self.element_of_lane() if element_of_lane is None else element_of_lane
        flat = np.zeros(self.elements, dtype=rows.dtype)
        held = index >= 0
        flat[index[held]] = np.asarray(rows).ravel()[held]
        return flat


@dataclass
class Quantized:
    """One worker's gradient in fixed point: the int32 flat values and how many were clipped."""
    values: np.ndarray
    clipped: int


class FixedPoint:
    """The fixed-point conversion of one job's gradients: per-tensor bounds and scales, shared by its workers.

    ``tensor_sizes``: elements of each parameter tensor in order; ``workers``: the most contributions one
    sum holds (the job's workers); ``gradient_bound``: the first iteration's bound and every later one's
    ceiling."""

    def __init__(self, tensor_sizes, workers: int, gradient_bound: float, headroom: float = DEFAULT_HEADROOM):
        self.tensor_sizes = [int(n) for n in tensor_sizes]
        self.workers, self.gradient_bound, self.headroom = workers, float(gradient_bound), headroom
        self.bounds = [self.gradient_bound] * len(self.tensor_sizes)
        self._tensor_of_element = np.repeat(np.arange(len(self.tensor_sizes)), self.tensor_sizes)

    @property
    def scale_bits(self) -> list:
        return [scale_bits_for(b, self.workers) for b in self.bounds]

    def element_scales(self) -> np.ndarray:
        """float64 ``2^bits`` of each element's tensor."""
        return np.exp2(np.asarray(self.scale_bits, dtype=np.float64))[self._tensor_of_element]

    def quantize(self, gradient: np.ndarray) -> Quantized:
        """The flat float ``gradient`` clipped to its tensors' bounds, scaled and rounded to int32."""
        g = np.asarray(gradient, dtype=np.float64)
        bound = np.asarray(self.bounds)[self._tensor_of_element]
        finite = np.isfinite(g)
        g = np.where(finite, g, 0.0)
        clipped = int(np.count_nonzero(np.abs(g) > bound)) + int(np.count_nonzero(~finite))
        values = np.rint(np.clip(g, -bound, bound) * self.element_scales()).astype(np.int32)
        return Quantized(values, clipped)

    def dequantize(self, total: np.ndarray) -> np.ndarray:
        """float64 of a flat integer sum (any integer dtype) under the scales it was made with."""
        return np.asarray(total, dtype=np.float64) / self.element_scales()

    def error_bound(self, contributions: int) -> np.ndarray:
        """Per element: the most a dequantized sum of ``contributions`` unclipped gradients differs from
        their float sum (each rounding is within 1/2 of a unit of ``2^-bits``)."""
        return contributions * 0.5 / self.element_scales()

    def next_bounds(self, mean_gradient: np.ndarray):
        """Set the bounds of the next iteration from this one's aggregated mean gradient (the same on every
        worker): ``headroom`` times each tensor's largest magnitude, within ``gradient_bound`` and
        ``gradient_bound * 2^-MAX_BOUND_SHRINK_BITS``."""
        floor = self.gradient_bound * 2.0**-MAX_BOUND_SHRINK_BITS
        largest = np.zeros(len(self.tensor_sizes))
        np.maximum.at(largest, self._tensor_of_element, np.abs(np.asarray(mean_gradient, dtype=np.float64)))
        self.bounds = [min(self.gradient_bound, max(floor, self.headroom * float(m))) for m in largest]
