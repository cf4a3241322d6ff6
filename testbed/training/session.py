"""A training job's worker, between its agent and its model: the gradient it sends each iteration, as the
wire's int32 rows, and the aggregate it gets back, applied.

The worker agent (testbed/agents/worker.py) asks :meth:`WorkerTraining.gradient_rows` for an iteration's
rows in its compute phase, keeps the lanes of every RESULT (:meth:`WorkerTraining.keep_result`), and once
an iteration's RESULTs are all in, applies their sum (:meth:`WorkerTraining.apply`, at the start of the
next compute phase, so the update is compute, inside the job's ``compute_time``). The sum holds the
gradients of the workers the RESULT's bitmap names (all of them, or a K-of-N scheme's participants): the
update is their mean, so K-SGD's and GOAT-Async's lost gradients cost accuracy.

What it adds to the worker's record of an iteration: ``param_hash`` (the parameters the iteration's
gradient was computed on; every worker's must be the same), ``train_loss``, ``clipped`` (values clipped to
their tensor's bound, :mod:`testbed.training.fixed_point`), ``checksums`` (per seq, the weighted checksum
of the int32 lanes it sent: :func:`testbed.training.checks.fragment_checksums`, from which the results
check the PS's sums exactly), and on the evaluator (worker index 0), every ``eval_every`` iterations,
``accuracy``, ``loss`` and ``eval_s`` (the evaluation's wall time: it runs in that worker's compute phase,
on the critical path of one worker, and is stated here rather than hidden).
"""

import time

import numpy as np

from testbed.training.checks import fragment_checksums
from testbed.training.fixed_point import FixedPoint, FragmentLayout
from testbed.training.trainer import Trainer, TrainingConfig

EVALUATOR_INDEX = 0


class WorkerTraining:
    """The training side of worker ``config.worker_index`` of its job (an ``AgentConfig`` with ``training``)."""

    def __init__(self, config):
        t = config.training
        self.eval_every = int(t["eval_every"])
        self.trainer = Trainer(TrainingConfig(model=t["model"], dataset=t["dataset"],
                                              learning_rate=float(t["learning_rate"]), momentum=float(t["momentum"]),
                                              batch_size=int(t["batch_size"]), seed=config.seed),
                               config.worker_index, config.total_workers)
        self.fixed_point = FixedPoint(self.trainer.tensor_sizes, config.total_workers, config.gradient_bound)
        self.layout = FragmentLayout(tuple(n for n, _ in config.layout), config.lanes)
        if self.layout.elements != sum(self.trainer.tensor_sizes):
            raise ValueError(f"the job's layout holds {self.layout.elements} elements, its model "
                             f"{sum(self.trainer.tensor_sizes)} parameters")
        self.element_of_lane = self.layout.element_of_lane()
        self.evaluator = config.worker_index == EVALUATOR_INDEX
        self.lanes = config.lanes
        self.results = {}        # iteration -> (rows int64 [fragments, lanes], contributors per seq)
        self.pending = None      # the last complete iteration whose aggregate is not applied yet

    def gradient_rows(self, iteration: int) -> tuple:
        """(int32 rows by seq of this iteration's gradient, what the iteration's record gains), after
        applying the previous iteration's aggregate and evaluating when due."""
        record = {}
        if self.pending is not None:
            self.apply(self.pending)
            self.pending = None
        record["param_hash"] = self.trainer.parameter_hash()
        if self.evaluator and iteration % self.eval_every == 0:
            record.update(self.evaluation())
        grad, loss = self.trainer.gradient(iteration)
        quantized = self.fixed_point.quantize(grad)
        rows = self.layout.to_rows(quantized.values, self.element_of_lane)
        record.update(train_loss=loss, clipped=quantized.clipped, checksums=fragment_checksums(rows).tolist())
        return rows, record

    def evaluation(self) -> dict:
        start = time.monotonic()
        result = self.trainer.evaluate()
        return {"accuracy": result.accuracy, "loss": result.loss, "eval_s": time.monotonic() - start}

    def keep_result(self, iteration: int, seq: int, bitmap: int, lanes: np.ndarray):
        """The lanes of the RESULT of ``seq`` of ``iteration`` (a view into the receive batch: copied)."""
        kept = self.results.get(iteration)
        if kept is None:
            fragments = len(self.element_of_lane) // self.lanes
            kept = self.results[iteration] = (np.zeros((fragments, self.lanes), dtype=np.int64),
                                              np.zeros(fragments, dtype=np.int64))
        rows, contributors = kept
        rows[seq, :len(lanes)] = lanes
        contributors[seq] = bin(bitmap).count("1")

    def complete(self, iteration: int) -> bool:
        kept = self.results.get(iteration)
        return kept is not None and bool(np.all(kept[1] > 0))

    def finish_iteration(self, iteration: int):
        """The iteration's RESULTs are all in: its aggregate is applied at the next compute phase."""
        self.pending = iteration

    def apply(self, iteration: int):
        """Apply the mean of ``iteration``'s aggregated gradients; the next iteration's scales follow it."""
        rows, contributors = self.results.pop(iteration)
        if len(set(contributors.tolist())) != 1:
            raise ValueError(f"iteration {iteration}: RESULTs sum different workers ({sorted(set(contributors))})")
        total = self.layout.from_rows(rows, self.element_of_lane)
        mean = self.fixed_point.dequantize(total) / int(contributors[0])
        self.trainer.apply(mean)
        self.fixed_point.next_bounds(mean)
        for old in [i for i in self.results if i < iteration]:
            del self.results[old]

    def final_record(self) -> dict:
        """After the last iteration, what its record gains: its aggregate applied, the final parameters'
        hash (``final_param_hash``) and, on the evaluator, the final evaluation (``final_accuracy``,
        ``final_loss``, ``final_eval_s``)."""
        if self.pending is not None:
            self.apply(self.pending)
            self.pending = None
        record = {"final_param_hash": self.trainer.parameter_hash()}
        if self.evaluator:
            record.update({f"final_{key}": value for key, value in self.evaluation().items()})
        return record
