"""Real training through the emulated network (a job's ``training:`` section, guide/training.md).

``datasets`` (seeded, generated with numpy, never downloaded) and ``models`` (the declarations: tensor
shapes and parameter counts, without PyTorch) are what the scenario checks a job against;
``fixed_point`` turns a float gradient into the int32 fragments the wire carries and an aggregate back;
``trainer`` (PyTorch on the CPU, the ``[training]`` extra) is a worker's model, its shard of the data, its
optimizer and its evaluation. Only ``trainer`` imports torch, and only when a job trains.
"""
