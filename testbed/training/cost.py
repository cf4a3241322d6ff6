"""What a training job's real work costs this machine's CPU, for the planner (:mod:`testbed.budget`).

Under time dilation N the scenario's ``compute_time`` stays the virtual compute time; the workers' real
work (a gradient on the mini-batch, its fixed-point conversion, the update, the evaluation now and then)
takes what it takes on this machine, on the same cores the packets need. The planner counts it as it counts
packets: measured here, on this machine, by timing a few steps of the job's model (PyTorch is imported
only for a job that trains, and only here and in the workers).
"""

import time

from testbed.training.fixed_point import FixedPoint
from testbed.training.trainer import Trainer, TrainingConfig

#: Steps timed after one untimed step (which pays the first calls' set-up).
STEPS_TIMED = 8


def iteration_cpu_s(spec, seed: int, workers: int, gradient_bound: float) -> float:
    """CPU seconds one worker of a job training ``spec`` (a :class:`testbed.scenario.model.TrainingSpec`)
    spends per iteration on this machine: a gradient on its mini-batch, its fixed-point conversion, the
    update, and one evaluation on the held-out set per ``eval_every`` iterations (worker 0 evaluates;
    counted on every worker, which errs on the side of headroom)."""
    trainer = Trainer(TrainingConfig(model=spec.model, dataset=spec.dataset, learning_rate=spec.learning_rate,
                                     momentum=spec.momentum, batch_size=spec.batch_size, seed=seed), 0, workers)
    fixed_point = FixedPoint(trainer.tensor_sizes, workers, gradient_bound)

    def step(iteration):
        grad, _ = trainer.gradient(iteration)
        fixed_point.quantize(grad)
        trainer.apply(grad)
    step(0)
    start = time.process_time()
    for iteration in range(1, STEPS_TIMED + 1):
        step(iteration)
    stepping_s = (time.process_time() - start) / STEPS_TIMED
    start = time.process_time()
    trainer.evaluate()
    return stepping_s + (time.process_time() - start) / spec.eval_every
