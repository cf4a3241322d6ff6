"""Ring all-reduce's schedule (Rina §II-B 2): which chunk a worker sends and receives at each step.

The gradient (``total`` fragments, in seq order) is split into N contiguous
chunks, one per worker of the ring; chunk c holds fragments
[c x total // N, (c + 1) x total // N). Worker r sends to worker r + 1 and
receives from worker r - 1 (mod N).

- ScatterReduce, steps 0 .. N-2: worker r sends chunk (r - s) mod N and
  adds the chunk (r - s - 1) mod N it receives to its own. After N - 1
  steps it holds the whole ring's sum of chunk (r + 1) mod N.
- AllGather, steps N-1 .. 2N-3 (s = step - (N - 1)): worker r sends chunk
  (r + 1 - s) mod N, which it holds summed, and keeps the chunk (r - s) mod
  N it receives. After N - 1 steps it holds every chunk summed.

Each step is a barrier, as the paper's RAR (§III-A, Eq. 1): a worker starts
step s + 1 once its chunk of step s is acknowledged and the chunk it
receives in step s is complete. Pure functions; the ring agent
(:mod:`testbed.agents.ring`) moves the packets.
"""

from dataclasses import dataclass


@dataclass(frozen=True)
class RingStep:
    step: int
    send_chunk: int
    receive_chunk: int
    reduce: bool          # add the received chunk (ScatterReduce) or keep it (AllGather)


def chunk_bounds(total: int, workers: int) -> list:
    """[(first, end)) of each of the ``workers`` chunks of ``total`` fragments (some empty if total < workers)."""
    return [(c * total // workers, (c + 1) * total // workers) for c in range(workers)]


def rar_steps(rank: int, workers: int) -> list:
    """Worker ``rank``'s 2 (N - 1) steps of ring all-reduce over ``workers`` workers."""
    n = workers
    scatter = [RingStep(s, (rank - s) % n, (rank - s - 1) % n, True) for s in range(n - 1)]
    gather = [RingStep(n - 1 + s, (rank + 1 - s) % n, (rank - s) % n, False) for s in range(n - 1)]
    return scatter + gather


def fragments_sent(total: int, rank: int, workers: int) -> int:
    """Fragments worker ``rank`` sends per iteration (every step's chunk once): about 2 (N - 1) / N of the
    gradient."""
    bounds = chunk_bounds(total, workers)
    return sum(bounds[s.send_chunk][1] - bounds[s.send_chunk][0] for s in rar_steps(rank, workers))


def ring_pairs(workers: list) -> list:
    """(worker, its successor) around the ring, in the order the job lists its workers."""
    return [(w, workers[(i + 1) % len(workers)]) for i, w in enumerate(workers)]
