"""The ebpf target: ``p4/ina.p4`` as BPF programs at TC ingress and egress of every switch port.

``ina.bpf.c`` mirrors ina.p4 control by control (its header says where the mapping is not one to one);
:mod:`.switch` builds, loads, pins and attaches it; :mod:`.runtime` is its SwitchRuntime over the pinned
maps (:mod:`.maps`: the ``bpf(2)`` calls).
"""
