"""Datasets generated from the scenario's seed: nothing is downloaded at run time, nothing ships as a file.

Two classification sets, both drawn with numpy from ``(seed, name)`` so that every worker, the evaluator
and a rerun draw the same examples:

- ``blobs``: 10 classes of points in 32 dimensions, each class a Gaussian cloud around a centre drawn at
  random; the centres are close enough that the clouds overlap, so a model learns over tens of iterations
  and stops short of 100 % (a K-of-N scheme's lost gradients show in the curve). For ``mlp``.
- ``patterns``: 10 classes of 8 x 8 one-channel images, each class a random binary pattern, shifted by up
  to one pixel each way and covered in Gaussian noise: a translation a convolution handles and a pixel-wise
  model finds harder. For ``cnn`` (and ``mlp``).

Why generated rather than a real dataset such as scikit-learn's digits: no download and no dependency
beyond the ``[training]`` extra's PyTorch, any size and difficulty from the seed, and the same numbers on
every machine. The held-out set is drawn from the same distribution, apart from the training set.

A worker's shard (:func:`shard_indices`) is the training examples whose index is congruent to its worker
index modulo the job's workers: disjoint shards whose union is the whole set.
"""

from dataclasses import dataclass

import numpy as np

CLASSES = 10
TRAIN_EXAMPLES = 4000
TEST_EXAMPLES = 1000
BLOB_DIMENSIONS = 32
BLOB_CENTRE_SPREAD = 0.45     # the centres' std per dimension, against the clouds' std of 1 (overlapping)
PATTERN_SIDE = 8
PATTERN_NOISE = 0.5           # the noise's std against the patterns' 0/1 pixels
PATTERN_SHIFT = 1             # pixels a pattern moves at most, each way


@dataclass(frozen=True)
class Dataset:
    """A training set and its held-out set: float32 inputs ``[examples, *input_shape]``, int64 labels."""
    name: str
    train_x: np.ndarray
    train_y: np.ndarray
    test_x: np.ndarray
    test_y: np.ndarray
    input_shape: tuple
    classes: int = CLASSES


def _rng(seed: int, name: str) -> np.random.Generator:
    return np.random.default_rng([seed, *name.encode()])


def _blobs(seed: int) -> Dataset:
    rng = _rng(seed, "blobs")
    centres = rng.normal(0.0, BLOB_CENTRE_SPREAD, size=(CLASSES, BLOB_DIMENSIONS))

    def draw(n):
        y = rng.integers(0, CLASSES, size=n)
        return (centres[y] + rng.normal(size=(n, BLOB_DIMENSIONS))).astype(np.float32), y.astype(np.int64)

    train_x, train_y = draw(TRAIN_EXAMPLES)
    test_x, test_y = draw(TEST_EXAMPLES)
    return Dataset("blobs", train_x, train_y, test_x, test_y, (BLOB_DIMENSIONS,))


def _patterns(seed: int) -> Dataset:
    rng = _rng(seed, "patterns")
    templates = (rng.random(size=(CLASSES, PATTERN_SIDE, PATTERN_SIDE)) < 0.3).astype(np.float32)

    def draw(n):
        y = rng.integers(0, CLASSES, size=n)
        shifts = rng.integers(-PATTERN_SHIFT, PATTERN_SHIFT + 1, size=(n, 2))
        images = np.stack([np.roll(templates[c], tuple(s), axis=(0, 1)) for c, s in zip(y, shifts)])
        images += rng.normal(0.0, PATTERN_NOISE, size=images.shape).astype(np.float32)
        return images[:, None].astype(np.float32), y.astype(np.int64)

    train_x, train_y = draw(TRAIN_EXAMPLES)
    test_x, test_y = draw(TEST_EXAMPLES)
    return Dataset("patterns", train_x, train_y, test_x, test_y, (1, PATTERN_SIDE, PATTERN_SIDE))


_MAKERS = {"blobs": _blobs, "patterns": _patterns}
#: The datasets a job's ``training.dataset`` may name, and the input shape of each (what a model is built for).
DATASETS = ("blobs", "patterns")
INPUT_SHAPES = {"blobs": (BLOB_DIMENSIONS,), "patterns": (1, PATTERN_SIDE, PATTERN_SIDE)}


def make_dataset(name: str, seed: int) -> Dataset:
    """Dataset ``name`` drawn from ``seed``: the same arrays for the same arguments, on every machine."""
    return _MAKERS[name](seed)


def shard_indices(examples: int, worker_index: int, workers: int) -> np.ndarray:
    """The training examples of worker ``worker_index`` of ``workers``: every ``workers``-th from its index."""
    if not 0 <= worker_index < workers:
        raise ValueError(f"worker index {worker_index} outside 0..{workers - 1}")
    return np.arange(worker_index, examples, workers)
