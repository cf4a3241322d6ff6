"""Parameter-server agent: completes the global aggregation and checks it bit for bit.

The PS owns some sub-models (the placement's ``ps_of_submodel``). For each of
their fragments it merges what arrives (raw gradients, switch aggregates,
bypassed fragments) by contributor bitmap (:class:`FragmentSum`):

- disjoint from what it holds: add (the usual case);
- containing every piece it holds that it touches (a fuller aggregate after a
  flush, or the aggregate whose member's retransmission came first): those
  pieces are replaced by it;
- within what it holds (a duplicate): drop; once the fragment is complete,
  its RESULT goes again to the packet's contributors (their RESULT was lost);
- cutting across a piece it holds: drop (``overlap_drops``; the data plane
  builds no such aggregate, see p4/README.md).

When all (participating) workers' bits are present the sum is compared with
the exact sum recomputed from their seeds (``gradients.expected_sum``) and
the RESULT, carrying the aggregate, goes to every worker; a CE mark (ECN,
set by a switch queue) on anything that arrived since the last RESULT is
echoed on it (ECN_ECHO), for the workers' congestion control. An aggregate of
every worker that arrives whole before any other piece of its fragment (the
usual case where a switch sums them all) is compared with the exact sum as the
wire carries it (big-endian 32-bit lanes) and, equal, is the RESULT's payload as
it came, without a merge; otherwise it is merged as any piece. A training job's
gradients are real, not drawn from seeds: its PS records each aggregate's
checksum instead (``checksums``, seq -> ``testbed.training.checks.fragment_checksums``;
``exact`` is None) and the results compare it with the sum of the workers'. K-of-N schemes
(K-SGD, GOAT-Async) name the workers that count; the others' gradients
reach the PS directly and are counted and discarded (``discarded_pkts``). The iteration record
says whether every fragment was exact; a mismatch is also printed, never
silently averaged away. Results of the previous iteration are kept to answer
late retransmissions.

PA-ATP (jobs whose transport reads GACKs, ``program.PA_ATP_TRANSPORTS``):
the PS is the node that takes the gradients its aggregation switch could not
(overflowed: COLLISION, CAPACITY, late or retransmitted ones bypassed to it)
and those sent straight to it, so it answers each raw gradient (level 0) of
the current iteration at once with a GACK to its sender (PA-ATP §III-B 1):
the gradient's header without lanes, flags GACK (+ ECN_ECHO when it arrived
CE), and the ``progress`` (S_sum) and ``fanin`` it arrived with, which its
switch wrote. Its RESULTs are the AACKs, as for every job. Aggregates and
flushed partials are not gradients of one worker: no GACK.
"""

import select

import numpy as np

from testbed.agents.common import AgentClock, agent_session, install_status_dump
from testbed.agents.datagrams import ReceiveBatch
from testbed.agents.fragment_sum import DUPLICATE, OVERLAP, REPLACED, FragmentSum
from testbed.agents.gradients import expected_sum
from testbed.training.checks import fragment_checksums
from testbed.dataplane.program import PA_ATP_TRANSPORTS
from testbed.dataplane.wire import (FLAG_COLLISION, FLAG_DATA, FLAG_ECN_ECHO, FLAG_GACK, FLAG_RESULT, FLAG_RETX,
                                    FRAME_OVERHEAD_BYTES, INA_HEADER, INA_HEADER_BYTES, INA_UDP_PORT, fragment_seqs)



def gack_header(header: tuple, ce: bool, ps_node: int) -> bytes:
    """PA-ATP's GACK of a raw gradient whose INA ``header`` (its unpacked fields) arrived: that header,
    flags GACK (+ ECN_ECHO when it arrived ``ce``), no lanes, ``agg_node`` the PS's id (the node that
    took it: the worker then knows no switch slot holds it), every other field as it arrived (progress
    and fanin included: its switch's S_sum and N)."""
    (job, _, _, level, _, fanin, count, submodel, it, seq, slot, bitmap, progress) = header
    return INA_HEADER.pack(job, FLAG_GACK | FLAG_ECN_ECHO if ce else FLAG_GACK, 0, level, ps_node, fanin, count,
                           submodel, it, seq, slot, bitmap, progress)


class ParameterServer:
    def __init__(self, config, sock, records, clock=None):
        self.cfg = config
        self.sock = sock
        self.records = records
        self.clock = clock or AgentClock(config.time_dilation)
        # Workers whose gradients count: all, or the K of N a K-of-N scheme chose (ksgd, goat-async).
        participants = config.participants or range(config.total_workers)
        self.participants = list(participants)
        self.full_mask = sum(1 << i for i in participants)
        seqs_of = fragment_seqs([n for _, n in config.layout])
        self.owned = {seq: p.submodel for p in config.submodels for seq in seqs_of[p.submodel]}
        self.worker_addrs = [(ip, INA_UDP_PORT) for _, ip in sorted(config.workers)]
        # Where a complete aggregate's RESULT goes: once to the job's group (the switches replicate it
        # to every worker), or to every worker in turn (BytePS's pull).
        self.result_addrs = [(config.result_group_ip, INA_UDP_PORT)] if config.result_group_ip else self.worker_addrs
        if config.result_group_ip and config.local_worker_ip:
            self.result_addrs.append((config.local_worker_ip, INA_UDP_PORT))    # a worker on this host
        self.echo_congestion = False
        self.gacks = config.transport in PA_ATP_TRANSPORTS     # answer raw gradients with GACKs (PA-ATP)
        self.batch = ReceiveBatch(sock)
        self.iteration = 0
        self.held = {}        # seq -> FragmentSum of an incomplete fragment of the current iteration (diagnosis)
        self.completed = {}   # seq -> RESULT payload of the current iteration

    def send_result(self, iteration, seq, payload_bytes, addrs):
        """The RESULT of ``seq`` to ``addrs``; ECN_ECHO on it when a CE mark arrived since the last echo
        (RESULTs go to every worker, so all workers of the job cut their windows together)."""
        cfg = self.cfg
        flags = FLAG_RESULT | FLAG_ECN_ECHO if self.echo_congestion else FLAG_RESULT
        self.echo_congestion = False
        header = INA_HEADER.pack(cfg.job_id, flags, cfg.lanes, 0, cfg.ps_id, 0, cfg.total_workers,
                                 self.owned.get(seq, 0), iteration, seq, 0, self.full_mask, 0)
        data = header + payload_bytes
        for addr in addrs:
            self.sock.sendto(data, addr)

    def run(self):
        cfg, clock = self.cfg, self.clock
        previous_results = {}
        # The first iteration counts from the job's start (its ``start`` after the run's common start).
        t_prev = clock.now_s() + clock.until_s(cfg.start_s)
        for iteration in range(cfg.iterations):
            record = self.run_iteration(iteration, previous_results, t_prev)
            t_prev = clock.now_s()
            previous_results = record.pop("_results")
            self.records.write(record)
        print(f"ps {cfg.name}: {cfg.iterations} iterations done; answering late retransmissions", flush=True)
        self.linger(cfg.iterations - 1, previous_results)

    def linger(self, iteration, results):
        """Re-send RESULTs of the last iteration to workers whose RESULT was lost, until stopped.

        The orchestrator stops the PS once every worker has finished.
        """
        clock = self.clock
        deadline = clock.now_s() + self.cfg.deadline_s
        while clock.now_s() < deadline:
            ready, _, _ = select.select([self.sock], [], [], 0.2)
            if not ready:
                continue
            for _, (job, flags, _, _, _, _, _, _, it, seq, _, bitmap, _) in self.batch.drain():
                if job == self.cfg.job_id and flags & FLAG_DATA and it == iteration and seq in results:
                    self.send_result(it, seq, results[seq], self._addrs(bitmap))

    def describe(self) -> dict:
        """What this PS waits for (the stall diagnosis): incomplete fragments and the workers missing."""
        incomplete = sorted(seq for seq in self.owned if seq not in self.completed)
        held = {seq: fragment.bitmap for seq, fragment in self.held.items()}
        return {"role": "ps", "iteration": self.iteration, "fragments": len(self.owned),
                "incomplete": len(incomplete),
                "first_incomplete": [{"seq": seq, "workers_missing": [i for i in self.participants
                                                                      if not held.get(seq, 0) >> i & 1]}
                                     for seq in incomplete[:10]]}

    def run_iteration(self, iteration, previous_results, t_prev):
        cfg = self.cfg
        # Expected sums use the whole job's layout: seq numbering is job-wide.
        expected = None if cfg.training else expected_sum(cfg.seed, cfg.job_id, self.participants, iteration,
                                                          cfg.layout, cfg.lanes, cfg.gradient_bound, cfg.scale_bits)
        # The exact sums as the wire carries them (big-endian 32-bit lanes), for the rows that fit there: an
        # aggregate of every worker that arrives whole and equal to one is the RESULT as it is.
        expected_wire = None if expected is None else expected.astype(">i4")
        fits_wire = None if expected is None else (expected == expected_wire).all(axis=1)
        checksums = {}    # a training job's: seq -> its aggregate's checksum
        acc = {}          # seq -> FragmentSum of what arrived, until the fragment is complete
        results = {}      # seq -> payload bytes
        self.iteration, self.held, self.completed = iteration, acc, results
        stats = dict(ingress_pkts=0, ingress_bytes=0, raw_pkts=0, aggregate_pkts=0, bypassed_pkts=0,
                     duplicate_pkts=0, overlap_drops=0, replaced=0, stale_pkts=0, foreign_pkts=0,
                     discarded_pkts=0, max_level=0, ce_marked_pkts=0, spurious_retx_pkts=0, gacks_sent=0)
        exact = True
        mismatches = 0
        t_first = None
        clock = self.clock
        deadline = clock.now_s() + cfg.deadline_s
        sock, sendto, batch = self.sock, self.sock.sendto, self.batch
        owned, gacks = self.owned, self.gacks
        while len(results) < len(owned):
            ready, _, _ = select.select([sock], [], [], 0.2)
            if clock.now_s() > deadline:
                raise TimeoutError(f"ps {cfg.name}: iteration {iteration}: {len(owned) - len(results)} of "
                                   f"{len(owned)} fragments incomplete after {cfg.deadline_s:.0f}s")
            if not ready:
                continue
            for i, header in batch.drain():
                (job, flags, elems, level, _, _, count, _, it, seq, _, bitmap, _) = header
                if job != cfg.job_id or not flags & FLAG_DATA:
                    continue
                stats["ingress_pkts"] += 1
                stats["ingress_bytes"] += batch.length(i) + FRAME_OVERHEAD_BYTES
                ce = batch.ce(i)
                if ce:
                    stats["ce_marked_pkts"] += 1
                    self.echo_congestion = True
                if flags & FLAG_RETX and level == 0 and (
                        seq in results or bitmap & (acc[seq].bitmap if seq in acc else 0) == bitmap):
                    stats["spurious_retx_pkts"] += 1     # a worker's retransmission of what the PS holds
                if it != iteration:
                    stats["stale_pkts"] += 1
                    old = previous_results.get(seq) if it == iteration - 1 else None
                    if old is not None:
                        self.send_result(it, seq, old, self._addrs(bitmap))
                    continue
                if seq not in owned:
                    stats["foreign_pkts"] += 1
                    continue
                if gacks and not level:
                    sendto(gack_header(header, ce, cfg.ps_id), batch.sender(i))
                    stats["gacks_sent"] += 1
                if bitmap & ~self.full_mask:
                    stats["discarded_pkts"] += 1      # a worker left out of this K-of-N iteration
                    continue
                if t_first is None:
                    t_first = clock.now_s()
                stats["max_level"] = max(stats["max_level"], level)
                if flags & FLAG_COLLISION:
                    stats["bypassed_pkts"] += 1
                stats["aggregate_pkts" if level else "raw_pkts"] += 1
                if seq in results:
                    stats["duplicate_pkts"] += 1
                    self.send_result(iteration, seq, results[seq], self._addrs(bitmap))
                    continue
                if (bitmap == self.full_mask and elems == cfg.lanes and seq not in acc and fits_wire is not None
                        and fits_wire[seq] and batch.length(i) >= INA_HEADER_BYTES + 4 * cfg.lanes):
                    # The usual case on a switch that sums every worker: the whole aggregate at once. Exact when
                    # its lanes are the exact sum's bytes; then they are the RESULT's (else the merge below
                    # finds where they differ).
                    payload = expected_wire[seq].tobytes()
                    if batch.lane_bytes(i, cfg.lanes) == payload:
                        results[seq] = payload
                        self.send_result(iteration, seq, payload, self.result_addrs)
                        continue
                lanes = batch.lanes(i, min(elems, cfg.lanes)).astype(np.int64)
                fragment = acc.get(seq)
                if fragment is None:
                    fragment = acc[seq] = FragmentSum(cfg.lanes)
                verdict = fragment.merge(bitmap, lanes)
                if verdict is DUPLICATE or verdict is OVERLAP:
                    stats["duplicate_pkts" if verdict is DUPLICATE else "overlap_drops"] += 1
                    continue
                if verdict is REPLACED:
                    stats["replaced"] += 1
                if fragment.bitmap == self.full_mask:
                    total = acc.pop(seq).total
                    if expected is None:
                        checksums[seq] = int(fragment_checksums(total[None])[0])
                    elif not np.array_equal(total, expected[seq]):
                        exact = False
                        mismatches += 1
                        if mismatches <= 3:
                            bad = int(np.flatnonzero(total != expected[seq])[0])
                            print(f"ps {cfg.name}: iteration {iteration} seq {seq}: aggregate differs from the "
                                  f"exact sum at lane {bad} ({int(total[bad])} != {int(expected[seq][bad])})",
                                  flush=True)
                    payload = total.astype(">i4").tobytes()
                    results[seq] = payload
                    self.send_result(iteration, seq, payload, self.result_addrs)
        t_done = clock.now_s()
        return {"iteration": iteration, "t_end": clock.epoch_s(), "iteration_s": t_done - t_prev,
                "aggregation_s": t_done - (t_first or t_done), "fragments": len(owned),
                "exact": None if expected is None else exact, "mismatched_fragments": mismatches, **stats,
                **({"checksums": checksums} if expected is None else {}), "_results": results}

    def _addrs(self, bitmap):
        return [addr for i, addr in enumerate(self.worker_addrs) if bitmap >> i & 1]


def run(config) -> int:
    with agent_session(config) as (sock, records, clock):
        ps = ParameterServer(config, sock, records, clock)
        install_status_dump(config.run_dir, config.name, ps.describe)
        print(f"ps {config.name}: job {config.job}, {len(ps.owned)} fragments/iteration from "
              f"{config.total_workers} workers", flush=True)
        ps.run()
    return 0
