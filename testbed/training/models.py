"""The models a job's ``training.model`` may name, declared without PyTorch: their parameter tensors'
names and shapes, in the order ``torch.nn.Module.named_parameters`` gives them, for the scenario (the
job's gradient size is its model's parameter count) and the fixed-point layout (a scale per tensor).
:func:`testbed.training.trainer.build_model` builds the same modules in PyTorch; a unit test holds the
two to each other.

- ``mlp``: flatten, Linear(inputs, 64), ReLU, Linear(64, classes). Any input shape.
- ``cnn``: Conv2d(channels, 8, 3, padding 1), ReLU, MaxPool 2, Conv2d(8, 16, 3, padding 1), ReLU,
  MaxPool 2, flatten, Linear(16 x (side/4)^2, classes). Images (channels, side, side), side a multiple of 4.
"""

import math

MLP_HIDDEN = 64
CNN_CHANNELS = (8, 16)
CNN_KERNEL = 3
MODELS = ("mlp", "cnn")


def unsupported(model: str, input_shape: tuple) -> str:
    """Why ``model`` cannot take inputs of ``input_shape`` ("" when it can)."""
    if model == "cnn" and not (len(input_shape) == 3 and input_shape[1] == input_shape[2]
                               and input_shape[1] % 4 == 0):
        return f"cnn takes square images (channels, side, side) with side a multiple of 4, not inputs {input_shape}"
    return ""


def tensor_shapes(model: str, input_shape: tuple, classes: int) -> list:
    """[(name, shape)] of ``model``'s parameters for inputs of ``input_shape`` and ``classes`` outputs."""
    if model == "mlp":
        inputs = math.prod(input_shape)
        return [("1.weight", (MLP_HIDDEN, inputs)), ("1.bias", (MLP_HIDDEN,)),
                ("3.weight", (classes, MLP_HIDDEN)), ("3.bias", (classes,))]
    if model == "cnn":
        reason = unsupported(model, input_shape)
        if reason:
            raise ValueError(reason)
        channels, side = input_shape[0], input_shape[1]
        first, second = CNN_CHANNELS
        return [("0.weight", (first, channels, CNN_KERNEL, CNN_KERNEL)), ("0.bias", (first,)),
                ("3.weight", (second, first, CNN_KERNEL, CNN_KERNEL)), ("3.bias", (second,)),
                ("7.weight", (classes, second * (side // 4) ** 2)), ("7.bias", (classes,))]
    raise KeyError(model)


def tensor_sizes(model: str, input_shape: tuple, classes: int) -> list:
    """Elements of each parameter tensor, in order."""
    return [math.prod(shape) for _, shape in tensor_shapes(model, input_shape, classes)]


def parameter_count(model: str, input_shape: tuple, classes: int) -> int:
    return sum(tensor_sizes(model, input_shape, classes))
