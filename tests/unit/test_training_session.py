"""A training worker's side of its agent, driven by hand (no sockets): the rows it sends are its quantized
gradient in the wire's layout, the RESULTs' lanes it keeps are applied as the participants' mean, every
worker stays identical, and the records prove the PS's sums exact from checksums."""

import numpy as np
import pytest

from support import require_torch
from testbed.agents.config import AgentConfig
from testbed.dataplane.wire import fragments_of
from testbed.training import checks, models

LANES = 16


def _config(index, workers=3, training=None):
    sizes = models.tensor_sizes("mlp", (32,), 10)
    elements = [sizes[0] + sizes[1], sizes[2] + sizes[3]]
    layout = [(n, fragments_of(n, LANES)) for n in elements]
    return AgentConfig(role="worker", name=f"w{index}", ip="", job="j", job_id=1, seed=9, iterations=4,
                       lanes=LANES, scale_bits=0, gradient_bound=1.0, total_workers=workers, submodels=[],
                       total_fragments=sum(f for _, f in layout), layout=layout, worker_index=index,
                       training=training or {"model": "mlp", "dataset": "blobs", "learning_rate": 0.1,
                                             "momentum": 0.9, "batch_size": 16, "eval_every": 2,
                                             "target_accuracy": None})


def _round(sessions, iteration, participants):
    """Every session's rows; the participants' sum handed back to every session as RESULTs (bitmap of the
    participants), seq by seq; the records."""
    sent = [s.gradient_rows(iteration) for s in sessions]
    total = sum(sent[i][0].astype(np.int64) for i in participants)
    bitmap = sum(1 << i for i in participants)
    for s in sessions:
        for seq in reversed(range(len(total))):         # any order
            s.keep_result(iteration, seq, bitmap, total[seq].astype(">i4"))
        assert s.complete(iteration)
        s.finish_iteration(iteration)
    return [record for _, record in sent], total


@pytest.mark.parametrize("participants", [[0, 1, 2], [0, 2]])
def test_workers_apply_the_participants_mean_and_stay_identical(participants):
    require_torch()
    from testbed.training.session import WorkerTraining
    sessions = [WorkerTraining(_config(i)) for i in range(3)]
    records = {i: [] for i in range(3)}
    ps_rows = []
    for it in range(4):
        recs, total = _round(sessions, it, participants)
        for i, r in enumerate(recs):
            records[i].append({"iteration": it, "t_start": 10.0 + it, **r})
        ps_rows.append({"iteration": it, "checksums": {str(seq): int(c) for seq, c in
                                                       enumerate(checks.fragment_checksums(total))}})
    assert checks.diverged_iterations(records) == []
    assert len({r["param_hash"] for r in records[0]}) == 4            # the model moved every iteration
    assert "accuracy" in records[0][0] and "accuracy" in records[0][2] and "accuracy" not in records[0][1]
    assert all("accuracy" not in r for r in records[1])                # one evaluator
    assert all(checks.aggregates_exact(ps_rows, records, participants).values())
    finals = [s.final_record() for s in sessions]
    assert len({f["param_hash"] for f in finals}) == 1 and "accuracy" in finals[0]


def test_a_wrong_aggregate_or_a_missing_worker_is_not_exact_and_a_divergence_is_found():
    worker_rows = {0: [{"iteration": 0, "checksums": [5, 7], "param_hash": "a"}],
                   1: [{"iteration": 0, "checksums": [1, -2], "param_hash": "b"}]}
    assert checks.aggregates_exact([{"iteration": 0, "checksums": {"0": 6, "1": 5}}], worker_rows, [0, 1]) == {0: True}
    assert checks.aggregates_exact([{"iteration": 0, "checksums": {"1": 6}}], worker_rows, [0, 1]) == {0: False}
    assert checks.aggregates_exact([{"iteration": 1, "checksums": {}}], worker_rows, [0, 1]) == {1: False}
    assert checks.diverged_iterations(worker_rows) == [0]


def test_the_checksum_is_linear_and_sees_a_lane_off_by_one():
    rng = np.random.default_rng(2)
    a, b = (rng.integers(-2**30, 2**30, size=(5, 64)) for _ in range(2))
    assert np.array_equal(checks.fragment_checksums(a + b), checks.fragment_checksums(a) + checks.fragment_checksums(b))
    c = (a + b).copy()
    c[3, 17] += 1
    assert (checks.fragment_checksums(c) != checks.fragment_checksums(a + b)).tolist() == [False] * 3 + [True, False]


def test_time_to_accuracy_is_the_first_evaluation_at_the_target():
    rows = checks.accuracy_rows([{"iteration": 0, "t_start": 100.0, "accuracy": 0.1, "loss": 2.0, "eval_s": 0.01},
                                 {"iteration": 1, "t_start": 100.5},
                                 {"iteration": 2, "t_start": 101.0, "accuracy": 0.72, "loss": 0.9, "eval_s": 0.01},
                                 {"iteration": 4, "t_start": 102.0, "accuracy": 0.8, "loss": 0.7, "eval_s": 0.01}],
                                100.0)
    assert [r["time_s"] for r in rows] == [0.0, 1.0, 2.0]
    assert checks.time_to_accuracy_s(rows, 0.7) == 1.0 and checks.time_to_accuracy_s(rows, 0.9) is None
