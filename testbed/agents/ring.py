"""Ring all-reduce worker agent (``policy: rar`` or ``h-ar``, Rina §II-B 2 and §III-A): no PS, no
aggregation in the network.

Per iteration: emulated compute (``compute_time_s`` plus a straggler delay,
drawn as the INA worker draws it), then the steps of its scheme's schedule
(:mod:`testbed.agents.ring_schedule`: RAR's 2 (N - 1) around one ring of the
job's ``workers``, or H-AR's within the rack, between the racks and within
the rack again). In each step the worker sends a range of its gradient
buffer to one peer and receives a range from another, which it adds to its
buffer (ScatterReduce) or keeps (AllGather). Every packet is plain UDP to
``wire.RING_UDP_PORT``, which the switches forward without parsing as INA:
a ring header (``wire.RING_HEADER``) and the lanes, one fragment per packet.

Delivery is the job's transport (``atp``: its congestion-controlled window,
pacing at the host link, RTO and gap detection): each step's range is one
transport round of as many fragments as it has, and the receiving peer's
ACKs (flag RESULT, ``elems`` fragments from ``index``; ECN_ECHO when one met
a switch queue's CE mark) play the part of the INA worker's RESULTs. The
receiver acknowledges runs of fragments (:mod:`testbed.agents.ring_acks`:
every 4, at the range's end, on a CE mark, or after 2 ms) and a duplicate
at once, keeps ranges of later steps (and iterations) that arrive early,
and drops duplicates of steps it has finished.

The worker answers its peers while it computes, and once its last
iteration is done it keeps answering until nothing has arrived for
``LINGER_QUIET_S`` (longer than the longest RTO), so a peer whose last ACKs
were lost gets them again (TCP's TIME-WAIT, RFC 793), or until the
orchestrator, which sees every worker's records, says that all of them have
recorded their last iteration (:func:`job_done_path`): then nobody awaits an
answer, and a run need not last ``LINGER_QUIET_S`` times its dilation more.

Each step may start with a delay (the scheme's ``step_overhead`` and
``step_jitter`` options: Rina Eq. 1's per-step overhead O(G) and its
spread sigma, which make RAR's long chain of barriers slow), drawn from a
normal clipped at 0 with an RNG seeded by (seed, job, worker); the
iteration's record has their sum (``step_delays_s``), which its
communication time includes.

Exactness: each worker recomputes every worker's gradient of the iteration
(:func:`testbed.agents.gradients.expected_sum`, the PS's check) and compares
its buffer after the last step bit for bit; its record says ``exact`` and
how many fragments differ. Communication time is the time from the start of
the first step to the end of the last.
"""

import random
from functools import partial
from pathlib import Path

import numpy as np

from testbed.agents.common import (AgentClock, SendTally, agent_session, arrived_ce, install_status_dump,
                                   pending_datagrams, straggler_rng, wait_readable)
from testbed.agents.gradients import expected_sum, worker_fragments
from testbed.agents.ring_acks import DelayedAcks
from testbed.agents.ring_schedule import worker_steps
from testbed.agents.transport import make_transport
from testbed.agents.transport.base import MAX_RTO_S
from testbed.dataplane.wire import (FLAG_DATA, FLAG_ECN_ECHO, FLAG_RESULT, FLAG_RETX,
                                    RING_HEADER, RING_HEADER_BYTES, RING_UDP_PORT, ring_frame_bytes)
from testbed.stragglers import straggler_delay_s

IDLE_WAIT_S = 0.05          # longest sleep without a timer due, wall seconds
LINGER_QUIET_S = MAX_RTO_S + 0.5   # virtual seconds


def mismatched_fragments(cfg, iteration: int, rows) -> int:
    """How many fragments of ``rows`` (the job's whole gradient, as a ring worker holds it after
    ``iteration``) differ from the exact sum of every worker's (:func:`expected_sum`; of the config's
    ``contributors`` once a failed worker's gradient is left out)."""
    expected = expected_sum(cfg.seed, cfg.job_id, cfg.contributors or cfg.total_workers, iteration, cfg.layout,
                            cfg.lanes, cfg.gradient_bound, cfg.scale_bits)
    return int(np.any(rows != expected, axis=1).sum())


def job_done_path(run_dir, job: str) -> Path:
    """The file the orchestrator writes once every worker of ring job ``job`` has recorded its last iteration
    (testbed.emulation.monitor.Monitor.release_finished_rings); it ends their lingering."""
    return Path(run_dir) / "agents" / f"{job}.job-done"


class AnsweringPeer:
    """What every ring agent does when it is not sending its own range: answer its peers (``serve``, the
    subclass's: it sets ``last_arrival_s`` when a datagram arrives) until a deadline, and after its last
    iteration until they have been quiet for ``LINGER_QUIET_S``. With a ``halt``
    (:class:`testbed.agents.ring_generation.HaltRequest`), each wake-up of ``serve`` raises ``RingHalted``
    once the orchestrator asked the ring to stop (a Rina job's worker failed)."""

    def __init__(self, config, sock, records, clock=None, halt=None):
        self.cfg = config
        self.sock = sock
        self.records = records
        self.clock = clock or AgentClock(config.time_dilation)
        self.halt = halt
        self.last_arrival_s = self.clock.now_s()
        self.phase = "starting"

    def serve_until(self, deadline_s: float):
        """Answer the peers (computing, or waiting for the job's start) until ``deadline_s``."""
        while (now := self.clock.now_s()) < deadline_s:
            self.serve(deadline_s - now)

    def _readable(self, wait_s: float) -> bool:
        """Whether a datagram waits on the socket within ``wait_s`` virtual seconds (at most ``IDLE_WAIT_S`` of
        wall time); ``RingHalted`` once the orchestrator asked the ring to stop."""
        ready = wait_readable(self.sock, min(IDLE_WAIT_S, self.clock.wall_s(wait_s)), IDLE_WAIT_S)
        if self.halt is not None:
            self.halt.check()
        return ready

    def linger(self):
        """Keep answering until nothing has arrived for ``LINGER_QUIET_S``, or until the job is done
        (:func:`job_done_path`; looked for at each wake-up, at most ``IDLE_WAIT_S`` apart)."""
        self.phase = "lingering"
        done = job_done_path(self.cfg.run_dir, self.cfg.job) if self.cfg.run_dir else None
        while (quiet_until := self.last_arrival_s + LINGER_QUIET_S) > (now := self.clock.now_s()):
            if done is not None and done.exists():
                self.phase = "done"
                return
            self.serve(quiet_until - now)


class RingWorker(AnsweringPeer):
    def __init__(self, config, sock, records, clock=None, halt=None):
        super().__init__(config, sock, records, clock, halt)
        self.rank = config.worker_index
        self.steps, self.ips = self._ring(config)
        self.frame_bytes = self._frame_bytes(config.lanes)
        self.delay_rng = straggler_rng(config)
        self.step_rng = random.Random(config.seed * 1_000_033 + config.job_id * 1013 + config.worker_index)
        self.transport = make_transport(config.transport, window_cap=config.window,
                                        link_rate_bps=config.link_rate_bps, frame_bytes=self.frame_bytes,
                                        min_rto_s=config.retransmit_timeout_s,
                                        first_result_timeout_s=config.first_result_timeout_s,
                                        options=config.transport_options)
        self.received = {}             # (iteration, step) -> {index: lanes as bytes}, steps not yet applied
        self.position = (0, -1)        # (iteration, step) being worked on; earlier ones are applied
        self.acks = DelayedAcks()

    # -- what a ring scheme's member says differently (testbed.agents.rina overrides these) ---------
    @staticmethod
    def _ring(config) -> tuple:
        """(steps, {rank: address}) of this worker's ring."""
        return (worker_steps(config.schedule, config.worker_index, config.total_workers, config.total_fragments,
                             config.racks), dict(config.workers))

    @staticmethod
    def _frame_bytes(lanes: int) -> int:
        return ring_frame_bytes(lanes)

    def _data_packet(self, st, iteration, out, index, retransmission):
        """(address, datagram) of fragment ``index`` of step ``st``'s range ``out``."""
        flags = FLAG_DATA | (FLAG_RETX if retransmission else 0)
        return ((self.ips[st.send_to], RING_UDP_PORT),
                RING_HEADER.pack(self.cfg.job_id, flags, self.cfg.lanes, st.step, iteration, index)
                + out[index].tobytes())

    def _from_peer(self, step: int, address: str) -> bool:
        """Whether data of ``step`` from ``address`` comes from the peer this worker receives from then."""
        return address == self.ips[self.steps[step].receive_from]

    def _finish(self, iteration: int, buf):
        """The iteration's buffer once every step is applied (a Rina agent waits for its rack's chunk here)."""
        return buf

    # -- packets in ----------------------------------------------------------------------
    def serve(self, wait_s: float):
        """Wait up to ``wait_s`` virtual seconds, at most ``IDLE_WAIT_S`` of wall time (less if an ACK falls
        due) for datagrams, handle every one that arrived, and send the ACKs due."""
        clock = self.clock
        due = self.acks.next_due_s()
        if due is not None:
            wait_s = min(wait_s, due - clock.now_s())
        ready = self._readable(wait_s)
        now = clock.now_s()
        if ready:
            self._receive(now)
        for ack in self.acks.due(now):
            self._send_ack(ack)

    def _receive(self, now: float):
        for data, ancillary, sender in pending_datagrams(self.sock):
            self.last_arrival_s = now
            if len(data) < RING_HEADER_BYTES:
                continue
            job, flags, elems, step, iteration, index = RING_HEADER.unpack_from(data)
            if job != self.cfg.job_id or step >= len(self.steps):
                continue
            if flags & FLAG_RESULT:
                self._on_ack(iteration, step, index, elems, flags, sender, now)
            elif flags & FLAG_DATA:
                self._on_data(iteration, step, index, data[RING_HEADER_BYTES:], ancillary, sender, now)

    def _on_ack(self, iteration, step, index, count, flags, sender, now):
        """An ACK of ``count`` fragments from ``index`` of ``step``; its echo counts once."""
        if (iteration, step) == self.position and sender[0] == self.ips[self.steps[step].send_to]:
            for k in range(index, min(index + count, self.transport.total)):
                self.transport.on_result(k, now, bool(flags & FLAG_ECN_ECHO) and k == index)

    def _on_data(self, iteration, step, index, payload, ancillary, sender, now):
        """Fragment ``index`` of ``step``'s range from the peer: kept until its step is applied, acknowledged."""
        if not self._from_peer(step, sender[0]):
            return
        key = (iteration, step)
        ce = arrived_ce(ancillary)
        chunk = self.received.setdefault(key, {}) if key >= self.position else None
        duplicate = chunk is None or index in chunk
        if not duplicate:
            chunk[index] = payload
        complete = not duplicate and len(chunk) == self._chunk_size(step)
        for ack in self.acks.on_data(key, index, ce, duplicate, complete, now):
            self._send_ack(ack)

    def _send_ack(self, ack):
        iteration, step = ack.key
        self.sock.sendto(RING_HEADER.pack(self.cfg.job_id, FLAG_RESULT | (FLAG_ECN_ECHO if ack.ce else 0), ack.count,
                                          step, iteration, ack.first),
                         (self.ips[self.steps[step].receive_from], RING_UDP_PORT))

    def _chunk_size(self, step: int) -> int:
        """Fragments this worker receives in ``step``."""
        first, end = self.steps[step].receive
        return end - first

    # -- one iteration -------------------------------------------------------------------
    def run_iteration(self, iteration: int) -> dict:
        cfg, lanes = self.cfg, self.cfg.lanes
        self.phase = "computing"
        clock = self.clock
        t0 = clock.now_s()
        delay_s = straggler_delay_s(cfg.compute_delay, self.delay_rng)
        self.serve_until(t0 + cfg.compute_time_s + delay_s)
        buf = worker_fragments(cfg.seed, cfg.job_id, cfg.worker_index, iteration, cfg.layout, lanes,
                               cfg.gradient_bound, cfg.scale_bits)
        transport = self.transport
        before = dict(transport.stats)
        fragments = 0
        t_comm = clock.now_s()
        tally = SendTally(t_comm)
        deadline = t_comm + cfg.deadline_s
        self.phase = "communicating"
        step_delays_s = 0.0
        for st in self.steps:
            self.position = (iteration, st.step)
            if cfg.step_overhead_s or cfg.step_jitter_s:
                # The step's own overhead (Rina Eq. 1's O(G) and its spread), answering the peers meanwhile.
                step_delay_s = max(0.0, self.step_rng.gauss(cfg.step_overhead_s, cfg.step_jitter_s))
                step_delays_s += step_delay_s
                self.serve_until(clock.now_s() + step_delay_s)
            first, end = st.send
            packet = partial(self._data_packet, st, iteration, buf[first:end].astype(">i4"))
            fragments += end - first
            transport.start_iteration(end - first, (), clock.now_s())
            r_first, r_end = st.receive
            expected = r_end - r_first
            while not (transport.finished() and len(self.received.get(self.position, ())) >= expected):
                now = clock.now_s()
                tally.send_due(transport, now, packet, self.sock.sendto)
                wake = transport.next_deadline_s(now)
                self.serve(float("inf") if wake is None else wake - now)
                if clock.now_s() > deadline:
                    raise TimeoutError(self._stuck(iteration, st, expected))
            chunk = self.received.pop(self.position, {})
            rows = np.frombuffer(b"".join(chunk[i] for i in range(expected)), dtype=">i4").reshape(expected, lanes)
            if st.reduce:
                buf[r_first:r_end] += rows
            else:
                buf[r_first:r_end] = rows
        self.position = (iteration + 1, -1)       # every step of this iteration is applied
        buf = self._finish(iteration, buf)
        t_end = clock.now_s()
        mismatched = mismatched_fragments(cfg, iteration, buf)
        counts = {k: v - before[k] for k, v in transport.stats.items() if k not in ("sent", "retransmitted")}
        return {"iteration": iteration, "participant": True, "superseded": False,
                "compute_s": t_comm - t0, "straggler_delay_s": delay_s,
                "t_start": clock.epoch_s() - (t_end - t0), "comm_s": t_end - t_comm, "iteration_s": t_end - t0,
                "t_end": clock.epoch_s(), "sent_pkts": tally.pkts, "retx_pkts": tally.retx_pkts,
                "sent_bytes": tally.frame_bytes,
                "fragments": fragments, "window": transport.window(), "srtt_s": transport.rtt.srtt_s, **counts,
                "exact": mismatched == 0, "mismatched_fragments": mismatched, "step_delays_s": step_delays_s,
                "sending_rate_bps": tally.rate_bps(cfg.link_rate_bps)}

    def _stuck(self, iteration, st, expected) -> str:
        t = self.transport
        unacked = [i for i in range(t.total) if not t.acked[i]]
        got = len(self.received.get((iteration, st.step), ()))
        return (f"ring worker {self.cfg.name}: iteration {iteration} step {st.step}: {len(unacked)} of {t.total} "
                f"fragments unacknowledged by {self.ips[st.send_to]}, {got} of {expected} received from "
                f"{self.ips[st.receive_from]} after {self.cfg.deadline_s:.0f}s; is every ring worker running?")

    def describe(self) -> dict:
        """What this worker waits for (the stall diagnosis)."""
        t = self.transport
        state = {"role": "ring", "iteration": self.position[0], "step": self.position[1], "phase": self.phase,
                 "window": t.window(), "srtt_s": t.rtt.srtt_s, "rto_s": t.rtt.rto_s(), **t.stats}
        if self.phase == "communicating":
            state.update(fragments=t.total, unacknowledged=sum(1 for i in range(t.total) if not t.acked[i]),
                         received=len(self.received.get(self.position, ())))
        return state

    def linger(self):
        self.position = (self.cfg.iterations, 0)      # every step of every iteration is applied
        super().linger()


def run(config) -> int:
    with agent_session(config, RING_UDP_PORT) as (sock, records, clock):
        worker = RingWorker(config, sock, records, clock)
        install_status_dump(config.run_dir, config.name, worker.describe)
        if config.start_s > 0:
            worker.phase = "waiting for the job's start"
            worker.serve_until(clock.now_s() + clock.until_s(config.start_s))
        print(f"ring worker {config.name}: job {config.job} ({config.schedule}) rank {worker.rank} of "
              f"{config.total_workers}, {len(worker.steps)} steps, {config.total_fragments} fragments/iteration, "
              f"window {config.window}", flush=True)
        for iteration in range(config.iterations):
            records.write(worker.run_iteration(iteration))
        worker.linger()
        print(f"ring worker {config.name}: {config.iterations} iterations done", flush=True)
    return 0
