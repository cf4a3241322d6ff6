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
    assert len({f["final_param_hash"] for f in finals}) == 1 and "final_accuracy" in finals[0]
    assert "final_accuracy" not in finals[1]


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


def test_a_training_jobs_summary_accuracy_csv_and_iterations_csv(tmp_path):
    """job_metrics checks a training job's aggregates by checksums and reports its training section;
    accuracy.csv holds the evaluator's evaluations in virtual time since the run's start."""
    import csv
    from testbed.metrics.summary import job_metrics, write_accuracy_csv, write_iterations_csv
    from testbed.scenario import parse_scenario
    scenario = parse_scenario("""\
version: 1
topology: {kind: explicit, switches: [s1], hosts: [w1, w2, ps], links: [[w1, s1], [w2, s1], [ps, s1]]}
jobs:
  - {name: j, workers: [w1, w2], ps: ps, policy: atp, iterations: 2,
     training: {model: mlp, eval_every: 1, target_accuracy: 0.5}}
""", "t.yaml", ())
    job = scenario.jobs[0]

    def worker(index, accuracy=None):
        rows = []
        for it in range(2):
            row = {"iteration": it, "t_start": 1000.0 + it, "iteration_s": 1.0, "comm_s": 0.5, "compute_s": 0.5,
                   "sending_rate_bps": 1e6, "sent_bytes": 100, "sent_pkts": 2, "fragments": 2, "retx_pkts": 0,
                   "checksums": [index + it, 10 * index], "param_hash": f"h{it}", "clipped": 1,
                   "compute_overrun_s": 0.01 * index, "train_loss": 1.0}
            if accuracy:
                row.update(accuracy=accuracy[it], loss=1.0 - accuracy[it], eval_s=0.002)
            rows.append(row)
        return rows

    ps = [{"iteration": it, "iteration_s": 1.0, "exact": None, "mismatched_fragments": 0, "ingress_bytes": 0,
           "ingress_pkts": 0, "bypassed_pkts": 0, "duplicate_pkts": 0, "checksums": {"0": 1 + 2 * it, "1": 10}}
          for it in range(2)]
    records = {"w1": worker(0, [0.3, 0.6]), "w2": worker(1), "ps": ps}
    metrics = job_metrics(job, records)
    assert metrics["aggregation_exact"] is True
    t = metrics
    assert t["models_identical"] and t["final_accuracy"] == 0.6 and t["time_to_accuracy_s"] == 1.0
    assert t["clipped_values"] == 4 and t["compute_overrun_s"] == 0.01
    records["ps"][1]["checksums"]["1"] = 11
    records["w2"][0]["param_hash"] = "other"
    metrics = job_metrics(job, records)
    assert metrics["aggregation_exact"] is False and metrics["diverged_iterations"] == [0]
    assert write_accuracy_csv(tmp_path / "accuracy.csv", scenario, records, 999.0)
    rows = list(csv.DictReader(open(tmp_path / "accuracy.csv")))
    assert [(r["iteration"], float(r["time_s"]), float(r["accuracy"])) for r in rows] == [("0", 1.0, 0.3),
                                                                                         ("1", 2.0, 0.6)]
    write_iterations_csv(tmp_path / "iterations.csv", scenario, records)
    assert "param_hash" in open(tmp_path / "iterations.csv").readline()


def test_the_divergence_watch_reads_records_as_they_grow_and_names_the_first_iteration_that_differs(tmp_path):
    paths = {w: tmp_path / f"{w}.jsonl" for w in ("w1", "w2")}
    watch = checks.DivergenceWatch(paths)
    assert watch.poll() is None                                          # nothing written yet

    def append(worker, text):
        with open(paths[worker], "a") as f:
            f.write(text)
    append("w1", '{"iteration": 0, "param_hash": "a"}\n{"iteration": 1, "param_hash": "b"}\n')
    append("w2", '{"iteration": 0, "param_hash": "a"}\n{"iteration": 1, "par')    # a line half written
    assert watch.poll() is None                                          # iteration 1 not known for w2 yet
    append("w2", 'am_hash": "b"}\n')
    assert watch.poll() is None and watch.hashes == {}                   # both agree, forgotten
    append("w1", '{"iteration": 2, "param_hash": "c", "final_param_hash": "d"}\n')
    append("w2", '{"iteration": 2, "param_hash": "c", "final_param_hash": "e"}\n')
    assert watch.poll() == (3, {"w1": "d", "w2": "e"})                  # the final parameters differ
