"""What the agents share, pure or on a loopback socket: draining a socket's datagrams with their TOS byte,
the straggler RNG's seed, a ring worker's exactness count, and answering peers until quiet."""

import socket
from types import SimpleNamespace

import numpy as np

from testbed.agents.common import ECN_CE, ECN_ECT0, arrived_ce, open_endpoint, pending_datagrams, straggler_rng
from testbed.agents.gradients import expected_sum
from testbed.agents.ring import LINGER_QUIET_S, AnsweringPeer, job_done_path, mismatched_fragments


def test_pending_datagrams_yields_every_waiting_datagram_with_its_tos_then_stops():
    receiver = open_endpoint("127.0.0.1", 0, "127.0.0.1")
    sender = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sender.bind(("127.0.0.1", 0))
    try:
        address = receiver.getsockname()
        for tos, payload in ((ECN_ECT0, b"one"), (ECN_CE, b"two"), (ECN_ECT0, b"three")):
            sender.setsockopt(socket.IPPROTO_IP, socket.IP_TOS, tos)
            sender.sendto(payload, address)
        got = list(pending_datagrams(receiver))
        assert [data for data, _, _ in got] == [b"one", b"two", b"three"]
        assert [arrived_ce(ancillary) for _, ancillary, _ in got] == [False, True, False]
        assert all(sender_address == sender.getsockname() for _, _, sender_address in got)
        assert list(pending_datagrams(receiver)) == []          # nothing waiting: no wait either
    finally:
        sender.close()
        receiver.close()


def test_arrived_ce_reads_the_ecn_bits_of_the_tos_byte_only():
    assert arrived_ce([]) is False
    assert arrived_ce([(socket.IPPROTO_IP, socket.IP_TOS, bytes([0x20 | ECN_CE]))]) is True   # DSCP bits aside
    assert arrived_ce([(socket.IPPROTO_IP, socket.IP_TOS, bytes([0x01]))]) is False           # ECT(1)


def test_the_straggler_rng_is_seeded_by_seed_job_and_worker():
    config = SimpleNamespace(seed=1, job_id=2, worker_index=3)
    assert straggler_rng(config).random() == straggler_rng(SimpleNamespace(**vars(config))).random()
    others = [SimpleNamespace(seed=2, job_id=2, worker_index=3), SimpleNamespace(seed=1, job_id=3, worker_index=3),
              SimpleNamespace(seed=1, job_id=2, worker_index=4)]
    assert len({straggler_rng(c).random() for c in [config] + others}) == 4


def test_mismatched_fragments_counts_the_fragments_that_differ_from_the_exact_sum():
    cfg = SimpleNamespace(seed=5, job_id=1, total_workers=3, layout=[(6 * 8, 6)], lanes=8, gradient_bound=1.0,
                          scale_bits=16, contributors=[])
    exact = expected_sum(cfg.seed, cfg.job_id, cfg.total_workers, 2, cfg.layout, cfg.lanes, cfg.gradient_bound,
                         cfg.scale_bits).astype(np.int32)
    assert mismatched_fragments(cfg, 2, exact) == 0
    wrong = exact.copy()
    wrong[1, 0] += 1
    wrong[4, 3:] -= 1
    assert mismatched_fragments(cfg, 2, wrong) == 2
    assert mismatched_fragments(cfg, 3, exact) == 6             # another iteration's sum: every fragment differs
    # After a Rina agent's error the sum leaves its gradient out: the survivors' sum is exact, the full one not.
    survivors = SimpleNamespace(**{**vars(cfg), "contributors": [0, 2]})
    without_1 = expected_sum(cfg.seed, cfg.job_id, [0, 2], 2, cfg.layout, cfg.lanes, cfg.gradient_bound,
                             cfg.scale_bits).astype(np.int32)
    assert mismatched_fragments(survivors, 2, without_1) == 0 and mismatched_fragments(survivors, 2, exact) == 6


class FakeClock:
    def __init__(self):
        self.t = 0.0

    def now_s(self):
        return self.t


class Peer(AnsweringPeer):
    """Serves by advancing the clock; a datagram arrives at each instant in ``arrivals_s``."""

    def __init__(self, arrivals_s, run_dir=""):
        super().__init__(SimpleNamespace(run_dir=run_dir, job="j"), sock=None, records=None, clock=FakeClock())
        self.arrivals_s, self.waits = list(arrivals_s), []

    def serve(self, wait_s):
        self.waits.append(wait_s)
        step = min(wait_s, 0.25)
        self.clock.t += step
        while self.arrivals_s and self.arrivals_s[0] <= self.clock.t:
            self.last_arrival_s = self.arrivals_s.pop(0)


def test_a_ring_peer_serves_until_its_deadline_and_lingers_until_quiet():
    peer = Peer([0.1, 1.0])
    assert (peer.phase, peer.last_arrival_s) == ("starting", 0.0)
    peer.serve_until(0.5)
    assert peer.clock.t == 0.5 and peer.waits[0] == 0.5 and peer.last_arrival_s == 0.1
    peer.linger()
    assert peer.phase == "lingering"
    assert peer.last_arrival_s == 1.0                               # the late datagram restarted the quiet time
    assert peer.clock.t >= 1.0 + LINGER_QUIET_S and peer.clock.t < 1.0 + LINGER_QUIET_S + 0.25


def test_a_lingering_ring_peer_ends_once_the_orchestrator_says_the_job_is_done(tmp_path):
    (tmp_path / "agents").mkdir()
    peer = Peer([0.1, 0.3], run_dir=str(tmp_path))
    peer.serve_until(0.2)
    peer.arrivals_s.append(0.4)
    peer.serve = lambda wait_s, serve=peer.serve: (serve(wait_s), peer.clock.t >= 0.5 and
                                                    job_done_path(tmp_path, "j").write_text(""))
    peer.linger()
    assert peer.phase == "done" and 0.5 <= peer.clock.t < 0.8          # not 0.4 + LINGER_QUIET_S
    assert job_done_path(tmp_path, "j") == tmp_path / "agents" / "j.job-done"
