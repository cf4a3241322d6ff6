"""The worker's datagrams, built per iteration with numpy (testbed/agents/worker.py, ``Worker.frames``): byte
for byte what packing each header with ``INA_HEADER`` gives, shadow copies and retransmissions included."""

import numpy as np

from testbed.agents.config import AgentConfig, SubmodelAssignment
from testbed.agents.gradients import worker_fragments
from testbed.agents.worker import Worker
from testbed.dataplane.wire import (FLAG_DATA, FLAG_RETX, FLAG_SHADOW, INA_HEADER, INA_HEADER_BYTES, fragment_seqs,
                                    shadow_slot, slot_index)

LANES = 8
LAYOUT = [(40, 5), (24, 3)]                 # two sub-models, interleaved seqs


def config():
    return AgentConfig(role="worker", name="w2", ip="10.0.0.2", job="j", job_id=6, seed=4, iterations=3,
                       lanes=LANES, scale_bits=16, gradient_bound=1.0, total_workers=4, worker_index=2,
                       submodels=[SubmodelAssignment(0, 40, 5, "ps", "10.0.0.9", ps_node=9, agg_node=7,
                                               agg_ip="10.255.0.1", fanin=4, slot_base=10, slot_count=4),
                                  SubmodelAssignment(1, 24, 3, "ps", "10.0.0.9", ps_node=9, agg_node=8,
                                               agg_ip="10.255.0.2", fanin=2, slot_base=40, slot_count=4,
                                               shadow_pool=2)],
                       total_fragments=8, layout=LAYOUT, window=4, transport="atp")


def plan_of(cfg, seq: int) -> SubmodelAssignment:
    return next(p for p, seqs in zip(cfg.submodels, fragment_seqs([n for _, n in LAYOUT])) if seq in seqs)


def packed(cfg, iteration: int, seq: int, rows) -> bytes:
    """Fragment ``seq``'s datagram as the header's definition packs it."""
    plan = plan_of(cfg, seq)
    slot, flags = slot_index(seq, plan.slot_base, plan.slot_count), FLAG_DATA
    if plan.shadow_pool:
        slot, version = shadow_slot(seq, iteration, cfg.total_fragments, plan.slot_base, plan.shadow_pool)
        flags |= FLAG_SHADOW if version else 0
    return INA_HEADER.pack(cfg.job_id, flags, LANES, 0, plan.agg_node, plan.fanin, 1, plan.submodel, iteration, seq,
                           slot, 1 << cfg.worker_index, 0) + rows[seq].astype(">i4").tobytes()


def test_each_iterations_datagrams_are_the_packed_headers_and_lanes():
    cfg = config()
    worker = Worker(cfg, sock=None, records=None)
    for iteration in range(3):
        rows = worker_fragments(cfg.seed, cfg.job_id, cfg.worker_index, iteration, LAYOUT, LANES, 1.0, 16)
        frames = worker.frames(iteration, rows).view(np.uint8).reshape(cfg.total_fragments, -1)
        assert [bytes(frame) for frame in frames] == [packed(cfg, iteration, seq, rows) for seq in range(8)]
    assert worker.addresses == [(plan_of(cfg, seq).agg_ip, 40000) for seq in range(8)]


def test_a_resent_datagram_is_flagged_retx_and_stays_so():
    cfg = config()
    worker = Worker(cfg, sock=None, records=None)
    rows = worker_fragments(cfg.seed, cfg.job_id, cfg.worker_index, 0, LAYOUT, LANES, 1.0, 16)
    packet = worker.packets(worker.frames(0, rows))
    flags_of = [INA_HEADER.unpack_from(bytes(packet(3, resent)[1]))[1] for resent in (False, True, False)]
    assert flags_of == [FLAG_DATA, FLAG_DATA | FLAG_RETX, FLAG_DATA | FLAG_RETX]
    address, datagram = packet(4, False)
    assert address == (plan_of(cfg, 4).agg_ip, 40000) and bytes(datagram) == packed(cfg, 0, 4, rows)
    assert len(datagram) == INA_HEADER_BYTES + 4 * LANES
