"""Gradient profiles of the models the papers train, and their sub-model partition.

Per-tensor fp32 parameter counts come from ``testbed/data/model_tensors.json``
(torchvision / HuggingFace definitions; provenance in the file's ``about``).
Models without a per-tensor list there (DenseNet-121, ResNet-34,
Inception-v3, the LSTM InArt trains) are given by their total parameter count
split evenly over a nominal number of tensors; a job may also state its
gradient size directly (``gradient_size: 221MB``), which rescales the profile
and keeps its shape.

Sub-models (GOAT §IV: "the sub-model set is defined by the default model
partition of PyTorch") are contiguous groups of tensors in definition order,
balanced by size. A sub-model travels as one zero-padded run of fragments:
the contract's "last fragment of a tensor is zero-padded" applies to the
sub-model bucket, as gradient buckets do in PyTorch DDP, so tiny tensors
(batch-norm biases) do not each cost a fragment.
"""

import json
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from testbed.dataplane.wire import fragments_of

_DATA = Path(__file__).resolve().parent / "data" / "model_tensors.json"

#: Models given by total parameter count only: (params, nominal tensor count, provenance).
TOTAL_ONLY = {
    "densenet121": (7_978_856, 121, "torchvision densenet121 num_params"),
    "densenet169": (14_149_480, 169, "torchvision densenet169 num_params"),
    "densenet201": (20_013_928, 201, "torchvision densenet201 num_params"),
    "resnet34": (21_797_672, 110, "torchvision resnet34 num_params"),
    "inception_v3": (27_161_264, 292, "torchvision inception_v3 num_params"),
    "lstm": (406_750_000, 8, "InArt §5 LSTM gradient of 1627 MB (fp32)"),
}


@dataclass(frozen=True)
class GradientProfile:
    name: str
    tensors: tuple  # ((tensor name, elements), ...)

    @property
    def elements(self) -> int:
        return sum(n for _, n in self.tensors)

    @property
    def gradient_bytes(self) -> int:
        return 4 * self.elements

    def scaled(self, factor: float) -> "GradientProfile":
        """Every tensor multiplied by ``factor`` (at least one element each)."""
        return GradientProfile(self.name, tuple((t, max(1, round(n * factor))) for t, n in self.tensors))

    def with_gradient_bytes(self, gradient_bytes: float) -> "GradientProfile":
        return self.scaled(gradient_bytes / self.gradient_bytes)

    def partition(self, submodels: int) -> list:
        """Split the tensors into ``submodels`` contiguous groups of near-equal size.

        Returns a list of element counts, one per sub-model. Greedy on the
        running total: a group closes when it reaches its share of the rest.
        """
        if submodels < 1:
            raise ValueError("submodels must be >= 1")
        submodels = min(submodels, len(self.tensors))
        sizes, current, remaining = [], 0, self.elements
        groups_left = submodels
        for index, (_, n) in enumerate(self.tensors):
            current += n
            tensors_left = len(self.tensors) - index - 1
            share = remaining / groups_left
            if groups_left > 1 and (current >= share or tensors_left < groups_left):
                sizes.append(current)
                remaining -= current
                groups_left -= 1
                current = 0
        sizes.append(current)
        return [s for s in sizes if s > 0]


def even_pieces(elements: int, most_elements: int) -> list:
    """``elements`` split into the fewest contiguous pieces of at most ``most_elements`` each, near-equal in
    size and across tensor boundaries: sub-models smaller than a layer (GOAT §III cites DINA's pieces
    "smaller than a single layer"; its §IV-D bound assumes 2 MB sub-models)."""
    if most_elements < 1:
        raise ValueError("most_elements must be >= 1")
    pieces = -(-elements // most_elements)
    return [(k + 1) * elements // pieces - k * elements // pieces for k in range(pieces)]


@lru_cache(maxsize=None)
def _tensor_lists() -> dict:
    return json.loads(_DATA.read_text())["models"]


def available_models() -> list:
    return sorted(set(_tensor_lists()) | set(TOTAL_ONLY))


def load_profile(name: str) -> GradientProfile:
    key = name.lower().replace("-", "_")
    tensors = _tensor_lists()
    if key in tensors:
        return GradientProfile(key, tuple((t, int(n)) for t, n in tensors[key]["tensors"]))
    if key in TOTAL_ONLY:
        params, count, _ = TOTAL_ONLY[key]
        each = params // count
        sizes = [each] * count
        sizes[-1] += params - each * count
        return GradientProfile(key, tuple((f"tensor{i}", n) for i, n in enumerate(sizes)))
    raise KeyError(name)


def fragments_per_submodel(sizes, lanes: int) -> list:
    return [fragments_of(s, lanes) for s in sizes]
