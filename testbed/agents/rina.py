"""Rina's workers (``policy: rina``, Rina §IV): ring all-reduce over abstracted workers, a Rina rack's
ToR summing the rack's shards.

The scheme (:mod:`testbed.schemes.ring`) makes the job's workers G *members*
in ring order: each rack under a programmable ToR is one (a Rina rack, its
agent the lowest-rank worker), every other worker one on its own (an
autonomous worker). The members run RAR's 2 (G - 1) steps
(:func:`testbed.agents.ring_schedule.rar_steps` over the members): G - 1
ScatterReduce steps, then G - 1 AllGather steps. Every packet carries the
INA header (``wire.INA_HEADER``, port 40000), its seq being
``wire.rina_seq(step, index within the step's chunk)``.

- **An autonomous worker** (:class:`RinaMember`) is a RAR worker
  (:class:`testbed.agents.ring.RingWorker`): it sends its range of each step
  to the next member, the next member acknowledges (flag RESULT, ``count``
  fragments from ``seq``), and it adds (ScatterReduce) or keeps (AllGather)
  what its predecessor sends. Its AllGather packets carry flag GATHER.
- **A Rina rack's agent** (:class:`RinaMember` too) runs the same steps for
  the rack, but in every ScatterReduce step and in the first AllGather step
  (step G - 1) what it sends is a *task* (flags DATA, TASK; ``agg_node`` its
  ToR, ``fanin`` the rack's size, bitmap bit 0): its own shard of the
  fragment (its gradient plus what the predecessor sent earlier, §IV-B 3),
  addressed to the next member. The ToR keeps it in the job's contiguous
  slots and multicasts the header as a *pull* (flag PULL) to the rack's
  other workers; their shards complete the slot, and the rack's sum leaves
  the ToR, from the ToR's address, toward the next member, which
  acknowledges it to the agent (a member's data comes from its agent or
  its ToR: ``member_tors``). In step G - 1 the sum is a finished chunk
  (GATHER): the ToR sends it to every worker of the rack as well (§IV-B 4),
  so the agent waits for its rack's copy of it before the iteration ends
  (:meth:`RinaMember._finish`), resending the task of a fragment whose copy
  is late (the ToR keeps the sum and sends it again). Later AllGather steps
  forward what arrived, as RAR does; a finished chunk arriving for the
  agent goes to the whole rack (the ToR's ``rina_gather``).
- **A Rina rack's other workers** (:class:`RinaRackWorker`) answer each pull
  with their shard (their gradient's fragment, bit ``rack_rank``), to the
  next member through the ToR, and collect the finished chunks the ToR
  multicasts to the rack (their rack's own, and the predecessor's in each
  AllGather step). A worker that waits ``REPAIR_AFTER_RTOS`` minimum RTOs
  with fragments missing asks its agent for them (flag REPAIR, ``count``
  fragments from the fragment index ``seq``), and the agent answers from the
  last iteration it finished.

Delivery between members is the job's transport, as for RAR; the rack's
shards ride on the agent's window (each task pulls one fragment from the
rack), so the agent's congestion control paces the rack, as §IV-C has the
agent's ACK clock the ScatterReduce. Exactness is checked by every worker,
as RAR's are.

When a worker fails (``stragglers.failures``), the job's ring is stopped
and made again without it (§IV-C2: a failed agent's rack's other workers
fall back to plain RAR, autonomous members in its place; a rack goes on
without a failed worker of its own; the ring bypasses a failed autonomous
worker), and the interrupted iteration is redone
(:mod:`testbed.agents.ring_generation`); every packet carries its ring's
generation in the iteration field.
"""

import numpy as np

from testbed.agents.common import (FRAME_OVERHEAD_BYTES, agent_session, install_status_dump, pending_datagrams,
                                   sending_rate_bps, straggler_rng)
from testbed.agents.gradients import worker_fragments
from testbed.agents.ring import AnsweringPeer, RingWorker, mismatched_fragments
from testbed.agents.ring_generation import HaltRequest, RingHalted, await_next_generation
from testbed.agents.ring_schedule import rar_steps
from testbed.dataplane.wire import (FLAG_DATA, FLAG_ECN_ECHO, FLAG_GATHER, FLAG_PULL, FLAG_REPAIR, FLAG_RESULT,
                                    FLAG_RETX, FLAG_TASK, INA_HEADER, INA_HEADER_BYTES, INA_UDP_PORT,
                                    ina_frame_bytes, rina_generation_iteration, rina_iteration, rina_seq,
                                    rina_step_index)
from testbed.stragglers import straggler_delay_s

#: A rack worker (or agent) missing finished fragments asks again after this many minimum RTOs without one.
REPAIR_AFTER_RTOS = 4
#: Fragments one REPAIR asks for at most (its count field is 16 bits).
MAX_REPAIR_RUN = 0xFFFF


def ring_datagrams(agent, now: float):
    """The datagrams waiting on ``agent``'s socket that belong to its ring: ``(header, iteration, datagram,
    ancillary data, sender)``, ``header`` the unpacked ``INA_HEADER`` and ``iteration`` the ring's own (its
    generation taken off). Those too short for the header, of another job or of another ring generation are
    dropped; every datagram counts as an arrival (``agent.last_arrival_s = now``: an agent done with its
    iterations lingers until none came for a while, :meth:`testbed.agents.ring.AnsweringPeer.linger`)."""
    cfg = agent.cfg
    for data, ancillary, sender in pending_datagrams(agent.sock):
        agent.last_arrival_s = now
        if len(data) < INA_HEADER_BYTES:
            continue
        header = INA_HEADER.unpack_from(data)
        generation, iteration = rina_generation_iteration(header[8])
        if header[0] == cfg.job_id and generation == cfg.generation:
            yield header, iteration, data, ancillary, sender


def repair_runs(missing) -> list:
    """(first, count) runs of the sorted fragment indices ``missing``, each at most ``MAX_REPAIR_RUN`` long."""
    runs = []
    for index in missing:
        if runs and runs[-1][0] + runs[-1][1] == index and runs[-1][1] < MAX_REPAIR_RUN:
            runs[-1][1] += 1
        else:
            runs.append([index, 1])
    return [tuple(r) for r in runs]


class RinaMember(RingWorker):
    """An autonomous worker, or a Rina rack's agent (``rack_tor_node`` set, ``rack_rank`` 0)."""

    def __init__(self, config, sock, records, clock=None, halt=None):
        super().__init__(config, sock, records, clock, halt)
        self.gather_from = len(config.workers) - 1      # step G - 1: the first AllGather step
        self.rack = config.rack_tor_node != 0
        tors = dict(config.member_tors)
        self.tor_ip = tors[config.member_index]
        self.sources = {m: {ip, tors[m]} - {""} for m, ip in config.workers}
        self.own_chunk = {}        # iteration -> {index: lanes}: the rack's finished chunk, as its ToR sent it back
        self.finished = None       # (iteration, buffer) of the last iteration done: what repairs are answered from
        self.repairs_answered = 0

    @staticmethod
    def _ring(config) -> tuple:
        return rar_steps(config.member_index, len(config.workers), config.total_fragments), dict(config.workers)

    @staticmethod
    def _frame_bytes(lanes: int) -> int:
        return ina_frame_bytes(lanes)

    def _data_packet(self, st, iteration, out, index, retransmission):
        cfg = self.cfg
        flags = FLAG_DATA | (FLAG_RETX if retransmission else 0) | (FLAG_GATHER if st.step >= self.gather_from else 0)
        if self.rack and st.step <= self.gather_from:
            flags |= FLAG_TASK
            agg_node, fanin, bitmap = cfg.rack_tor_node, cfg.rack_size, 1
        else:
            agg_node = fanin = bitmap = 0
        return ((self.ips[st.send_to], INA_UDP_PORT),
                INA_HEADER.pack(cfg.job_id, flags, cfg.lanes, 0, agg_node, fanin, 1, 0,
                                rina_iteration(cfg.generation, iteration), rina_seq(st.step, index), 0, bitmap, 0)
                + out[index].tobytes())

    def _receive(self, now: float):
        for header, iteration, data, ancillary, sender in ring_datagrams(self, now):
            _, flags, _, _, _, _, count, _, _, seq, _, _, _ = header
            if flags & FLAG_REPAIR:
                self._answer_repair(sender, iteration, seq, count)
                continue
            step, index = rina_step_index(seq)
            if step >= len(self.steps):
                continue
            if flags & FLAG_RESULT:
                self._on_ack(iteration, step, index, count, flags, sender, now)
            elif flags & FLAG_DATA:
                if self.rack and sender[0] == self.tor_ip:
                    # The rack's finished chunk, sent back to the rack by its ToR.
                    if step == self.gather_from and (self.finished is None or iteration > self.finished[0]):
                        self.own_chunk.setdefault(iteration, {})[index] = data[INA_HEADER_BYTES:]
                    continue
                self._on_data(iteration, step, index, data[INA_HEADER_BYTES:], ancillary, sender, now)

    def _from_peer(self, step: int, address: str) -> bool:
        return address in self.sources[self.steps[step].receive_from]

    def _send_ack(self, ack):
        iteration, step = ack.key
        self.sock.sendto(INA_HEADER.pack(self.cfg.job_id, FLAG_RESULT | (FLAG_ECN_ECHO if ack.ce else 0), 0, 0, 0, 0,
                                         ack.count, 0, rina_iteration(self.cfg.generation, iteration),
                                         rina_seq(step, ack.first), 0, 0, 0),
                         (self.ips[self.steps[step].receive_from], INA_UDP_PORT))

    def _finish(self, iteration: int, buf):
        """A Rina agent's rack sums its own finished chunk in step G - 1 and sends it back: wait for every
        fragment of it (resending the task of those late by ``REPAIR_AFTER_RTOS`` minimum RTOs), then keep
        the iteration's buffer for the rack's repairs."""
        if self.rack:
            st = self.steps[self.gather_from]
            first, end = st.send
            shards = buf[first:end].astype(">i4")
            clock, wait_s = self.clock, REPAIR_AFTER_RTOS * self.cfg.retransmit_timeout_s
            deadline = clock.now_s() + self.cfg.deadline_s
            asked = clock.now_s()
            got = self.own_chunk.setdefault(iteration, {})
            while len(got) < end - first:
                now = clock.now_s()
                if now > deadline:
                    raise TimeoutError(f"rina agent {self.cfg.name}: iteration {iteration}: {end - first - len(got)} "
                                       f"of {end - first} fragments of the rack's finished chunk never came back "
                                       f"from its ToR after {self.cfg.deadline_s:.0f}s")
                if now - asked >= wait_s:
                    for index in range(end - first):
                        if index not in got:
                            addr, data = self._data_packet(st, iteration, shards, index, True)
                            self.sock.sendto(data, addr)
                    asked = now
                self.serve(asked + wait_s - now)
            rows = b"".join(got[i] for i in range(end - first))
            buf[first:end] = np.frombuffer(rows, dtype=">i4").reshape(end - first, self.cfg.lanes)
            del self.own_chunk[iteration]
        self.finished = (iteration, buf.copy())
        return buf

    def _answer_repair(self, sender, iteration: int, first: int, count: int):
        """A rack worker's REPAIR: the fragments it asks for, from the last iteration this agent finished."""
        if self.finished is None or self.finished[0] != iteration:
            return      # not finished here yet: it asks again
        buf, cfg = self.finished[1], self.cfg
        for index in range(first, min(first + count, len(buf))):
            self.sock.sendto(INA_HEADER.pack(cfg.job_id, FLAG_DATA | FLAG_REPAIR, cfg.lanes, 0, 0, 0, 0, 0,
                                             rina_iteration(cfg.generation, iteration), index, 0, 0, 0)
                             + buf[index].astype(">i4").tobytes(),
                             (sender[0], INA_UDP_PORT))
            self.repairs_answered += 1

    def describe(self) -> dict:
        return {**super().describe(), "role": "rina agent" if self.rack else "rina autonomous",
                "member": self.cfg.member_index, "repairs_answered": self.repairs_answered}


class RinaRackWorker(AnsweringPeer):
    """A Rina rack's worker other than its agent: shards on pull, finished chunks from the ToR."""

    def __init__(self, config, sock, records, clock=None, halt=None):
        super().__init__(config, sock, records, clock, halt)
        members = dict(config.workers)
        self.steps = rar_steps(config.member_index, len(members), config.total_fragments)
        self.gather_from = len(members) - 1
        self.next_ip = members[self.steps[0].send_to]
        tors = dict(config.member_tors)
        self.tor_ip = tors[config.member_index]
        predecessor = self.steps[0].receive_from
        self.predecessor_ips = {members[predecessor], tors[predecessor]} - {""}
        self.bitmap = 1 << config.rack_rank
        self.delay_rng = straggler_rng(config)
        self.gradient = None        # (iteration, fragments) once computed
        self.waiting_pulls = []     # (iteration, seq, flags, agg_node, fanin) of pulls before their gradient
        self.result = None          # (iteration, fragments, have) being collected
        self.missing = 0
        self.answered = set()       # seqs of the current iteration answered (a second answer is a resend)
        self.tally = [0, 0, 0, None, 0.0]     # packets, resent packets, frame bytes, first pull's time, last send's
        self.repairs_asked = 0
        self.progress_s = self.last_arrival_s

    # -- packets ----------------------------------------------------------------------------
    def serve(self, wait_s: float):
        if self._readable(wait_s):
            self._receive(self.clock.now_s())

    def _receive(self, now: float):
        for header, iteration, data, _, sender in ring_datagrams(self, now):
            _, flags, _, _, agg_node, fanin, _, _, _, seq, _, _, _ = header
            if flags & FLAG_PULL:
                if self.gradient is None or iteration > self.gradient[0]:
                    self.waiting_pulls.append((iteration, seq, flags, agg_node, fanin))
                elif iteration == self.gradient[0]:
                    self._answer_pull(seq, flags, agg_node, fanin, now)
            elif flags & FLAG_DATA:
                self._on_finished(sender[0], flags, iteration, seq, data[INA_HEADER_BYTES:], now)

    def _answer_pull(self, seq: int, flags: int, agg_node: int, fanin: int, now: float):
        """This worker's shard of the pulled fragment, to the next member through the ToR."""
        cfg = self.cfg
        step, index = rina_step_index(seq)
        if step > self.gather_from:
            return
        iteration, rows = self.gradient
        data = INA_HEADER.pack(cfg.job_id, FLAG_DATA | (flags & FLAG_GATHER), cfg.lanes, 0, agg_node, fanin, 1, 0,
                               rina_iteration(cfg.generation, iteration), seq, 0, self.bitmap, 0) \
            + rows[self.steps[step].send[0] + index].tobytes()
        self.sock.sendto(data, (self.next_ip, INA_UDP_PORT))
        tally = self.tally
        tally[0] += 1
        tally[1] += seq in self.answered
        tally[2] += len(data) + FRAME_OVERHEAD_BYTES
        if tally[3] is None:
            tally[3] = now
        tally[4] = now
        self.answered.add(seq)

    def _on_finished(self, sender_ip: str, flags: int, iteration: int, seq: int, payload: bytes, now: float):
        """A finished fragment: the rack's own chunk (from its ToR, step G - 1), the predecessor's
        in an AllGather step, or the agent's answer to a REPAIR (seq: the fragment's index)."""
        if self.result is None or iteration != self.result[0]:
            return
        if flags & FLAG_REPAIR:
            fragment = seq
        else:
            step, index = rina_step_index(seq)
            if sender_ip == self.tor_ip and step == self.gather_from:
                fragment = self.steps[step].send[0] + index
            elif sender_ip in self.predecessor_ips and self.gather_from <= step < len(self.steps):
                fragment = self.steps[step].receive[0] + index
            else:
                return
        _, rows, have = self.result
        if fragment < len(have) and not have[fragment]:
            rows[fragment] = np.frombuffer(payload, dtype=">i4", count=self.cfg.lanes)
            have[fragment] = True
            self.missing -= 1
            self.progress_s = now

    # -- one iteration --------------------------------------------------------------------
    def run_iteration(self, iteration: int) -> dict:
        cfg, clock = self.cfg, self.clock
        self.phase = "computing"
        t0 = clock.now_s()
        delay_s = straggler_delay_s(cfg.compute_delay, self.delay_rng)
        self.serve_until(t0 + cfg.compute_time_s + delay_s)
        t_comm = clock.now_s()
        self.phase = "communicating"
        self.gradient = (iteration, worker_fragments(cfg.seed, cfg.job_id, cfg.worker_index, iteration, cfg.layout,
                                                     cfg.lanes, cfg.gradient_bound, cfg.scale_bits).astype(">i4"))
        self.result = (iteration, np.zeros((cfg.total_fragments, cfg.lanes), dtype=np.int32),
                       np.zeros(cfg.total_fragments, dtype=bool))
        self.missing = cfg.total_fragments
        self.answered = set()
        self.tally = [0, 0, 0, None, t_comm]
        self.progress_s = t_comm
        pulls, self.waiting_pulls = self.waiting_pulls, []
        for pulled, seq, flags, agg_node, fanin in pulls:
            if pulled == iteration:
                self._answer_pull(seq, flags, agg_node, fanin, t_comm)
            elif pulled > iteration:
                self.waiting_pulls.append((pulled, seq, flags, agg_node, fanin))
        wait_s = REPAIR_AFTER_RTOS * cfg.retransmit_timeout_s
        deadline = t_comm + cfg.deadline_s
        asked = t_comm
        while self.missing:
            now = clock.now_s()
            if now > deadline:
                raise TimeoutError(f"rina worker {cfg.name}: iteration {iteration}: {self.missing} of "
                                   f"{cfg.total_fragments} finished fragments never came after {cfg.deadline_s:.0f}s; "
                                   f"is its agent {cfg.agent_ip} running?")
            if now - max(self.progress_s, asked) >= wait_s:
                self._ask_repair(iteration)
                asked = now
            self.serve(max(self.progress_s, asked) + wait_s - now)
        t_end = clock.now_s()
        _, rows, _ = self.result
        mismatched = mismatched_fragments(cfg, iteration, rows)
        pkts, resent, frame_bytes, first_pull_s, last_s = self.tally
        return {"iteration": iteration, "participant": True, "superseded": False,
                "compute_s": t_comm - t0, "straggler_delay_s": delay_s,
                "t_start": clock.epoch_s() - (t_end - t0), "comm_s": t_end - t_comm, "iteration_s": t_end - t0,
                "t_end": clock.epoch_s(), "sent_pkts": pkts, "retx_pkts": resent, "sent_bytes": frame_bytes,
                "fragments": len(self.answered), "window": 0, "srtt_s": None, "exact": mismatched == 0,
                "mismatched_fragments": mismatched, "step_delays_s": 0.0, "repairs_asked": self.repairs_asked,
                # the pulls clock this worker: its rate is over the time from the first pull to its last shard
                "sending_rate_bps": sending_rate_bps(frame_bytes, pkts, last_s - (first_pull_s or t_comm),
                                                     cfg.link_rate_bps)}

    def _ask_repair(self, iteration: int):
        """Ask the agent for every finished fragment still missing."""
        have = self.result[2]
        for first, count in repair_runs(np.flatnonzero(~have).tolist()):
            self.sock.sendto(INA_HEADER.pack(self.cfg.job_id, FLAG_REPAIR, 0, 0, 0, 0, count, 0,
                                             rina_iteration(self.cfg.generation, iteration), first, 0, 0, 0),
                             (self.cfg.agent_ip, INA_UDP_PORT))
            self.repairs_asked += 1

    def describe(self) -> dict:
        return {"role": "rina rack worker", "iteration": self.result[0] if self.result else None,
                "phase": self.phase, "missing": self.missing, "waiting_pulls": len(self.waiting_pulls),
                "repairs_asked": self.repairs_asked}


def _is_rack_worker(config) -> bool:
    """A Rina rack's worker other than its agent (else a member: an agent or an autonomous worker)."""
    return config.rack_tor_node != 0 and config.rack_rank != 0


def _worker_of(config, sock, records, clock, halt):
    """The object a Rina job's worker is under ``config``."""
    return (RinaRackWorker if _is_rack_worker(config) else RinaMember)(config, sock, records, clock, halt)


def _announce(config):
    role = ("worker of the rack" if _is_rack_worker(config) else "agent of the rack") if config.rack_tor_node \
        else "autonomous"
    generation = f", ring generation {config.generation} from iteration {config.first_iteration}" \
        if config.generation else ""
    print(f"rina worker {config.name}: job {config.job}, member {config.member_index} of {len(config.workers)} "
          f"({role}), {config.total_fragments} fragments/iteration, window {config.window}{generation}", flush=True)


def run(config) -> int:
    halt = HaltRequest()        # before the start: an early SIGUSR2 must not end the process
    with agent_session(config, INA_UDP_PORT) as (sock, records, clock):
        worker = _worker_of(config, sock, records, clock, halt)
        install_status_dump(config.run_dir, config.name, lambda: worker.describe())
        iteration = 0
        while True:
            try:
                if iteration == 0 and config.generation == 0 and config.start_s > 0:
                    worker.phase = "waiting for the job's start"
                    worker.serve_until(clock.now_s() + clock.until_s(config.start_s))
                _announce(config)
                while iteration < config.iterations:
                    records.write({**worker.run_iteration(iteration), "generation": config.generation})
                    iteration += 1
                worker.linger()
                break
            except RingHalted:
                # Rina §IV-C2: a worker of the job failed; the orchestrator makes the next ring generation.
                print(f"rina worker {config.name}: ring stopped with {iteration} iterations done", flush=True)
                config = await_next_generation(config, iteration, config.ready_timeout_s)
                previous, worker = worker, _worker_of(config, sock, records, clock, halt)
                for rng in ("delay_rng", "step_rng"):       # the draws go on where they stood
                    if hasattr(previous, rng) and hasattr(worker, rng):
                        setattr(worker, rng, getattr(previous, rng))
                iteration = config.first_iteration
        print(f"rina worker {config.name}: {config.iterations} iterations done", flush=True)
    return 0
