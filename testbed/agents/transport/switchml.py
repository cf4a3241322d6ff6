"""SwitchML's transport (Sapio et al., NSDI'21): self-clocked, no congestion control.

A worker streams fragment ``i`` into slot ``i mod s`` and sends fragment
``i + s`` only after the RESULT of fragment ``i`` came back: the window is
fixed at the job's ``window`` (at most the slots of its switch) and never
shrinks. Loss is recovered by timeout (the job's ``retransmit_timeout``,
adapted to the measured RTT as :class:`.base.Transport` does) and by gaps.
Departures are paced at the host link rate like every transport here.
"""

from testbed.agents.transport.base import Transport


class SwitchMLTransport(Transport):
    name = "switchml"
