"""Synthetic gradients in fixed point, reproducible from (seed, job, worker, iteration).

A worker and the PS derive the same numbers independently: the worker sends
them, the PS recomputes the exact sum over all workers and checks the
aggregate it received bit for bit. Values are uniform in
[-bound, bound] x 2^scale_bits, drawn directly as integers (a quantised
uniform gradient), drawn sub-model by sub-model, each sub-model
zero-padded to whole fragments of ``lanes`` elements, and returned indexed by
seq (``wire.fragment_seqs`` interleaves the sub-models' fragments).
"""

import numpy as np

from testbed.dataplane.wire import fragment, fragment_seqs


def worker_fragments(seed: int, job_id: int, worker_index: int, iteration: int, submodels, lanes: int,
                     gradient_bound: float, scale_bits: int) -> np.ndarray:
    """int32 array [total fragments, lanes] of one worker's gradient for one iteration; row = seq.

    ``submodels``: sequence of (elements, fragments) in sub-model order.
    """
    rng = np.random.default_rng([seed, job_id, worker_index, iteration])
    limit = int(round(gradient_bound * (1 << scale_bits)))
    rows = [fragment(rng.integers(-limit, limit + 1, size=elements, dtype=np.int64).astype(np.int32), lanes)
            for elements, _ in submodels]
    return np.concatenate(rows)[layout_row_of_seq([n for _, n in submodels])]


def layout_row_of_seq(fragments_per_submodel) -> np.ndarray:
    """For each seq, its row in the sub-model-by-sub-model layout (each sub-model's fragments in turn):
    the order in which a gradient's fragments, cut sub-model by sub-model, go on the wire."""
    rows = np.empty(sum(fragments_per_submodel), dtype=np.int64)
    first = 0
    for seqs in fragment_seqs(fragments_per_submodel):
        rows[seqs] = np.arange(first, first + len(seqs))
        first += len(seqs)
    return rows


def expected_sum(seed: int, job_id: int, workers, iteration: int, submodels, lanes: int,
                 gradient_bound: float, scale_bits: int) -> np.ndarray:
    """Exact int64 sum over ``workers`` (worker indices, or a count meaning 0..count-1),
    [total fragments, lanes]."""
    total = None
    for w in (range(workers) if isinstance(workers, int) else workers):
        frags = worker_fragments(seed, job_id, w, iteration, submodels, lanes, gradient_bound, scale_bits)
        total = frags.astype(np.int64) if total is None else total + frags
    return total
