"""What a training run's records prove: the PS's sums exact, every worker's model identical, and the
accuracy over virtual time. Pure functions over the agents' records (numpy, no torch).

The PS cannot recompute real gradients from seeds, as it does synthetic ones; instead every worker records,
per seq, a weighted checksum of the int32 lanes it sent (:func:`fragment_checksums`: the sum of lane k
times k + 1, in int64), and the PS records the same checksum of each aggregate it completed. The checksum
is linear in the lanes, so the aggregate is the exact sum of its contributors' fragments only if its
checksum is the sum of theirs (a lane off by d changes it by d (k + 1), never 0; two lanes off in
compensating ways pass, which a per-lane check would catch at the cost of the whole gradient in the
records).
"""

import json

import numpy as np


def fragment_checksums(rows: np.ndarray) -> np.ndarray:
    """int64 per row (seq) of [fragments, lanes] integer lanes: sum over k of lane k times (k + 1)."""
    rows = np.asarray(rows, dtype=np.int64)
    return rows @ np.arange(1, rows.shape[1] + 1, dtype=np.int64)


def aggregates_exact(ps_rows: list, worker_rows: dict, participants) -> dict:
    """{iteration: whether every aggregate the PS completed equals the sum of the participants' fragments}.

    ``ps_rows``: a PS's records (each with ``iteration`` and ``checksums``, {seq: checksum} of its
    aggregates); ``worker_rows``: {worker index: its records} (each with ``iteration`` and ``checksums``, a
    list by seq); ``participants``: the worker indices whose gradients the sums hold. An iteration a
    participant has no record of is not exact."""
    by_worker = {w: {r["iteration"]: r.get("checksums") for r in rows} for w, rows in worker_rows.items()}
    verdict = {}
    for row in ps_rows:
        it = row["iteration"]
        sent = [by_worker.get(w, {}).get(it) for w in participants]
        if any(s is None for s in sent):
            verdict[it] = False
            continue
        verdict[it] = all(int(checksum) == sum(int(s[int(seq)]) for s in sent)
                          for seq, checksum in (row.get("checksums") or {}).items())
    return verdict


def diverged_iterations(worker_rows: dict) -> list:
    """Iterations at which the workers' ``param_hash`` differ (every worker's model must be identical); the
    final parameters (a last record's ``final_param_hash``) count as the iteration after the last."""
    hashes = {}
    for rows in worker_rows.values():
        for r in rows:
            for iteration, digest in _hashes_of(r):
                hashes.setdefault(iteration, set()).add(digest)
    return sorted(it for it, seen in hashes.items() if len(seen) > 1)


def accuracy_rows(evaluator_rows: list, start_epoch_s: float) -> list:
    """accuracy.csv's rows from the evaluator's records: the iterations the model has been updated by,
    virtual time since ``start_epoch_s`` (the record's ``t_start``: the evaluation ran at the start of
    that iteration's compute; the final evaluation, after the last update, at its ``t_final``), accuracy,
    loss, the evaluation's wall seconds."""
    rows = []
    for r in evaluator_rows:
        if "accuracy" in r:
            rows.append({"iteration": r["iteration"], "time_s": r["t_start"] - start_epoch_s,
                         "accuracy": r["accuracy"], "loss": r["loss"], "eval_s": r["eval_s"]})
        if "final_accuracy" in r:
            rows.append({"iteration": r["iteration"] + 1, "time_s": r["t_final"] - start_epoch_s,
                         "accuracy": r["final_accuracy"], "loss": r["final_loss"], "eval_s": r["final_eval_s"]})
    return rows


def time_to_accuracy_s(rows: list, target: float):
    """The virtual time of the first evaluation at or above ``target`` accuracy (None: never reached)."""
    return next((r["time_s"] for r in rows if r["accuracy"] >= target), None)


class DivergenceWatch:
    """Follows a training job's workers' records while they are written (``paths``: worker -> its records
    file, JSON lines) and finds the first iteration at which their parameter hashes differ, as soon as every
    worker has recorded it; each :meth:`poll` reads only what was appended since the last (whole lines)."""

    def __init__(self, paths: dict):
        self.paths = dict(paths)
        self.offsets = {worker: 0 for worker in self.paths}
        self.hashes = {}        # iteration -> {worker: hash}, until every worker's is in

    def poll(self):
        """``(iteration, {worker: hash})`` of the first divergence seen, or None."""
        for worker, path in self.paths.items():
            for record in self._new_records(worker, path):
                for iteration, digest in _hashes_of(record):
                    self.hashes.setdefault(iteration, {})[worker] = digest
        for iteration in sorted(self.hashes):
            seen = self.hashes[iteration]
            if len(seen) < len(self.paths):
                continue
            if len(set(seen.values())) > 1:
                return iteration, seen
            del self.hashes[iteration]
        return None

    def _new_records(self, worker, path) -> list:
        try:
            with open(path, "rb") as f:
                f.seek(self.offsets[worker])
                text = f.read()
        except FileNotFoundError:
            return []
        whole = text[:text.rfind(b"\n") + 1]
        self.offsets[worker] += len(whole)
        return [json.loads(line) for line in whole.splitlines() if line.strip()]


def _hashes_of(record: dict) -> list:
    """(iteration, parameter hash) pairs a worker's record holds: its iteration's, and after the last
    iteration the final parameters' as the iteration after it."""
    pairs = []
    if "param_hash" in record:
        pairs.append((record["iteration"], record["param_hash"]))
    if "final_param_hash" in record:
        pairs.append((record["iteration"] + 1, record["final_param_hash"]))
    return pairs
