"""A worker's model, its shard of the data and its optimizer, in PyTorch on the CPU (the ``[training]`` extra).

Every worker of a job builds the same model from the same seed, computes a float gradient on a mini-batch
of its own shard each iteration (:meth:`Trainer.gradient`), and applies the aggregated mean gradient it
gets back (:meth:`Trainer.apply`) with the same deterministic optimizer, so every worker's parameters stay
identical bit for bit (:meth:`Trainer.parameter_hash` says so each iteration). Torch runs on one thread; the optimizer is SGD with momentum, written out in numpy on the flat
parameter vector so that nothing in it depends on torch's kernels.
"""

import hashlib
from dataclasses import dataclass

import numpy as np

from testbed.training.datasets import Dataset, make_dataset, shard_indices
from testbed.training.models import CNN_CHANNELS, CNN_KERNEL, MLP_HIDDEN, tensor_shapes


def _torch():
    """torch, set up for reproducible CPU work: one thread, so the same batch gives the same gradient bits
    run after run (torch's CPU kernels are deterministic on one thread; its ``use_deterministic_algorithms``
    guards GPU kernels and would import its compiler, seconds of every worker's start)."""
    try:
        import torch
    except ImportError as exc:        # the agent's one-line error
        raise RuntimeError("training needs PyTorch: install the [training] extra (see guide/training.md)") from exc
    torch.set_num_threads(1)
    return torch


def build_model(model: str, input_shape: tuple, classes: int, seed: int):
    """The torch module ``model`` (testbed.training.models declares it), its parameters drawn from ``seed``."""
    torch = _torch()
    nn = torch.nn
    torch.manual_seed(seed)
    if model == "mlp":
        inputs = int(np.prod(input_shape))
        module = nn.Sequential(nn.Flatten(), nn.Linear(inputs, MLP_HIDDEN), nn.ReLU(),
                               nn.Linear(MLP_HIDDEN, classes))
    elif model == "cnn":
        channels, side = input_shape[0], input_shape[1]
        first, second = CNN_CHANNELS
        module = nn.Sequential(nn.Conv2d(channels, first, CNN_KERNEL, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                               nn.Conv2d(first, second, CNN_KERNEL, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                               nn.Flatten(), nn.Linear(second * (side // 4) ** 2, classes))
    else:
        raise KeyError(model)
    declared = tensor_shapes(model, input_shape, classes)
    built = [(name, tuple(p.shape)) for name, p in module.named_parameters()]
    if built != declared:
        raise AssertionError(f"{model}: built {built}, declared {declared}")
    return module


@dataclass(frozen=True)
class TrainingConfig:
    """What a worker needs to train (the job's ``training:`` section, resolved)."""
    model: str
    dataset: str
    learning_rate: float
    momentum: float
    batch_size: int           # examples per worker per iteration
    seed: int


@dataclass(frozen=True)
class Evaluation:
    accuracy: float           # fraction of the held-out set classified right
    loss: float               # mean cross-entropy on it


class Trainer:
    """One worker's model (or the evaluator's): ``worker_index`` of ``workers`` picks its shard."""

    def __init__(self, config: TrainingConfig, worker_index: int, workers: int, dataset: Dataset = None):
        self.torch = torch = _torch()
        self.config = config
        self.data = dataset or make_dataset(config.dataset, config.seed)
        self.shard = shard_indices(len(self.data.train_y), worker_index, workers)
        self.worker_index = worker_index
        self.model = build_model(config.model, self.data.input_shape, self.data.classes, config.seed)
        self.parameters = [p for p in self.model.parameters()]
        self.flat = np.concatenate([p.detach().numpy().ravel() for p in self.parameters]).astype(np.float32)
        self.velocity = np.zeros_like(self.flat)
        self.loss_fn = torch.nn.CrossEntropyLoss()
        self._train_x, self._train_y = torch.from_numpy(self.data.train_x), torch.from_numpy(self.data.train_y)

    @property
    def tensor_sizes(self) -> list:
        return [p.numel() for p in self.parameters]

    def batch_indices(self, iteration: int) -> np.ndarray:
        """The examples of this worker's mini-batch at ``iteration``: its shard in an order drawn per epoch
        from (seed, worker, epoch), ``batch_size`` at a time."""
        per_epoch = max(1, len(self.shard) // self.config.batch_size)
        epoch, step = divmod(iteration, per_epoch)
        order = np.random.default_rng([self.config.seed, self.worker_index, epoch]).permutation(self.shard)
        return order[step * self.config.batch_size:(step + 1) * self.config.batch_size]

    def gradient(self, iteration: int) -> tuple:
        """(flat float32 gradient of the loss on this iteration's mini-batch, that loss)."""
        torch = self.torch
        index = torch.from_numpy(self.batch_indices(iteration))
        self.model.zero_grad(set_to_none=False)
        loss = self.loss_fn(self.model(self._train_x[index]), self._train_y[index])
        loss.backward()
        grad = np.concatenate([p.grad.numpy().ravel() for p in self.parameters]).astype(np.float32)
        return grad, float(loss.item())

    def apply(self, mean_gradient: np.ndarray):
        """One SGD step with momentum on the aggregated ``mean_gradient`` (float32 arithmetic in numpy:
        the same bits on every worker given the same aggregate)."""
        g = np.asarray(mean_gradient, dtype=np.float32)
        cfg = self.config
        self.velocity = np.float32(cfg.momentum) * self.velocity + g
        self.flat = self.flat - np.float32(cfg.learning_rate) * self.velocity
        self._load()

    def _load(self):
        torch = self.torch
        with torch.no_grad():
            first = 0
            for p in self.parameters:
                n = p.numel()
                p.copy_(torch.from_numpy(self.flat[first:first + n].reshape(tuple(p.shape))))
                first += n

    def parameter_hash(self) -> str:
        """The first 16 hex digits of the SHA-256 of the parameters' float32 bytes."""
        return hashlib.sha256(self.flat.tobytes()).hexdigest()[:16]

    def evaluate(self) -> Evaluation:
        """Accuracy and mean loss on the held-out set."""
        torch = self.torch
        with torch.no_grad():
            logits = self.model(torch.from_numpy(self.data.test_x))
            labels = torch.from_numpy(self.data.test_y)
            loss = float(self.loss_fn(logits, labels).item())
            accuracy = float((logits.argmax(1) == labels).double().mean().item())
        return Evaluation(accuracy, loss)
