"""Worker agent: synthetic gradients out, aggregated results back, one iteration at a time.

Per iteration (synchronous SGD, as every scheme of the papers runs it):
emulated compute (sleep ``compute_time_s``), then every fragment of every
sub-model is sent to the aggregation node the placement chose for it (a switch
INA address or the PS). When a fragment leaves, and when it is sent again
flagged RETX, is the job's transport's decision (``testbed/agents/transport``:
ATP's congestion-controlled window by default, SwitchML's self-clocked one
for ``switchml``, PA-ATP's dual windows for ``pa-atp`` and ``strawasyn``);
this agent only moves packets in and out of it. A fragment is acknowledged
by the RESULT carrying its aggregate (PA-ATP's AACK): its ECN_ECHO (the PS's
echo of a CE mark) and AECN (the switch's aggregator-overflow mark) flags
reach the transport with it. A GACK (PA-ATP's per-fragment acknowledgment
from the node that took the fragment: a header without lanes, flag GACK)
reaches it with its ``progress`` field (S_sum), ``fanin`` (the N that
S_sum sums over), ECN_ECHO (the CE mark the fragment met) and whether the
PS took the fragment (the GACK's ``agg_node`` is the PS's id); transports
without GACKs ignore them. Communication time is the time from the first
send to the last RESULT of the iteration.

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

Real training (a job with ``training``, ``training`` in its config): the gradient is its model's, from
``testbed.training.session.WorkerTraining`` (imported only then: PyTorch), computed in the compute phase,
which sleeps only what is left of ``compute_time_s`` after the real work (the virtual compute time stays
the scenario's; a real computation longer than it is the iteration's ``compute_overrun_s``). The lanes of
every RESULT are kept; once an iteration's are all in, their sum is applied at the next compute phase. A
worker left out of K-of-N iterations does not skip ahead: it needs every aggregate to keep its model the
others'.

Fragment ``k`` of sub-model ``g`` has seq ``wire.fragment_seqs(layout)[g][k]``:
the sub-models are interleaved, so sending in seq order sends them side by
side. The slot of a fragment at its aggregation node is ``slot_base + seq mod
slot_count`` (wire.slot_index), the range the controller gave the job there;
under SwitchML's shadow copies (``shadow_pool``) it is the copy of its pool
slot that ``wire.shadow_slot`` names for the iteration, flagged SHADOW when
it is copy 1.
"""

import time

import numpy as np

from testbed.agents.common import (AgentClock, SendTally, agent_session, install_status_dump, straggler_rng,
                                   wait_readable)
from testbed.agents.datagrams import ReceiveBatch
from testbed.agents.gradients import worker_fragments
from testbed.agents.transport import make_transport
from testbed.dataplane.wire import (FLAG_AECN, FLAG_DATA, FLAG_ECN_ECHO, FLAG_GACK, FLAG_RESULT, FLAG_RETX,
                                    FLAG_SHADOW, INA_HEADER_DTYPE, INA_UDP_PORT,
                                    fragment_seqs, ina_frame_bytes, shadow_slot, slot_index)
from testbed.stragglers import straggler_delay_s

IDLE_WAIT_S = 0.05         # longest sleep without a timer due (stop and K-of-N checks), wall seconds


class Worker:
    def __init__(self, config, sock, records, clock=None, training=None):
        """``training``: a training job's ``testbed.training.session.WorkerTraining`` (made before the agent
        says it is ready: it loads PyTorch and the dataset)."""
        self.cfg = config
        self.sock = sock
        self.records = records
        self.clock = clock or AgentClock(config.time_dilation)
        # RESULTs of later iterations, kept for when this worker gets there (a worker that fell
        # behind finds them in its socket); the newest iteration any RESULT was for.
        self.early_results = {}
        self.newest_iteration = -1
        self.iteration, self.phase = 0, "starting"
        self.batch = ReceiveBatch(sock) if sock is not None else None    # without one: receive() driven by hand
        self.delay_rng = straggler_rng(config)
        # Per fragment: its destination and the header fields that do not change from iteration to iteration.
        seqs_of = fragment_seqs([n for _, n in config.layout])
        total = config.total_fragments
        self.addresses = [None] * total
        self.agg_nodes, self.fanins, self.submodels, self.slots = (np.zeros(total, dtype=np.int64) for _ in range(4))
        self.path_keys = [None] * total
        self.ps_nodes = [0] * total      # a GACK naming it came from the PS
        self.shadow = {}        # seq -> (slot_base, pool) of fragments aggregated in SwitchML shadow copies
        for p in config.submodels:
            seqs = seqs_of[p.submodel]
            for seq in seqs:
                if p.shadow_pool:
                    self.shadow[seq] = (p.slot_base, p.shadow_pool)
                self.slots[seq] = slot_index(seq, p.slot_base, p.slot_count) if p.slot_count else 0
                self.addresses[seq] = (p.agg_ip, INA_UDP_PORT)
                # RESULTs of one path (aggregation node and PS) come back in order; of two, not.
                self.path_keys[seq] = (p.agg_ip, p.ps_ip)
                self.ps_nodes[seq] = p.ps_node
            self.agg_nodes[seqs], self.fanins[seqs], self.submodels[seqs] = p.agg_node, p.fanin, p.submodel
        self.training = training
        self.transport = make_transport(config.transport, window_cap=config.window,
                                        link_rate_bps=config.link_rate_bps, frame_bytes=ina_frame_bytes(config.lanes),
                                        min_rto_s=config.retransmit_timeout_s,
                                        first_result_timeout_s=config.first_result_timeout_s,
                                        options=config.transport_options)

    def slots_and_flags(self, iteration: int) -> tuple:
        """Per seq, the slot it names this iteration and the flags that go with it (SHADOW for copy 1 of a
        SwitchML pool slot); without shadow copies the slot is the same every iteration."""
        slots = self.slots.copy()
        flags = np.zeros(len(slots), dtype=np.uint16)
        for seq, (base, pool) in self.shadow.items():
            slots[seq], version = shadow_slot(seq, iteration, self.cfg.total_fragments, base, pool)
            flags[seq] = FLAG_SHADOW if version else 0
        return slots, flags

    def frames(self, iteration: int, rows: np.ndarray) -> np.ndarray:
        """This iteration's datagrams, one record per seq (its INA header, then its lanes), built in one pass
        over the gradient's ``rows`` (one per seq): sent as they are, flagged RETX in place when resent."""
        cfg = self.cfg
        slots, slot_flags = self.slots_and_flags(iteration)
        frames = np.empty(len(rows), dtype=np.dtype([("header", INA_HEADER_DTYPE), ("lanes", ">i4", (cfg.lanes,))]))
        header = frames["header"]
        for name, value in (("job", cfg.job_id), ("elems", cfg.lanes), ("level", 0), ("count", 1),
                            ("iteration", iteration), ("bitmap", 1 << cfg.worker_index), ("progress", 0),
                            ("agg_node", self.agg_nodes), ("fanin", self.fanins), ("submodel", self.submodels),
                            ("seq", np.arange(len(rows))), ("slot", slots), ("flags", FLAG_DATA | slot_flags)):
            header[name] = value
        frames["lanes"] = rows
        return frames

    def packets(self, frames: np.ndarray):
        """``packet(seq, retransmission) -> (address, datagram)`` over this iteration's ``frames``
        (:meth:`frames`): a view of the record, flagged RETX in place when it is resent (every later send of
        it is a retransmission too)."""
        flags = frames["header"]["flags"]
        frame_bytes = frames.dtype.itemsize
        datagrams = memoryview(frames.view(np.uint8))
        addresses = self.addresses

        def packet(seq, retransmission):
            if retransmission:
                flags[seq] |= FLAG_RETX
            return addresses[seq], datagrams[seq * frame_bytes:(seq + 1) * frame_bytes]

        return packet

    def describe(self) -> dict:
        """What this worker waits for (the stall diagnosis)."""
        t = self.transport
        state = {"role": "worker", "iteration": self.iteration, "phase": self.phase, "window": t.window(),
                 "srtt_s": t.rtt.srtt_s, "rto_s": t.rtt.rto_s(), **t.state(), **t.stats}
        if self.phase == "communicating":
            missing = [seq for seq in range(t.total) if not t.acked[seq]]
            state.update(fragments=t.total, results_missing=len(missing), first_missing_seqs=missing[:10],
                         next_seq=t.next_seq, lowest_unacknowledged=t.base,
                         first_result_seen=t.first_result_s is not None)
        return state

    def run_iteration(self, iteration: int) -> dict:
        cfg = self.cfg
        self.iteration, self.phase = iteration, "computing"
        clock = self.clock
        t0 = clock.now_s()
        delay_s = straggler_delay_s(cfg.compute_delay, self.delay_rng)
        training_record = {}
        if self.training is None:
            clock.sleep(cfg.compute_time_s + delay_s)
            rows = worker_fragments(cfg.seed, cfg.job_id, cfg.worker_index, iteration, cfg.layout, cfg.lanes,
                                    cfg.gradient_bound, cfg.scale_bits)
        else:
            rows, training_record = self.training.gradient_rows(iteration)
            worked_s = clock.now_s() - t0
            clock.sleep(max(0.0, cfg.compute_time_s + delay_s - worked_s))
            training_record["compute_overrun_s"] = max(0.0, worked_s - cfg.compute_time_s - delay_s)
        frames = self.frames(iteration, rows)
        packet, total = self.packets(frames), len(frames)
        transport = self.transport
        self.phase = "communicating"
        before = dict(transport.stats)
        t_comm = clock.now_s()
        transport.start_iteration(total, self.early_results.pop(iteration, ()), t_comm,
                                  path_keys=self.path_keys)
        tally = SendTally(t_comm)
        sock, sendto, receive, batch = self.sock, self.sock.sendto, self.receive, self.batch
        listening_since_s = time.time()     # what arrived while computing waited by design (host delay)
        deadline = t_comm + cfg.deadline_s
        superseded = False
        keep = self.keep_result if self.training is not None else None
        while not transport.finished():
            if not cfg.participant and self.newest_iteration > iteration and self.training is None:
                # Left out of this K-of-N iteration and overtaken: the model moved on; take the newest.
                superseded = True
                break
            now = clock.now_s()
            tally.send_due(transport, now, packet, sendto)
            wake = transport.next_deadline_s(now)
            wait_s = IDLE_WAIT_S if wake is None else min(IDLE_WAIT_S, clock.wall_s(wake - now))
            if wait_readable(sock, wait_s, IDLE_WAIT_S):
                for i, header in batch.drain(listening_since_s):
                    receive(header, iteration, clock.now_s())
                    if keep is not None:
                        keep(batch, i, header, iteration)
            if clock.now_s() > deadline:
                missing = [seq for seq in range(total) if not transport.acked[seq]]
                raise TimeoutError(f"worker {cfg.name}: iteration {iteration}: no RESULT for {len(missing)} of "
                                   f"{total} fragments after {cfg.deadline_s:.0f}s (first missing seq "
                                   f"{missing[0]}); is the PS running and every switch on the path up?")
        t_end = clock.now_s()
        if self.training is not None:
            if not self.training.complete(iteration):
                raise RuntimeError(f"worker {cfg.name}: iteration {iteration}: every fragment acknowledged "
                                   f"but not every RESULT's lanes kept")
            self.training.finish_iteration(iteration)
            if iteration == cfg.iterations - 1:
                # The last aggregate applied and the model evaluated once more: the run's final figures.
                training_record.update(self.training.final_record(), t_final=clock.epoch_s())
        # What the transport did this iteration (every counter it keeps but the packets, counted above).
        counts = {k: v - before[k] for k, v in transport.stats.items() if k not in ("sent", "retransmitted")}
        return {"iteration": iteration, "participant": cfg.participant, "superseded": superseded,
                "compute_s": t_comm - t0, "straggler_delay_s": delay_s,
                "t_start": clock.epoch_s() - (t_end - t0), "comm_s": t_end - t_comm,
                "iteration_s": t_end - t0, "t_end": clock.epoch_s(), "sent_pkts": tally.pkts,
                "retx_pkts": tally.retx_pkts, "sent_bytes": tally.frame_bytes, "fragments": total,
                "window": transport.window(), "srtt_s": transport.rtt.srtt_s, **counts,
                "sending_rate_bps": tally.rate_bps(cfg.link_rate_bps), **training_record}

    def keep_result(self, batch, i: int, header: tuple, iteration: int):
        """A training worker keeps the lanes of a RESULT of this iteration or a later one (datagram ``i`` of
        ``batch``)."""
        job, flags, elems, _, _, _, _, _, it, seq, _, bitmap, _ = header
        if job == self.cfg.job_id and flags & FLAG_RESULT and it >= iteration and seq < len(self.addresses):
            self.training.keep_result(it, seq, bitmap, batch.lanes(i, min(elems, self.cfg.lanes)))

    def receive(self, header: tuple, iteration: int, now_s: float):
        """Hand one datagram of this job, by its INA ``header`` (the fields ``INA_HEADER.unpack`` gives), to
        the transport: a GACK of ``iteration`` (with its progress sum, fan-in and CE echo), or a RESULT
        (with its ECN_ECHO and AECN flags); RESULTs of later iterations are remembered for when this worker
        gets there. Anything else is dropped."""
        job, flags, _, _, agg_node, fanin, _, _, it, seq, _, _, progress = header
        if job != self.cfg.job_id or seq >= len(self.addresses) or it < iteration:
            return
        if flags & FLAG_GACK:
            if it == iteration:
                self.transport.on_gack(seq, now_s, progress, fanin, bool(flags & FLAG_ECN_ECHO),
                                       at_ps=agg_node == self.ps_nodes[seq])
        elif flags & FLAG_RESULT:
            if it > iteration:
                self.early_results.setdefault(it, set()).add(seq)
                self.newest_iteration = max(self.newest_iteration, it)
            else:
                self.transport.on_result(seq, now_s, bool(flags & FLAG_ECN_ECHO), bool(flags & FLAG_AECN))

def run(config) -> int:
    training = None
    if config.training:
        from testbed.training.session import WorkerTraining     # PyTorch: only a training job's workers
        training = WorkerTraining(config)
    with agent_session(config) as (sock, records, clock):
        worker = Worker(config, sock, records, clock, training)
        install_status_dump(config.run_dir, config.name, worker.describe)
        if config.start_s > 0:
            # The job's scheduled start (its ``start``), after the run's common start.
            worker.phase = "waiting for the job's start"
            clock.sleep(clock.until_s(config.start_s))
        print(f"worker {config.name}: job {config.job} index {config.worker_index}, {len(worker.addresses)} "
              f"fragments/iteration, window {config.window}", flush=True)
        iteration = 0
        while iteration < config.iterations:
            records.write(worker.run_iteration(iteration))
            # A worker left out of K-of-N iterations continues from the newest model it has seen (a training
            # worker applies every aggregate in turn instead).
            skip = not config.participant and worker.training is None
            iteration = max(iteration + 1, worker.newest_iteration) if skip else iteration + 1
        print(f"worker {config.name}: {config.iterations} iterations done", flush=True)
    return 0
