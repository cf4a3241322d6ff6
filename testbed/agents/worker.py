"""Worker agent: synthetic gradients out, aggregated results back, one iteration at a time.

Per iteration (synchronous SGD, as every scheme of the papers runs it):
emulated compute (sleep ``compute_time_s``), then every fragment of every
sub-model is sent to the aggregation node the policy chose for it (a switch
INA address or the PS), under a sliding window: fragment ``seq`` leaves only
while ``seq`` < lowest unacknowledged + ``window``. A fragment is acknowledged by the RESULT carrying its aggregate.
A fragment without a RESULT after the retransmission timeout is sent again
flagged RETX (timeout doubled per attempt, at most 1 s; the base timeout
adapts to 4 x the smoothed RTT, Karn's rule for samples). Communication time
is the time from the first send to the last RESULT of the iteration.

K-of-N schemes (K-SGD, GOAT-Async): a worker whose gradient does not count
(``participant`` false) sends it straight to the PS, which discards it, and
takes the newest model: RESULTs of later iterations are remembered, and once
one arrives it stops waiting for its own iteration's and continues from the
newest iteration seen.

Stragglers: ``compute_delay`` adds a delay per iteration drawn from a
distribution (normal clipped to [low, high], uniform, or fixed; GOAT §VII-C
uses a normal with std 0.2 s clipped to [0, 1] s), from an RNG seeded by
(seed, job, worker) so a run is repeatable. Each delay is in the iteration's
record (``straggler_delay_s``) and so in the run's event log.

The slot of a fragment at its aggregation node is ``slot_base + seq mod
slot_count`` (wire.slot_index), the range the controller gave the job there.
"""

import heapq
import random
import select
import time

from testbed.agents.common import agent_session
from testbed.agents.gradients import worker_fragments
from testbed.dataplane.wire import (FLAG_DATA, FLAG_RESULT, FLAG_RETX, INA_HEADER, INA_HEADER_BYTES, INA_UDP_PORT,
                                    slot_index)

MAX_RTO_S = 1.0
FRAME_OVERHEAD_BYTES = 42  # Ethernet + IPv4 + UDP around the INA header and payload


class Worker:
    def __init__(self, config, sock, records):
        self.cfg = config
        self.sock = sock
        self.records = records
        self.srtt_s = None
        # RESULTs of later iterations, kept for when this worker gets there (a worker that fell
        # behind finds them in its socket); the newest iteration any RESULT was for.
        self.early_results = {}
        self.newest_iteration = -1
        self.delay_rng = random.Random(config.seed * 1_000_003 + config.job_id * 1009 + config.worker_index)
        # Per fragment: (destination address, header fields that do not change).
        self.targets = []
        for p in config.submodels:
            for k in range(p.fragments):
                seq = p.seq_offset + k
                slot = slot_index(seq, p.slot_base, p.slot_count) if p.slot_count else 0
                self.targets.append(((p.agg_ip, INA_UDP_PORT), p.agg_node, p.fanin, p.submodel, slot))

    def straggler_delay_s(self) -> float:
        d = self.cfg.compute_delay
        if not d:
            return 0.0
        kind = d["distribution"]
        if kind == "fixed":
            return d["value_s"]
        if kind == "uniform":
            return self.delay_rng.uniform(d["low_s"], d["high_s"])
        return min(d["high_s"], max(d["low_s"], self.delay_rng.gauss(d["mean_s"], d["std_s"])))

    def rto_s(self) -> float:
        base = self.cfg.retransmit_timeout_s
        return base if self.srtt_s is None else max(base, 4 * self.srtt_s)

    def run_iteration(self, iteration: int) -> dict:
        cfg = self.cfg
        t0 = time.monotonic()
        delay_s = self.straggler_delay_s()
        if cfg.compute_time_s + delay_s > 0:
            time.sleep(cfg.compute_time_s + delay_s)
        rows = worker_fragments(cfg.seed, cfg.job_id, cfg.worker_index, iteration, cfg.layout, cfg.lanes,
                                cfg.gradient_bound, cfg.scale_bits).astype(">i4")
        bit = 1 << cfg.worker_index
        total = len(self.targets)

        def packet(seq, flags):
            addr, agg_node, fanin, submodel, slot = self.targets[seq]
            header = INA_HEADER.pack(cfg.job_id, flags, cfg.lanes, 0, agg_node, fanin, 1, submodel, iteration, seq,
                                     slot, bit, 0)
            return addr, header + rows[seq].tobytes()

        acked = bytearray(total)
        for seq in self.early_results.pop(iteration, ()):
            acked[seq] = 1
        done = sum(acked)
        sent_at = [0.0] * total
        attempts = [0] * total
        timers = []          # heap of (deadline, seq, attempt)
        next_seq = base = 0
        sent_pkts = retx_pkts = sent_bytes = 0
        t_comm = time.monotonic()
        sock, sendto, recv = self.sock, self.sock.sendto, self.sock.recv
        deadline = t_comm + cfg.deadline_s
        superseded = False
        while done < total:
            if not cfg.participant and self.newest_iteration > iteration:
                # Left out of this K-of-N iteration and overtaken: the model moved on; take the newest.
                superseded = True
                break
            now = time.monotonic()
            while base < total and acked[base]:
                base += 1
            # A sliding window over seq (not a count of unacknowledged fragments): seq is sent
            # only while seq < lowest unacknowledged + window, so fragments in flight never
            # share a slot (slot = seq mod slots, window <= slots): SwitchML's self-clocking.
            while next_seq < base + cfg.window and next_seq < total:
                if acked[next_seq]:          # its result is already here (a worker that fell behind)
                    next_seq += 1
                    continue
                addr, data = packet(next_seq, FLAG_DATA)
                sendto(data, addr)
                sent_pkts += 1
                sent_bytes += len(data) + FRAME_OVERHEAD_BYTES
                sent_at[next_seq] = now
                heapq.heappush(timers, (now + self.rto_s(), next_seq, 0))
                next_seq += 1
            wait = max(0.0, timers[0][0] - now) if timers else 0.05
            ready, _, _ = select.select([sock], [], [], min(wait, 0.05))
            if ready:
                while True:
                    try:
                        data = recv(4096)
                    except BlockingIOError:
                        break
                    if len(data) < INA_HEADER_BYTES:
                        continue
                    job, flags, _, _, _, _, _, _, it, seq, _, _, _ = INA_HEADER.unpack_from(data)
                    if job != cfg.job_id or not flags & FLAG_RESULT or seq >= total or it < iteration:
                        continue
                    if it > iteration:
                        self.early_results.setdefault(it, set()).add(seq)
                        self.newest_iteration = max(self.newest_iteration, it)
                        continue
                    if not acked[seq]:
                        acked[seq] = 1
                        done += 1
                        if attempts[seq] == 0:
                            sample = time.monotonic() - sent_at[seq]
                            self.srtt_s = sample if self.srtt_s is None else 0.875 * self.srtt_s + 0.125 * sample
            now = time.monotonic()
            while timers and timers[0][0] <= now:
                _, seq, attempt = heapq.heappop(timers)
                if acked[seq] or attempt != attempts[seq]:
                    continue
                attempts[seq] += 1
                addr, data = packet(seq, FLAG_DATA | FLAG_RETX)
                sendto(data, addr)
                retx_pkts += 1
                sent_bytes += len(data) + FRAME_OVERHEAD_BYTES
                backoff = min(MAX_RTO_S, self.rto_s() * (2 ** attempts[seq]))
                heapq.heappush(timers, (now + backoff, seq, attempts[seq]))
            if now > deadline:
                missing = total - done
                raise TimeoutError(f"worker {cfg.name}: iteration {iteration}: no RESULT for {missing} of {total} "
                                   f"fragments after {cfg.deadline_s:.0f}s (first missing seq "
                                   f"{acked.index(0)}); is the PS running and every switch on the path up?")
        t_end = time.monotonic()
        return {"iteration": iteration, "participant": cfg.participant, "superseded": superseded,
                "compute_s": t_comm - t0, "straggler_delay_s": delay_s,
                "t_start": time.time() - (t_end - t0), "comm_s": t_end - t_comm,
                "iteration_s": t_end - t0, "t_end": time.time(), "sent_pkts": sent_pkts, "retx_pkts": retx_pkts,
                "sent_bytes": sent_bytes, "fragments": total,
                "sending_rate_bps": 8 * sent_bytes / max(1e-9, t_end - t_comm)}


def run(config) -> int:
    with agent_session(config) as (sock, records):
        worker = Worker(config, sock, records)
        print(f"worker {config.name}: job {config.job} index {config.worker_index}, {len(worker.targets)} "
              f"fragments/iteration, window {config.window}", flush=True)
        iteration = 0
        while iteration < config.iterations:
            records.write(worker.run_iteration(iteration))
            # A worker left out of K-of-N iterations continues from the newest model it has seen.
            iteration = iteration + 1 if config.participant else max(iteration + 1, worker.newest_iteration)
        print(f"worker {config.name}: {config.iterations} iterations done", flush=True)
    return 0
