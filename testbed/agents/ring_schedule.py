"""Ring all-reduce schedules: which peer a worker sends to and receives from at each step, and which
fragments (Rina §II-B 2 for RAR, §III-A for H-AR).

A step is a barrier, as the paper's RAR (§III-A, Eq. 1): a worker starts
step s + 1 once what it sent in step s is acknowledged and what it receives
in step s is complete. Ranks are positions in the job's ``workers`` list.

RAR over N workers (``rar_steps``): the gradient (``total`` fragments, in
seq order) is split into N contiguous chunks; chunk c holds fragments
[c x total // N, (c + 1) x total // N). Worker r sends to r + 1 and receives
from r - 1 (mod N).

- ScatterReduce, steps 0 .. N-2: worker r sends chunk (r - s) mod N and
  adds the chunk (r - s - 1) mod N it receives to its own. After N - 1
  steps it holds the whole ring's sum of chunk (r + 1) mod N.
- AllGather, steps N-1 .. 2N-3 (s = step - (N - 1)): worker r sends chunk
  (r + 1 - s) mod N, which it holds summed, and keeps the chunk (r - s) mod
  N it receives. After N - 1 steps it holds every chunk summed.

H-AR over R racks of M workers each (``har_steps``; ``racks`` lists each
rack's ranks, local rank l = position in its rack): a ScatterReduce within
the rack (M - 1 steps, as RAR's over the rack's ring: worker l ends with
the rack's sum of chunk (l + 1) mod M of M), then an all-reduce of that
chunk between the racks (RAR's 2 (R - 1) steps over the ring of the workers
of local rank l in every rack, on that chunk's fragments), then an
AllGather within the rack (M - 1 steps). 2 (M - 1) + 2 (R - 1) steps in all.
Pure functions; the ring agent (:mod:`testbed.agents.ring`) moves the
packets.
"""

from dataclasses import dataclass


@dataclass(frozen=True)
class RingStep:
    step: int
    send_to: int          # rank
    receive_from: int     # rank
    send: tuple           # [first, end) fragments sent
    receive: tuple        # [first, end) fragments received
    reduce: bool          # add what arrives (ScatterReduce) or keep it (AllGather)


def chunk_bounds(total: int, parts: int, first: int = 0) -> list:
    """[(first, end)) of each of ``parts`` contiguous chunks of ``total`` fragments from ``first`` (some empty
    if total < parts)."""
    return [(first + c * total // parts, first + (c + 1) * total // parts) for c in range(parts)]


def _ring(ring: list, position: int, span: tuple, step0: int) -> list:
    """RAR's 2 (n - 1) steps for the member at ``position`` of ``ring`` (ranks), on fragments ``span``."""
    n = len(ring)
    chunks = chunk_bounds(span[1] - span[0], n, span[0])
    succ, pred = ring[(position + 1) % n], ring[(position - 1) % n]
    scatter = [RingStep(step0 + s, succ, pred, chunks[(position - s) % n], chunks[(position - s - 1) % n], True)
               for s in range(n - 1)]
    gather = [RingStep(step0 + n - 1 + s, succ, pred, chunks[(position + 1 - s) % n], chunks[(position - s) % n],
                       False) for s in range(n - 1)]
    return scatter + gather


def rar_steps(rank: int, workers: int, total: int) -> list:
    """Worker ``rank``'s 2 (N - 1) steps of ring all-reduce over ``workers`` workers."""
    return _ring(list(range(workers)), rank, (0, total), 0)


def har_steps(rank: int, racks: list, total: int) -> list:
    """Worker ``rank``'s steps of hierarchical all-reduce over ``racks`` (lists of ranks, all as long)."""
    rack = next(r for r in racks if rank in r)
    local = rack.index(rank)
    m = len(rack)
    within = _ring(rack, local, (0, total), 0)
    scatter, gather = within[:m - 1], within[m - 1:]
    mine = chunk_bounds(total, m)[(local + 1) % m]            # the rack's sum this worker holds
    between = _ring([r[local] for r in racks], racks.index(rack), mine, m - 1)
    step0 = m - 1 + len(between)
    return scatter + between + [RingStep(step0 + k, s.send_to, s.receive_from, s.send, s.receive, s.reduce)
                                for k, s in enumerate(gather)]


def fragments_sent(steps: list) -> int:
    """Fragments a worker sends per iteration (every step's range once)."""
    return sum(s.send[1] - s.send[0] for s in steps)


def worker_steps(schedule: str, rank: int, workers: int, total: int, racks: list = ()) -> list:
    """Worker ``rank``'s steps under ``schedule`` (a ring scheme's name: ``rar``, or ``h-ar`` over ``racks``)."""
    if schedule == "rar":
        return rar_steps(rank, workers, total)
    if schedule == "h-ar":
        return har_steps(rank, [list(r) for r in racks], total)
    raise ValueError(f"unknown ring schedule {schedule!r}; known: rar, h-ar")


@dataclass(frozen=True)
class RingPhase:
    """Consecutive steps in which every worker sends to one peer (RAR: one phase; H-AR: within the rack,
    between the racks, within the rack again): what the flow-level simulator rates as one set of streams."""
    peers: tuple          # per rank, the rank it sends to
    fragments: tuple      # per rank, the fragments it sends in the phase
    steps: int


def job_phases(schedule: str, workers: int, total: int, racks: list = ()) -> list:
    """The phases of one iteration of a ring job (:class:`RingPhase`)."""
    per_worker = [worker_steps(schedule, r, workers, total, racks) for r in range(workers)]
    phases, start, count = [], 0, len(per_worker[0])
    while start < count:
        end = start + 1
        while end < count and all(s[end].send_to == s[start].send_to for s in per_worker):
            end += 1
        phases.append(RingPhase(tuple(s[start].send_to for s in per_worker),
                                tuple(fragments_sent(s[start:end]) for s in per_worker), end - start))
        start = end
    return phases
