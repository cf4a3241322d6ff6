"""The data-plane targets, by name: three ways to run ``p4/ina.p4`` on a switch.

- ``pyswitch``: the program's Python model, one process per switch (or per group of switches);
- ``bmv2``: the P4 source itself, compiled by p4c and run by bmv2's ``simple_switch``;
- ``ebpf``: the program as BPF at TC ingress and egress of the switch's ports, in the kernel.

A scenario's ``target: auto`` resolves as :func:`testbed.budget.resolve_target` says.
"""

#: Every target a run can use.
NAMES = ("pyswitch", "bmv2", "ebpf")
#: What a scenario or ``--target`` may say.
CHOICES = ("auto",) + NAMES
